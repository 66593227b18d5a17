//! The concurrent tree: one code path for both leaf kinds (paper sections 2.1 and 5).
//!
//! Concurrency follows the paper's scheme (section 2.1), with reader-writer latches
//! (`parking_lot::RwLock`) on every node and hand-over-hand coupling, top-down then
//! left-to-right, so there is no global lock and no deadlock:
//! - find: read latches root to leaf, read latch on the leaf;
//! - insert/delete: read latches down to the leaf's parent, write latch on the leaf; if the leaf
//!   must split, release everything and redo the descent pessimistically with write latches,
//!   releasing the ancestors of any node that can take one more pivot (so the root is held only
//!   when it may split). The paper first tries to upgrade the parent's read latch in place;
//!   `parking_lot` read latches cannot be upgraded, and a split happens once per hundreds of
//!   inserts, so we always take the pessimistic second descent;
//! - iterate_range: descend like find, then move right leaf by leaf, taking the next leaf's read
//!   latch before releasing the current one. When the leaf's part to visit is not sorted, drop the
//!   read latch, take the write latch, sort (the BPA's log and touched blocks), downgrade to a read
//!   latch and resume after the last visited key (section 5's read-then-write optimisation);
//! - map_range: like iterate_range but never writes, so read latches only.
//!
//! Why latches and not optimistic lock coupling (OLC): OLC lets readers read a node while a
//! writer changes it and validates a version afterwards. For `K: Ord + Copy` in general that means
//! comparing keys read from a torn node, which is undefined behaviour for types with invalid bit
//! patterns (and formally for any type in Rust's memory model); the tree is generic, so it keeps
//! the paper's safe scheme. OLC was not implemented, so there is no side-by-side measurement of
//! the two. What was measured (`docs/results/bptree.md`, `examples/bptree_tables.rs`): with CPU
//! time per worker as the clock, two threads do about twice the finds of one, that is, latch
//! traffic on the shared upper nodes did not show up as lost throughput on this 2-core machine;
//! profiles (`perf`) of finds are dominated by cache misses on nodes, not by latch instructions.
//!
//! Nodes are never freed while the tree lives (deletes are tombstones or shifts inside leaves; no
//! merges), so a node pointer read under a latch stays valid for the tree's lifetime; that is what
//! makes the raw child pointers sound. Each leaf keeps `next` (its right sibling) and `high` (the
//! pivot above it), set under the leaf's write latch.
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

use std::marker::PhantomData;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::bpa::Bpa;
use super::inner::Inner;
use super::leaf::{Leaf, Removed, Scan};

/// A pointer to a node owned by the tree.
struct NodePtr<K, V, L>(NonNull<Node<K, V, L>>);

impl<K, V, L> Clone for NodePtr<K, V, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V, L> Copy for NodePtr<K, V, L> {}
impl<K, V, L> PartialEq for NodePtr<K, V, L> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

// SAFETY: a `NodePtr` is a shared reference to a node the tree owns; the nodes are `Send + Sync`
// when keys, values and leaves are (all access goes through the node's latch).
unsafe impl<K: Send + Sync, V: Send + Sync, L: Send + Sync> Send for NodePtr<K, V, L> {}
// SAFETY: as above.
unsafe impl<K: Send + Sync, V: Send + Sync, L: Send + Sync> Sync for NodePtr<K, V, L> {}

enum Node<K, V, L> {
    Inner(RwLock<Inner<K, NodePtr<K, V, L>>>),
    Leaf(RwLock<LeafNode<K, V, L>>),
}

/// A leaf with its place in the leaf chain (`repr(C)`: the leaf's hot fields first).
#[repr(C)]
struct LeafNode<K, V, L> {
    leaf: L,
    /// The right sibling, if any.
    next: Option<NodePtr<K, V, L>>,
    /// The pivot just above this leaf (every key here is below it); `None` for the last leaf.
    high: Option<K>,
    /// Bumped whenever elements leave this leaf for a leaf on its left (a two-into-three split
    /// moves the lower part of the right leaf into the new middle leaf). An iteration that let go
    /// of the leaf to sort it checks this to know whether it must descend again.
    moved_left: u32,
    _v: PhantomData<V>,
}

type LeafLatch<K, V, L> = RwLock<LeafNode<K, V, L>>;

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
pub struct BpTree<K: Ord + Copy, V: Copy, L: Leaf<K, V> = Bpa<K, V>> {
    root: AtomicPtr<Node<K, V, L>>,
    shape: L::Shape,
    inner_capacity: usize,
    leaves: AtomicUsize,
    inner_nodes: AtomicUsize,
    /// [leaf splits in two, rebalances with the right sibling, two-into-three splits]
    reorganisations: [AtomicUsize; 3],
}

// SAFETY: the tree owns its nodes through raw pointers; every access to a node goes through its
// latch, and keys, values and leaves are `Send + Sync`.
unsafe impl<K, V, L> Send for BpTree<K, V, L>
where
    K: Ord + Copy + Send + Sync,
    V: Copy + Send + Sync,
    L: Leaf<K, V>,
{
}
// SAFETY: as above.
unsafe impl<K, V, L> Sync for BpTree<K, V, L>
where
    K: Ord + Copy + Send + Sync,
    V: Copy + Send + Sync,
    L: Leaf<K, V>,
{
}

impl<K, V, L> BpTree<K, V, L>
where
    K: Ord + Copy + Send + Sync + 'static,
    V: Copy + Send + Sync + 'static,
    L: Leaf<K, V> + 'static,
{
    /// An empty tree with leaves of `shape` and internal nodes of `inner_capacity` pivots
    /// (at least 3).
    pub(crate) fn with_shape(shape: L::Shape, inner_capacity: usize) -> Self {
        BpTree {
            root: AtomicPtr::new(std::ptr::null_mut()),
            shape,
            inner_capacity: inner_capacity.max(3),
            leaves: AtomicUsize::new(0),
            inner_nodes: AtomicUsize::new(0),
            reorganisations: Default::default(),
        }
    }

    fn leaf_shape(&self) -> L::Shape {
        self.shape
    }

    /// The node behind `p`.
    #[inline(always)]
    fn node(&self, p: NodePtr<K, V, L>) -> &Node<K, V, L> {
        // SAFETY: nodes are allocated by `alloc` and freed only in `Drop`, which takes
        // `&mut self`; so every pointer reachable from the tree is valid while `&self` lives.
        unsafe { p.0.as_ref() }
    }

    fn alloc(&self, node: Node<K, V, L>) -> NodePtr<K, V, L> {
        match node {
            Node::Inner(_) => self.inner_nodes.fetch_add(1, Ordering::Relaxed),
            Node::Leaf(_) => self.leaves.fetch_add(1, Ordering::Relaxed),
        };
        NodePtr(NonNull::from(Box::leak(Box::new(node))))
    }

    fn new_leaf(
        &self,
        leaf: L,
        next: Option<NodePtr<K, V, L>>,
        high: Option<K>,
    ) -> NodePtr<K, V, L> {
        self.alloc(Node::Leaf(RwLock::new(LeafNode {
            leaf,
            next,
            high,
            moved_left: 0,
            _v: PhantomData,
        })))
    }

    #[inline(always)]
    fn root(&self) -> Option<NodePtr<K, V, L>> {
        NonNull::new(self.root.load(Ordering::Acquire)).map(NodePtr)
    }

    /// Descends with read latches to the leaf for `target` and latches it with `latch`.
    /// `None` when the tree is empty.
    #[inline]
    fn descend<'t, G>(
        &'t self,
        target: Target<'_, K>,
        latch: impl Fn(&'t LeafLatch<K, V, L>) -> G,
    ) -> Option<(G, &'t LeafLatch<K, V, L>)> {
        let pick = |inner: &Inner<K, NodePtr<K, V, L>>| match target {
            Target::Key(k) => inner.child_for(k),
            Target::Leftmost => inner.first_child(),
        };
        loop {
            let root = self.root()?;
            match self.node(root) {
                Node::Leaf(l) => {
                    let g = latch(l);
                    if self.root() == Some(root) {
                        return Some((g, l));
                    }
                }
                Node::Inner(i) => {
                    let mut g = i.read();
                    if self.root() != Some(root) {
                        continue;
                    }
                    loop {
                        match self.node(pick(&g)) {
                            Node::Inner(child) => g = child.read(),
                            Node::Leaf(l) => return Some((latch(l), l)),
                        }
                    }
                }
            }
        }
    }

    /// The value of `key`.
    pub fn find(&self, key: &K) -> Option<V> {
        let (g, _) = self.descend(Target::Key(key), |l| l.read())?;
        g.leaf.prefetch(key);
        g.leaf.find(key)
    }

    /// Inserts `(key, value)`, overwriting an existing value.
    pub fn insert(&self, key: K, value: V) {
        if let Some((mut g, _)) = self.descend(Target::Key(&key), |l| l.write()) {
            g.leaf.prefetch(&key);
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
    ) -> (Option<(K, NodePtr<K, V, L>)>, Result<Option<V>, ()>) {
        match g.leaf.make_room() {
            None => (None, Self::apply(&mut g.leaf, key, op)),
            Some((pivot, right_leaf)) => {
                self.reorganisations[0].fetch_add(1, Ordering::Relaxed);
                let mut right_leaf = right_leaf;
                // Apply before publishing the right leaf, so nobody sees it half-done.
                let result = if key < pivot {
                    Self::apply(&mut g.leaf, key, op)
                } else {
                    Self::apply(&mut right_leaf, key, op)
                };
                let right = self.new_leaf(right_leaf, g.next, g.high);
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
        right: NodePtr<K, V, L>,
        parent: &mut Inner<K, NodePtr<K, V, L>>,
        key: K,
        op: Op<V>,
    ) -> (Option<(K, NodePtr<K, V, L>)>, Result<Option<V>, ()>) {
        let Node::Leaf(r) = self.node(right) else {
            unreachable!("a leaf's sibling is a leaf")
        };
        let mut rg = r.write();
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
            parent.set_pivot_before(right, pivot);
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
        let mut middle = L::with_first(self.leaf_shape(), b[0].0, b[0].1);
        middle.refill(b);
        let (pm, pr) = (b[0].0, c[0].0);
        parent.set_pivot_before(right, pr);
        let result = if key < pm {
            Self::apply(&mut g.leaf, key, op)
        } else if key < pr {
            Self::apply(&mut middle, key, op)
        } else {
            Self::apply(&mut rg.leaf, key, op)
        };
        let m = self.new_leaf(middle, Some(right), Some(pr));
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
                        let leaf =
                            self.new_leaf(L::with_first(self.leaf_shape(), key, v), None, None);
                        let won = self.root.compare_exchange(
                            std::ptr::null_mut(),
                            leaf.0.as_ptr(),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        if won.is_ok() {
                            return None;
                        }
                        // Another thread made the first leaf; ours was never published.
                        self.free_unpublished(leaf);
                        continue;
                    }
                }
            };
            match self.node(root) {
                Node::Leaf(l) => {
                    let mut g = l.write();
                    if self.root() != Some(root) {
                        continue;
                    }
                    if let Ok(r) = Self::apply(&mut g.leaf, key, op) {
                        return r;
                    }
                    let (split, result) = self.split_and_apply(&mut g, key, op);
                    if let Some((pivot, right)) = split {
                        let new_root = Inner::new_root(self.inner_capacity, root, pivot, right);
                        let new_root = self.alloc(Node::Inner(RwLock::new(new_root)));
                        self.root.store(new_root.0.as_ptr(), Ordering::Release);
                    }
                    match result {
                        Ok(r) => return r,
                        Err(()) => continue,
                    }
                }
                Node::Inner(i) => {
                    let g = i.write();
                    if self.root() != Some(root) {
                        continue;
                    }
                    let mut path = vec![(root, g)];
                    loop {
                        let child = match path.last() {
                            Some((_, g)) => g.child_for(&key),
                            None => unreachable!("the path is never empty"),
                        };
                        match self.node(child) {
                            Node::Inner(c) => {
                                let cg = c.write();
                                if cg.has_room() {
                                    path.clear();
                                }
                                path.push((child, cg));
                            }
                            Node::Leaf(l) => {
                                let mut lg = l.write();
                                if let Ok(r) = Self::apply(&mut lg.leaf, key, op) {
                                    return r;
                                }
                                let sibling = lg.next.filter(|r| {
                                    L::SHARES_WITH_SIBLING
                                        && path.last().is_some_and(|(_, p)| p.has_later_child(*r))
                                });
                                let (split, result) = match (sibling, path.last_mut()) {
                                    (Some(r), Some((_, parent))) => {
                                        self.share_and_apply(&mut lg, r, parent, key, op)
                                    }
                                    _ => self.split_and_apply(&mut lg, key, op),
                                };
                                if let Some((pivot, right)) = split {
                                    self.insert_pivot(&mut path, pivot, right);
                                }
                                match result {
                                    Ok(r) => return r,
                                    Err(()) => break,
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Inserts `pivot` → `right` into the last node of `path`, splitting full nodes upwards; a
    /// split of `path[0]` (then necessarily the root) grows a new root.
    #[allow(clippy::type_complexity)]
    fn insert_pivot(
        &self,
        path: &mut [(
            NodePtr<K, V, L>,
            RwLockWriteGuard<'_, Inner<K, NodePtr<K, V, L>>>,
        )],
        pivot: K,
        right: NodePtr<K, V, L>,
    ) {
        let (mut pivot, mut right) = (pivot, right);
        for (_, node) in path.iter_mut().rev() {
            if node.has_room() {
                node.insert(pivot, right);
                return;
            }
            let (up, mut sibling) = node.split();
            if pivot < up {
                node.insert(pivot, right);
            } else {
                sibling.insert(pivot, right);
            }
            pivot = up;
            right = self.alloc(Node::Inner(RwLock::new(sibling)));
        }
        if let Some((old_root, _)) = path.first() {
            let new_root = Inner::new_root(self.inner_capacity, *old_root, pivot, right);
            let new_root = self.alloc(Node::Inner(RwLock::new(new_root)));
            self.root.store(new_root.0.as_ptr(), Ordering::Release);
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
        if let Target::Key(k) = target {
            g.leaf.prefetch(k);
        }
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
                    let Node::Leaf(l) = self.node(next) else {
                        unreachable!("a leaf's sibling is a leaf")
                    };
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
            let Node::Leaf(l) = self.node(next) else {
                unreachable!("a leaf's sibling is a leaf")
            };
            g = l.read();
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
            cur = g.next.map(|n| match self.node(n) {
                Node::Leaf(l) => l.read(),
                Node::Inner(_) => unreachable!("a leaf's sibling is a leaf"),
            });
        }
        s.leaves = self.leaves.load(Ordering::Relaxed) as u64;
        s.inner_nodes = self.inner_nodes.load(Ordering::Relaxed) as u64;
        let r = |i: usize| self.reorganisations[i].load(Ordering::Relaxed) as u64;
        (s.leaf_splits, s.sibling_shares, s.three_way_splits) = (r(0), r(1), r(2));
        let node = std::mem::size_of::<Node<K, V, L>>();
        s.bytes = s.leaves * (node + L::heap_bytes(&self.leaf_shape())) as u64
            + s.inner_nodes
                * (node + Inner::<K, NodePtr<K, V, L>>::heap_bytes(self.inner_capacity)) as u64;
        s
    }

    /// Checks the whole tree: pivots ascending and bounding their subtrees, leaves all at one
    /// depth and chained left to right with the right `high` pivots, every leaf's own invariants.
    /// Call it when no writer runs.
    pub fn check(&self) -> Result<(), String> {
        let Some(root) = self.root() else {
            return Ok(());
        };
        let mut leaves = Vec::new();
        self.check_node(root, None, None, 0, &mut None, &mut leaves)?;
        for (i, w) in leaves.windows(2).enumerate() {
            let Node::Leaf(l) = self.node(w[0]) else {
                return Err("leaf list holds an inner node".into());
            };
            if l.read().next != Some(w[1]) {
                return Err(format!("leaf {i}'s next is not the following leaf"));
            }
        }
        if let Some(&last) = leaves.last() {
            if let Node::Leaf(l) = self.node(last) {
                if l.read().next.is_some() {
                    return Err("the last leaf has a next".into());
                }
            }
        }
        Ok(())
    }

    fn check_node(
        &self,
        p: NodePtr<K, V, L>,
        lo: Option<K>,
        hi: Option<K>,
        depth: usize,
        leaf_depth: &mut Option<usize>,
        leaves: &mut Vec<NodePtr<K, V, L>>,
    ) -> Result<(), String> {
        let in_range = |k: &K| lo.is_none_or(|l| *k >= l) && hi.is_none_or(|h| *k < h);
        match self.node(p) {
            Node::Inner(i) => {
                let g = i.read();
                let keys = g.keys();
                if keys.is_empty() || keys.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(format!(
                        "inner node at depth {depth}: pivots empty or unsorted"
                    ));
                }
                if !keys.iter().all(in_range) {
                    return Err(format!(
                        "inner node at depth {depth}: pivot outside its range"
                    ));
                }
                for (c, child) in g.children().enumerate() {
                    let clo = if c == 0 { lo } else { Some(keys[c - 1]) };
                    let chi = keys.get(c).copied().or(hi);
                    self.check_node(child, clo, chi, depth + 1, leaf_depth, leaves)?;
                }
            }
            Node::Leaf(l) => {
                let g = l.read();
                match leaf_depth {
                    Some(d) if *d != depth => {
                        return Err(format!("leaves at depths {d} and {depth}"));
                    }
                    _ => *leaf_depth = Some(depth),
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
            }
        }
        Ok(())
    }

    /// Frees a leaf that was never published.
    fn free_unpublished(&self, p: NodePtr<K, V, L>) {
        self.leaves.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` and was never stored where another thread could see it.
        drop(unsafe { Box::from_raw(p.0.as_ptr()) });
    }
}

impl<K: Ord + Copy, V: Copy, L: Leaf<K, V>> Drop for BpTree<K, V, L> {
    fn drop(&mut self) {
        fn free<K: Ord + Copy, V, L>(p: NodePtr<K, V, L>) {
            // SAFETY: `&mut self` means no one else references the tree, and every node is
            // reachable exactly once from the root through inner nodes' children.
            let node = unsafe { Box::from_raw(p.0.as_ptr()) };
            if let Node::Inner(i) = *node {
                let inner = i.into_inner();
                for c in inner.children() {
                    free(c);
                }
            }
        }
        if let Some(root) = NonNull::new(*self.root.get_mut()) {
            free(NodePtr(root));
        }
    }
}
