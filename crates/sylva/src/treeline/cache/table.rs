//! The record cache's hash table: slot numbers found by their key's hash, with no tombstones.
//!
//! Open addressing with linear probing over a power of two of buckets. A bucket is a 4-byte
//! slot number and, in a separate array, a 1-byte tag: 0 for empty, else the hash's top seven
//! bits with the high bit set, so that a probe reads the tags (64 to a cache line) and visits a
//! slot's key, in the cache's arena, only on a matching tag (one in 128 of the others).
//!
//! **Why not `hashbrown`.** Its removals leave tombstones where a probe sequence must go on,
//! and tombstones count against the capacity until the table rehashes. Under the cache's churn
//! (every admission evicts an entry once the budget is reached) they bring the table to its
//! rehash point however few entries are live, and with more than half of them live that rehash
//! doubles the table. The cache must charge the doubling before it happens (old and new tables
//! are held together while entries move over), so it could not grow past half its table: 1.8M
//! entries at 10M 64-byte records, where the budget held 2.6M (`docs/results/treeline.md`,
//! session 40). Here a removal shifts the entries after it back into the hole (backward-shift
//! deletion), leaving the table as if the key had never been inserted: the room left depends
//! on the live entries alone, so the charge does too, and the same operations give the same
//! charge whatever the hash's seed.
//!
//! The shift needs each following entry's home bucket, which the table does not keep (the
//! 1-byte tag is not enough for it): the caller's `rehash` reads its key and hashes it again.
//! That is a read of the arena per entry shifted, about one at the table's load, beside the
//! page read that an eviction's admission made.
//!
//! The table grows (doubles) when its entries would pass seven eighths of its buckets, where a
//! probe for an absent key visits about 32 buckets (a cache line or two of tags), and a
//! removal shifts about as many; it never shrinks. (The cache charges the doubled table
//! within the last eighth before that point: a cache whose budget cannot pay for it stays
//! under 77% of its buckets, about 10 buckets a probe for an absent key.)

/// The smallest table, in buckets.
const MIN_BUCKETS: usize = 64;
const EMPTY: u8 = 0;

/// The table (module docs).
pub(super) struct SlotTable {
    tags: Vec<u8>,
    slots: Vec<u32>,
    len: usize,
}

fn tag_of(hash: u64) -> u8 {
    0x80 | (hash >> 57) as u8
}

impl SlotTable {
    /// An empty table of the smallest size.
    pub(super) fn new() -> Self {
        SlotTable {
            tags: vec![EMPTY; MIN_BUCKETS],
            slots: vec![0; MIN_BUCKETS],
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.tags.len() - 1
    }

    fn home(&self, hash: u64) -> usize {
        hash as usize & self.mask()
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Entries the table holds before it doubles.
    pub(super) fn capacity(&self) -> usize {
        Self::limit(self.tags.len())
    }

    fn limit(buckets: usize) -> usize {
        buckets / 8 * 7
    }

    /// Bytes of the table's two arrays.
    pub(super) fn allocation_size(&self) -> usize {
        self.tags.capacity() + self.slots.capacity() * 4
    }

    /// The slot whose entry has `hash` and which `eq` accepts.
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let (tag, mask) = (tag_of(hash), self.mask());
        let mut i = self.home(hash);
        loop {
            match self.tags[i] {
                EMPTY => return None,
                t if t == tag && eq(self.slots[i]) => return Some(self.slots[i]),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Adds `slot`, whose key has `hash` and is not in the table; `rehash` gives the hash of an
    /// entry's key from its slot (for moving the entries when the table doubles).
    pub(super) fn insert(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) {
        if self.len + 1 > self.capacity() {
            self.grow(&rehash);
        }
        self.place(hash, slot);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, slot: u32) {
        let mask = self.mask();
        let mut i = self.home(hash);
        while self.tags[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.tags[i] = tag_of(hash);
        self.slots[i] = slot;
    }

    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let buckets = self.tags.len() * 2;
        let tags = std::mem::replace(&mut self.tags, vec![EMPTY; buckets]);
        let slots = std::mem::replace(&mut self.slots, vec![0; buckets]);
        for (i, &t) in tags.iter().enumerate() {
            if t != EMPTY {
                self.place(rehash(slots[i]), slots[i]);
            }
        }
    }

    /// Replaces slot number `old`, whose key has `hash`, by `new` (the entry moved); returns
    /// whether `old` was there.
    pub(super) fn replace(&mut self, hash: u64, old: u32, new: u32) -> bool {
        let (tag, mask) = (tag_of(hash), self.mask());
        let mut i = self.home(hash);
        loop {
            match self.tags[i] {
                EMPTY => return false,
                t if t == tag && self.slots[i] == old => {
                    self.slots[i] = new;
                    return true;
                }
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Removes `slot`, whose key has `hash`; returns whether it was there. The entries after
    /// it in its run move back over the hole where their probe sequences allow (`rehash` as in
    /// [`SlotTable::insert`]).
    pub(super) fn remove(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) -> bool {
        let (tag, mask) = (tag_of(hash), self.mask());
        let mut hole = self.home(hash);
        loop {
            match self.tags[hole] {
                EMPTY => return false,
                t if t == tag && self.slots[hole] == slot => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            if self.tags[j] == EMPTY {
                break;
            }
            // The entry at `j` may move into the hole if the hole lies on its probe sequence,
            // between its home and `j`.
            let home = self.home(rehash(self.slots[j]));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.tags[hole] = self.tags[j];
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.tags[hole] = EMPTY;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A hash whose low bits take 64 values only, some near the table's end: long runs that
    /// wrap around it. The top bits (the tags) vary.
    fn weak(key: u32) -> u64 {
        let mixed = u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed & !0xFFFF) | u64::from(key % 64 * 1021)
    }

    #[test]
    fn found_through_growth_and_backward_shifting_removals_under_colliding_hashes() {
        // Slot s holds key s * 7 + 1; the model is the set of live slots.
        let key = |s: u32| s * 7 + 1;
        let hash = |s: u32| weak(key(s));
        let mut t = SlotTable::new();
        let mut live = HashSet::new();
        let mut rng = 0x2545_F491_4F6C_DD1D_u64;
        for round in 0..40_000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let s = (rng % 3_000) as u32;
            if live.remove(&s) {
                assert!(t.remove(hash(s), s, hash), "round {round}: slot {s} missing");
            } else {
                t.insert(hash(s), s, hash);
                live.insert(s);
            }
            assert_eq!(t.len(), live.len());
            if round % 1_000 == 0 {
                for s in 0..3_000 {
                    let found = t.find(hash(s), |x| x == s);
                    assert_eq!(found.is_some(), live.contains(&s), "round {round} slot {s}");
                }
            }
        }
        // No tombstones: every non-empty bucket is a live entry.
        assert_eq!(t.tags.iter().filter(|&&x| x != EMPTY).count(), live.len());
    }

    #[test]
    fn a_removal_leaves_the_table_as_if_the_key_had_never_been_inserted() {
        let hash = |s: u32| weak(s);
        let mut with = SlotTable::new();
        let mut without = SlotTable::new();
        for s in 0..40 {
            with.insert(hash(s), s, hash);
            if s != 17 {
                without.insert(hash(s), s, hash);
            }
        }
        assert!(with.remove(hash(17), 17, hash));
        assert!(!with.remove(hash(17), 17, hash), "removed twice");
        // Linear probing places by insertion order, so positions may differ; what must agree
        // is the set of entries and each probe's reach (no entry is cut off from its home).
        for s in 0..40 {
            assert_eq!(with.find(hash(s), |x| x == s).is_some(), s != 17, "slot {s}");
        }
        assert_eq!(with.len(), without.len());
        assert_eq!(with.allocation_size(), without.allocation_size());
    }

    #[test]
    fn the_table_doubles_only_past_seven_eighths_and_never_shrinks() {
        let hash = |s: u32| u64::from(s).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut t = SlotTable::new();
        let cap = t.capacity();
        let alloc = t.allocation_size();
        for s in 0..cap as u32 {
            t.insert(hash(s), s, hash);
        }
        assert_eq!(t.allocation_size(), alloc, "full but not past it");
        t.insert(hash(cap as u32), cap as u32, hash);
        assert_eq!(t.allocation_size(), 2 * alloc);
        for s in 0..=cap as u32 {
            assert!(t.remove(hash(s), s, hash));
        }
        assert_eq!(t.len(), 0);
        assert_eq!(t.allocation_size(), 2 * alloc);
    }
}
