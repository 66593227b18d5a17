//! Internal nodes: sorted arrays of pivots and child pointers (paper section 5: "standard sorted
//! arrays in the internal nodes"; 1,024 bytes by default as in section 6), read optimistically.
//!
//! Layout: one allocation per node, aligned to a cache line, a 40-byte header followed inline by
//! `capacity` pairs `(pivot, child after it)`:
//!
//! ```text
//! [ latch | len | capacity | leaves_below | first | (pivot 0, child 1) | (pivot 1, child 2) | ... ]
//! ```
//!
//! Child `i` holds the keys in `[pivot[i - 1], pivot[i])` (unbounded at the ends). Keeping the
//! pivots inline (not behind a `Vec`) means reaching a node costs one dependent cache miss, not
//! two, and the child pointer a search ends on sits next to the pivot it compared last.
//!
//! Concurrency: optimistic lock coupling (Leis et al.). Each node has a versioned
//! [`Latch`]; readers take no lock and write nothing: they read the version, search, and check
//! the version again afterwards, restarting if a writer came in between. Writers hold the latch
//! exclusively ([`InnerWrite`]). Because readers race with writers, every field a reader touches
//! is an atomic (relaxed loads compile to plain loads on x86-64): pivots are stored as `u64`
//! words through [`InnerKey`], so a reader that reads a half-shifted array sees wrong but valid
//! keys and then fails validation. That is why keys need [`InnerKey`] rather than any
//! `Ord + Copy` type: a torn read of an arbitrary `K` would be undefined behaviour.
//!
//! A child slot holds null or a pointer to a node of the kind `leaves_below` says (slots are
//! zeroed at allocation and only ever written with this node's children); nodes are never freed
//! while the tree lives. So a pointer read optimistically is safe to follow once it is non-null,
//! even before validation.
//!
//! Invariants (under the latch): pivots strictly ascending; `len <= capacity`; the root may have
//! no pivot (only its `first` child), every other node has at least one.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::leaf::{prefetch_bytes, prefetch_slice, PREFETCH_LIMIT};
use crate::sync::{backoff, Latch};

/// A key type internal nodes can hold: encodable in one 64-bit word.
///
/// `from_word(to_word(k)) == k` must hold. `from_word` is also called on words a racing writer
/// left half-updated (the result is discarded after validation), so it must accept any word
/// without panicking.
pub trait InnerKey: Ord + Copy + Send + Sync + 'static {
    /// The key as a word.
    fn to_word(self) -> u64;
    /// The key `to_word` made `word` from (any value for other words).
    fn from_word(word: u64) -> Self;
}

macro_rules! inner_key {
    ($($t:ty),*) => {$(
        impl InnerKey for $t {
            #[inline(always)]
            fn to_word(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_word(word: u64) -> Self {
                word as $t
            }
        }
    )*};
}
inner_key!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// One pivot and the child after it.
#[repr(C)]
struct Pair {
    key: AtomicU64,
    child: AtomicPtr<u8>,
}

/// The node header; the pairs follow it in the same allocation.
#[repr(C)]
struct Header {
    latch: Latch,
    len: AtomicUsize,
    capacity: usize,
    /// Whether the children are leaves (otherwise internal nodes). Fixed for a node's life.
    leaves_below: bool,
    first: AtomicPtr<u8>,
}

const ALIGN: usize = 64;

/// A pointer to an internal node. Copy; valid while the tree that made it lives.
pub(crate) struct InnerPtr<K> {
    ptr: NonNull<u8>,
    _k: PhantomData<K>,
}

impl<K> Clone for InnerPtr<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for InnerPtr<K> {}
impl<K> PartialEq for InnerPtr<K> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }
}
impl<K> std::fmt::Debug for InnerPtr<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InnerPtr({:p})", self.ptr)
    }
}

// SAFETY: an `InnerPtr` is a shared reference to a node whose fields are all atomics or
// immutable after allocation; keys are `Send + Sync`.
unsafe impl<K: Send + Sync> Send for InnerPtr<K> {}
// SAFETY: as above.
unsafe impl<K: Send + Sync> Sync for InnerPtr<K> {}

fn layout(capacity: usize) -> Layout {
    let (layout, offset) = Layout::new::<Header>()
        .extend(Layout::array::<Pair>(capacity).expect("inner node size overflows"))
        .expect("inner node size overflows");
    debug_assert_eq!(offset, PAIRS_OFFSET);
    layout
        .align_to(ALIGN)
        .expect("cache-line alignment is valid")
        .pad_to_align()
}

/// Where the pairs start: right after the header (what `layout` computes, as a constant).
const PAIRS_OFFSET: usize =
    std::mem::size_of::<Header>().next_multiple_of(std::mem::align_of::<Pair>());

impl<K: InnerKey> InnerPtr<K> {
    /// A new node with no pivot and `first` as its only child.
    pub(crate) fn alloc(capacity: usize, leaves_below: bool, first: *mut u8) -> Self {
        let layout = layout(capacity);
        // SAFETY: the layout has a non-zero size (the header alone is 40 bytes).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh allocation of `layout`, which starts with a `Header`; the
        // zeroed pairs after it are valid atomics (key 0, null child).
        unsafe {
            ptr.cast::<Header>().write(Header {
                latch: Latch::default(),
                len: AtomicUsize::new(0),
                capacity,
                leaves_below,
                first: AtomicPtr::new(first),
            });
        }
        InnerPtr {
            ptr,
            _k: PhantomData,
        }
    }

    /// Frees the node (not its children).
    ///
    /// # Safety
    /// `self` came from [`InnerPtr::alloc`], is freed once, and no one uses it afterwards.
    pub(crate) unsafe fn free(self) {
        let layout = layout(self.header().capacity);
        // SAFETY: the caller guarantees this is the allocation `alloc` made with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }

    /// The node behind an erased child pointer.
    ///
    /// # Safety
    /// `raw` is non-null and was made by [`InnerPtr::as_raw`] of a live node.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(raw: *mut u8) -> Self {
        InnerPtr {
            // SAFETY: the caller guarantees `raw` is non-null.
            ptr: unsafe { NonNull::new_unchecked(raw) },
            _k: PhantomData,
        }
    }

    /// The node as an erased child pointer.
    #[inline(always)]
    pub(crate) fn as_raw(self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[inline(always)]
    fn header(&self) -> &Header {
        // SAFETY: the node is live (nodes are freed only when the tree drops) and starts with
        // an initialised header whose fields are atomics or never written after `alloc`.
        unsafe { self.ptr.cast::<Header>().as_ref() }
    }

    #[inline(always)]
    fn pairs(&self) -> &[Pair] {
        // SAFETY: the allocation holds `capacity` initialised pairs at `PAIRS_OFFSET` (zeroed
        // or written since), and `ptr` has the whole allocation's provenance.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.as_ptr().add(PAIRS_OFFSET).cast::<Pair>(),
                self.header().capacity,
            )
        }
    }

    /// Starts loading the first `bytes` bytes of the node (header and pairs; see
    /// [`InnerPtr::prefetch_bytes`]) as soon as its address is known, so its header and pivots
    /// arrive together instead of one after the other.
    #[inline(always)]
    pub(crate) fn prefetch(&self, bytes: usize) {
        prefetch_bytes(self.ptr.as_ptr(), bytes);
    }

    /// How much of a node of `capacity` pivots a descent prefetches: all of it, up to
    /// [`PREFETCH_LIMIT`].
    pub(crate) fn prefetch_bytes(capacity: usize) -> usize {
        Self::bytes(capacity).min(PREFETCH_LIMIT)
    }

    /// The node's versioned latch.
    #[inline(always)]
    pub(crate) fn latch(&self) -> &Latch {
        &self.header().latch
    }

    /// Whether the children are leaves.
    #[inline(always)]
    pub(crate) fn leaves_below(&self) -> bool {
        self.header().leaves_below
    }

    /// The pairs in use: `len` clamped to the capacity (a racing read may see any `len`).
    #[inline(always)]
    fn used(&self) -> &[Pair] {
        let pairs = self.pairs();
        let len = self.header().len.load(Relaxed).min(pairs.len());
        &pairs[..len]
    }

    /// The child whose range holds `key` (null if a racing writer left an empty slot; callers
    /// restart then). Loads the used pivots at once first: their misses overlap, where a binary
    /// search would take them one after another. Correct only if the version is validated
    /// afterwards or the node is write-latched.
    #[inline(always)]
    pub(crate) fn child_for(&self, key: &K) -> *mut u8 {
        let used = self.used();
        prefetch_slice(used);
        match used.partition_point(|p| K::from_word(p.key.load(Relaxed)) <= *key) {
            0 => self.header().first.load(Relaxed),
            i => used[i - 1].child.load(Relaxed),
        }
    }

    /// The leftmost child (same caveat as [`InnerPtr::child_for`]).
    #[inline(always)]
    pub(crate) fn first_child(&self) -> *mut u8 {
        self.header().first.load(Relaxed)
    }

    /// All children, left to right (under the latch, or with no writer running).
    pub(crate) fn children(&self) -> Vec<*mut u8> {
        std::iter::once(self.first_child())
            .chain(self.used().iter().map(|p| p.child.load(Relaxed)))
            .collect()
    }

    /// All pivots, ascending (under the latch, or with no writer running).
    pub(crate) fn keys(&self) -> Vec<K> {
        self.used()
            .iter()
            .map(|p| K::from_word(p.key.load(Relaxed)))
            .collect()
    }

    /// Whether `child` is a child of this node other than the first.
    pub(crate) fn has_later_child(&self, child: *mut u8) -> bool {
        self.used().iter().any(|p| p.child.load(Relaxed) == child)
    }

    /// Whether one more pivot fits.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.header().len.load(Relaxed) < self.header().capacity
    }

    /// Bytes a node of `capacity` pivots allocates.
    pub(crate) fn bytes(capacity: usize) -> usize {
        layout(capacity).size()
    }

    /// Takes the latch exclusively, waiting for other writers.
    pub(crate) fn write(self) -> InnerWrite<K> {
        let mut spins = 0u32;
        loop {
            if let Ok(v) = self.latch().read_lock() {
                if self.latch().upgrade(v).is_ok() {
                    return InnerWrite { node: self };
                }
            }
            backoff(&mut spins);
        }
    }
}

/// An internal node with its latch held exclusively; released on drop.
pub(crate) struct InnerWrite<K: InnerKey> {
    node: InnerPtr<K>,
}

impl<K: InnerKey> Drop for InnerWrite<K> {
    fn drop(&mut self) {
        self.node.latch().unlock();
    }
}

impl<K: InnerKey> std::ops::Deref for InnerWrite<K> {
    type Target = InnerPtr<K>;
    fn deref(&self) -> &InnerPtr<K> {
        &self.node
    }
}

impl<K: InnerKey> InnerWrite<K> {
    /// The node.
    pub(crate) fn node(&self) -> InnerPtr<K> {
        self.node
    }

    fn set(&self, i: usize, key: K, child: *mut u8) {
        let p = &self.node.pairs()[i];
        p.key.store(key.to_word(), Relaxed);
        p.child.store(child, Relaxed);
    }

    /// Replaces the pivot just before `child` (which must be a later child) with `pivot`, which
    /// must keep the pivots ascending.
    pub(crate) fn set_pivot_before(&self, child: *mut u8, pivot: K) {
        if let Some(p) = self.used().iter().find(|p| p.child.load(Relaxed) == child) {
            p.key.store(pivot.to_word(), Relaxed);
        }
    }

    /// Adds `pivot` with `right` as the child just after it. Precondition: `has_room()` and
    /// `pivot` not yet present.
    pub(crate) fn insert(&self, pivot: K, right: *mut u8) {
        let used = self.used();
        let len = used.len();
        let i = used.partition_point(|p| K::from_word(p.key.load(Relaxed)) < pivot);
        let pairs = self.pairs();
        for j in (i..len).rev() {
            pairs[j + 1].key.store(pairs[j].key.load(Relaxed), Relaxed);
            pairs[j + 1]
                .child
                .store(pairs[j].child.load(Relaxed), Relaxed);
        }
        self.set(i, pivot, right);
        self.header().len.store(len + 1, Relaxed);
    }

    /// Moves the upper half to a new node; returns the pivot that separates the halves (it moves
    /// up to the parent and stays in neither) and the new right node, not yet published.
    pub(crate) fn split(&self) -> (K, InnerPtr<K>) {
        let used = self.used();
        let mid = used.len() / 2;
        let pivot = K::from_word(used[mid].key.load(Relaxed));
        let right = InnerPtr::<K>::alloc(
            self.header().capacity,
            self.leaves_below(),
            used[mid].child.load(Relaxed),
        );
        for (j, p) in used[mid + 1..].iter().enumerate() {
            let dst = &right.pairs()[j];
            dst.key.store(p.key.load(Relaxed), Relaxed);
            dst.child.store(p.child.load(Relaxed), Relaxed);
        }
        right.header().len.store(used.len() - mid - 1, Relaxed);
        self.header().len.store(mid, Relaxed);
        (pivot, right)
    }
}

/// A new root over `left` and `right` separated by `pivot`, not yet published.
pub(crate) fn new_root<K: InnerKey>(
    capacity: usize,
    leaves_below: bool,
    left: *mut u8,
    pivot: K,
    right: *mut u8,
) -> InnerPtr<K> {
    let root = InnerPtr::<K>::alloc(capacity, leaves_below, left);
    let p = &root.pairs()[0];
    p.key.store(pivot.to_word(), Relaxed);
    p.child.store(right, Relaxed);
    root.header().len.store(1, Relaxed);
    root
}
