//! Internal nodes: sorted arrays of pivots and child pointers (paper section 5: "standard sorted
//! arrays in the internal nodes"; 1,024 bytes by default as in section 6).
//!
//! Child `i` holds the keys in `[keys[i - 1], keys[i])` (unbounded at the ends). Both arrays are
//! allocated at full capacity when the node is made, so a node never reallocates.
//!
//! Invariants: `keys` strictly ascending; `children.len() == keys.len() + 1`;
//! `keys.len() <= capacity`.

/// An internal node over child handles `C`.
#[derive(Debug)]
pub(crate) struct Inner<K, C> {
    keys: Vec<K>,
    children: Vec<C>,
}

impl<K: Ord + Copy, C: Copy> Inner<K, C> {
    /// A node with one pivot and two children (a new root).
    pub(crate) fn new_root(capacity: usize, left: C, pivot: K, right: C) -> Self {
        let mut keys = Vec::with_capacity(capacity);
        let mut children = Vec::with_capacity(capacity + 1);
        keys.push(pivot);
        children.push(left);
        children.push(right);
        Inner { keys, children }
    }

    /// The child whose range holds `key`.
    #[inline(always)]
    pub(crate) fn child_for(&self, key: &K) -> C {
        self.children[self.keys.partition_point(|k| k <= key)]
    }

    /// The leftmost child.
    #[inline(always)]
    pub(crate) fn first_child(&self) -> C {
        self.children[0]
    }

    /// All children, left to right.
    pub(crate) fn children(&self) -> &[C] {
        &self.children
    }

    /// All pivots, ascending.
    pub(crate) fn keys(&self) -> &[K] {
        &self.keys
    }

    /// Whether one more pivot fits.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.keys.len() < self.keys.capacity()
    }

    /// Adds `pivot` with `right` as the child just after it. Precondition: `has_room()` and
    /// `pivot` not yet present.
    pub(crate) fn insert(&mut self, pivot: K, right: C) {
        let i = self.keys.partition_point(|k| *k < pivot);
        self.keys.insert(i, pivot);
        self.children.insert(i + 1, right);
    }

    /// Moves the upper half to a new node; returns the pivot that separates the halves (it moves
    /// up to the parent and stays in neither) and the new right node.
    pub(crate) fn split(&mut self) -> (K, Self) {
        let capacity = self.keys.capacity();
        let mid = self.keys.len() / 2;
        let mut keys = Vec::with_capacity(capacity);
        let mut children = Vec::with_capacity(capacity + 1);
        keys.extend_from_slice(&self.keys[mid + 1..]);
        children.extend_from_slice(&self.children[mid + 1..]);
        let pivot = self.keys[mid];
        self.keys.truncate(mid);
        self.children.truncate(mid + 1);
        (pivot, Inner { keys, children })
    }

    /// Heap bytes a node of `capacity` pivots allocates.
    pub(crate) fn heap_bytes(capacity: usize) -> usize {
        capacity * std::mem::size_of::<K>() + (capacity + 1) * std::mem::size_of::<C>()
    }
}
