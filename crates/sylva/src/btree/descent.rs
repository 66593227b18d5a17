//! Descents (paper section 7.1, optimistic lock coupling): from the metadata page to the leaf
//! whose range holds a key, or to the parent of a given page, and from a leaf to its right
//! neighbour under the same parent. Each level reads a page's latch version, reads the page,
//! and validates the parent's version before and after touching the child, so a torn child id
//! never becomes a read of a page that does not exist (`super::tree` module docs).
//!
//! A thread marked non-blocking (the PA-Tree mode's worker, `crate::db::pa`) stops at a page
//! that is not in memory instead of loading it. A descent asks for the mark once and runs a
//! copy of its loop compiled for that answer ([`NodeLatch::read_lock_as`]): every put and get
//! descends, and the blocking descent then carries no test of the mark at any level.

use super::store::{NodeLatch, NodeStore};
use super::tree::{checked, BTree};
use crate::page::slotted::Slotted;
use crate::page::{corrupt, PageId, KIND_INNER};
use crate::sync::{Abort, Olc};

/// More inner levels than any tree can have (each at least halves the records below it).
const MAX_HEIGHT: usize = 64;

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
        let mut parent = self.meta;
        let mut pl = self.latch(self.meta)?;
        let mut pv = pl.read_lock_as(NONBLOCKING)?;
        // The metadata page's only content a descent needs is its upper child (the root), at a
        // fixed offset: no need to decode the whole header on every descent.
        let meta = self.page(self.meta)?;
        if meta[0] != KIND_INNER {
            pl.validate(pv)?;
            return Err(corrupt(self.meta, "metadata page is not an inner node").into());
        }
        let mut id = upper_child(meta);
        let mut slot = 0;
        for _level in 0..=MAX_HEIGHT {
            // The child id was read optimistically: validate the parent before touching the
            // child (a paged store loads a page on read_lock, and a torn id must restart, not
            // become a read of a page that does not exist), and again after, as lock coupling
            // requires.
            pl.validate(pv)?;
            let (l, page) = self.node(id)?;
            let v = l.read_lock_as(NONBLOCKING)?;
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
