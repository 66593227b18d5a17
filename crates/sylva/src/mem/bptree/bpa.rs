//! The buffered partitioned array (BPA), the BP-tree's leaf (paper section 3; `num_elts` from
//! section 5).
//!
//! One leaf is two parallel arrays (keys, values) of `log_size + num_blocks + num_blocks *
//! block_size` slots laid out as in Figure 2a:
//!
//! ```text
//! [ log: log_size unsorted slots | header: num_blocks sorted minimums | block 0 | block 1 | ... ]
//! ```
//!
//! The two arrays, and the small per-block lengths, per-block sorted bits and per-log-slot
//! tombstone flags, live in the leaf's storage, inline in its node allocation (`inline.rs`),
//! in the order `[sorted bits | block lengths | tombstone flags | keys | values]`: everything a
//! lookup reads before it picks a block (block lengths, log keys, header keys) is one contiguous
//! run at a fixed offset from the node, which a descent prefetches with the latch line
//! ([`Leaf::hot_bytes`]). Values come after all keys, so a block's keys and values are
//! `keys.len()` slots apart (two pages, usually).
//!
//! - The *log* buffers inserts (newest copy wins over the header/blocks). Insert scans it for the
//!   key, overwrites or appends; when the append fills it, it is *flushed*: sorted, then either
//!   appended into the blocks (case 2a, when every block keeps at least one empty slot) or merged
//!   with everything and *redistributed* evenly (case 2b).
//! - The *header* holds the minimum element of each active block (the element itself, not a copy:
//!   block `b`'s other elements lie strictly between `header[b]` and `header[b + 1]`).
//! - The *blocks* are unsorted; a bit per block records whether it is currently sorted. Ordered
//!   iteration sorts the log and only the blocks it touches ([`Leaf::prepare_iterate`], under the
//!   write latch) and then co-iterates log and blocks; `map` needs no sorting.
//!
//! Differences from the paper, and why:
//! - Every key value is valid. The paper's artifact marks empty slots with key 0; here the log,
//!   each block and the header carry explicit lengths, so 0 and the maximum key are ordinary keys.
//! - Deletes are tombstones in the log (the paper leaves deletes out, "symmetric to insertions").
//!   A tombstone for a key that is only in the log just removes that log entry. At a flush a
//!   tombstone for an absent key is dropped; one that hits an element in the header or a block
//!   sends the flush down the merge path (case 2b), which drops both. That keeps case 2a an
//!   append-only path; deletes are rare in the workloads the paper targets.
//! - A log key smaller than `header[0]` is flushed into block 0 and then swapped with the header
//!   slot, so case 2a does not need a redistribute to accept a new leaf minimum.
//! - `map` does not copy the log: it resolves each in-range log key against the header/blocks
//!   once (marking the shadowed slot) and then scans the blocks skipping those slots.
//!
//! Invariants (checked by [`Leaf::check`]):
//! - `log_len < log_size` between operations, log keys distinct, `log_sorted` true only if the
//!   log is in ascending order; a tombstone is in the log only if its key is in the header/blocks.
//! - `header[..heads]` strictly ascending; block `b < heads` holds at most `block_size - 1`
//!   elements, all strictly between `header[b]` and `header[b + 1]`; blocks `>= heads` are empty.
//! - `main_count = heads + Σ block_len`, and `num_elts = main_count + log_len <= num_blocks *
//!   block_size`, so any flush fits after a redistribute.

use std::alloc::Layout;
use std::ops::Bound;
use std::ptr::NonNull;

use super::inline::{ArraysLayout, InlineSlice};
use super::leaf::{at_or_after, before, lower_bound, prefetch_slice, Leaf, Removed, Scan};

#[path = "bpa_flush.rs"]
mod flush;
#[cfg(test)]
#[path = "bpa_tests.rs"]
mod tests;

/// Which flush paths ran on this thread, so tests can show they hit each one.
#[cfg(test)]
pub(crate) mod paths {
    use std::cell::Cell;

    thread_local! {
        /// [first flush into an empty header, case 2a, case 2b, split, tombstone sent to 2b]
        pub(crate) static HITS: Cell<[u64; 5]> = const { Cell::new([0; 5]) };
    }

    pub(crate) fn hit(i: usize) {
        HITS.with(|h| {
            let mut a = h.get();
            a[i] += 1;
            h.set(a);
        });
    }
}

#[cfg(not(test))]
mod paths {
    #[inline(always)]
    pub(crate) fn hit(_: usize) {}
}

/// The shape of a BPA leaf, in slots. The default (32, 32, 32) is the paper's: 1,088 slots,
/// 17,408 bytes for u64 pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpaShape {
    /// Slots in the log (at least 1).
    pub log_size: usize,
    /// Blocks, and so header slots (at least 1).
    pub num_blocks: usize,
    /// Slots per block (at least 2: one element plus the empty slot the invariant keeps).
    pub block_size: usize,
}

impl Default for BpaShape {
    fn default() -> Self {
        BpaShape {
            log_size: 32,
            num_blocks: 32,
            block_size: 32,
        }
    }
}

impl BpaShape {
    /// Distinct elements a leaf holds at most: one per header slot plus `block_size - 1` per
    /// block.
    pub fn capacity(&self) -> usize {
        self.num_blocks * self.block_size
    }

    /// Total slots (log, header and blocks).
    pub fn slots(&self) -> usize {
        self.log_size + self.num_blocks + self.num_blocks * self.block_size
    }
}

/// Where a BPA's arrays sit in its storage (offsets in bytes), in the order a lookup reads them:
/// the small per-block and per-log-slot arrays, then the keys (log, header, blocks), then the
/// values. A lookup reads the block lengths, the log keys and the header keys before it picks a
/// block, so those are the leading [`Leaf::hot_bytes`] and get prefetched together.
struct Arrays {
    sorted_bits: usize,
    block_len: usize,
    log_tomb: usize,
    keys: usize,
    vals: usize,
    layout: Layout,
}

impl Arrays {
    fn of<K, V>(shape: &BpaShape) -> Self {
        let mut a = ArraysLayout::new();
        let sorted_bits = a.push::<u64>(shape.num_blocks.div_ceil(64));
        let block_len = a.push::<u32>(shape.num_blocks);
        let log_tomb = a.push::<bool>(shape.log_size);
        let keys = a.push::<K>(shape.slots());
        let vals = a.push::<V>(shape.slots());
        Arrays {
            sorted_bits,
            block_len,
            log_tomb,
            keys,
            vals,
            layout: a.layout(),
        }
    }
}

/// A buffered partitioned array.
///
/// The arrays live in the leaf's storage, inline in its node allocation (see `inline.rs`).
/// `repr(C)` keeps the fields a lookup reads first (keys, lengths, shape) together at the
/// front, next to the latch word.
#[derive(Debug)]
#[repr(C)]
pub struct Bpa<K, V> {
    /// `[log | header | blocks]`.
    keys: InlineSlice<K>,
    log_len: usize,
    /// Active blocks, that is, elements in the header.
    heads: usize,
    shape: BpaShape,
    /// Elements in each block (excluding its header element).
    block_len: InlineSlice<u32>,
    vals: InlineSlice<V>,
    /// Bit `b`: block `b` is sorted.
    sorted_bits: InlineSlice<u64>,
    /// Per log slot: is this entry a tombstone.
    log_tomb: InlineSlice<bool>,
    log_sorted: bool,
    /// Elements in the header and blocks.
    main_count: usize,
}

impl<K: Ord + Copy, V: Copy> Bpa<K, V> {
    #[inline(always)]
    fn header_start(&self) -> usize {
        self.shape.log_size
    }

    #[inline(always)]
    fn block_start(&self, b: usize) -> usize {
        self.shape.log_size + self.shape.num_blocks + b * self.shape.block_size
    }

    #[inline(always)]
    fn header(&self) -> &[K] {
        &self.keys[self.header_start()..self.header_start() + self.heads]
    }

    #[inline(always)]
    fn len_of(&self, b: usize) -> usize {
        self.block_len[b] as usize
    }

    #[inline(always)]
    fn is_sorted(&self, b: usize) -> bool {
        self.sorted_bits[b / 64] & (1 << (b % 64)) != 0
    }

    #[inline(always)]
    fn set_sorted(&mut self, b: usize, sorted: bool) {
        if sorted {
            self.sorted_bits[b / 64] |= 1 << (b % 64);
        } else {
            self.sorted_bits[b / 64] &= !(1 << (b % 64));
        }
    }

    /// The block whose range holds `key` (block 0 for keys below the first header). Requires
    /// `heads > 0`.
    #[inline(always)]
    fn block_of(&self, key: &K) -> usize {
        self.header()
            .partition_point(|h| h <= key)
            .saturating_sub(1)
    }

    /// The block an iteration starting at `from` begins in.
    #[inline]
    fn block_of_bound(&self, from: &Bound<K>) -> usize {
        match from {
            Bound::Included(k) | Bound::Excluded(k) => self.block_of(k),
            Bound::Unbounded => 0,
        }
    }

    /// The slot of `key` in the header or its block, if there.
    #[inline]
    fn locate_main(&self, key: &K) -> Option<usize> {
        if self.heads == 0 {
            return None;
        }
        let i = self.header().partition_point(|h| h <= key);
        if i == 0 {
            return None;
        }
        let b = i - 1;
        if self.keys[self.header_start() + b] == *key {
            return Some(self.header_start() + b);
        }
        let s = self.block_start(b);
        let n = self.len_of(b);
        // The block's values load while its keys are scanned.
        prefetch_slice(&self.vals[s..s + n]);
        self.keys[s..s + n]
            .iter()
            .position(|k| k == key)
            .map(|p| s + p)
    }

    /// The log slot holding `key`, if any.
    #[inline(always)]
    fn locate_log(&self, key: &K) -> Option<usize> {
        self.keys[..self.log_len].iter().position(|k| k == key)
    }

    /// Appends `(key, value)` to the log (tombstone or not) and flushes when the log fills.
    fn append_to_log(&mut self, key: K, value: V, tomb: bool) {
        let j = self.log_len;
        self.log_sorted &= j == 0 || self.keys[j - 1] < key;
        self.keys[j] = key;
        self.vals[j] = value;
        self.log_tomb[j] = tomb;
        self.log_len += 1;
        if self.log_len == self.shape.log_size {
            self.flush();
        }
    }

    /// Emits the sorted main part from block `b`, position `p` (`None`: starting with the header
    /// element) onwards, with the log already exhausted.
    #[inline]
    fn iterate_main<F: FnMut(K, V) -> bool>(
        &self,
        mut b: usize,
        mut p: Option<usize>,
        f: &mut F,
    ) -> Scan {
        while b < self.heads {
            if p.is_none() {
                let h = self.header_start() + b;
                if !f(self.keys[h], self.vals[h]) {
                    return Scan::Stopped;
                }
            }
            let n = self.len_of(b);
            let s = self.block_start(b);
            let from = (s + p.unwrap_or(0)).min(s + n);
            if from < s + n && !self.is_sorted(b) {
                return Scan::NeedsSort;
            }
            for (k, v) in self.keys[from..s + n].iter().zip(&self.vals[from..s + n]) {
                if !f(*k, *v) {
                    return Scan::Stopped;
                }
            }
            b += 1;
            p = None;
        }
        Scan::Exhausted
    }
}

impl<K, V> Leaf<K, V> for Bpa<K, V>
where
    K: Ord + Copy + Send + Sync,
    V: Copy + Send + Sync,
{
    type Shape = BpaShape;

    const SHARES_WITH_SIBLING: bool = true;

    fn storage_layout(shape: &BpaShape) -> Layout {
        Arrays::of::<K, V>(shape).layout
    }

    fn hot_bytes(shape: &BpaShape) -> usize {
        Arrays::of::<K, V>(shape).keys
            + (shape.log_size + shape.num_blocks) * std::mem::size_of::<K>()
    }

    unsafe fn with_first_in(shape: BpaShape, storage: NonNull<u8>, key: K, value: V) -> Self {
        // Unused slots hold copies of the first pair (no `Default` bound, no uninitialised
        // memory); only slots inside the lengths are ever read.
        let a = Arrays::of::<K, V>(&shape);
        let slots = shape.slots();
        // SAFETY: the caller hands over `storage` with `a.layout`; `Arrays::of` placed the five
        // arrays at disjoint offsets inside it, each aligned for its type.
        let (keys, vals, log_tomb, block_len, sorted_bits) = unsafe {
            (
                InlineSlice::filled(storage, a.keys, slots, key),
                InlineSlice::filled(storage, a.vals, slots, value),
                InlineSlice::filled(storage, a.log_tomb, shape.log_size, false),
                InlineSlice::filled(storage, a.block_len, shape.num_blocks, 0u32),
                InlineSlice::filled(
                    storage,
                    a.sorted_bits,
                    shape.num_blocks.div_ceil(64),
                    u64::MAX,
                ),
            )
        };
        let mut bpa = Bpa {
            shape,
            keys,
            vals,
            log_tomb,
            block_len,
            sorted_bits,
            log_len: 0,
            log_sorted: true,
            heads: 0,
            main_count: 0,
        };
        bpa.redistribute(&[(key, value)]);
        bpa
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.main_count + self.log_len >= self.shape.capacity()
    }

    fn insert(&mut self, key: K, value: V) {
        if let Some(j) = self.locate_log(&key) {
            self.vals[j] = value;
            self.log_tomb[j] = false;
            return;
        }
        self.append_to_log(key, value, false);
    }

    #[inline]
    fn find(&self, key: &K) -> Option<V> {
        if let Some(j) = self.locate_log(key) {
            return (!self.log_tomb[j]).then(|| self.vals[j]);
        }
        self.locate_main(key).map(|s| self.vals[s])
    }

    fn remove(&mut self, key: &K) -> Removed<V> {
        let in_main = self.locate_main(key);
        match (self.locate_log(key), in_main) {
            (Some(j), _) if self.log_tomb[j] => Removed::Absent,
            (Some(j), Some(_)) => {
                self.log_tomb[j] = true;
                Removed::Was(self.vals[j])
            }
            (Some(j), None) => {
                let v = self.vals[j];
                // Shifting (not swapping) keeps a sorted log sorted.
                self.keys.copy_within(j + 1..self.log_len, j);
                self.vals.copy_within(j + 1..self.log_len, j);
                self.log_tomb.copy_within(j + 1..self.log_len, j);
                self.log_len -= 1;
                Removed::Was(v)
            }
            (None, Some(_)) if self.is_full() => Removed::NeedsRoom,
            (None, Some(s)) => {
                let v = self.vals[s];
                self.append_to_log(*key, v, true);
                Removed::Was(v)
            }
            (None, None) => Removed::Absent,
        }
    }

    fn make_room(&mut self) -> Option<Vec<(K, V)>> {
        let mut all = self.merged();
        if all.len() < self.shape.capacity() {
            self.redistribute(&all);
            return None;
        }
        paths::hit(3);
        let right = all.split_off(all.len() / 2);
        self.redistribute(&all);
        Some(right)
    }

    fn capacity(&self) -> usize {
        self.shape.capacity()
    }

    fn take_sorted(&mut self) -> Vec<(K, V)> {
        self.merged()
    }

    fn refill(&mut self, sorted: &[(K, V)]) {
        self.redistribute(sorted);
    }

    fn iterate<F: FnMut(K, V) -> bool>(&self, from: Bound<K>, f: &mut F) -> Scan {
        if !self.log_sorted {
            return Scan::NeedsSort;
        }
        let mut li = lower_bound(&self.keys[..self.log_len], &from);
        if self.heads == 0 {
            for j in li..self.log_len {
                if !self.log_tomb[j] && !f(self.keys[j], self.vals[j]) {
                    return Scan::Stopped;
                }
            }
            return Scan::Exhausted;
        }
        // The main cursor: block `b`, and `p` = None for its header element or Some(index).
        let mut b = self.block_of_bound(&from);
        let (s0, n0) = (self.block_start(b), self.len_of(b));
        prefetch_slice(&self.keys[s0..s0 + n0]);
        prefetch_slice(&self.vals[s0..s0 + n0]);
        let mut p = None;
        if !at_or_after(&self.keys[self.header_start() + b], &from) {
            if self.len_of(b) > 0 && !self.is_sorted(b) {
                return Scan::NeedsSort;
            }
            let s = self.block_start(b);
            let block = &self.keys[s..s + self.len_of(b)];
            p = Some(lower_bound(block, &from));
        }
        // Co-iterate while log entries remain: emit the stored run below each log key, then the
        // log entry itself (it replaces an equal stored key, being the newer copy).
        while li < self.log_len {
            let lk = self.keys[li];
            while b < self.heads {
                match p {
                    None => {
                        let h = self.header_start() + b;
                        if self.keys[h] >= lk {
                            break;
                        }
                        if !f(self.keys[h], self.vals[h]) {
                            return Scan::Stopped;
                        }
                        p = Some(0);
                    }
                    Some(i) => {
                        let (s, n) = (self.block_start(b), self.len_of(b));
                        if i < n {
                            if !self.is_sorted(b) {
                                return Scan::NeedsSort;
                            }
                            // Find the run below `lk` first, then emit it as a plain slice
                            // walk: no comparison with the log key and no bounds check per
                            // element (this is the path most elements take while the log
                            // still has entries further on).
                            let rest = &self.keys[s + i..s + n];
                            let run = rest.partition_point(|k| *k < lk);
                            let vals = &self.vals[s + i..s + i + run];
                            for (k, v) in rest[..run].iter().zip(vals) {
                                if !f(*k, *v) {
                                    return Scan::Stopped;
                                }
                            }
                            p = Some(i + run);
                            if i + run < n {
                                break;
                            }
                        }
                        b += 1;
                        p = None;
                    }
                }
            }
            if b < self.heads {
                let slot = match p {
                    None => self.header_start() + b,
                    Some(i) => self.block_start(b) + i,
                };
                if self.keys[slot] == lk {
                    p = Some(p.map_or(0, |i| i + 1));
                }
            }
            if !self.log_tomb[li] && !f(lk, self.vals[li]) {
                return Scan::Stopped;
            }
            li += 1;
        }
        self.iterate_main(b, p, f)
    }

    fn prepare_iterate(&mut self, from: Bound<K>, want: usize) {
        self.sort_log();
        if self.heads == 0 {
            return;
        }
        // Each log entry can hide at most one stored element, so `want + log_len` stored
        // elements at or after `from` are enough. In the first block only those at or after
        // `from` count: the scan skips the rest.
        let first = self.block_of_bound(&from);
        let mut covered = 0usize;
        let enough = want.saturating_add(self.log_len);
        let mut b = first;
        while b < self.heads && covered <= enough {
            self.sort_block(b);
            let (s, n) = (self.block_start(b), self.len_of(b));
            covered += if b == first {
                let head = at_or_after(&self.keys[self.header_start() + b], &from);
                usize::from(head) + n - lower_bound(&self.keys[s..s + n], &from)
            } else {
                1 + n
            };
            b += 1;
        }
    }

    fn map<F: FnMut(K, V) -> bool>(&self, start: K, end: Option<K>, f: &mut F) -> Scan {
        let in_range = |k: &K| *k >= start && before(k, &end);
        // Log entries first; remember which stored slots they shadow.
        let mut shadowed: Vec<usize> = Vec::new();
        for j in 0..self.log_len {
            let k = self.keys[j];
            if !in_range(&k) {
                continue;
            }
            if let Some(s) = self.locate_main(&k) {
                shadowed.push(s);
            }
            if !self.log_tomb[j] && !f(k, self.vals[j]) {
                return Scan::Stopped;
            }
        }
        if self.heads == 0 {
            return Scan::Exhausted;
        }
        let visible = |s: usize| shadowed.is_empty() || !shadowed.contains(&s);
        for b in self.block_of(&start)..self.heads {
            let h = self.header_start() + b;
            let hk = self.keys[h];
            if !before(&hk, &end) {
                break;
            }
            if hk >= start && visible(h) && !f(hk, self.vals[h]) {
                return Scan::Stopped;
            }
            let s = self.block_start(b);
            let n = self.len_of(b);
            let whole = hk >= start
                && match (&end, b + 1 < self.heads) {
                    (None, _) => true,
                    (Some(e), true) => self.keys[h + 1] <= *e,
                    (Some(_), false) => false,
                }
                && !shadowed.iter().any(|&x| x >= s && x < s + n);
            if whole {
                for (k, v) in self.keys[s..s + n].iter().zip(&self.vals[s..s + n]) {
                    if !f(*k, *v) {
                        return Scan::Stopped;
                    }
                }
            } else {
                for i in s..s + n {
                    let k = self.keys[i];
                    if in_range(&k) && visible(i) && !f(k, self.vals[i]) {
                        return Scan::Stopped;
                    }
                }
            }
        }
        Scan::Exhausted
    }

    fn live(&self) -> usize {
        let mut n = self.main_count;
        for j in 0..self.log_len {
            match (self.log_tomb[j], self.locate_main(&self.keys[j]).is_some()) {
                (true, true) => n -= 1,
                (false, false) => n += 1,
                _ => {}
            }
        }
        n
    }

    fn num_elts(&self) -> usize {
        self.main_count + self.log_len
    }

    fn stored_keys(&self) -> Vec<K> {
        let mut keys = self.keys[..self.log_len].to_vec();
        keys.extend_from_slice(self.header());
        for b in 0..self.heads {
            let s = self.block_start(b);
            keys.extend_from_slice(&self.keys[s..s + self.len_of(b)]);
        }
        keys
    }

    fn check(&self) -> Result<(), String> {
        let shape = self.shape;
        if self.log_len >= shape.log_size {
            return Err(format!(
                "log holds {} of {} slots",
                self.log_len, shape.log_size
            ));
        }
        let log = &self.keys[..self.log_len];
        for i in 0..log.len() {
            if log[i + 1..].contains(&log[i]) {
                return Err(format!("log holds a key twice (slot {i})"));
            }
            if self.log_tomb[i] && self.locate_main(&log[i]).is_none() {
                return Err(format!("tombstone in log slot {i} hides nothing"));
            }
        }
        if self.log_sorted && log.windows(2).any(|w| w[0] > w[1]) {
            return Err("log marked sorted but is not".into());
        }
        let header = self.header();
        if header.windows(2).any(|w| w[0] >= w[1]) {
            return Err("header not strictly ascending".into());
        }
        let mut count = self.heads;
        for b in 0..shape.num_blocks {
            let n = self.len_of(b);
            if b >= self.heads {
                if n != 0 {
                    return Err(format!("inactive block {b} holds {n} elements"));
                }
                continue;
            }
            if n >= shape.block_size {
                return Err(format!("block {b} holds {n} of {} slots", shape.block_size));
            }
            count += n;
            let s = self.block_start(b);
            let block = &self.keys[s..s + n];
            let lo = header[b];
            let hi = header.get(b + 1);
            if let Some(k) = block
                .iter()
                .find(|k| **k <= lo || hi.is_some_and(|h| *k >= h))
            {
                let _ = k;
                return Err(format!("block {b} holds a key outside its header range"));
            }
            if self.is_sorted(b) && block.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("block {b} marked sorted but is not"));
            }
            for i in 0..n {
                if block[i + 1..].contains(&block[i]) {
                    return Err(format!("block {b} holds a key twice"));
                }
            }
        }
        if count != self.main_count {
            return Err(format!("main_count {} but {count} stored", self.main_count));
        }
        if self.num_elts() > shape.capacity() {
            return Err(format!(
                "num_elts {} past capacity {}",
                self.num_elts(),
                shape.capacity()
            ));
        }
        Ok(())
    }
}
