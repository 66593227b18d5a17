//! Split (paper section 2): a full node's records go into two pages, the separator into the
//! parent, which is split first when it is full; a leaf first tries a deferred split with a
//! neighbour (`super::redistribute`) or a conversion in place (`super::leaf`). A root split
//! grows the tree through the metadata page (`super::tree`). Like a merge, it re-descends and
//! write-locks parent and node by upgrading the versions it read.

use std::sync::atomic::Ordering;

use super::leaf::LeafPlan;
use super::store::{NodeLatch, NodeStore, ParentEdit};
use super::tree::{BTree, WriteGuard};
use crate::error::Result;
use crate::page::build::{self, Builder, NodeSpec};
use crate::page::fingerprint;
use crate::page::slotted::{Slotted, SlottedMut};
use crate::page::{corrupt, PageId, KIND_FP_LEAF, KIND_INNER};
use crate::sync::Olc;

impl<S: NodeStore> BTree<S> {
    /// Splits page `target` (found through `key`); splits its parent first when the separator
    /// would not fit there. A leaf that needs an ordinary split first tries a deferred split
    /// with a neighbour. Always ends in `Restart` or an error for the caller to retry.
    ///
    /// Every page is allocated before any is changed, so a failed allocation leaves the tree as
    /// it was; the changed pages are reported to the store's log while all stay latched.
    pub(super) fn split(&self, target: PageId, key: &[u8], value_len: usize) -> Olc<()> {
        let (pid, pv, tv) = self.descend(key, Some(target))?;
        let (pl, tl) = (self.latch(pid)?, self.latch(target)?);
        pl.upgrade(pv)?;
        let pg = WriteGuard(pl);
        tl.upgrade(tv)?;
        let tg = WriteGuard(tl);
        let tpage = self.page_mut(target)?;
        let ps = self.options.page_size;
        let (left_image, right_image, separator) = if tpage[0] == KIND_INNER {
            let t = Slotted::new(target, tpage)?;
            let at = build::find_separator(&t)?;
            let (mut l, mut r) = (vec![0u8; ps], vec![0u8; ps]);
            build::split(&t, &at, self.flags, self.truncate, &mut l, &mut r)?;
            (l, r, at.separator)
        } else {
            if tpage[0] == KIND_FP_LEAF && self.sort_fp_leaf(target, tpage)? {
                self.store.log_pages(&[target], &[])?;
            }
            let mut plan = self.plan_leaf_split(target, tpage, key, value_len)?;
            if let LeafPlan::Median = plan {
                // Deferred split: make room by moving records into a neighbour first.
                if self.options.redistribute
                    && pid != self.meta
                    && self.redistribute(pid, target, key, value_len)?
                {
                    return Ok(());
                }
                plan = self.plan_median_split(target, tpage, key, value_len)?;
            }
            match plan {
                LeafPlan::InPlace(image) => {
                    tpage.copy_from_slice(&image);
                    self.store.log_pages(&[target], &[])?;
                    self.conversions.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                LeafPlan::Split {
                    left,
                    right,
                    separator,
                } => (left, right, separator),
                LeafPlan::Median => {
                    return Err(corrupt(target, "median split planned no split").into())
                }
            }
        };
        if pid != self.meta {
            let p = Slotted::new(pid, self.page(pid)?)?;
            let sep_len = separator.len().saturating_sub(p.prefix_len());
            if p.free_space_after_compaction() < p.record_space(sep_len, 8) {
                drop(tg);
                drop(pg);
                self.split(pid, key, 0)?;
                return Ok(());
            }
        }
        let left = self.store.allocate()?;
        let root = if pid == self.meta {
            match self.store.allocate() {
                Ok(root) => Some(root),
                Err(e) => {
                    // Give `left` back: nothing refers to it yet.
                    self.store.free(left)?;
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        let _lg = WriteGuard(self.latch(left)?);
        let root = match root {
            Some(root) => Some((root, WriteGuard(self.latch(root)?))),
            None => None,
        };
        self.page_mut(left)?.copy_from_slice(&left_image);
        tpage.copy_from_slice(&right_image);
        let at = build::SplitPoint { left: 0, separator };
        if let Some((root, _rg)) = &root {
            let root = *root;
            let spec = NodeSpec {
                kind: KIND_INNER,
                flags: self.flags,
                prefix_truncation: self.truncate,
                lower: &[],
                upper: None,
                upper_child: target,
                op_counter: 0,
            };
            let mut b = Builder::new(self.page_mut(root)?, &spec)
                .ok_or_else(|| corrupt(root, "page too small for a root"))?;
            if !b.push(&at.separator, &[], &left.to_le_bytes()) {
                return Err(corrupt(root, "separator does not fit a new root").into());
            }
            b.finish();
            SlottedMut::new(self.meta, self.page_mut(self.meta)?)?.set_upper_child(root);
            self.store
                .log_pages(&[left, target, root, self.meta], &[])?;
        } else {
            let edit = ParentEdit {
                remove: None,
                insert: vec![(&at.separator, left)],
            };
            self.apply_parent_edit(pid, &edit)?;
            self.store.log_pages_edit(&[left, target], pid, &edit)?;
        }
        self.splits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Sorts a write-latched fingerprinting leaf's unsorted tail; returns whether it changed.
    pub(crate) fn sort_fp_leaf(&self, id: PageId, page: &mut [u8]) -> Result<bool> {
        let mut node = SlottedMut::new(id, page)?;
        let view = node.view();
        if view.sorted() >= view.count() {
            return Ok(false);
        }
        fingerprint::sort(&mut node)?;
        Ok(true)
    }
}
