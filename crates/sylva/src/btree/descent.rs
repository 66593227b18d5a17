//! Descents (paper section 7.1, optimistic lock coupling): from the metadata page to the leaf
//! whose range holds a key, or to the parent of a given page, and from a leaf to its right
//! neighbour under the same parent. Each level reads a page's latch version, reads the page,
//! and validates the parent's version before and after touching the child, so a torn child id
//! never becomes a read of a page that does not exist (`super::tree` module docs).
//!
//! A thread marked non-blocking (the PA-Tree mode's worker, `crate::db::pa`) stops at a page
//! that is not in memory instead of loading it. A descent asks for the mark once and runs a
//! copy of its loop compiled for that answer ([`NodeLatch::read_lock_as`]): every put and get
//! descends, and the blocking descent then carries no test of the mark at any level. Such a
//! descent also notes where it stopped (the missing page's parent, the parent's version and
//! the child's slot, per thread), and a get's next attempt resumes there
//! ([`BTree::find_leaf_from`]) while the parent is unchanged: its child for the key is the
//! same page, now loaded.

use super::store::{NodeLatch, NodeStore};
use super::tree::{checked, BTree};
use crate::page::slotted::Slotted;
use crate::page::{corrupt, PageId, KIND_INNER};
use crate::sync::{Abort, Olc};

/// More inner levels than any tree can have (each at least halves the records below it).
const MAX_HEIGHT: usize = 64;

thread_local! {
    /// Where the last descent on this (non-blocking) thread stopped at a page not in memory: the
    /// missing page's place in its parent, as read. Its task resumes there after the load
    /// ([`BTree::find_leaf_from`]) rather than descending again from the root.
    static MISSED_AT: std::cell::Cell<Option<ChildPos>> = const { std::cell::Cell::new(None) };
}

/// Takes where this thread's last descent stopped at a missing page (see `MISSED_AT`).
pub(crate) fn take_missed_at() -> Option<ChildPos> {
    MISSED_AT.with(std::cell::Cell::take)
}

/// Where a page hangs in the tree: child `slot` of inner node `id` (the upper child when `slot`
/// is the node's count), as read at the node's latch version `version`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChildPos {
    pub(crate) id: PageId,
    pub(crate) version: u64,
    pub(crate) slot: usize,
}

/// What a descent reached: a page, its latch version, and where it hangs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Descent {
    pub(crate) id: PageId,
    pub(crate) version: u64,
    pub(crate) parent: ChildPos,
}

impl<S: NodeStore> BTree<S> {
    /// Descends to the leaf whose range holds `key`. With `target`, stops at the parent of
    /// page `target` instead and returns `(parent, parent version, target version)`.
    pub(crate) fn descend(&self, key: &[u8], target: Option<PageId>) -> Olc<(PageId, u64, u64)> {
        let d = self.descend_to(key, target)?;
        Ok(match target {
            Some(_) => (d.parent.id, d.parent.version, d.version),
            None => (d.id, d.version, d.version),
        })
    }

    /// [`Self::descend`], also returning where the page reached hangs in its parent.
    fn descend_to(&self, key: &[u8], target: Option<PageId>) -> Olc<Descent> {
        // Whether this thread stops at pages not in memory (the PA-Tree worker) is asked once
        // per descent, and each answer has its own copy of the loop: the common, blocking one
        // then has no test of it at any level ([`NodeLatch::read_lock_as`]).
        if crate::sync::nonblocking() {
            self.descend_as::<true>(key, target)
        } else {
            self.descend_as::<false>(key, target)
        }
    }

    /// [`Self::descend_to`] on a thread that is (`NONBLOCKING`) or is not marked non-blocking.
    #[inline(always)]
    fn descend_as<const NONBLOCKING: bool>(
        &self,
        key: &[u8],
        target: Option<PageId>,
    ) -> Olc<Descent> {
        let pl = self.latch(self.meta)?;
        let pv = pl.read_lock_as(NONBLOCKING)?;
        // The metadata page's only content a descent needs is its upper child (the root), at a
        // fixed offset: no need to decode the whole header on every descent.
        let meta = self.page(self.meta)?;
        if meta[0] != KIND_INNER {
            pl.validate(pv)?;
            return Err(corrupt(self.meta, "metadata page is not an inner node").into());
        }
        let root = upper_child(meta);
        self.descend_below::<NONBLOCKING>(key, target, (self.meta, pl, pv), root, 0)
    }

    /// A get's descent to the leaf for `key` on a non-blocking thread, resuming at `at` (where
    /// its last attempt stopped at a missing page, [`take_missed_at`]) if the parent there is
    /// still at the version it was read at: its child for `key` is then the same page, loaded
    /// since. Otherwise, and on a blocking thread, a descent from the root.
    pub(crate) fn find_leaf_from(&self, key: &[u8], at: Option<ChildPos>) -> Olc<(PageId, u64)> {
        let resumed = match at {
            Some(at) if at.id != self.meta && crate::sync::nonblocking() => {
                self.resume::<true>(key, at)?
            }
            _ => None,
        };
        match resumed {
            Some(d) => {
                self.resumed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok((d.id, d.version))
            }
            None => self.find_leaf(key),
        }
    }

    /// [`Self::find_leaf_from`]'s resumption: `None` if the parent changed.
    fn resume<const NONBLOCKING: bool>(&self, key: &[u8], at: ChildPos) -> Olc<Option<Descent>> {
        let (pl, page) = self.node(at.id)?;
        if pl.validate(at.version).is_err() {
            return Ok(None);
        }
        let Ok(node) = Slotted::new(at.id, page) else {
            return Ok(None);
        };
        if node.kind() != KIND_INNER || at.slot > node.count() {
            return Ok(None);
        }
        let Ok(child) = node.child(at.slot) else {
            return Ok(None);
        };
        if pl.validate(at.version).is_err() {
            return Ok(None);
        }
        self.descend_below::<NONBLOCKING>(key, None, (at.id, pl, at.version), child, at.slot)
            .map(Some)
    }

    /// The descent's loop from child `id` (at `slot`) of the inner node `from` (its id, latch and
    /// the version its child id was read at) down.
    #[inline(always)]
    fn descend_below<'s, const NONBLOCKING: bool>(
        &'s self,
        key: &[u8],
        target: Option<PageId>,
        from: (PageId, S::Latch<'s>, u64),
        id: PageId,
        slot: usize,
    ) -> Olc<Descent> {
        let (mut parent, mut pl, mut pv) = from;
        let (mut id, mut slot) = (id, slot);
        for _level in 0..=MAX_HEIGHT {
            // The child id was read optimistically: validate the parent before touching the
            // child (a paged store loads a page on read_lock, and a torn id must restart, not
            // become a read of a page that does not exist), and again after, as lock coupling
            // requires.
            pl.validate(pv)?;
            let (l, page) = self.node(id)?;
            let v = match l.read_lock_as(NONBLOCKING) {
                Ok(v) => v,
                Err(e) => {
                    if NONBLOCKING && matches!(e, Abort::Miss(_)) {
                        let at = ChildPos {
                            id: parent,
                            version: pv,
                            slot,
                        };
                        MISSED_AT.with(|m| m.set(Some(at)));
                    }
                    return Err(e);
                }
            };
            pl.validate(pv)?;
            let at = ChildPos {
                id: parent,
                version: pv,
                slot,
            };
            if Some(id) == target {
                return Ok(Descent {
                    id,
                    version: v,
                    parent: at,
                });
            }
            if page[0] != KIND_INNER {
                if target.is_some() {
                    return Err(Abort::Restart);
                }
                return Ok(Descent {
                    id,
                    version: v,
                    parent: at,
                });
            }
            let node = checked(l, v, Slotted::new(id, page))?;
            let (idx, _) = checked(l, v, node.lower_bound(key))?;
            let child = checked(l, v, node.child(idx))?;
            (parent, pl, pv, id, slot) = (id, l, v, child, idx);
        }
        // Only damaged child pointers (a cycle) make a descent this long: it would never end.
        pl.validate(pv)?;
        Err(corrupt(
            id,
            format!(
                "a descent passed more than {MAX_HEIGHT} inner levels (a cycle of child pointers?)"
            ),
        )
        .into())
    }

    /// The leaf for `key` and its version.
    #[inline]
    pub(crate) fn find_leaf(&self, key: &[u8]) -> Olc<(PageId, u64)> {
        self.descend(key, None).map(|(id, v, _)| (id, v))
    }

    /// The leaf for `key`, its version and where it hangs in its parent.
    #[inline]
    pub(crate) fn find_leaf_at(&self, key: &[u8]) -> Olc<Descent> {
        self.descend_to(key, None)
    }

    /// The right neighbour of the child at `at` under the same parent, and its version, if the
    /// parent is still at the version `at` was read at and the child is not its last one.
    /// `Ok(None)` means: descend from the root instead. While the parent is unchanged, its
    /// separator at `at.slot` is the child's upper fence and the next child's lower fence (every
    /// change of a leaf's fences changes its parent), so the leaf returned is the one holding
    /// the child's upper fence `++ [0]`, as a descent would find.
    pub(crate) fn next_child(&self, at: ChildPos) -> Olc<Option<Descent>> {
        if at.id == self.meta {
            return Ok(None);
        }
        let (pl, page) = self.node(at.id)?;
        if pl.validate(at.version).is_err() {
            return Ok(None);
        }
        let Ok(node) = Slotted::new(at.id, page) else {
            return Ok(None);
        };
        let slot = at.slot + 1;
        if node.kind() != KIND_INNER || slot > node.count() {
            return Ok(None);
        }
        let Ok(id) = node.child(slot) else {
            return Ok(None);
        };
        if pl.validate(at.version).is_err() {
            return Ok(None);
        }
        let (l, child) = self.node(id)?;
        let v = l.read_lock()?;
        if pl.validate(at.version).is_err() {
            return Ok(None);
        }
        if child[0] == KIND_INNER {
            // Siblings of a leaf are leaves; this is only a torn read of the child.
            l.validate(v)?;
            return Err(corrupt(id, "an inner node next to a leaf").into());
        }
        Ok(Some(Descent {
            id,
            version: v,
            parent: ChildPos { slot, ..at },
        }))
    }
}

/// The upper child of a slotted inner page (read without validating the header).
#[inline]
fn upper_child(page: &[u8]) -> PageId {
    let at = crate::page::slotted::off::UPPER_CHILD;
    u64::from_le_bytes(page[at..at + 8].try_into().unwrap_or_default())
}
