//! Deferred splits: a full leaf first moves records into a neighbour, or splits together with
//! it two-into-three (the B*-tree of Knuth's *The Art of Computer Programming*, vol. 3, after
//! Bayer and McCreight). Not in "B-Trees Are Back".
//!
//! Why: with 50/50 splits alone, leaves after random inserts are on average ln 2 ≈ 69% full
//! (Yao 1978). With 8-byte keys and 56-byte values that is about 110 bytes of page per
//! 64-byte record; deferred splits raise the fill to about 84% (about 91 bytes per record).
//!
//! What happens: an insert finds its leaf `T` full, and the leaf would get an ordinary
//! (median) split — not a layout conversion or a dense split, which keep their precedence
//! ([`super::leaf`]). With the parent and `T` write-latched, the neighbours of `T` under the
//! same parent (right and left) are read optimistically, and the comparison or fingerprinting
//! leaf among them with the most free space is write-latched by upgrading the version read (a
//! failed upgrade restarts the insert). If it has at least `1/MIN_FREE_DIVISOR` of a page free,
//! the records of both leaves are rebuilt into the same two pages (*redistribution*); otherwise
//! into three, the middle one new (the *2-to-3 split*, which leaves every page about 2/3 full).
//! The records are cut where the bytes balance (the pending record counted on its side), at the
//! shortest separator in the paper's window around that point (section 2), and the parent's
//! separator between the two leaves is replaced by the new one or two. Nothing changes unless
//! every page is built, the pending record then fits its page, and the parent has room for the
//! new separators; otherwise the ordinary 1-to-2 split runs, as before. Pages are allocated
//! before any is changed.
//!
//! Neighbours only under the same parent: every page a change touches is a child of the one
//! parent it holds, so the latch order (parent, then children, all taken by upgrades that
//! never wait while holding a latch — except the wait for a neighbour's short leaf write,
//! which holds nothing else) is the one split and merge use, and no cousin's parent needs
//! changing. Inner nodes still split 50/50: they are about 1% of the pages.
//!
//! Readers and scans need nothing new: a reader validates every page version it used, so one
//! that read a leaf or the parent while records moved restarts; scans and cursors move from
//! leaf to leaf by the upper fence, so a record moving between two leaves while a scan passes
//! is seen exactly once. Invariants are the tree's (`check()`): fences equal the parent's
//! separators, keys in range and ascending.
//!
//! Logging: the changed pages (the leaves, a new one included, and the parent) are reported
//! with [`NodeStore::log_pages`] while all are latched, like a split; a durable store logs
//! their images (a `PAGES` record), and redo needs nothing new.
//!
//! Cost: a load of random keys makes about 2.7 times as many structure changes as with plain
//! splits, each rewriting two or three leaves and the parent (and, in a database, logging their
//! images: about 3 times the log), so loads get slower (`docs/results/db.md`).
//! `Options::redistribute` turns deferred splits on: off by default for the in-memory tree
//! (the paper's policy), on by default in the database (`DbOptions::redistribute`).

use super::leaf::{collect, fences, op_counter, Records};
use super::store::{NodeLatch, NodeStore, ParentEdit};
use super::tree::{BTree, WriteGuard};
use crate::error::Result;
use crate::page::build::leaf_separator_near;
use crate::page::dense::{Dense, KIND_DENSE_LEAF};
use crate::page::semidense::{self, SemiDense, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::{slot_len, Slotted};
use crate::page::{corrupt, PageId, KIND_FP_LEAF, KIND_LEAF};
use crate::sync::{Abort, Olc};
use std::sync::atomic::Ordering;

/// A neighbour takes records only if at least `1/MIN_FREE_DIVISOR` of its page is free: less
/// would move a record or two and make the next insert redistribute again.
const MIN_FREE_DIVISOR: usize = 8;

/// Releases a neighbour's write latch: as a change if the neighbour was changed (and logged),
/// else as an unchanged page (a durable store then neither logs nor writes it back).
struct NeighbourGuard<L: NodeLatch> {
    latch: L,
    changed: bool,
}

impl<L: NodeLatch> Drop for NeighbourGuard<L> {
    fn drop(&mut self) {
        if self.changed {
            self.latch.unlock();
        } else {
            self.latch.unlock_hint();
        }
    }
}

/// Two neighbouring leaves rebuilt as `pages.len()` leaves (two or three), in key order, with
/// the separators between them.
struct Respread {
    pages: Vec<Vec<u8>>,
    separators: Vec<Vec<u8>>,
}

fn is_comparison_leaf(page: &[u8]) -> bool {
    matches!(page.first(), Some(&KIND_LEAF) | Some(&KIND_FP_LEAF))
}

impl<S: NodeStore> BTree<S> {
    /// With parent `pid` and its full leaf `target` write-latched by the caller, tries to make
    /// room for a record with key `key` and a `value_len`-byte value together with a neighbour
    /// under `pid`: by moving records into the neighbour when it has room, else by a 2-to-3
    /// split. `Ok(true)`: pages were changed and logged (the caller retries its insert).
    /// `Ok(false)`: nothing changed; split 1-to-2 instead.
    pub(crate) fn redistribute(
        &self,
        pid: PageId,
        target: PageId,
        key: &[u8],
        value_len: usize,
    ) -> Olc<bool> {
        if !is_comparison_leaf(self.page(target)?) {
            return Ok(false);
        }
        let p = Slotted::new(pid, self.page(pid)?)?;
        let (pos, _) = p.lower_bound(key)?;
        if p.child(pos)? != target {
            return Err(Abort::Restart);
        }
        // (slot of the separator between the two leaves in the parent, neighbour, whether the
        // neighbour is the right one)
        let mut candidates = Vec::with_capacity(2);
        if pos < p.count() {
            candidates.push((pos, p.child(pos + 1)?, true));
        }
        if pos > 0 {
            candidates.push((pos - 1, p.child(pos - 1)?, false));
        }
        let mut best = None;
        let mut best_free = 0;
        for (sep_idx, id, is_right) in candidates {
            let l = self.latch(id)?;
            let v = l.read_lock()?;
            // An optimistic look: a torn read only makes the choice worse, and the upgrade
            // below validates the version before anything is trusted.
            let page = self.page(id)?;
            if !is_comparison_leaf(page) {
                continue;
            }
            let Ok(node) = Slotted::new(id, page) else {
                continue;
            };
            let free = node.free_space_after_compaction();
            if best.is_none() || free > best_free {
                best_free = free;
                best = Some((sep_idx, id, is_right, l, v));
            }
        }
        let Some((sep_idx, nid, is_right, nl, nv)) = best else {
            return Ok(false);
        };
        nl.upgrade(nv)?;
        let mut ng = NeighbourGuard {
            latch: nl,
            changed: false,
        };
        let npage = self.page_mut(nid)?;
        if !is_comparison_leaf(npage) {
            return Ok(false);
        }
        if npage[0] == KIND_FP_LEAF && self.sort_fp_leaf(nid, npage)? {
            self.store.log_pages(&[nid], &[])?;
            ng.changed = true;
        }
        let (left, right) = if is_right {
            (target, nid)
        } else {
            (nid, target)
        };
        let parts = if best_free >= self.options.page_size / MIN_FREE_DIVISOR {
            2
        } else {
            3
        };
        let Some(plan) = self.plan_respread(
            (left, self.page(left)?),
            (right, self.page(right)?),
            key,
            value_len,
            parts,
        )?
        else {
            return Ok(false);
        };
        // The parent swaps the old separator for the new ones.
        let p = Slotted::new(pid, self.page(pid)?)?;
        if p.child(sep_idx)? != left {
            return Err(corrupt(pid, "separator does not point at the left neighbour").into());
        }
        let prefix_len = p.prefix_len();
        let mut need = 0;
        for sep in &plan.separators {
            let k = sep
                .get(prefix_len..)
                .ok_or_else(|| corrupt(pid, "separator shorter than the parent's prefix"))?;
            need += p.record_space(k.len(), 8);
        }
        if p.free_space_after_compaction() + p.record_space(p.lens(sep_idx).0, 8) < need {
            return Ok(false);
        }
        // Every page is allocated before any is changed, so a failed allocation changes nothing.
        let mut ids = vec![left];
        let mut new_guards = Vec::new();
        for _ in 2..parts {
            let id = self.store.allocate()?;
            new_guards.push(WriteGuard(self.latch(id)?));
            ids.push(id);
        }
        ids.push(right);
        ng.changed = true;
        for (&id, image) in ids.iter().zip(&plan.pages) {
            self.page_mut(id)?.copy_from_slice(image);
        }
        let edit = ParentEdit {
            remove: Some(sep_idx),
            insert: plan
                .separators
                .iter()
                .zip(&ids)
                .map(|(sep, &id)| (&sep[..], id))
                .collect(),
        };
        self.apply_parent_edit(pid, &edit)?;
        self.store.log_pages_edit(&ids, pid, &edit)?;
        if parts == 2 {
            self.redistributions.fetch_add(1, Ordering::Relaxed);
        } else {
            self.splits.fetch_add(1, Ordering::Relaxed);
            self.splits_2to3.fetch_add(1, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Rebuilds neighbouring leaves `left` and `right` (both sorted comparison or fingerprinting
    /// leaves) as `parts` leaves whose records split where the bytes balance, the pending record
    /// (`key`, `value_len`) counted on its side. `None` if a page would not fit or the pending
    /// record would still not fit its page.
    fn plan_respread(
        &self,
        left: (PageId, &[u8]),
        right: (PageId, &[u8]),
        key: &[u8],
        value_len: usize,
        parts: usize,
    ) -> Result<Option<Respread>> {
        let ps = self.options.page_size;
        let (lower, _) = fences(left.0, left.1)?;
        let (_, upper) = fences(right.0, right.1)?;
        let mut recs = Records::default();
        recs.reserve_pages(2, ps);
        collect(left.0, left.1, &mut recs)?;
        collect(right.0, right.1, &mut recs)?;
        let n = recs.len();
        if n < parts {
            return Ok(None);
        }
        // Bytes per record as a page of this tree stores it (the prefix is unknown until the
        // separators are; it is the same small amount on every side).
        let slot = slot_len(self.flags);
        let cost = |i: usize| slot + recs.key(i).len() + recs.value(i).len();
        let pending = slot + key.len() + value_len;
        let pending_at = (0..n).position(|i| recs.key(i) >= key).unwrap_or(n);
        let total: usize = (0..n).map(cost).sum::<usize>() + pending;
        // Record counts where the bytes reach 1/parts, 2/parts, ... of the total.
        let mut cuts = Vec::with_capacity(parts);
        let mut at = 0;
        let mut acc = if pending_at == 0 { pending } else { 0 };
        for j in 1..parts {
            while at < n && parts * acc < j * total {
                acc += cost(at);
                at += 1;
                if at == pending_at {
                    acc += pending;
                }
            }
            let (split, separator) = leaf_separator_near(n, at, |i| Ok(recs.key(i)))?;
            if cuts.last().is_some_and(|&(s, _)| s >= split) {
                return Ok(None);
            }
            cuts.push((split, separator));
        }
        let home = cuts
            .iter()
            .position(|(_, sep)| key <= sep.as_slice())
            .unwrap_or(parts - 1);
        let mut pages = Vec::with_capacity(parts);
        let mut from = 0;
        for j in 0..parts {
            let lo: &[u8] = if j == 0 { &lower } else { &cuts[j - 1].1 };
            let (hi, to) = match cuts.get(j) {
                Some((split, sep)) => (Some(sep.as_slice()), *split),
                None => (upper.as_deref(), n),
            };
            let counter = op_counter(if j + 1 == parts { right.1 } else { left.1 });
            let pending = (j == home).then_some((key, value_len));
            let mut page = vec![0u8; ps];
            if !self.build_leaf(&mut page, (lo, hi), &recs, from..to, pending, counter) {
                return Ok(None);
            }
            if j == home && !takes(left.0, &page, key, value_len)? {
                return Ok(None);
            }
            pages.push(page);
            from = to;
        }
        Ok(Some(Respread {
            pages,
            separators: cuts.into_iter().map(|(_, sep)| sep).collect(),
        }))
    }
}

/// Whether a freshly built leaf has room for a new record `key` with a `value_len`-byte value.
fn takes(id: PageId, page: &[u8], key: &[u8], value_len: usize) -> Result<bool> {
    if page.first() == Some(&KIND_DENSE_LEAF) {
        let d = Dense::new(id, page)?;
        return Ok(d.value_len() == value_len && d.slot_of(key).is_some());
    }
    if page.first() == Some(&KIND_SEMI_DENSE_LEAF) {
        // A semi-dense leaf (the `semidense` layout builds one where it pays): a slot for the
        // key, and room on its heap (an overwrite's old value is not counted: conservative).
        let s = SemiDense::new(id, page)?;
        return Ok(s.slot_of(key).is_some()
            && s.free_space_after_compaction() >= semidense::record_len(value_len));
    }
    let v = Slotted::new(id, page)?;
    let stored = key.len().saturating_sub(v.prefix_len());
    // A fingerprinting leaf also needs a fingerprint byte.
    let extra = usize::from(v.kind() == KIND_FP_LEAF);
    Ok(v.free_space_after_compaction() >= v.record_space(stored, value_len) + extra)
}
