//! Redo: the log replayed from the checkpoint onto the pages as [`crate::durable`] reads it (the
//! module docs of [`super`], "Recovery"; `docs/format.md`).
//!
//! Puts and deletes each change one leaf and commute with those of other leaves, so they are
//! held back in a [`LeafRedo`] of at most [`LeafRedo::BYTES`] and applied grouped by page, each
//! page's in LSN order: a leaf the log touches many times is then searched while it is in the
//! CPU's caches instead of once per scattered record (redo of random updates is bound by those
//! cache misses: `docs/results/db.md`, "recovering a 4 GiB log"). Every other record (page
//! images, parent edits, batch boundaries) applies what is held first, then itself, in log order.

use std::sync::atomic::Ordering;

use super::engine::PagedTree;
use super::log::{self, Record, RunWritten};
use super::overflow;
use super::store::{stamp_kind, PoolStore};
use crate::btree::BTree;
use crate::buffer::prefetch_line;
use crate::error::Result;
use crate::page::PageId;

/// A batch operation read back from the log: a put with its value, or a delete.
pub(super) type OwnedOp = (Vec<u8>, Option<Vec<u8>>);

/// Leaf records (puts and deletes) read but not applied yet, in log order.
#[derive(Default)]
pub(super) struct LeafRedo {
    /// Their keys and values, one after another.
    bytes: Vec<u8>,
    records: Vec<HeldRecord>,
}

/// A put or delete held back: its page and LSN, and where its key and value lie in
/// [`LeafRedo::bytes`] (the value right after the key).
struct HeldRecord {
    page: PageId,
    lsn: u64,
    at: u32,
    key_len: u32,
    /// [`HeldRecord::DELETE`] for a delete.
    value_len: u32,
}

impl HeldRecord {
    const DELETE: u32 = u32::MAX;
}

impl LeafRedo {
    /// The key and value bytes held before they are applied: recovery's memory stays bounded.
    pub(super) const BYTES: usize = 32 << 20;

    fn push(&mut self, page: PageId, lsn: u64, key: &[u8], value: Option<&[u8]>) {
        // Lengths and offsets fit in 32 bits: a record is a page or less, and the bytes held
        // stay under `BYTES` plus one record.
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        let value_len = match value {
            Some(v) => {
                self.bytes.extend_from_slice(v);
                v.len() as u32
            }
            None => HeldRecord::DELETE,
        };
        self.records.push(HeldRecord {
            page,
            lsn,
            at,
            key_len: key.len() as u32,
            value_len,
        });
    }
}

/// How many records ahead [`PagedTree::apply_leaf_redo`] fetches a record's bytes.
const PREFETCH_DISTANCE: usize = 8;

impl PagedTree {
    /// Whether the record at `lsn` names a run its record does not carry that is not in the
    /// page file whole ([`crate::durable::Engine::log_ends_before`]): checked only for records
    /// the crash may have left unsynced, since a sync of the log writes such runs first
    /// ([`super::runcache`], "Values the log does not carry").
    pub(super) fn run_missing(&self, lsn: u64, payload: &[u8]) -> Result<bool> {
        let store = &self.tree.store;
        if !log::is_runs(payload) || lsn < store.wal.claimed_durable_below() {
            return Ok(false);
        }
        let Record::Runs { written, .. } = log::decode(lsn, payload, store.page_size_bytes())?
        else {
            return Ok(false);
        };
        for w in written.iter().filter(|w| w.value.is_none()) {
            let r = overflow::ValueRef {
                first: w.first,
                len: w.len,
                crc: w.crc,
            };
            if !overflow::run_in_file(store.pool.file(), r)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Redoes the record at `lsn`, or holds it back if it is a leaf's put or delete (see the
    /// module docs).
    pub(super) fn redo_record(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        let image_len = self.tree.store.page_size_bytes();
        match log::decode(lsn, payload, image_len)? {
            Record::Batch(ops) => {
                self.apply_leaf_redo()?;
                self.pending_batch = Some(
                    ops.into_iter()
                        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                        .collect(),
                );
                Ok(())
            }
            Record::BatchEnd => {
                self.apply_leaf_redo()?;
                self.pending_batch = None;
                Ok(())
            }
            Record::Runs {
                written,
                freed,
                inner,
            } => {
                // The runs' allocations and frees are redone whatever the leaf's LSN (the free
                // space recovery starts from is the checkpoint's, which knows neither), and at
                // once: they touch only the free space and the runs' own pages, which no held
                // leaf record names. The wrapped leaf record is held or applied as any.
                for w in &written {
                    self.redo_run_written(lsn, w)?;
                }
                self.redo_page_record(lsn, *inner)?;
                let file = self.tree.store.pool.file();
                for f in freed {
                    file.free_run_deferred(f.first, f.pages as usize)?;
                }
                Ok(())
            }
            other => self.redo_page_record(lsn, other),
        }
    }

    /// Marks the run a RUNS record wrote in use and, when the record carries the value, writes
    /// the run again (its pages are the record's since it was allocated: nothing after it in
    /// the log can have reused them, as a run's free is deferred).
    fn redo_run_written(&self, lsn: u64, w: &RunWritten<'_>) -> Result<()> {
        let store = &self.tree.store;
        let file = store.pool.file();
        let n = overflow::run_pages(w.len as usize, file.page_size());
        for id in w.first..w.first.saturating_add(n) {
            file.ensure_allocated(id)?;
        }
        store.pool.forget_run(w.first, n)?;
        if let Some(value) = w.value {
            overflow::write_run(file, w.first, value, w.crc, lsn)?;
        }
        Ok(())
    }

    /// Redoes (or holds back) a record of page changes: anything but a batch's or a RUNS
    /// record.
    fn redo_page_record(&mut self, lsn: u64, record: Record<'_>) -> Result<()> {
        match record {
            Record::Put { page, key, value } => self.hold_leaf_redo(page, lsn, key, Some(value)),
            Record::Delete { page, key } => self.hold_leaf_redo(page, lsn, key, None),
            Record::PagesEdit {
                changed,
                parent,
                edit,
            } => {
                self.apply_leaf_redo()?;
                self.install_images(lsn, &changed)?;
                self.redo_page(parent, lsn, |t| t.apply_parent_edit(parent, &edit))
            }
            Record::Pages {
                changed,
                freed,
                delta,
            } => {
                self.apply_leaf_redo()?;
                let installed = self.install_images(lsn, &changed)?;
                if installed && delta != 0 {
                    let records = &self.tree.records;
                    if delta > 0 {
                        records.fetch_add(delta as u64, Ordering::Relaxed);
                    } else {
                        records.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
                    }
                }
                let pool = &self.tree.store.pool;
                for id in freed {
                    pool.lock_for_overwrite(id)?;
                    pool.free(id)?;
                }
                Ok(())
            }
            Record::Batch(_) | Record::BatchEnd | Record::Runs { .. } => {
                Err(crate::error::Error::LogCorruption {
                    path: None,
                    detail: format!(
                        "record {lsn}: a batch or RUNS record where a page change was expected"
                    ),
                })
            }
        }
    }

    /// Holds a leaf's put or delete back, applying what is held once it reaches
    /// [`LeafRedo::BYTES`].
    fn hold_leaf_redo(
        &mut self,
        page: PageId,
        lsn: u64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        self.leaf_redo.push(page, lsn, key, value);
        if self.leaf_redo.bytes.len() >= LeafRedo::BYTES {
            self.apply_leaf_redo()?;
        }
        Ok(())
    }

    /// Applies the held-back leaf records grouped by page, each page's in log order.
    fn apply_leaf_redo(&mut self) -> Result<()> {
        let mut held = std::mem::take(&mut self.leaf_redo);
        held.records.sort_unstable_by_key(|r| (r.page, r.lsn));
        let (records, bytes) = (&held.records, &held.bytes);
        let pool = &self.tree.store.pool;
        let result = records.iter().enumerate().try_for_each(|(i, r)| {
            // The records' bytes are read out of log order now, and each page is new to the
            // caches: fetch a later record's bytes ahead, and its whole page where its page
            // begins (the search reads slots and keys all over it; 4 KiB of bandwidth costs
            // less than the misses).
            if let Some(ahead) = records.get(i + PREFETCH_DISTANCE) {
                prefetch_line(bytes[ahead.at as usize..].as_ptr());
                if records[i + PREFETCH_DISTANCE - 1].page != ahead.page {
                    pool.prefetch(ahead.page);
                }
            }
            let at = r.at as usize;
            let key = &bytes[at..at + r.key_len as usize];
            if r.value_len == HeldRecord::DELETE {
                self.redo_page(r.page, r.lsn, |t| t.redo_delete(r.page, key).map(drop))
            } else {
                let value = &bytes[at + key.len()..at + key.len() + r.value_len as usize];
                self.redo_page(r.page, r.lsn, |t| t.redo_put(r.page, key, value).map(drop))
            }
        });
        // The buffers are kept for the next group.
        held.bytes.clear();
        held.records.clear();
        self.leaf_redo = held;
        result
    }

    /// After the last record: the held-back leaf records are applied; a batch whose end the
    /// log does not hold is applied again; then every change is logged. Whether a batch was
    /// applied again.
    pub(super) fn finish_redo(&mut self) -> Result<bool> {
        self.apply_leaf_redo()?;
        let store = &self.tree.store;
        let reapplied = if let Some(ops) = self.pending_batch.take() {
            // Applied again as a live batch is, logged: a page this changes may be written
            // back (evicted) before recovery's checkpoint, and a crash then must find its
            // change covered by a record with the page's LSN, or the next redo would compare
            // LSNs against a page holding changes no record explains (and miscount records).
            store.logging.store(true, Ordering::Release);
            for (k, v) in ops {
                match v {
                    Some(v) => super::batch::apply_put(&self.tree, self.buckets, &k, &v)?,
                    None => super::batch::apply_delete(&self.tree, self.buckets, &k)?,
                }
            }
            let mut end = Vec::new();
            log::batch_end(&mut end);
            store.append_record(&end)?;
            true
        } else {
            false
        };
        store.logging.store(true, Ordering::Release);
        Ok(reapplied)
    }

    /// Installs the logged `images` (record `lsn`) over pages that do not have them yet;
    /// returns whether it installed any.
    fn install_images(&self, lsn: u64, images: &[(PageId, log::Image<'_>)]) -> Result<bool> {
        let pool = &self.tree.store.pool;
        let image_len = self.tree.store.page_size_bytes();
        let mut installed = false;
        for &(id, image) in images {
            pool.lock_for_overwrite(id)?;
            if pool.page_lsn(id) >= lsn {
                pool.unlock(id, false);
                continue;
            }
            // SAFETY: we hold page `id` exclusively; its engine bytes are `image_len` long
            // inside the pool's mapping.
            let page = unsafe { std::slice::from_raw_parts_mut(pool.data(id).as_ptr(), image_len) };
            image.restore(page);
            pool.set_lsn(id, lsn);
            stamp_kind(pool, id);
            pool.unlock(id, true);
            installed = true;
        }
        Ok(installed)
    }

    /// Applies a logged change (a leaf's put or delete, a parent's edit) to `page` unless the
    /// page already has it.
    fn redo_page(
        &self,
        page: PageId,
        lsn: u64,
        apply: impl FnOnce(&BTree<PoolStore>) -> Result<()>,
    ) -> Result<()> {
        let pool = &self.tree.store.pool;
        pool.lock(page)?;
        if pool.page_lsn(page) >= lsn {
            pool.unlock(page, false);
            return Ok(());
        }
        match apply(&self.tree) {
            Ok(()) => {
                pool.set_lsn(page, lsn);
                stamp_kind(pool, page);
                pool.unlock(page, true);
                Ok(())
            }
            Err(e) => {
                pool.unlock(page, false);
                Err(e)
            }
        }
    }
}
