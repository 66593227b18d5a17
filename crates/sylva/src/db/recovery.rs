//! Redo: the log replayed from the checkpoint onto the pages, record by record as
//! [`crate::durable`] reads it (the module docs of [`super`], "Recovery"; `docs/format.md`).

use std::sync::atomic::Ordering;

use super::engine::PagedTree;
use super::log::{self, Record};
use super::store::{stamp_kind, PoolStore};
use crate::btree::BTree;
use crate::error::Result;
use crate::page::PageId;

/// A batch operation read back from the log: a put with its value, or a delete.
pub(super) type OwnedOp = (Vec<u8>, Option<Vec<u8>>);

impl PagedTree {
    /// Redoes the record at `lsn` (see the module docs).
    pub(super) fn redo_record(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        let this = &*self;
        let store = &self.tree.store;
        let image_len = store.page_size_bytes();
        let pending = match log::decode(lsn, payload, image_len)? {
            Record::Put { page, key, value } => {
                this.redo_page(page, lsn, |t| t.redo_put(page, key, value).map(drop))?;
                return Ok(());
            }
            Record::Delete { page, key } => {
                this.redo_page(page, lsn, |t| t.redo_delete(page, key).map(drop))?;
                return Ok(());
            }
            Record::PagesEdit {
                changed,
                parent,
                edit,
            } => {
                this.install_images(lsn, &changed)?;
                this.redo_page(parent, lsn, |t| t.apply_parent_edit(parent, &edit))?;
                return Ok(());
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
                return Ok(());
            }
            Record::Batch(ops) => Some(
                ops.into_iter()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect(),
            ),
            Record::BatchEnd => None,
        };
        self.pending_batch = pending;
        Ok(())
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
                    Some(v) => self.tree.put(&k, &v)?,
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
