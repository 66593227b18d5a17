//! Checkpoints, fuzzy and quiet (the module docs of [`super`], "Checkpoints are fuzzy").

use std::sync::atomic::Ordering;

use super::state::State;
use super::Core;
use crate::error::Result;

impl Core {
    /// A fuzzy checkpoint (module docs): its log position and record count are taken under
    /// the write gate, then the dirty pages are written while writers go on, then the meta page
    /// is written. Falls back to a quiet one if the log cannot rotate.
    pub(super) fn checkpoint_now(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock();
        if !self.fuzzy {
            return self.checkpoint_quiet_locked();
        }
        let store = &self.tree.store;
        let file = store.pool.file();
        // Most of the log's fsync here, so the rotation's own, with writers held back, is short.
        store.wal.sync()?;
        let begun = {
            let _gate = store.exclusive();
            let rotated = store
                .wal
                .rotate(self.durable_checkpoint.load(Ordering::Acquire))?;
            rotated.then(|| {
                let lsn = store.wal.next_lsn();
                store.checkpoint_lsn.store(lsn, Ordering::Release);
                file.begin_fuzzy();
                store.log_bytes.store(0, Ordering::Relaxed);
                (lsn, self.tree.records.load(Ordering::Relaxed))
            })
        };
        let Some((lsn, records)) = begun else {
            return self.checkpoint_quiet_locked();
        };
        // Recovery redoes from `lsn`, so every change with a smaller LSN must be in the file
        // once the meta page lands. Writers log and change pages under the gate, so all those
        // changes were in the frames when the gate opened, before `flush_all` began. A page
        // that was dirty then is, when the flush reaches it, either still dirty: the flush
        // copies it (after the gate, so the copy holds those changes) and writes the copy
        // before it returns; or clean because eviction wrote it meanwhile (under its lock,
        // before releasing it), or evicted, or freed (see below). The flush writes copies while
        // writers go on, and a change made after a copy is not in the file, but such a change
        // came after the gate: its LSN is at least `lsn`, and the page's first change after
        // `lsn` logged its full image, so redo rebuilds the page from the log whatever version
        // of it reached the file.
        store.pool.flush_all()?;
        // Most of the data file's sync happens here, not while the file holds allocations back.
        file.sync()?;
        // The log up to here durable: a page that was dirty when the checkpoint began and was
        // freed before `flush_all` reached it was not written, so the record that freed it must
        // survive, or recovery would bring the page back with its older content. (Pages the
        // file grew by since the checkpoint began are listed free in it, `PageFile::checkpoint`;
        // redo allocates again those whose records survive.)
        store.wal.sync()?;
        let state = State {
            layout: self.layout,
            meta_page: self.tree.meta,
            records,
            checkpoint_lsn: lsn,
        };
        file.checkpoint(&state.encode())?;
        self.durable_checkpoint.store(lsn, Ordering::Release);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        store.wal.drop_other(lsn)?;
        Ok(())
    }

    /// A quiet checkpoint: writes every dirty page, records a checkpoint at the log's end and
    /// empties the log, holding writers back for the last part. At open and close.
    pub(super) fn checkpoint_quiet(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock();
        self.checkpoint_quiet_locked()
    }

    fn checkpoint_quiet_locked(&self) -> Result<()> {
        let store = &self.tree.store;
        // Write most dirty pages while writers go on; under the gate only the pages dirtied
        // meanwhile are left to write, so writers wait for far less.
        store.pool.flush_all()?;
        let _gate = store.exclusive();
        let lsn = store.wal.next_lsn();
        store.wal.sync()?;
        store.checkpoint_lsn.store(lsn, Ordering::Release);
        let state = State {
            layout: self.layout,
            meta_page: self.tree.meta,
            records: self.tree.records.load(Ordering::Relaxed),
            checkpoint_lsn: lsn,
        };
        store.pool.checkpoint(&state.encode())?;
        self.durable_checkpoint.store(lsn, Ordering::Release);
        store.wal.truncate()?;
        store.log_bytes.store(0, Ordering::Relaxed);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
