//! Internal nodes: sorted arrays of pivots and child pointers (paper section 5: "standard sorted
//! arrays in the internal nodes"; 1,024 bytes by default as in section 6).
//!
//! Child `i` holds the keys in `[keys[i - 1], keys[i])` (unbounded at the ends). Both arrays are
//! allocated at full capacity when the node is made, so a node never reallocates.
//!
//! Invariants: `keys` strictly ascending; `children.len() == keys.len() + 1`;
//! `keys.len() <= capacity`.

use super::leaf::prefetch_slice;

/// An internal node over child handles `C`.
///
/// Stored as `first` plus `(pivot, child after it)` pairs in one array, so the child pointer a
/// search ends on sits next to the pivot it compared last (one cache miss less per level than
/// separate pivot and child arrays).
#[derive(Debug)]
pub(crate) struct Inner<K, C> {
    first: C,
    pairs: Vec<(K, C)>,
}

impl<K: Ord + Copy, C: Copy> Inner<K, C> {
    /// A node with one pivot and two children (a new root).
    pub(crate) fn new_root(capacity: usize, left: C, pivot: K, right: C) -> Self {
        let mut pairs = Vec::with_capacity(capacity);
        pairs.push((pivot, right));
        Inner { first: left, pairs }
    }

    /// The child whose range holds `key`. Loads the whole pivot array at once first: its misses
    /// overlap, where a binary search would take them one after another.
    #[inline(always)]
    pub(crate) fn child_for(&self, key: &K) -> C {
        prefetch_slice(&self.pairs);
        match self.pairs.partition_point(|(k, _)| k <= key) {
            0 => self.first,
            i => self.pairs[i - 1].1,
        }
    }

    /// The leftmost child.
    #[inline(always)]
    pub(crate) fn first_child(&self) -> C {
        self.first
    }

    /// All children, left to right.
    pub(crate) fn children(&self) -> impl Iterator<Item = C> + '_ {
        std::iter::once(self.first).chain(self.pairs.iter().map(|p| p.1))
    }

    /// All pivots, ascending.
    pub(crate) fn keys(&self) -> Vec<K> {
        self.pairs.iter().map(|p| p.0).collect()
    }

    /// Whether `child` is a child of this node other than the first.
    pub(crate) fn has_later_child(&self, child: C) -> bool
    where
        C: PartialEq,
    {
        self.pairs.iter().any(|p| p.1 == child)
    }

    /// Replaces the pivot just before `child` (which must be a later child) with `pivot`, which
    /// must keep the pivots ascending.
    pub(crate) fn set_pivot_before(&mut self, child: C, pivot: K)
    where
        C: PartialEq,
    {
        if let Some(p) = self.pairs.iter_mut().find(|p| p.1 == child) {
            p.0 = pivot;
        }
    }

    /// Whether one more pivot fits.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.pairs.len() < self.pairs.capacity()
    }

    /// Adds `pivot` with `right` as the child just after it. Precondition: `has_room()` and
    /// `pivot` not yet present.
    pub(crate) fn insert(&mut self, pivot: K, right: C) {
        let i = self.pairs.partition_point(|(k, _)| *k < pivot);
        self.pairs.insert(i, (pivot, right));
    }

    /// Moves the upper half to a new node; returns the pivot that separates the halves (it moves
    /// up to the parent and stays in neither) and the new right node.
    pub(crate) fn split(&mut self) -> (K, Self) {
        let mid = self.pairs.len() / 2;
        let mut pairs = Vec::with_capacity(self.pairs.capacity());
        pairs.extend_from_slice(&self.pairs[mid + 1..]);
        let (pivot, first) = self.pairs[mid];
        self.pairs.truncate(mid);
        (pivot, Inner { first, pairs })
    }

    /// Heap bytes a node of `capacity` pivots allocates.
    pub(crate) fn heap_bytes(capacity: usize) -> usize {
        capacity * std::mem::size_of::<(K, C)>()
    }
}
