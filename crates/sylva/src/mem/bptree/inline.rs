//! Leaf arrays stored inline in the leaf's node allocation.
//!
//! A leaf node is one allocation, aligned to a cache line:
//!
//! ```text
//! [ latch | leaf fields | next | high | moved_left | pad | leaf storage (arrays) ]
//!   ^ node                                                 ^ node + storage offset
//! ```
//!
//! The storage offset and size depend only on the tree's leaf shape, so once a descent knows a
//! leaf's address it can prefetch the latch line and the leading lines of the storage (for the
//! BPA: block lengths, log and header) at once, before it takes the latch (a locked instruction
//! that stalls later loads until the latch line arrives). With the arrays behind their own
//! allocations (`Box<[K]>`), their addresses were known only after the latch line had loaded:
//! one more dependent DRAM miss per lookup.
//!
//! A leaf sees its arrays through [`InlineSlice`]s: raw pointers into its storage that behave
//! like owned boxed slices (each covers a region no other slice covers, so `&self`/`&mut self`
//! on the leaf give shared/exclusive access to its arrays, exactly as `Box<[T]>` fields would).
//! [`ArraysLayout`] lays the arrays out one after another. Outside a tree (tests, one leaf on
//! its own), [`Standalone`] owns a leaf together with its storage.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::leaf::Leaf;

/// `len` initialised `T`s inside a leaf's storage, owned by the leaf like a `Box<[T]>` (but not
/// freed by it: the node allocation is).
pub(crate) struct InlineSlice<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: an `InlineSlice` is the only handle to its elements (like `Box<[T]>`), so sending it
// sends the elements.
unsafe impl<T: Send> Send for InlineSlice<T> {}
// SAFETY: shared access to an `InlineSlice` gives only `&[T]`.
unsafe impl<T: Sync> Sync for InlineSlice<T> {}

impl<T: Copy> InlineSlice<T> {
    /// Fills `len` slots at `storage + offset` with `fill` and takes them over.
    ///
    /// # Safety
    /// `storage + offset` is aligned for `T`, valid for reads and writes of `len` `T`s for as
    /// long as the returned slice lives, and no other live reference or `InlineSlice` covers
    /// those bytes.
    pub(crate) unsafe fn filled(storage: NonNull<u8>, offset: usize, len: usize, fill: T) -> Self {
        // SAFETY: the caller guarantees the region is inside the storage and aligned.
        let ptr = unsafe { storage.add(offset) }.cast::<T>();
        for i in 0..len {
            // SAFETY: `i < len`, inside the region; writing (not assigning) because the slots
            // may be uninitialised, and `T: Copy` has nothing to drop.
            unsafe { ptr.add(i).write(fill) };
        }
        InlineSlice { ptr, len }
    }
}

impl<T> Deref for InlineSlice<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `filled` initialised `len` elements, which stay valid while `self` lives, and
        // `&self` rules out an exclusive borrow through `self` at the same time.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for InlineSlice<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` is the only access, since no other handle covers
        // these elements.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for InlineSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.deref().fmt(f)
    }
}

/// Lays out arrays one after another (each aligned for its type), recording each one's offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArraysLayout {
    layout: Layout,
}

impl ArraysLayout {
    pub(crate) fn new() -> Self {
        ArraysLayout {
            layout: Layout::new::<()>(),
        }
    }

    /// Appends an array of `len` `T`s; returns its offset. Sizes come from validated leaf shapes
    /// (every dimension at most 4,096 slots, or 64 KiB nodes), far from overflowing.
    pub(crate) fn push<T>(&mut self, len: usize) -> usize {
        let array = Layout::array::<T>(len).expect("leaf array size overflows");
        let (layout, offset) = self
            .layout
            .extend(array)
            .expect("leaf storage size overflows");
        self.layout = layout;
        offset
    }

    /// The layout of everything pushed.
    pub(crate) fn layout(&self) -> Layout {
        self.layout.pad_to_align()
    }
}

/// A leaf with its own storage allocation, outside any tree.
pub struct Standalone<K: Ord + Copy, V: Copy, L: Leaf<K, V>> {
    /// `Some` until dropped; the leaf goes before its storage.
    leaf: Option<L>,
    storage: NonNull<u8>,
    layout: Layout,
    _kv: std::marker::PhantomData<(K, V)>,
}

impl<K: Ord + Copy, V: Copy, L: Leaf<K, V>> Standalone<K, V, L> {
    /// A leaf holding `sorted` (ascending, distinct, at least one and at most the shape's
    /// capacity elements); `None` if `sorted` is empty.
    pub fn from_sorted(shape: L::Shape, sorted: &[(K, V)]) -> Option<Self> {
        let &(k, v) = sorted.first()?;
        let layout = L::storage_layout(&shape);
        // At least one byte: allocating zero bytes is not allowed.
        let layout = Layout::from_size_align(layout.size().max(1), layout.align())
            .unwrap_or_else(|_| unreachable!("a valid layout stays valid with size >= 1"));
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let storage = NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(layout));
        // SAFETY: `storage` is a fresh allocation at least as large as `storage_layout(&shape)`
        // and as aligned, used by nothing else, and freed only after the leaf is dropped.
        let mut leaf = unsafe { L::with_first_in(shape, storage, k, v) };
        if sorted.len() > 1 {
            leaf.refill(sorted);
        }
        Some(Standalone {
            leaf: Some(leaf),
            storage,
            layout,
            _kv: std::marker::PhantomData,
        })
    }

    /// A leaf holding exactly `(key, value)`.
    pub fn with_first(shape: L::Shape, key: K, value: V) -> Self {
        match Self::from_sorted(shape, &[(key, value)]) {
            Some(s) => s,
            None => unreachable!("one element is not empty"),
        }
    }
}

impl<K: Ord + Copy, V: Copy, L: Leaf<K, V>> Deref for Standalone<K, V, L> {
    type Target = L;
    fn deref(&self) -> &L {
        match &self.leaf {
            Some(l) => l,
            None => unreachable!("the leaf is present until drop"),
        }
    }
}

impl<K: Ord + Copy, V: Copy, L: Leaf<K, V>> DerefMut for Standalone<K, V, L> {
    fn deref_mut(&mut self) -> &mut L {
        match &mut self.leaf {
            Some(l) => l,
            None => unreachable!("the leaf is present until drop"),
        }
    }
}

impl<K: Ord + Copy, V: Copy, L: Leaf<K, V>> Drop for Standalone<K, V, L> {
    fn drop(&mut self) {
        drop(self.leaf.take());
        // SAFETY: `storage` came from `alloc(layout)` in `from_sorted`, and the leaf that
        // pointed into it is gone.
        unsafe { dealloc(self.storage.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap

    use std::ops::Bound;

    use super::super::{BpTree, Bpa, BpaShape, SortedLeaf, SortedShape};
    use super::*;

    /// A value type with an odd size and alignment 1, so arrays after it need padding.
    type Odd = [u8; 3];

    fn odd(k: u64) -> Odd {
        [k as u8, (k >> 8) as u8, (k >> 16) as u8]
    }

    /// The layout invariant of a leaf kind: its storage is one block whose hot bytes lie inside
    /// it, and a leaf built there holds what it was given.
    fn layout_holds<K, V, L>(shape: L::Shape, sorted: &[(K, V)])
    where
        K: Ord + Copy + std::fmt::Debug,
        V: Copy + PartialEq + std::fmt::Debug,
        L: Leaf<K, V>,
    {
        let layout = L::storage_layout(&shape);
        assert!(L::hot_bytes(&shape) <= layout.size(), "{shape:?}");
        assert_eq!(layout.size() % layout.align(), 0, "{shape:?}");
        let leaf = Standalone::<K, V, L>::from_sorted(shape, sorted).unwrap();
        leaf.check().unwrap();
        let mut got = Vec::new();
        leaf.map(sorted[0].0, None, &mut |k, v| {
            got.push((k, v));
            true
        });
        got.sort_by_key(|p| p.0);
        assert_eq!(got, sorted, "{shape:?}");
    }

    #[test]
    fn odd_shapes_and_types_lay_out_inside_their_storage() {
        for (log_size, num_blocks, block_size) in [(1, 1, 2), (3, 5, 7), (7, 65, 3), (32, 32, 32)] {
            let shape = BpaShape {
                log_size,
                num_blocks,
                block_size,
            };
            let n = shape.capacity() as u64;
            let keys: Vec<u64> = (0..n).map(|i| i * 3).collect();
            let a: Vec<(u64, u64)> = keys.iter().map(|&k| (k, !k)).collect();
            layout_holds::<u64, u64, Bpa<u64, u64>>(shape, &a);
            let b: Vec<(u8, Odd)> = (0..n.min(256)).map(|i| (i as u8, odd(i))).collect();
            layout_holds::<u8, Odd, Bpa<u8, Odd>>(shape, &b);
            let c: Vec<(u32, u16)> = keys.iter().map(|&k| (k as u32, k as u16)).collect();
            layout_holds::<u32, u16, Bpa<u32, u16>>(shape, &c);
        }
        for slots in [2, 3, 17, 64] {
            let shape = SortedShape { slots };
            let a: Vec<(u16, Odd)> = (0..slots as u64).map(|k| (k as u16, odd(k))).collect();
            layout_holds::<u16, Odd, SortedLeaf<u16, Odd>>(shape, &a);
        }
    }

    /// A tree over an odd value type and shape: every leaf node's storage follows its latched
    /// node at an offset that must stay aligned through splits and reorganisations.
    #[test]
    fn trees_with_odd_layouts_keep_every_record() {
        fn run<L: Leaf<u32, Odd> + 'static>(tree: BpTree<u32, Odd, L>) {
            let n = 20_000u64;
            let key = |i: u64| (i.wrapping_mul(0x9E37_79B9) % 1_000_003) as u32;
            for i in 0..n {
                tree.insert(key(i), odd(i));
            }
            tree.check().unwrap();
            for i in 0..n {
                assert_eq!(tree.find(&key(i)), Some(odd(i)));
            }
            let mut seen = Vec::new();
            tree.iterate_range(Bound::Unbounded, usize::MAX, |k, _| {
                seen.push(k);
                true
            });
            let mut want: Vec<u32> = (0..n).map(key).collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(seen, want);
        }
        let shape = BpaShape {
            log_size: 5,
            num_blocks: 7,
            block_size: 9,
        };
        run(BpTree::<u32, Odd, Bpa<u32, Odd>>::with_shape(shape, 5));
        run(BpTree::<u32, Odd, SortedLeaf<u32, Odd>>::with_shape(
            SortedShape { slots: 13 },
            4,
        ));
    }
}
