//! The concurrent tree: one code path for both leaf kinds (paper sections 2.1 and 5).
//!
//! Concurrency: the paper's scheme (section 2.1) on the leaves, optimistic lock coupling (OLC,
//! Leis et al.) on the internal nodes. No global lock, no deadlock (latches are taken top-down,
//! then left to right):
//! - internal nodes (`inner.rs`) carry a versioned latch. A descent reads a node's version,
//!   picks the child, reads the child's version and validates the parent's, restarting from the
//!   root if a writer came in between. Readers never write shared memory on the way down;
//! - find: optimistic descent, read latch (`parking_lot::RwLock`) on the leaf, then the leaf's
//!   parent is validated (so the leaf cannot have split in between);
//! - insert/delete: optimistic descent, write latch on the leaf; if the leaf must split, release
//!   it and redo the descent pessimistically, write-latching internal nodes from the root down
//!   and releasing the ancestors of any node that can take one more pivot (so the root is held
//!   only when it may split). The paper first tries to upgrade the parent's latch in place; a
//!   split happens once per hundreds of inserts, so we always take the pessimistic second descent;
//! - iterate_range: descend like find, then move right leaf by leaf, taking the next leaf's read
//!   latch before releasing the current one. When the leaf's part to visit is not sorted, drop the
//!   read latch, take the write latch, sort (the BPA's log and touched blocks), downgrade to a read
//!   latch and resume after the last visited key (section 5's read-then-write optimisation);
//! - map_range: like iterate_range but never writes, so read latches only.
//!
//! Why OLC above the leaves and latches on them. The first version latched every node (the
//! paper's scheme throughout): each find then wrote the latch word of every internal node on its
//! path, and two threads reading the same few upper nodes passed those cache lines back and
//! forth; two threads ran YCSB C 1.61× one thread. With 1,024-element leaves there are few
//! internal nodes, so nearly every operation meets on them. Leaves are many and rarely shared
//! between threads, and leaf operations need their latch semantics (a BPA iteration sorts under
//! the write latch), so leaves keep reader-writer latches. The measured effect is in
//! `docs/results/bptree.md` ("Optimistic internal nodes"). OLC readers race with writers, so
//! internal nodes store keys as atomic words ([`InnerKey`]); the tree's keys must be
//! encodable in 64 bits.
//!
//! Prefetching on the way down. A find is bound by cache misses (10M keys: leaves of 17 KB,
//! 240 MB in all). As soon as a descent has read a child's address it starts loading the child:
//! an internal node whole (header and pivots together rather than header, then pivots), a leaf's
//! first bytes (latch line, leaf fields, and the leaf's hot arrays, which sit at a fixed offset in
//! the same allocation: `LeafLayout`, `inline.rs`). Taking the leaf's read latch is a locked
//! instruction, after which no later load starts until the latch line has arrived; prefetched
//! first, the log and header arrive with it instead of one DRAM miss later.
//!
//! Nodes are never freed while the tree lives (deletes are tombstones or shifts inside leaves; no
//! merges), so a node pointer read optimistically stays valid for the tree's lifetime; that is
//! what makes the raw child pointers sound without epochs. The root is always an internal node
//! (with one child and no pivot until the first split). Each leaf keeps `next` (its right
//! sibling) and `high` (the pivot above it), set under the leaf's write latch.
//!
//! Splits (section 5) and one addition. A full leaf first resolves its buffered duplicates and
//! tombstones; if still full it splits in two, as in the paper, except for leaves that ask to
//! share ([`Leaf::SHARES_WITH_SIBLING`], the BPA): those first rebalance with their right sibling
//! under the same parent, or split two full leaves into three (B*-tree style). Why: BPA leaves
//! are so big (1,024 elements) that under uniform inserts all leaves fill at the same rate and
//! split in waves; with plain splits the memory per record swung between 21.5 and 28.6 bytes as
//! 10M keys went in (28.4 at 10M), and with sharing it stays at 22.0. The baseline's small leaves
//! do not have the problem and keep plain splits, as in the paper's B+tree. Elements only move
//! left (into a new middle leaf) in a two-into-three split; the right leaf's `moved_left` counter
//! tells an iteration that let go of it to sort that it must descend again.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::bpa::Bpa;
use super::inner::{new_root, InnerKey, InnerPtr, InnerWrite};
use super::leaf::{prefetch_bytes, Leaf, Removed, Scan, PREFETCH_LIMIT};

/// A pointer to a leaf owned by the tree.
struct LeafPtr<K, V, L>(NonNull<LeafLatch<K, V, L>>);

impl<K, V, L> Clone for LeafPtr<K, V, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V, L> Copy for LeafPtr<K, V, L> {}
impl<K, V, L> PartialEq for LeafPtr<K, V, L> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K, V, L> LeafPtr<K, V, L> {
    /// The leaf as an erased child pointer, as internal nodes store it.
    fn as_raw(self) -> *mut u8 {
        self.0.as_ptr().cast()
    }
}

// SAFETY: a `LeafPtr` is a shared reference to a leaf the tree owns; leaves are `Send + Sync`
// when keys, values and leaf contents are (all access goes through the leaf's latch).
unsafe impl<K: Send + Sync, V: Send + Sync, L: Send + Sync> Send for LeafPtr<K, V, L> {}
// SAFETY: as above.
unsafe impl<K: Send + Sync, V: Send + Sync, L: Send + Sync> Sync for LeafPtr<K, V, L> {}

/// A leaf with its place in the leaf chain (`repr(C)`: the leaf's hot fields first). The leaf's
/// storage follows it in the same allocation ([`LeafLayout`]).
#[repr(C)]
struct LeafNode<K, V, L> {
    leaf: L,
    /// The right sibling, if any.
    next: Option<LeafPtr<K, V, L>>,
    /// The pivot just above this leaf (every key here is below it); `None` for the last leaf.
    high: Option<K>,
    /// Bumped whenever elements leave this leaf for a leaf on its left (a two-into-three split
    /// moves the lower part of the right leaf into the new middle leaf). An iteration that let go
    /// of the leaf to sort it checks this to know whether it must descend again.
    moved_left: u32,
    _v: PhantomData<V>,
}

type LeafLatch<K, V, L> = RwLock<LeafNode<K, V, L>>;

/// Where a leaf node's parts sit in its one allocation (see `inline.rs`): the latched node at
/// the start, its leaf's storage at `storage`; fixed by the leaf shape, so the same for every
/// leaf of a tree.
#[derive(Debug, Clone, Copy)]
struct LeafLayout {
    /// The whole allocation, aligned to a cache line.
    layout: Layout,
    /// Offset of the leaf's storage.
    storage: usize,
    /// Bytes from the start that a lookup reads first: the node (latch, lengths) and the
    /// leaf's hot bytes, capped.
    prefetch: usize,
}

impl LeafLayout {
    fn of<K, V, L: Leaf<K, V>>(shape: &L::Shape) -> Self
    where
        K: Ord + Copy,
        V: Copy,
    {
        // Leaf shapes are validated (at most 4,096 slots per dimension, 64 KiB nodes), so
        // these sizes are far from overflowing.
        let (layout, storage) = Layout::new::<LeafLatch<K, V, L>>()
            .extend(L::storage_layout(shape))
            .expect("leaf size overflows");
        let layout = layout
            .align_to(64)
            .expect("cache-line alignment is valid")
            .pad_to_align();
        let prefetch = storage + L::hot_bytes(shape).min(PREFETCH_LIMIT);
        LeafLayout {
            layout,
            storage,
            prefetch,
        }
    }
}

/// What a pessimistic descent does at the leaf.
#[derive(Clone, Copy)]
enum Op<V> {
    Insert(V),
    Remove,
}

/// Where a descent goes.
#[derive(Clone, Copy)]
enum Target<'a, K> {
    Key(&'a K),
    Leftmost,
}

/// What `check` collects while it walks the tree: the depth of the first leaf, and the leaves
/// in key order.
struct CheckWalk<K, V, L> {
    leaf_depth: Option<usize>,
    leaves: Vec<LeafPtr<K, V, L>>,
}

/// Counts and sizes of a tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Live records.
    pub records: u64,
    /// Elements stored in leaves, counting buffered duplicates and tombstones (Σ `num_elts`).
    pub num_elts: u64,
    /// Leaves.
    pub leaves: u64,
    /// Internal nodes.
    pub inner_nodes: u64,
    /// Bytes allocated for nodes (node structs plus their arrays).
    pub bytes: u64,
    /// Full leaves split in two.
    pub leaf_splits: u64,
    /// Full leaves rebalanced with their right sibling.
    pub sibling_shares: u64,
    /// Full leaves split, with their full right sibling, into three.
    pub three_way_splits: u64,
}

/// A concurrent B+tree whose leaves are `L`: the BP-tree with [`Bpa`] leaves (the
/// default), the paper's baseline B+tree with [`SortedLeaf`](super::SortedLeaf) leaves.
pub struct BpTree<K: InnerKey, V: Copy, L: Leaf<K, V> = Bpa<K, V>> {
    /// The root, always an internal node (null while the tree is empty).
    root: AtomicPtr<u8>,
    shape: L::Shape,
    leaf_layout: LeafLayout,
    inner_capacity: usize,
    /// Bytes of an internal node a descent prefetches.
    inner_prefetch: usize,
    leaves: AtomicUsize,
    inner_nodes: AtomicUsize,
    /// [leaf splits in two, rebalances with the right sibling, two-into-three splits]
    reorganisations: [AtomicUsize; 3],
    _kvl: PhantomData<(K, V, L)>,
}

// SAFETY: the tree owns its nodes through raw pointers; every access to a leaf goes through its
// latch, internal nodes are atomics read optimistically and written under their latch, and
// keys, values and leaves are `Send + Sync`.
unsafe impl<K, V, L> Send for BpTree<K, V, L>
where
    K: InnerKey,
    V: Copy + Send + Sync,
    L: Leaf<K, V>,
{
}
// SAFETY: as above.
unsafe impl<K, V, L> Sync for BpTree<K, V, L>
where
    K: InnerKey,
    V: Copy + Send + Sync,
    L: Leaf<K, V>,
{
}

impl<K, V, L> BpTree<K, V, L>
where
    K: InnerKey,
    V: Copy + Send + Sync + 'static,
    L: Leaf<K, V> + 'static,
{
    /// An empty tree with leaves of `shape` and internal nodes of `inner_capacity` pivots
    /// (at least 3).
    pub(crate) fn with_shape(shape: L::Shape, inner_capacity: usize) -> Self {
        BpTree {
            root: AtomicPtr::new(std::ptr::null_mut()),
            shape,
            leaf_layout: LeafLayout::of::<K, V, L>(&shape),
            inner_capacity: inner_capacity.max(3),
            inner_prefetch: InnerPtr::<K>::prefetch_bytes(inner_capacity.max(3)),
            leaves: AtomicUsize::new(0),
            inner_nodes: AtomicUsize::new(0),
            reorganisations: Default::default(),
            _kvl: PhantomData,
        }
    }

    /// The leaf behind an erased child pointer of an internal node whose children are leaves.
    #[inline(always)]
    fn leaf(&self, raw: *mut u8) -> &LeafLatch<K, V, L> {
        // SAFETY: leaves are allocated by `new_leaf` (an initialised node at the start of each
        // allocation) and freed only in `Drop`, which takes `&mut self`; callers pass only
        // non-null pointers read from a `leaves_below` node's slots, which hold nothing but its
        // leaves.
        unsafe { &*raw.cast::<LeafLatch<K, V, L>>() }
    }

    /// The leaf behind `p`.
    #[inline(always)]
    fn leaf_at(&self, p: LeafPtr<K, V, L>) -> &LeafLatch<K, V, L> {
        // SAFETY: as in `leaf`.
        unsafe { p.0.as_ref() }
    }

    fn alloc_inner(&self, leaves_below: bool, first: *mut u8) -> InnerPtr<K> {
        self.inner_nodes.fetch_add(1, Ordering::Relaxed);
        InnerPtr::alloc(self.inner_capacity, leaves_below, first)
    }

    /// Allocates a leaf node holding `sorted` (ascending, distinct, not empty, at most a leaf's
    /// capacity), not yet linked anywhere.
    fn new_leaf(
        &self,
        sorted: &[(K, V)],
        next: Option<LeafPtr<K, V, L>>,
        high: Option<K>,
    ) -> LeafPtr<K, V, L> {
        let Some(&(k0, v0)) = sorted.first() else {
            unreachable!("a new leaf always gets at least one element")
        };
        self.leaves.fetch_add(1, Ordering::Relaxed);
        let l = self.leaf_layout;
        // SAFETY: the layout's size is at least that of the node (non-zero: it holds a latch).
        let raw = unsafe { alloc(l.layout) };
        let Some(node) = NonNull::new(raw) else {
            handle_alloc_error(l.layout)
        };
        // SAFETY: `node + l.storage` is inside the fresh allocation, where `LeafLayout::of`
        // placed the leaf's storage (aligned for it), and only this leaf will use it; the
        // allocation lives until `free_leaf`, after the leaf is dropped.
        let mut leaf = unsafe { L::with_first_in(self.shape, node.add(l.storage), k0, v0) };
        if sorted.len() > 1 {
            leaf.refill(sorted);
        }
        let node = node.cast::<LeafLatch<K, V, L>>();
        // SAFETY: the allocation starts with room for a `LeafLatch`, aligned (the layout was
        // extended from it), and nothing is there yet.
        unsafe {
            node.write(RwLock::new(LeafNode {
                leaf,
                next,
                high,
                moved_left: 0,
                _v: PhantomData,
            }));
        }
        LeafPtr(node)
    }

    /// Drops and frees a leaf node.
    ///
    /// # Safety
    /// `p` came from this tree's `new_leaf`, is freed once, and nobody uses it afterwards.
    unsafe fn free_leaf(&self, p: LeafPtr<K, V, L>) {
        // SAFETY: the caller guarantees `p` is a live node made by `new_leaf` with this layout
        // and unused from now on; the leaf is dropped before its storage goes.
        unsafe {
            std::ptr::drop_in_place(p.0.as_ptr());
            dealloc(p.0.as_ptr().cast(), self.leaf_layout.layout);
        }
    }

    /// Starts loading what a lookup in the leaf at `raw` reads first (the latch line, the leaf's
    /// lengths and its hot arrays) before the latch is taken: the latch is a locked instruction,
    /// after which no later load starts until the latch line is in, so these misses would
    /// otherwise come one after another.
    #[inline(always)]
    fn prefetch_leaf(&self, raw: *mut u8) {
        prefetch_bytes(raw, self.leaf_layout.prefetch);
    }

    #[inline(always)]
    fn root(&self) -> Option<InnerPtr<K>> {
        let raw = self.root.load(Ordering::Acquire);
        // SAFETY: the root pointer is null or a live internal node made by `alloc_inner`.
        (!raw.is_null()).then(|| unsafe { InnerPtr::from_raw(raw) })
    }

    /// Descends optimistically (no latch taken on internal nodes, nothing written) to the leaf
    /// for `target` and latches it with `latch`. `None` when the tree is empty.
    ///
    /// Each step reads the child pointer, reads the child's version, then validates the
    /// parent's: a split of the child after the parent was read changes the parent (it gets the
    /// new pivot), so a stale path is always caught. At the leaf, the leaf is latched before the
    /// parent is validated, so the leaf cannot split between the two.
    #[inline]
    fn descend<'t, G>(
        &'t self,
        target: Target<'_, K>,
        latch: impl Fn(&'t LeafLatch<K, V, L>) -> G,
    ) -> Option<(G, &'t LeafLatch<K, V, L>)> {
        let pick = |node: &InnerPtr<K>| match target {
            Target::Key(k) => node.child_for(k),
            Target::Leftmost => node.first_child(),
        };
        'restart: loop {
            let root = self.root()?;
            let Ok(mut version) = root.latch().read_lock() else {
                continue;
            };
            if self.root() != Some(root) {
                continue;
            }
            let mut node = root;
            loop {
                let child = pick(&node);
                if child.is_null() {
                    continue 'restart;
                }
                if node.leaves_below() {
                    self.prefetch_leaf(child);
                    let leaf = self.leaf(child);
                    let g = latch(leaf);
                    if node.latch().validate(version).is_err() {
                        drop(g);
                        continue 'restart;
                    }
                    return Some((g, leaf));
                }
                // SAFETY: non-null, and the node's children are internal nodes.
                let next = unsafe { InnerPtr::<K>::from_raw(child) };
                next.prefetch(self.inner_prefetch);
                let Ok(next_version) = next.latch().read_lock() else {
                    continue 'restart;
                };
                if node.latch().validate(version).is_err() {
                    continue 'restart;
                }
                (node, version) = (next, next_version);
            }
        }
    }

    /// The value of `key`.
    pub fn find(&self, key: &K) -> Option<V> {
        let (g, _) = self.descend(Target::Key(key), |l| l.read())?;
        g.leaf.find(key)
    }

    /// Inserts `(key, value)`, overwriting an existing value.
    pub fn insert(&self, key: K, value: V) {
        if let Some((mut g, _)) = self.descend(Target::Key(&key), |l| l.write()) {
            if !g.leaf.is_full() {
                g.leaf.insert(key, value);
                return;
            }
        }
        self.modify_pessimistic(key, Op::Insert(value));
    }

    /// Removes `key`; returns its value if it was present.
    pub fn remove(&self, key: &K) -> Option<V> {
        let (mut g, _) = self.descend(Target::Key(key), |l| l.write())?;
        match g.leaf.remove(key) {
            Removed::Was(v) => Some(v),
            Removed::Absent => None,
            Removed::NeedsRoom => {
                drop(g);
                self.modify_pessimistic(*key, Op::Remove)
            }
        }
    }

    /// Applies `op` to a leaf with room; `Err` if it turned out to need room.
    fn apply(leaf: &mut L, key: K, op: Op<V>) -> Result<Option<V>, ()> {
        match op {
            Op::Insert(v) if !leaf.is_full() => {
                leaf.insert(key, v);
                Ok(None)
            }
            Op::Insert(_) => Err(()),
            Op::Remove => match leaf.remove(&key) {
                Removed::Was(v) => Ok(Some(v)),
                Removed::Absent => Ok(None),
                Removed::NeedsRoom => Err(()),
            },
        }
    }

    /// Makes room in the latched full leaf `g` (splitting it if needed) and applies `op`. On a
    /// split returns the new pivot and right leaf, already linked after `g` but not yet in the
    /// parent.
    #[allow(clippy::type_complexity)]
    fn split_and_apply(
        &self,
        g: &mut LeafNode<K, V, L>,
        key: K,
        op: Op<V>,
    ) -> (Option<(K, LeafPtr<K, V, L>)>, Result<Option<V>, ()>) {
        match g.leaf.make_room() {
            None => (None, Self::apply(&mut g.leaf, key, op)),
            Some(upper) => {
                self.reorganisations[0].fetch_add(1, Ordering::Relaxed);
                let right = self.new_leaf(&upper, g.next, g.high);
                let pivot = upper[0].0;
                // Apply before publishing the right leaf, so nobody sees it half-done (its
                // latch is free: nobody else knows it yet).
                let result = if key < pivot {
                    Self::apply(&mut g.leaf, key, op)
                } else {
                    Self::apply(&mut self.leaf_at(right).write().leaf, key, op)
                };
                g.next = Some(right);
                g.high = Some(pivot);
                (Some((pivot, right)), result)
            }
        }
    }

    /// Makes room in the latched full leaf `g` together with its right sibling `right` (a later
    /// child of the write-latched `parent`): if the two leave enough room, rebalance them evenly;
    /// otherwise split the two into three. Applies `op`. Returns a new middle leaf and its pivot,
    /// still to be inserted into the parent.
    #[allow(clippy::type_complexity)]
    fn share_and_apply(
        &self,
        g: &mut LeafNode<K, V, L>,
        right: LeafPtr<K, V, L>,
        parent: &InnerWrite<K>,
        key: K,
        op: Op<V>,
    ) -> (Option<(K, LeafPtr<K, V, L>)>, Result<Option<V>, ()>) {
        let mut rg = self.leaf_at(right).write();
        let cap = g.leaf.capacity();
        let mut all = g.leaf.take_sorted();
        if all.len() < cap {
            // Resolving buffered duplicates and tombstones made room.
            g.leaf.refill(&all);
            return (None, Self::apply(&mut g.leaf, key, op));
        }
        all.extend(rg.leaf.take_sorted());
        let n = all.len();
        if n <= cap * 2 * 7 / 8 {
            // Two leaves, each left at least an eighth empty.
            let (a, b) = all.split_at(n / 2);
            g.leaf.refill(a);
            rg.leaf.refill(b);
            let pivot = b[0].0;
            parent.set_pivot_before(right.as_raw(), pivot);
            g.high = Some(pivot);
            let result = if key < pivot {
                Self::apply(&mut g.leaf, key, op)
            } else {
                Self::apply(&mut rg.leaf, key, op)
            };
            self.reorganisations[1].fetch_add(1, Ordering::Relaxed);
            return (None, result);
        }
        // Two full leaves become three, two thirds full each.
        self.reorganisations[2].fetch_add(1, Ordering::Relaxed);
        let t = n / 3;
        let (a, rest) = all.split_at(t);
        let (b, c) = rest.split_at(t);
        g.leaf.refill(a);
        rg.leaf.refill(c);
        rg.moved_left = rg.moved_left.wrapping_add(1);
        let (pm, pr) = (b[0].0, c[0].0);
        let m = self.new_leaf(b, Some(right), Some(pr));
        parent.set_pivot_before(right.as_raw(), pr);
        let result = if key < pm {
            Self::apply(&mut g.leaf, key, op)
        } else if key < pr {
            // Not published yet, so its latch is free.
            Self::apply(&mut self.leaf_at(m).write().leaf, key, op)
        } else {
            Self::apply(&mut rg.leaf, key, op)
        };
        g.next = Some(m);
        g.high = Some(pm);
        (Some((pm, m)), result)
    }

    /// The second, pessimistic descent (section 2.1): write latches from the root down,
    /// releasing ancestors above any node with room for one more pivot, then split the leaf and
    /// propagate pivots up.
    fn modify_pessimistic(&self, key: K, op: Op<V>) -> Option<V> {
        loop {
            let Some(root) = self.root() else {
                match op {
                    Op::Remove => return None,
                    Op::Insert(v) => {
                        let leaf = self.new_leaf(&[(key, v)], None, None);
                        let root = self.alloc_inner(true, leaf.as_raw());
                        let won = self.root.compare_exchange(
                            std::ptr::null_mut(),
                            root.as_raw(),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        if won.is_ok() {
                            return None;
                        }
                        // Another thread made the first leaf; ours was never published.
                        self.free_unpublished(root, leaf);
                        continue;
                    }
                }
            };
            let g = root.write();
            if self.root() != Some(root) {
                continue;
            }
            let mut path = vec![g];
            loop {
                let Some(parent) = path.last() else {
                    unreachable!("the path is never empty")
                };
                let child = parent.child_for(&key);
                if !parent.leaves_below() {
                    // SAFETY: under the parent's latch the child is a live internal node.
                    let c = unsafe { InnerPtr::<K>::from_raw(child) }.write();
                    if c.has_room() {
                        path.clear();
                    }
                    path.push(c);
                    continue;
                }
                let mut lg = self.leaf(child).write();
                if let Ok(r) = Self::apply(&mut lg.leaf, key, op) {
                    return r;
                }
                let sibling = lg
                    .next
                    .filter(|r| L::SHARES_WITH_SIBLING && parent.has_later_child(r.as_raw()));
                let (split, result) = match sibling {
                    Some(r) => self.share_and_apply(&mut lg, r, parent, key, op),
                    None => self.split_and_apply(&mut lg, key, op),
                };
                if let Some((pivot, right)) = split {
                    self.insert_pivot(&path, pivot, right.as_raw());
                }
                match result {
                    Ok(r) => return r,
                    Err(()) => break,
                }
            }
        }
    }

    /// Inserts `pivot` → `right` into the last node of `path`, splitting full nodes upwards; a
    /// split of `path[0]` (then necessarily the root) grows a new root, published before the
    /// old root's latch is released.
    fn insert_pivot(&self, path: &[InnerWrite<K>], pivot: K, right: *mut u8) {
        let (mut pivot, mut right) = (pivot, right);
        for node in path.iter().rev() {
            if node.has_room() {
                node.insert(pivot, right);
                return;
            }
            self.inner_nodes.fetch_add(1, Ordering::Relaxed);
            let (up, sibling) = node.split();
            if pivot < up {
                node.insert(pivot, right);
            } else {
                // The new sibling is not published yet: write it through a guard of its own.
                sibling.write().insert(pivot, right);
            }
            pivot = up;
            right = sibling.as_raw();
        }
        if let Some(old_root) = path.first() {
            let root = new_root(
                self.inner_capacity,
                false,
                old_root.node().as_raw(),
                pivot,
                right,
            );
            self.inner_nodes.fetch_add(1, Ordering::Relaxed);
            self.root.store(root.as_raw(), Ordering::Release);
        }
    }

    /// Applies `f` to up to `length` elements in key order starting at `start` (the paper's
    /// iterate_range); stops early when `f` returns `false`. Returns the number visited.
    pub fn iterate_range(
        &self,
        start: Bound<K>,
        length: usize,
        mut f: impl FnMut(K, V) -> bool,
    ) -> usize {
        if length == 0 {
            return 0;
        }
        let target = match &start {
            Bound::Included(k) | Bound::Excluded(k) => Target::Key(k),
            Bound::Unbounded => Target::Leftmost,
        };
        let Some((mut g, mut latch)) = self.descend(target, |l| l.read()) else {
            return 0;
        };
        let mut count = 0usize;
        let mut cursor = start;
        loop {
            let from = cursor;
            let mut visit = |k: K, v: V| {
                cursor = Bound::Excluded(k);
                count += 1;
                f(k, v) && count < length
            };
            match g.leaf.iterate(from, &mut visit) {
                Scan::Stopped => return count,
                Scan::Exhausted => {
                    let Some(next) = g.next else { return count };
                    let l = self.leaf_at(next);
                    g = l.read();
                    latch = l;
                }
                Scan::NeedsSort => {
                    // Sorting needs the write latch. If, while no latch was held, elements left
                    // this leaf for one on its left, descend again to the leaf holding the cursor.
                    let moved = g.moved_left;
                    drop(g);
                    let mut w = latch.write();
                    if w.moved_left != moved {
                        drop(w);
                        let target = match &cursor {
                            Bound::Included(k) | Bound::Excluded(k) => Target::Key(k),
                            Bound::Unbounded => Target::Leftmost,
                        };
                        let Some((again, l)) = self.descend(target, |l| l.write()) else {
                            return count;
                        };
                        (w, latch) = (again, l);
                    }
                    w.leaf.prepare_iterate(cursor, length - count);
                    g = RwLockWriteGuard::downgrade(w);
                }
            }
        }
    }

    /// Applies `f` to every element with `start <= key < end` (`end == None`: no upper bound) in
    /// any order (the paper's map_range); stops early when `f` returns `false`. Returns the
    /// number visited.
    pub fn map_range(&self, start: K, end: Option<K>, mut f: impl FnMut(K, V) -> bool) -> usize {
        if end.is_some_and(|e| e <= start) {
            return 0;
        }
        let Some((mut g, _)) = self.descend(Target::Key(&start), |l| l.read()) else {
            return 0;
        };
        let mut count = 0usize;
        loop {
            let mut visit = |k: K, v: V| {
                count += 1;
                f(k, v)
            };
            if g.leaf.map(start, end, &mut visit) == Scan::Stopped {
                return count;
            }
            let more = match (g.high, end) {
                (None, _) => false,
                (Some(h), Some(e)) => h < e,
                (Some(_), None) => true,
            };
            let Some(next) = g.next.filter(|_| more) else {
                return count;
            };
            g = self.leaf_at(next).read();
        }
    }

    /// Counts and sizes, walking the leaf chain (linear time; consistent only when no writer runs
    /// at the same time).
    pub fn stats(&self) -> TreeStats {
        let mut s = TreeStats::default();
        let mut cur: Option<RwLockReadGuard<'_, LeafNode<K, V, L>>> =
            self.descend(Target::Leftmost, |l| l.read()).map(|(g, _)| g);
        while let Some(g) = cur {
            s.records += g.leaf.live() as u64;
            s.num_elts += g.leaf.num_elts() as u64;
            cur = g.next.map(|n| self.leaf_at(n).read());
        }
        s.leaves = self.leaves.load(Ordering::Relaxed) as u64;
        s.inner_nodes = self.inner_nodes.load(Ordering::Relaxed) as u64;
        let r = |i: usize| self.reorganisations[i].load(Ordering::Relaxed) as u64;
        (s.leaf_splits, s.sibling_shares, s.three_way_splits) = (r(0), r(1), r(2));
        s.bytes = s.leaves * self.leaf_layout.layout.size() as u64
            + s.inner_nodes * InnerPtr::<K>::bytes(self.inner_capacity) as u64;
        s
    }

    /// Checks the whole tree: pivots ascending and bounding their subtrees, leaves all at one
    /// depth and chained left to right with the right `high` pivots, every leaf's own invariants.
    /// Call it when no writer runs.
    pub fn check(&self) -> Result<(), String> {
        let Some(root) = self.root() else {
            return Ok(());
        };
        let mut walk = CheckWalk {
            leaf_depth: None,
            leaves: Vec::new(),
        };
        self.check_inner(root, (None, None), 0, &mut walk)?;
        let leaves = walk.leaves;
        for (i, w) in leaves.windows(2).enumerate() {
            if self.leaf_at(w[0]).read().next != Some(w[1]) {
                return Err(format!("leaf {i}'s next is not the following leaf"));
            }
        }
        if let Some(&last) = leaves.last() {
            if self.leaf_at(last).read().next.is_some() {
                return Err("the last leaf has a next".into());
            }
        }
        Ok(())
    }

    fn check_inner(
        &self,
        node: InnerPtr<K>,
        (lo, hi): (Option<K>, Option<K>),
        depth: usize,
        walk: &mut CheckWalk<K, V, L>,
    ) -> Result<(), String> {
        let in_range = |k: &K| lo.is_none_or(|l| *k >= l) && hi.is_none_or(|h| *k < h);
        let keys = node.keys();
        if (keys.is_empty() && depth > 0) || keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "inner node at depth {depth}: pivots empty or unsorted"
            ));
        }
        if !keys.iter().all(in_range) {
            return Err(format!(
                "inner node at depth {depth}: pivot outside its range"
            ));
        }
        for (c, child) in node.children().into_iter().enumerate() {
            let clo = if c == 0 { lo } else { Some(keys[c - 1]) };
            let chi = keys.get(c).copied().or(hi);
            if child.is_null() {
                return Err(format!("inner node at depth {depth}: null child {c}"));
            }
            if node.leaves_below() {
                let p = LeafPtr(NonNull::from(self.leaf(child)));
                self.check_leaf(p, (clo, chi), depth + 1, walk)?;
            } else {
                // SAFETY: non-null, and this node's children are internal nodes.
                let c = unsafe { InnerPtr::<K>::from_raw(child) };
                self.check_inner(c, (clo, chi), depth + 1, walk)?;
            }
        }
        Ok(())
    }

    fn check_leaf(
        &self,
        p: LeafPtr<K, V, L>,
        (lo, hi): (Option<K>, Option<K>),
        depth: usize,
        walk: &mut CheckWalk<K, V, L>,
    ) -> Result<(), String> {
        let in_range = |k: &K| lo.is_none_or(|l| *k >= l) && hi.is_none_or(|h| *k < h);
        let g = self.leaf_at(p).read();
        let leaves = &mut walk.leaves;
        match &mut walk.leaf_depth {
            Some(d) if *d != depth => {
                return Err(format!("leaves at depths {d} and {depth}"));
            }
            depth_seen => *depth_seen = Some(depth),
        }
        g.leaf
            .check()
            .map_err(|e| format!("leaf {}: {e}", leaves.len()))?;
        if g.high != hi {
            return Err(format!(
                "leaf {}: high pivot differs from its parent's",
                leaves.len()
            ));
        }
        if !g.leaf.stored_keys().iter().all(in_range) {
            return Err(format!("leaf {}: key outside its pivots", leaves.len()));
        }
        leaves.push(p);
        Ok(())
    }

    /// Frees a root and its one leaf that were never published.
    fn free_unpublished(&self, root: InnerPtr<K>, leaf: LeafPtr<K, V, L>) {
        self.leaves.fetch_sub(1, Ordering::Relaxed);
        self.inner_nodes.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: both came from `alloc_inner`/`new_leaf` and were never stored where another
        // thread could see them.
        unsafe {
            self.free_leaf(leaf);
            root.free();
        }
    }
}

impl<K: InnerKey, V: Copy, L: Leaf<K, V>> Drop for BpTree<K, V, L> {
    fn drop(&mut self) {
        fn free<K: InnerKey, V, L>(node: InnerPtr<K>, leaf_layout: Layout) {
            for child in node.children() {
                if child.is_null() {
                    continue;
                }
                if node.leaves_below() {
                    // SAFETY: `&mut self` means no one else references the tree; every leaf is
                    // reachable exactly once, from its parent, and was made by `new_leaf` with
                    // this layout; the node is dropped before its allocation goes.
                    unsafe {
                        std::ptr::drop_in_place(child.cast::<LeafLatch<K, V, L>>());
                        dealloc(child, leaf_layout);
                    }
                } else {
                    // SAFETY: as above, for internal nodes made by `alloc_inner`.
                    free::<K, V, L>(unsafe { InnerPtr::from_raw(child) }, leaf_layout);
                }
            }
            // SAFETY: as above; the node's children are freed and it is not used again.
            unsafe { node.free() };
        }
        let root = *self.root.get_mut();
        if !root.is_null() {
            // SAFETY: a non-null root is a live internal node made by `alloc_inner`.
            free::<K, V, L>(unsafe { InnerPtr::from_raw(root) }, self.leaf_layout.layout);
        }
    }
}
