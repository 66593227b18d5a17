//! The baseline leaf: a plain sorted array, as in the paper's B+tree (section 2, "B-tree structure
//! and operations"; section 6 "Data structures setup", TLX's B+tree leaves).
//!
//! Keys and values live in two parallel arrays at the leaf's full capacity (`node_size / (size_of
//! K + size_of V)` slots), inline in the leaf's node allocation like the BPA's (see `inline.rs`),
//! so a leaf of `node_size` bytes is what the paper's node-size sweep varies. An insert shifts the larger elements right by one; a delete
//! shifts them left; a split moves the upper half to a new leaf.
//!
//! Invariants: `keys[..len]` strictly ascending; `len <= capacity`.

use std::alloc::Layout;
use std::ops::Bound;
use std::ptr::NonNull;

use super::inline::{ArraysLayout, InlineSlice};
use super::leaf::{before, lower_bound, Leaf, Removed, Scan, PREFETCH_LIMIT};

/// The baseline leaf's shape: how many `(key, value)` slots it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortedShape {
    /// Slots per leaf (at least 2, so a split leaves something on both sides).
    pub slots: usize,
}

/// A sorted-array leaf.
#[derive(Debug)]
pub struct SortedLeaf<K, V> {
    keys: InlineSlice<K>,
    vals: InlineSlice<V>,
    len: usize,
}

/// The keys' and values' offsets in the storage, and its layout.
fn arrays<K, V>(shape: &SortedShape) -> (usize, usize, Layout) {
    let mut a = ArraysLayout::new();
    let keys = a.push::<K>(shape.slots);
    let vals = a.push::<V>(shape.slots);
    (keys, vals, a.layout())
}

impl<K, V> Leaf<K, V> for SortedLeaf<K, V>
where
    K: Ord + Copy + Send + Sync,
    V: Copy + Send + Sync,
{
    type Shape = SortedShape;

    fn storage_layout(shape: &SortedShape) -> Layout {
        arrays::<K, V>(shape).2
    }

    fn hot_bytes(shape: &SortedShape) -> usize {
        // A binary search over more keys than this touches too few of their lines.
        let (keys, _, _) = arrays::<K, V>(shape);
        let bytes = keys + shape.slots * std::mem::size_of::<K>();
        if bytes <= PREFETCH_LIMIT {
            bytes
        } else {
            0
        }
    }

    unsafe fn with_first_in(shape: SortedShape, storage: NonNull<u8>, key: K, value: V) -> Self {
        // Filling unused slots with the first pair avoids `Default` bounds and uninitialised
        // memory; slots past `len` are never read.
        let (k, v, _) = arrays::<K, V>(&shape);
        // SAFETY: the caller hands over `storage` with this layout, whose two arrays are
        // disjoint and aligned for their types.
        let (keys, vals) = unsafe {
            (
                InlineSlice::filled(storage, k, shape.slots, key),
                InlineSlice::filled(storage, v, shape.slots, value),
            )
        };
        SortedLeaf { keys, vals, len: 1 }
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.len == self.keys.len()
    }

    fn insert(&mut self, key: K, value: V) {
        let i = self.keys[..self.len].partition_point(|k| *k < key);
        if i < self.len && self.keys[i] == key {
            self.vals[i] = value;
            return;
        }
        self.keys.copy_within(i..self.len, i + 1);
        self.vals.copy_within(i..self.len, i + 1);
        self.keys[i] = key;
        self.vals[i] = value;
        self.len += 1;
    }

    #[inline]
    fn find(&self, key: &K) -> Option<V> {
        let i = self.keys[..self.len].partition_point(|k| k < key);
        (i < self.len && self.keys[i] == *key).then(|| self.vals[i])
    }

    fn remove(&mut self, key: &K) -> Removed<V> {
        let i = self.keys[..self.len].partition_point(|k| k < key);
        if i == self.len || self.keys[i] != *key {
            return Removed::Absent;
        }
        let v = self.vals[i];
        self.keys.copy_within(i + 1..self.len, i);
        self.vals.copy_within(i + 1..self.len, i);
        self.len -= 1;
        Removed::Was(v)
    }

    fn make_room(&mut self) -> Option<Vec<(K, V)>> {
        let mid = self.len / 2;
        let right = (mid..self.len)
            .map(|i| (self.keys[i], self.vals[i]))
            .collect();
        self.len = mid;
        Some(right)
    }

    fn capacity(&self) -> usize {
        self.keys.len()
    }

    fn take_sorted(&mut self) -> Vec<(K, V)> {
        let out = (0..self.len)
            .map(|i| (self.keys[i], self.vals[i]))
            .collect();
        self.len = 0;
        out
    }

    fn refill(&mut self, sorted: &[(K, V)]) {
        for (i, &(k, v)) in sorted.iter().enumerate() {
            self.keys[i] = k;
            self.vals[i] = v;
        }
        self.len = sorted.len();
    }

    #[inline]
    fn iterate<F: FnMut(K, V) -> bool>(&self, from: Bound<K>, f: &mut F) -> Scan {
        let i = lower_bound(&self.keys[..self.len], &from);
        for (k, v) in self.keys[i..self.len].iter().zip(&self.vals[i..self.len]) {
            if !f(*k, *v) {
                return Scan::Stopped;
            }
        }
        Scan::Exhausted
    }

    fn prepare_iterate(&mut self, _from: Bound<K>, _want: usize) {}

    #[inline]
    fn map<F: FnMut(K, V) -> bool>(&self, start: K, end: Option<K>, f: &mut F) -> Scan {
        let i = lower_bound(&self.keys[..self.len], &Bound::Included(start));
        for (k, v) in self.keys[i..self.len].iter().zip(&self.vals[i..self.len]) {
            if !before(k, &end) {
                return Scan::Exhausted;
            }
            if !f(*k, *v) {
                return Scan::Stopped;
            }
        }
        Scan::Exhausted
    }

    fn live(&self) -> usize {
        self.len
    }

    fn num_elts(&self) -> usize {
        self.len
    }

    fn stored_keys(&self) -> Vec<K> {
        self.keys[..self.len].to_vec()
    }

    fn check(&self) -> Result<(), String> {
        if self.len > self.keys.len() {
            return Err(format!(
                "len {} past capacity {}",
                self.len,
                self.keys.len()
            ));
        }
        if let Some(i) = (1..self.len).find(|&i| self.keys[i - 1] >= self.keys[i]) {
            return Err(format!("keys not strictly ascending at {i}"));
        }
        Ok(())
    }
}
