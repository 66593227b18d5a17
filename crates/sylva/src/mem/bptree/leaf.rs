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

use std::alloc::Layout;
use std::ops::Bound;
use std::ptr::NonNull;

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

    /// The layout of the arrays a leaf of `shape` keeps in its storage, which sits inline in
    /// the leaf's node allocation (see `inline.rs`).
    fn storage_layout(shape: &Self::Shape) -> Layout;

    /// How many leading bytes of the storage a lookup reads nearly all of before it knows where
    /// to look next (prefetched with the latch line as soon as a descent knows the leaf).
    fn hot_bytes(shape: &Self::Shape) -> usize;

    /// A leaf holding exactly `(key, value)`, with its arrays in `storage`.
    ///
    /// # Safety
    /// `storage` is aligned to `storage_layout(&shape)`, valid for reads and writes of its size
    /// for as long as the leaf lives, and used by nothing else meanwhile.
    unsafe fn with_first_in(shape: Self::Shape, storage: NonNull<u8>, key: K, value: V) -> Self;

    /// Whether an insert of a key not yet in the leaf could overflow it (the paper's
    /// `num_elts == capacity` test of section 5).
    fn is_full(&self) -> bool;

    /// Inserts or overwrites. Precondition: `!self.is_full()`.
    fn insert(&mut self, key: K, value: V);

    /// The value of `key`, if present.
    fn find(&self, key: &K) -> Option<V>;

    /// Removes `key`.
    fn remove(&mut self, key: &K) -> Removed<V>;

    /// Makes room in a full leaf: resolves buffered duplicates and tombstones and, if the leaf is
    /// still full, removes its upper half (in key order) and returns it, ascending, for a new
    /// leaf. `None` means room was made without a split.
    fn make_room(&mut self) -> Option<Vec<(K, V)>>;

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

/// Bytes past which prefetching a whole array does not pay: a binary search touches too few of
/// its lines.
pub(crate) const PREFETCH_LIMIT: usize = 2048;

/// Asks the CPU to load every cache line of `items` (a hint: no effect on results), when they
/// span at most [`PREFETCH_LIMIT`] bytes.
#[inline(always)]
pub(crate) fn prefetch_slice<T>(items: &[T]) {
    let bytes = std::mem::size_of_val(items);
    if bytes <= PREFETCH_LIMIT {
        prefetch_bytes(items.as_ptr().cast(), bytes);
    }
}

/// Asks the CPU to load the cache lines of `bytes` bytes from `start` (a hint: it never faults,
/// so `start` need not be dereferenceable, and it has no effect on results).
#[inline(always)]
pub(crate) fn prefetch_bytes(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch is a hint that never faults on any address; `wrapping_add`
            // computes the address without asserting it is in bounds.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(off).cast::<i8>()) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}
