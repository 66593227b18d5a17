//! Redo: the log replayed from the checkpoint onto the pages, record by record as
//! [`crate::durable`] reads it (the module docs of [`super`], "Recovery"; `docs/format.md`).

use std::sync::atomic::Ordering;

use super::engine::PagedTree;
use super::log::{self, Record, RunWritten};
use super::overflow;
use super::store::{stamp_kind, PoolStore};
use crate::btree::BTree;
use crate::error::Result;
use crate::page::PageId;

/// A batch operation read back from the log: a put with its value, or a delete.
pub(super) type OwnedOp = (Vec<u8>, Option<Vec<u8>>);

impl PagedTree {
    /// Redoes the record at `lsn` (see the module docs).
    pub(super) fn redo_record(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        let image_len = self.tree.store.page_size_bytes();
        let pending = match log::decode(lsn, payload, image_len)? {
            Record::Batch(ops) => Some(
                ops.into_iter()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect(),
            ),
            Record::BatchEnd => None,
            Record::Runs {
                written,
                freed,
                inner,
            } => {
                // The runs' allocations and frees are redone whatever the leaf's LSN: the free
                // space recovery starts from is the checkpoint's, which knows neither.
                for w in &written {
                    self.redo_run_written(lsn, w)?;
                }
                self.redo_leaf_record(lsn, *inner)?;
                let file = self.tree.store.pool.file();
                for f in freed {
                    file.free_run_deferred(f.first, f.pages as usize)?;
                }
                return Ok(());
            }
            other => return self.redo_leaf_record(lsn, other),
        };
        self.pending_batch = pending;
        Ok(())
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

    /// Redoes a record of page changes (anything but a batch's or a RUNS record).
    fn redo_leaf_record(&self, lsn: u64, record: Record<'_>) -> Result<()> {
        let this = self;
        let store = &self.tree.store;
        match record {
            Record::Put { page, key, value } => {
                this.redo_page(page, lsn, |t| t.redo_put(page, key, value).map(drop))?;
                Ok(())
            }
            Record::Delete { page, key } => {
                this.redo_page(page, lsn, |t| t.redo_delete(page, key).map(drop))?;
                Ok(())
            }
            Record::PagesEdit {
                changed,
                parent,
                edit,
            } => {
                this.install_images(lsn, &changed)?;
                this.redo_page(parent, lsn, |t| t.apply_parent_edit(parent, &edit))?;
                Ok(())
            }
            Record::Pages {
                changed,
                freed,
                delta,
            } => {
                let pool = &store.pool;
                let installed = this.install_images(lsn, &changed)?;
                if installed && delta != 0 {
                    let records = &this.tree.records;
                    if delta > 0 {
                        records.fetch_add(delta as u64, Ordering::Relaxed);
                    } else {
                        records.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
                    }
                }
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

    /// After the last record: a batch whose end the log does not hold is applied again; then
    /// every change is logged. Whether a batch was applied again.
    pub(super) fn finish_redo(&mut self) -> Result<bool> {
        let store = &self.tree.store;
        let reapplied = if let Some(ops) = self.pending_batch.take() {
            // Applied again as a live batch is, logged: a page this changes may be written
            // back (evicted) before recovery's checkpoint, and a crash then must find its
            // change covered by a record with the page's LSN, or the next redo would compare
            // LSNs against a page holding changes no record explains (and miscount records).
            store.logging.store(true, Ordering::Release);
            for (k, v) in ops {
                match v {
                    Some(v) => drop(overflow::put(&self.tree, &k, &v)?),
                    None => drop(self.tree.delete(&k)?),
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
