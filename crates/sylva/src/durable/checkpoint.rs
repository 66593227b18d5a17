//! Checkpoints, fuzzy and quiet (the module docs of [`super`], "The protocol"; the B+tree's side
//! in the module docs of [`crate::db`], "Checkpoints are fuzzy").

use std::sync::atomic::Ordering;

use super::{Core, Engine};
use crate::error::Result;

impl<E: Engine> Core<E> {
    /// A fuzzy checkpoint (module docs): its log position and the engine's state are taken with
    /// writers held back, then what it needs is written while writers go on, then the meta page
    /// is written. Falls back to a quiet one if the log cannot rotate.
    pub(super) fn checkpoint_now(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock();
        self.checkpoint_locked()
    }

    /// [`Core::checkpoint_now`] unless another checkpoint runs or an online backup holds
    /// checkpoints off (`super::backup`): then nothing, and `false`. For a writer that would
    /// otherwise wait for a whole backup.
    pub(super) fn try_checkpoint_now(&self) -> Result<bool> {
        let Some(_one) = self.checkpoint_lock.try_lock() else {
            return Ok(false);
        };
        self.checkpoint_locked().map(|()| true)
    }

    /// [`Core::checkpoint_now`] with the checkpoint lock held by the caller.
    pub(super) fn checkpoint_locked(&self) -> Result<()> {
        // Checked again with the lock held: a checkpoint that failed meanwhile (the thread's,
        // which the caller waited for) poisoned the store, and may have left the file's
        // begun state behind.
        self.poison.check()?;
        if !self.fuzzy {
            return self.checkpoint_quiet_locked();
        }
        let engine = &self.engine;
        let wal = &self.wal;
        let file = engine.page_file();
        // Most of the log's fsync here, so the rotation's own, with writers held back, is short.
        wal.sync()?;
        let begun = {
            let _gate = engine.hold_writers();
            let rotated = wal.rotate(self.durable_checkpoint.load(Ordering::Acquire))?;
            rotated.then(|| {
                let lsn = wal.next_lsn();
                let state = engine.begin_checkpoint(lsn);
                file.begin_fuzzy();
                (lsn, state)
            })
        };
        let Some((lsn, state)) = begun else {
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
        let written = (|| {
            engine.flush(lsn)?;
            // Most of the data file's sync happens here, not while the file holds allocations
            // back.
            file.sync()?;
            // The log up to here durable: a page that was dirty when the checkpoint began and
            // was freed before `flush_all` reached it was not written, so the record that freed
            // it must survive, or recovery would bring the page back with its older content.
            // (Pages the file grew by since the checkpoint began are listed free in it,
            // `PageFile::checkpoint`; redo allocates again those whose records survive.)
            wal.sync()?;
            file.checkpoint(&state)
        })();
        if written.is_err() {
            // Its free space must not outlive it: a later checkpoint recording it would list
            // free the pages grown since this one began, after the log that allocates them again
            // is gone (found by `power_loss_patree`, docs/results/reliability.md, defect 8).
            file.abandon_fuzzy();
        }
        written?;
        self.durable_checkpoint.store(lsn, Ordering::Release);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        wal.drop_other(lsn)?;
        Ok(())
    }

    /// A quiet checkpoint: writes every dirty page, records a checkpoint at the log's end and
    /// empties the log, holding writers back for the last part. At open and close.
    pub(super) fn checkpoint_quiet(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock();
        self.checkpoint_quiet_locked()
    }

    fn checkpoint_quiet_locked(&self) -> Result<()> {
        self.poison.check()?;
        let engine = &self.engine;
        let wal = &self.wal;
        // Write most dirty pages while writers go on; with writers held back only the pages
        // dirtied meanwhile are left to write, so writers wait for far less.
        engine.flush(wal.next_lsn())?;
        let _gate = engine.hold_writers_quiet();
        // The free space of now, not one a failed fuzzy checkpoint noted.
        engine.page_file().abandon_fuzzy();
        let lsn = wal.next_lsn();
        wal.sync()?;
        let state = engine.begin_checkpoint(lsn);
        engine.flush(lsn)?;
        engine.page_file().checkpoint(&state)?;
        self.durable_checkpoint.store(lsn, Ordering::Release);
        wal.truncate()?;
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
