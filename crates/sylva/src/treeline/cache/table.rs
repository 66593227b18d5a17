//! The record cache's hash table: slot numbers found by their key's hash, with no tombstones.
//!
//! Open addressing with linear probing over a power of two of buckets. A bucket is a 4-byte
//! slot number and, in a separate array, a 2-byte control: a tag (0 for empty, else the hash's
//! top seven bits with the high bit set) and the entry's distance from its home bucket. A probe
//! reads the controls (32 to a cache line) and visits a slot's key, in the cache's arena, only
//! on a matching tag (one in 128 of the others).
//!
//! **Why not `hashbrown`.** Its removals leave tombstones where a probe sequence must go on,
//! and tombstones count against the capacity until the table rehashes. Under the cache's churn
//! (every admission evicts an entry once the budget is reached) they bring the table to its
//! rehash point however few entries are live, and with more than half of them live that rehash
//! doubles the table. The cache must charge the doubling before it happens (old and new tables
//! are held together while entries move over), so it could not grow past half its table: 1.8M
//! entries at 10M 64-byte records, where the budget held 2.6M (`docs/results/treeline.md`,
//! session 40). Here a removal shifts the entries after it back into the hole (backward-shift
//! deletion, Knuth's Algorithm R), leaving the table as if the key had never been inserted: the
//! room left depends on the live entries alone, so the charge does too, and the same operations
//! give the same charge whatever the hash's seed.
//!
//! **Why the distance.** The shift must know each following entry's home bucket, up to the end
//! of the run. Without the distance the entry's key was read from the arena and hashed again:
//! at ten million records the run after a removal is long (the table is up to seven eighths
//! full), each of its keys a cache miss, and eviction's removals took a third of a read miss's
//! user time (`docs/results/treeline.md`, session 42). With it the shift reads the controls
//! alone. A distance that does not fit a byte is stored as 255 and the key hashed again.
//!
//! The table grows (doubles) when its entries would pass seven eighths of its buckets, where a
//! probe for an absent key visits about 32 buckets (a cache line or two of controls), and a
//! removal shifts about as many; it never shrinks. (The cache charges the doubled table
//! within the last eighth before that point: a cache whose budget cannot pay for it stays
//! under 77% of its buckets, about 10 buckets a probe for an absent key.)

/// The smallest table, in buckets.
const MIN_BUCKETS: usize = 64;
const EMPTY: u8 = 0;
/// A distance of this or more is stored as this, and found by hashing the key again.
const FAR: u8 = u8::MAX;

/// A bucket's control: its tag ([`EMPTY`] or the hash's top bits) and its entry's distance
/// from its home bucket (capped at [`FAR`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ctrl {
    tag: u8,
    dist: u8,
}

const VACANT: Ctrl = Ctrl {
    tag: EMPTY,
    dist: 0,
};

/// The table (module docs).
pub(super) struct SlotTable {
    ctrl: Vec<Ctrl>,
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
            ctrl: vec![VACANT; MIN_BUCKETS],
            slots: vec![0; MIN_BUCKETS],
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.ctrl.len() - 1
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
        Self::limit(self.ctrl.len())
    }

    fn limit(buckets: usize) -> usize {
        buckets / 8 * 7
    }

    /// Bytes of the table's two arrays.
    pub(super) fn allocation_size(&self) -> usize {
        self.ctrl.capacity() * std::mem::size_of::<Ctrl>() + self.slots.capacity() * 4
    }

    /// The slot whose entry has `hash` and which `eq` accepts.
    pub(super) fn find(&self, hash: u64, eq: impl FnMut(u32) -> bool) -> Option<u32> {
        self.position(hash, eq).map(|i| self.slots[i])
    }

    /// The bucket of the entry with `hash` that `eq` accepts.
    fn position(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<usize> {
        let (tag, mask) = (tag_of(hash), self.mask());
        let mut i = self.home(hash);
        loop {
            match self.ctrl[i].tag {
                EMPTY => return None,
                t if t == tag && eq(self.slots[i]) => return Some(i),
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
        let home = self.home(hash);
        let mut i = home;
        while self.ctrl[i].tag != EMPTY {
            i = (i + 1) & mask;
        }
        self.ctrl[i] = Ctrl {
            tag: tag_of(hash),
            dist: Self::capped(i.wrapping_sub(home) & mask),
        };
        self.slots[i] = slot;
    }

    fn capped(dist: usize) -> u8 {
        dist.min(FAR as usize) as u8
    }

    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let buckets = self.ctrl.len() * 2;
        let ctrl = std::mem::replace(&mut self.ctrl, vec![VACANT; buckets]);
        let slots = std::mem::replace(&mut self.slots, vec![0; buckets]);
        for (i, c) in ctrl.iter().enumerate() {
            if c.tag != EMPTY {
                self.place(rehash(slots[i]), slots[i]);
            }
        }
    }

    /// Replaces slot number `old`, whose key has `hash`, by `new` (the entry moved); returns
    /// whether `old` was there.
    pub(super) fn replace(&mut self, hash: u64, old: u32, new: u32) -> bool {
        match self.position(hash, |s| s == old) {
            Some(i) => {
                self.slots[i] = new;
                true
            }
            None => false,
        }
    }

    /// Removes `slot`, whose key has `hash`; returns whether it was there. The entries after
    /// it in its run move back over the hole where their probe sequences allow (`rehash` as in
    /// [`SlotTable::insert`], for an entry farther than [`FAR`] from its home).
    pub(super) fn remove(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) -> bool {
        let Some(mut hole) = self.position(hash, |s| s == slot) else {
            return false;
        };
        self.len -= 1;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let c = self.ctrl[j];
            if c.tag == EMPTY {
                break;
            }
            // The entry at `j` may move into the hole if the hole lies on its probe sequence,
            // between its home and `j`.
            let dist = match c.dist {
                FAR => j.wrapping_sub(self.home(rehash(self.slots[j]))) & mask,
                d => d as usize,
            };
            let back = j.wrapping_sub(hole) & mask;
            if dist >= back {
                self.ctrl[hole] = Ctrl {
                    tag: c.tag,
                    dist: Self::capped(dist - back),
                };
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.ctrl[hole] = VACANT;
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

    impl SlotTable {
        /// Asserts that each entry's control holds its distance from its home bucket.
        fn check_distances(&self, hash: impl Fn(u32) -> u64) {
            let mask = self.mask();
            for (i, c) in self.ctrl.iter().enumerate() {
                if c.tag != EMPTY {
                    let d = i.wrapping_sub(self.home(hash(self.slots[i]))) & mask;
                    assert_eq!(c.dist, SlotTable::capped(d), "bucket {i}");
                }
            }
        }
    }

    #[test]
    fn entries_farther_than_a_byte_from_home_are_found_and_shifted_by_their_hash() {
        // Every key's home is bucket 5: one run of 1,500 entries in a table of 2,048 buckets.
        let hash = |s: u32| (u64::from(s).wrapping_mul(0x9E37_79B9_7F4A_7C15) & !0xFFFF) | 5;
        let mut t = SlotTable::new();
        for s in 0..1_500 {
            t.insert(hash(s), s, hash);
        }
        assert!(t.ctrl.iter().filter(|c| c.dist == FAR).count() > 1_000);
        t.check_distances(hash);
        for s in (0..1_500).step_by(3) {
            assert!(t.remove(hash(s), s, hash), "slot {s}");
        }
        t.check_distances(hash);
        for s in 0..1_500 {
            assert_eq!(
                t.find(hash(s), |x| x == s).is_some(),
                s % 3 != 0,
                "slot {s}"
            );
        }
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
                assert!(
                    t.remove(hash(s), s, hash),
                    "round {round}: slot {s} missing"
                );
            } else {
                t.insert(hash(s), s, hash);
                live.insert(s);
            }
            assert_eq!(t.len(), live.len());
            if round % 1_000 == 0 {
                t.check_distances(hash);
                for s in 0..3_000 {
                    let found = t.find(hash(s), |x| x == s);
                    assert_eq!(found.is_some(), live.contains(&s), "round {round} slot {s}");
                }
            }
        }
        // No tombstones: every non-empty bucket is a live entry.
        assert_eq!(t.ctrl.iter().filter(|c| c.tag != EMPTY).count(), live.len());
        t.check_distances(hash);
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
            assert_eq!(
                with.find(hash(s), |x| x == s).is_some(),
                s != 17,
                "slot {s}"
            );
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
