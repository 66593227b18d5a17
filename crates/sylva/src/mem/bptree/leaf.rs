//! The one varying part of the tree: what a leaf is.
//!
//! The paper compares two trees that differ only in their leaves (section 6, "Data structures
//! setup"): the plain B+tree with sorted-array leaves and the BP-tree with BPA leaves. Here both
//! are the same [`BpTree`](super::BpTree) code instantiated with a different [`Leaf`], so the
//! node-size tradeoff of Figure 1 and Tables 1–2 is measured in one binary with nothing else
//! differing.
//!
//! A leaf is always accessed under its latch: `&self` methods under the read latch, `&mut self`
//! methods under the write latch. Methods taking `&self` never write (readers never write shared
//! memory); anything that must reorganise (the BPA sorting its log or a block before an ordered
//! iteration) reports [`Scan::NeedsSort`] so the tree can take the write latch and call
//! [`Leaf::prepare_iterate`].

use std::ops::Bound;

/// How an ordered or unordered visit of one leaf ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The visitor returned `false`.
    Stopped,
    /// Every element of the leaf at or after the start was visited.
    Exhausted,
    /// The ordered visit reached a part of the leaf that is not sorted; the elements visited so
    /// far are the sorted prefix. Call [`Leaf::prepare_iterate`] under the write latch and resume
    /// after the last visited key.
    NeedsSort,
}

/// What [`Leaf::remove`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed<V> {
    /// The key was present with this value and is now gone.
    Was(V),
    /// The key was not present.
    Absent,
    /// The key is present but the leaf has no room for a tombstone; split first.
    NeedsRoom,
}

/// A leaf of the tree.
pub trait Leaf<K: Ord + Copy, V: Copy>: Sized + Send + Sync {
    /// The leaf's shape (sizes), fixed for a tree.
    type Shape: Copy + Send + Sync + std::fmt::Debug;

    /// Whether a full leaf first shares its elements with its right sibling (two leaves
    /// rebalanced, or two full leaves split into three), as in a B*-tree, instead of always
    /// splitting in two. See the tree's module docs for why the BPA wants it.
    const SHARES_WITH_SIBLING: bool = false;

    /// A leaf holding exactly `(key, value)`.
    fn with_first(shape: Self::Shape, key: K, value: V) -> Self;

    /// Whether an insert of a key not yet in the leaf could overflow it (the paper's
    /// `num_elts == capacity` test of section 5).
    fn is_full(&self) -> bool;

    /// Inserts or overwrites. Precondition: `!self.is_full()`.
    fn insert(&mut self, key: K, value: V);

    /// The value of `key`, if present.
    fn find(&self, key: &K) -> Option<V>;

    /// Starts loading the cache lines a lookup of `key` reads first, so their misses overlap
    /// instead of following one another.
    fn prefetch(&self, _key: &K) {}

    /// Removes `key`.
    fn remove(&mut self, key: &K) -> Removed<V>;

    /// Makes room in a full leaf: resolves buffered duplicates and tombstones and, if the leaf is
    /// still full, moves its upper half (in key order) to a new leaf and returns
    /// `(first key of the new leaf, new leaf)`. `None` means room was made without a split.
    fn make_room(&mut self) -> Option<(K, Self)>;

    /// Distinct elements the leaf holds at most.
    fn capacity(&self) -> usize;

    /// Every live element in ascending key order, duplicates and tombstones resolved. The leaf
    /// must be [`Leaf::refill`]ed before any other use.
    fn take_sorted(&mut self) -> Vec<(K, V)>;

    /// Replaces the contents with `sorted` (ascending, distinct, at most `capacity()` elements).
    fn refill(&mut self, sorted: &[(K, V)]);

    /// Visits the elements with key in `from` in ascending order (stopping early when `f` returns
    /// `false`), without writing. See [`Scan::NeedsSort`].
    fn iterate<F: FnMut(K, V) -> bool>(&self, from: Bound<K>, f: &mut F) -> Scan;

    /// Under the write latch: sorts whatever [`Leaf::iterate`] from `from` needs to visit about
    /// `want` elements without returning [`Scan::NeedsSort`].
    fn prepare_iterate(&mut self, from: Bound<K>, want: usize);

    /// Visits every element with `start <= key < end` (`end == None`: no upper bound), in any
    /// order, without writing. Never returns [`Scan::NeedsSort`].
    fn map<F: FnMut(K, V) -> bool>(&self, start: K, end: Option<K>, f: &mut F) -> Scan;

    /// Live records in the leaf (exact; may cost a pass over the leaf).
    fn live(&self) -> usize;

    /// The paper's `num_elts`: elements stored, counting buffered duplicates and tombstones.
    fn num_elts(&self) -> usize;

    /// Heap bytes a leaf of `shape` allocates, besides the node that holds it.
    fn heap_bytes(shape: &Self::Shape) -> usize;

    /// Every key stored, live or not, in no particular order (for checks).
    fn stored_keys(&self) -> Vec<K>;

    /// Checks the leaf's invariants; `Err` says which one is broken.
    fn check(&self) -> Result<(), String>;
}

/// Whether `key` lies at or after `from`.
#[inline(always)]
pub(crate) fn at_or_after<K: Ord>(key: &K, from: &Bound<K>) -> bool {
    match from {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    }
}

/// The first index of the ascending `sorted` whose key lies in `from`.
#[inline(always)]
pub(crate) fn lower_bound<K: Ord>(sorted: &[K], from: &Bound<K>) -> usize {
    match from {
        Bound::Included(s) => sorted.partition_point(|k| k < s),
        Bound::Excluded(s) => sorted.partition_point(|k| k <= s),
        Bound::Unbounded => 0,
    }
}

/// Whether `key` lies before the exclusive `end` (`None`: unbounded).
#[inline(always)]
pub(crate) fn before<K: Ord>(key: &K, end: &Option<K>) -> bool {
    match end {
        Some(e) => key < e,
        None => true,
    }
}

/// Asks the CPU to load every cache line of `items` (a hint: no effect on results), when they
/// span at most 2 KiB; past that a binary search touches too few of the lines to pay for it.
#[inline(always)]
pub(crate) fn prefetch_slice<T>(items: &[T]) {
    if std::mem::size_of_val(items) > 2048 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(items);
        let base = items.as_ptr().cast::<i8>();
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch is a hint that never faults, and `base + off` stays inside `items`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}
