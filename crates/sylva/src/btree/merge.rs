//! Merge (paper section 2: merge at ≥ 3/4 empty): after a delete leaves a node underfull, it is
//! merged with its right neighbour under the same parent (the left one for the last child) if
//! the union fits one page; merges cascade to inner nodes. The merge re-descends and
//! write-locks parent, node and neighbour by upgrading the versions it read, like a split
//! (`super::tree`), and logs the merged page, the parent and the freed page with
//! [`NodeStore::log_pages`] (after the sort of a fingerprinting leaf among them, logged on its
//! own).

use std::sync::atomic::Ordering;

use super::leaf::semi_dense_underfull;
use super::store::{NodeLatch, NodeStore};
use super::tree::{BTree, WriteGuard};
use crate::error::Result;
use crate::page::build;
use crate::page::dense::{Dense, KIND_DENSE_LEAF};
use crate::page::semidense::KIND_SEMI_DENSE_LEAF;
use crate::page::slotted::{Slotted, SlottedMut};
use crate::page::{corrupt, PageId, KIND_FP_LEAF, KIND_INNER};
use crate::sync::{Abort, Olc};

impl<S: NodeStore> BTree<S> {
    /// Whether leaf `id` (write-latched by the caller) is empty enough to merge: a dense leaf
    /// under a quarter full, a slotted one with 3/4 of its page free, a semi-dense one either
    /// way (`leaf::semi_dense_underfull`).
    pub(crate) fn underfull(&self, id: PageId) -> Result<bool> {
        let page = self.page(id).map_err(|_| corrupt(id, "leaf vanished"))?;
        if page[0] == KIND_SEMI_DENSE_LEAF {
            return semi_dense_underfull(id, page);
        }
        if page[0] == KIND_DENSE_LEAF {
            let d = Dense::new(id, page)?;
            return Ok(d.count() * 4 < d.capacity());
        }
        let free = Slotted::new(id, page)?.free_space_after_compaction();
        Ok(free >= self.options.page_size * 3 / 4)
    }

    /// Merges page `target` with a neighbour under the same parent if the result fits
    /// (section 2: merge at ≥ 3/4 empty). Best effort: gives up quietly on contention.
    /// `lsn` becomes the LSN of the last record a merge logged, if any.
    pub(crate) fn try_merge(&self, target: PageId, key: &[u8], lsn: &mut u64) -> Result<()> {
        let parent_underfull = match self.merge_once(target, key, lsn) {
            Ok(p) => p,
            // Best effort: a miss on a non-blocking thread gives up like contention does.
            Err(Abort::Restart | Abort::Miss(_)) => None,
            Err(Abort::Fail(e)) => return Err(e),
        };
        if let Some(pid) = parent_underfull {
            self.try_merge(pid, key, lsn)?;
        }
        Ok(())
    }

    /// One merge attempt; returns the parent if it is now underfull itself.
    fn merge_once(&self, target: PageId, key: &[u8], lsn: &mut u64) -> Olc<Option<PageId>> {
        let (pid, pv, tv) = self.descend(key, Some(target))?;
        if pid == self.meta {
            return Ok(None);
        }
        let (pl, tl) = (self.latch(pid)?, self.latch(target)?);
        pl.upgrade(pv)?;
        let _pg = WriteGuard(pl);
        tl.upgrade(tv)?;
        let tg = WriteGuard(tl);
        let p = Slotted::new(pid, self.page(pid)?)?;
        let (pos, _) = p.lower_bound(key)?;
        if p.child(pos)? != target {
            return Err(Abort::Restart);
        }
        let (left, right, sep_idx) = if pos < p.count() {
            (target, p.child(pos + 1)?, pos)
        } else if pos > 0 {
            (p.child(pos - 1)?, target, pos - 1)
        } else {
            return Ok(None);
        };
        let other = if left == target { right } else { left };
        let ol = self.latch(other)?;
        ol.upgrade(ol.read_lock()?)?;
        let og = WriteGuard(ol);
        for id in [left, right] {
            let page = self.page_mut(id)?;
            if page[0] == KIND_FP_LEAF && self.sort_fp_leaf(id, page)? {
                *lsn = (*lsn).max(self.store.log_pages(&[id], &[])?);
            }
        }
        let (lp, rp) = (self.page(left)?, self.page(right)?);
        let merged = if lp[0] == KIND_INNER {
            let (lv, rv) = (Slotted::new(left, lp)?, Slotted::new(right, rp)?);
            if rv.kind() != KIND_INNER {
                return Err(corrupt(pid, "neighbours of different levels").into());
            }
            let mut merged = vec![0u8; self.options.page_size];
            if !build::merge(&lv, &rv, self.flags, self.truncate, &mut merged)? {
                return Ok(None);
            }
            merged
        } else {
            match self.plan_leaf_merge((left, lp), (right, rp))? {
                Some(m) => m,
                None => return Ok(None),
            }
        };
        self.page_mut(right)?.copy_from_slice(&merged);
        let mut pm = SlottedMut::new(pid, self.page_mut(pid)?)?;
        pm.remove(sep_idx);
        let parent_free = pm.view().free_space_after_compaction();
        *lsn = (*lsn).max(self.store.log_pages(&[right, pid], &[left])?);
        // Free the left page: its guard must not unlock it again.
        let (lg, rg) = if left == target { (tg, og) } else { (og, tg) };
        std::mem::forget(lg);
        self.store.free(left)?;
        drop(rg);
        self.merges.fetch_add(1, Ordering::Relaxed);
        Ok((parent_free >= self.options.page_size * 3 / 4).then_some(pid))
    }
}
