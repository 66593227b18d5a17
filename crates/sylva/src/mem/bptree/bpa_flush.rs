//! The BPA's flush (paper section 3, insert case 2): sorting the log and blocks, case 2a (append
//! the log into blocks that keep an empty slot), case 2b (merge everything, drop duplicates and
//! tombstones, redistribute evenly over the blocks). See [`super`] for the layout and invariants.

use super::{paths, Bpa};

/// Where a log entry's key sits in the header/blocks, found while planning a flush.
#[derive(Clone, Copy)]
struct Planned {
    block: usize,
    /// The slot holding the same key, or `usize::MAX` when the key is new to the blocks.
    slot: usize,
}

impl<K: Ord + Copy, V: Copy> Bpa<K, V> {
    /// Sorts the log (insertion sort: it is small and often nearly sorted).
    pub(super) fn sort_log(&mut self) {
        if self.log_sorted {
            return;
        }
        for i in 1..self.log_len {
            let (k, v, t) = (self.keys[i], self.vals[i], self.log_tomb[i]);
            let mut j = i;
            while j > 0 && self.keys[j - 1] > k {
                self.keys[j] = self.keys[j - 1];
                self.vals[j] = self.vals[j - 1];
                self.log_tomb[j] = self.log_tomb[j - 1];
                j -= 1;
            }
            self.keys[j] = k;
            self.vals[j] = v;
            self.log_tomb[j] = t;
        }
        self.log_sorted = true;
    }

    /// Sorts block `b` if its bit says it is not sorted.
    pub(super) fn sort_block(&mut self, b: usize) {
        if self.is_sorted(b) {
            return;
        }
        let s = self.block_start(b);
        let n = self.len_of(b);
        sort_pairs(&mut self.keys[s..s + n], &mut self.vals[s..s + n]);
        self.set_sorted(b, true);
    }

    /// Every live element (log, header, blocks), sorted, duplicates resolved newest-first and
    /// tombstones applied. Leaves the log, header and blocks to be rewritten by the caller.
    pub(super) fn merged(&mut self) -> Vec<(K, V)> {
        self.sort_log();
        for b in 0..self.heads {
            self.sort_block(b);
        }
        let mut out = Vec::with_capacity(self.main_count + self.log_len);
        let mut li = 0;
        for b in 0..self.heads {
            let h = self.header_start() + b;
            let s = self.block_start(b);
            for slot in std::iter::once(h).chain(s..s + self.len_of(b)) {
                let k = self.keys[slot];
                while li < self.log_len && self.keys[li] < k {
                    if !self.log_tomb[li] {
                        out.push((self.keys[li], self.vals[li]));
                    }
                    li += 1;
                }
                if li < self.log_len && self.keys[li] == k {
                    if !self.log_tomb[li] {
                        out.push((k, self.vals[li]));
                    }
                    li += 1;
                } else {
                    out.push((k, self.vals[slot]));
                }
            }
        }
        for i in li..self.log_len {
            if !self.log_tomb[i] {
                out.push((self.keys[i], self.vals[i]));
            }
        }
        out
    }

    /// Replaces the whole contents with `sorted` (ascending, distinct), spread as evenly as
    /// possible over the blocks: the paper's redistribute. Empties the log.
    pub(super) fn redistribute(&mut self, sorted: &[(K, V)]) {
        let n = sorted.len();
        debug_assert!(n <= self.shape.capacity());
        let heads = self.shape.num_blocks.min(n);
        self.log_len = 0;
        self.log_sorted = true;
        self.heads = heads;
        self.main_count = n;
        self.block_len.fill(0);
        self.sorted_bits.fill(u64::MAX);
        if n == 0 {
            return;
        }
        let (q, r) = (n / heads, n % heads);
        let mut i = 0;
        for b in 0..heads {
            let group = q + usize::from(b < r);
            let h = self.header_start() + b;
            (self.keys[h], self.vals[h]) = sorted[i];
            let s = self.block_start(b);
            for (j, &(k, v)) in sorted[i + 1..i + group].iter().enumerate() {
                self.keys[s + j] = k;
                self.vals[s + j] = v;
            }
            self.block_len[b] = (group - 1) as u32;
            i += group;
        }
    }

    /// Moves the log into the header and blocks (section 3, case 2): case 2a appends into blocks
    /// that keep an empty slot; otherwise case 2b merges everything and redistributes.
    pub(super) fn flush(&mut self) {
        if self.log_len == 0 {
            return;
        }
        self.sort_log();
        if self.heads == 0 {
            paths::hit(0);
            let all = self.merged();
            self.redistribute(&all);
            return;
        }
        let Some(plan) = self.plan_case_2a() else {
            paths::hit(2);
            let all = self.merged();
            self.redistribute(&all);
            return;
        };
        paths::hit(1);
        let mut new_min_in_block_0 = false;
        for (j, p) in plan.iter().enumerate() {
            if p.slot != usize::MAX {
                self.vals[p.slot] = self.vals[j];
            } else if !self.log_tomb[j] {
                let b = p.block;
                let s = self.block_start(b) + self.len_of(b);
                self.keys[s] = self.keys[j];
                self.vals[s] = self.vals[j];
                self.block_len[b] += 1;
                self.main_count += 1;
                self.set_sorted(b, false);
                new_min_in_block_0 |= b == 0 && self.keys[j] < self.keys[self.header_start()];
            }
        }
        if new_min_in_block_0 {
            // The smallest new key becomes block 0's header element; the old one joins block 0.
            let s = self.block_start(0);
            let n = self.len_of(0);
            let m = (s..s + n)
                .min_by_key(|&i| self.keys[i])
                .unwrap_or(self.header_start());
            let h = self.header_start();
            self.keys.swap(h, m);
            self.vals.swap(h, m);
        }
        self.log_len = 0;
        self.log_sorted = true;
    }

    /// Case 2a's test: locates each (sorted) log entry in its block and counts the new elements
    /// per block (`count_per_block + new_destined_per_block < block_size`). `None` when some block
    /// would fill, or when a tombstone hits a stored element; both go to case 2b.
    fn plan_case_2a(&self) -> Option<Vec<Planned>> {
        let mut plan = Vec::with_capacity(self.log_len);
        let mut j = 0;
        while j < self.log_len {
            let b = self.block_of(&self.keys[j]);
            let run_end = if b + 1 < self.heads {
                let next = self.keys[self.header_start() + b + 1];
                j + self.keys[j..self.log_len].partition_point(|k| *k < next)
            } else {
                self.log_len
            };
            let h = self.header_start() + b;
            let s = self.block_start(b);
            let block = &self.keys[s..s + self.len_of(b)];
            let mut new = 0;
            for e in j..run_end {
                let k = self.keys[e];
                let slot = if self.keys[h] == k {
                    Some(h)
                } else {
                    block.iter().position(|x| *x == k).map(|p| s + p)
                };
                match (slot, self.log_tomb[e]) {
                    (Some(_), true) => {
                        paths::hit(4);
                        return None;
                    }
                    (None, false) => new += 1,
                    _ => {}
                }
                plan.push(Planned {
                    block: b,
                    slot: slot.unwrap_or(usize::MAX),
                });
            }
            if self.len_of(b) + new >= self.shape.block_size {
                return None;
            }
            j = run_end;
        }
        Some(plan)
    }
}

/// Sorts two parallel slices by the first.
fn sort_pairs<K: Ord + Copy, V: Copy>(keys: &mut [K], vals: &mut [V]) {
    if keys.len() <= 48 {
        for i in 1..keys.len() {
            let (k, v) = (keys[i], vals[i]);
            let mut j = i;
            while j > 0 && keys[j - 1] > k {
                keys[j] = keys[j - 1];
                vals[j] = vals[j - 1];
                j -= 1;
            }
            keys[j] = k;
            vals[j] = v;
        }
        return;
    }
    let mut pairs: Vec<(K, V)> = keys.iter().copied().zip(vals.iter().copied()).collect();
    pairs.sort_unstable_by_key(|p| p.0);
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        keys[i] = k;
        vals[i] = v;
    }
}
