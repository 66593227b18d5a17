//! The durability layer every disk engine stands on: the directory and its lock, open → verify
//! → redo → quiet checkpoint, fuzzy checkpoints on a background thread, the [`SyncMode`]
//! cadence with its log sync thread, and the `Poisoned` state. An engine plugs in through the
//! [`Engine`] trait instead of copying any of it. [`crate::Db`] (the B+tree of
//! [`crate::btree`] over the [`crate::buffer`] pool) is its first engine.
//!
//! **What the layer owns.** A store is a directory ([`dir`]: `data.sylva`, the page file;
//! `wal.log` and `wal.2.log`, the log's segments; `LOCK`) opened through [`crate::io::Vfs`], so
//! the power-loss simulation can stand under all of it. The layer holds the write-ahead log
//! ([`crate::wal::Wal`]) and decides when it is synced ([`SyncCadence`]), when it rotates and is
//! dropped (checkpoints), and what the page file's meta page records at a checkpoint: the bytes
//! the engine gives it. The engine owns its pages and whatever caches them, and the *meaning*
//! of its log records; the layer never decodes either.
//!
//! **The protocol** (ARIES-style redo, with fuzzy checkpoints and PostgreSQL's full-page writes;
//! the module docs of [`crate::db`] give the B+tree's side):
//! - *Open* ([`Durable::start`]): the page file is synced (a killed process may have left
//!   writes the OS holds), its meta page verified and the engine's state in it decoded
//!   ([`Engine::decode_state`], which names the LSN redo starts at); the log is opened at that
//!   LSN (a torn tail is cut and reported); the engine is built; every intact record from the
//!   LSN on is handed to [`Engine::redo`], one at a time as the log is read, so memory does not
//!   grow with the log; [`Engine::redo_end`] finishes what the log left half-done; then a quiet
//!   checkpoint if anything was redone, cut or created. Redo must be idempotent: a record whose
//!   effect is already in the engine's files (an LSN in a page header says so) is skipped.
//! - *Fuzzy checkpoint* ([`Core::checkpoint_now`]): with writers held back
//!   ([`Engine::hold_writers`]) only while the log rotates to its other segment and the engine
//!   notes its state ([`Engine::begin_checkpoint`] at LSN `l`); then [`Engine::flush`] writes
//!   what the checkpoint needs while writers go on, the page file is synced, the log is synced,
//!   and the meta page records the noted state. Recovery redoes from `l`. This is correct
//!   whatever state the engine's pages were written in only if every page changed at or after
//!   `l` logs its full image first (full-page writes, which `begin_checkpoint(l)` switches on):
//!   redo installs the image and replays the page's later records.
//! - *Quiet checkpoint* (at open and close, and when the log cannot rotate): writers are held
//!   back while the last changes are flushed; both segments are emptied.
//! - *Durability* ([`SyncCadence`]): `Always` syncs the log to the write's LSN before the write
//!   returns (group commit: concurrent writers share the fsync); `Batch` hands each boundary's
//!   fsync to the log sync thread; `Never` syncs at `sync()`, checkpoints and close.
//! - *Failure* ([`poison`]): any failed write, fsync or background run poisons the store.
//! - *Compaction* ([`compact`]): checkpoints that take the free pages at the page file's end out
//!   of it, then the file truncated to what the last one records.
//! - *Online backup* ([`backup`]): with checkpoints held off, from the last checkpoint, a fuzzy
//!   copy of the page file, the log's end noted with writers held back, the runs the engine wrote without
//!   logging them copied again ([`Engine::note_unlogged_runs`]), the log up to that end.
//!
//! **The engine's side** ([`Engine`]) is three duties and their plumbing: replay one log record;
//! flush what a checkpoint needs up to an LSN; the bytes of engine state the meta page keeps.
//! How the three engines to come fit it:
//! - The **B+tree** ([`crate::db`]): redo installs page images and applies leaf puts and deletes
//!   and parent edits through the buffer pool; flush writes the pool's dirty pages; the state is
//!   the tree's metadata page, record count and layout.
//! - **TreeLine** (record cache + page file): its log records are record-level puts and deletes
//!   and page-group rewrites; redo applies them to the page groups (or back into the record
//!   cache, whose dirty records a flush writes into their pages); the state is the page-group
//!   directory's root and model parameters.
//! - **NB-tree** (in-memory root d-tree + immutable runs): the log covers the root d-tree's
//!   inserts and the publication of each run; redo rebuilds the root d-tree from the records
//!   since the checkpoint and re-links runs whose publication it finds; flush writes the root
//!   d-tree out as a run (or notes that it need not); the state lists the runs.
//!
//! None of them needs more: each keeps its own records' format within its range of record
//! types, its own page kinds, and whatever it caches.

mod background;
pub(crate) mod backup;
mod cadence;
mod checkpoint;
pub(crate) mod compact;
pub(crate) mod dir;
pub(crate) mod poison;
mod recovery;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::error::Result;
use crate::io::{LockGuard, PageFile};
use crate::wal::{SyncMode, Wal};
use background::Trigger;
use poison::Poison;

pub use backup::{
    BackupOptions, BackupProgress, BackupReport, DEFAULT_DEVICE_SHARE, PARTIAL_DATA_FILE,
};
pub use cadence::{Due, SyncCadence};
pub use dir::{DATA_FILE, LOCK_FILE, NEW_DATA_FILE, WAL_FILE, WAL_FILE_2};
pub use recovery::RecoveryReport;

/// An engine over the durability layer (module docs): what the layer cannot do without knowing
/// the engine's pages and records.
pub(crate) trait Engine: Send + Sync + 'static {
    /// The engine's state as the page file's meta page keeps it, decoded.
    type State;
    /// Holds every writer back while it lives (a writer logs and changes pages under the
    /// engine's write gate, so with it held no record is half applied).
    type Writers<'a>
    where
        Self: 'a;

    /// Decodes the state the last checkpoint recorded (`user`: the meta page's bytes for the
    /// engine); `None` for a new store. With it, the LSN redo starts at.
    fn decode_state(path: &Path, user: &[u8]) -> Result<Option<(Self::State, u64)>>;

    /// Replays the log record `payload` at `lsn` (at or after the checkpoint's LSN), skipping
    /// what the engine's files already hold. Recovery owns the engine (`&mut`): it may keep
    /// state across records (a write batch whose end it has not seen yet).
    fn redo(&mut self, lsn: u64, payload: &[u8]) -> Result<()>;

    /// Whether the log really ends before the record `payload` at `lsn`, which the page file
    /// does not back: a record that does not carry what it needs (`Db`'s out-of-line values
    /// written without their bytes in the log, [`crate::db::overflow`]) and that the crash may
    /// have left on disk unsynced ([`crate::wal::Wal::claimed_durable_below`]). Recovery then
    /// cuts it and every later record off, as a torn tail. No, by default.
    fn log_ends_before(&mut self, lsn: u64, payload: &[u8]) -> Result<bool> {
        let _ = (lsn, payload);
        Ok(false)
    }

    /// After the last record: finishes what the log left half-done (a batch cut short, applied
    /// again and logged), and logs every change from here on. Whether it applied anything.
    fn redo_end(&mut self) -> Result<bool>;

    /// Holds writers back until the guard drops.
    fn hold_writers(&self) -> Self::Writers<'_>;

    /// Holds writers back for a quiet checkpoint's last part ([`Engine::hold_writers`] by
    /// default). An engine that logs a page's image when it writes the page (TreeLine), not
    /// when it changes it, writes what is dirty here, before `begin_checkpoint`: the flush
    /// after it then logs no image that the emptied log would lose.
    fn hold_writers_quiet(&self) -> Self::Writers<'_> {
        self.hold_writers()
    }

    /// With writers held back, a checkpoint begins at `lsn`: every later change of a page logs
    /// the page's full image first, the count of bytes logged since a checkpoint restarts, and
    /// the returned bytes are what the meta page will record (the engine's state now, and
    /// `lsn`, which `decode_state` gives back).
    fn begin_checkpoint(&self, lsn: u64) -> Vec<u8>;

    /// Writes to the page file every change logged before `lsn` (more is harmless); not synced.
    fn flush(&self, lsn: u64) -> Result<()>;

    /// The page file whose meta page records checkpoints.
    fn page_file(&self) -> &PageFile;

    /// Bytes logged since the last checkpoint began (what triggers the next one).
    fn logged_bytes(&self) -> u64;

    /// Whether the pages freed since the last checkpoint began call for a checkpoint now,
    /// however little was logged: an engine whose frees wait for the next checkpoint (the
    /// durable state may still point at the pages) grows its file meanwhile instead of reusing
    /// them. No by default.
    #[inline]
    fn frees_due(&self) -> bool {
        false
    }

    /// How many reads of the page file the store's own operations have made so far (a count
    /// that only grows): an online backup's copy gives the device up while it grows, as while
    /// the log does ([`backup`], "Sharing the device"). None by default: the copy then yields
    /// to the store's log writes only.
    fn reads_made(&self) -> u64 {
        0
    }

    /// Whether the checkpoint thread runs at nice 10: yes unless writers wait for its
    /// progress step by step (the NB-tree's deamortized merger), where a lower priority than
    /// the writers' makes each of those waits as long as the scheduler keeps it off the CPU.
    fn checkpoint_at_low_priority(&self) -> bool {
        true
    }

    /// For an online backup ([`backup`]): starts (`on`) or ends noting the page runs (first
    /// page, pages) the engine writes to the page file without logging their bytes (made
    /// durable before the record naming them instead), and returns those noted since it
    /// started when it ends. Such a run may be written after the backup copied its pages and be
    /// named by a record the backup's log holds, so the backup copies it again. An engine that
    /// cannot tell refuses online backups (the default).
    fn note_unlogged_runs(&self, on: bool) -> Result<Vec<(u64, u64)>> {
        let _ = on;
        Err(crate::Error::InvalidArgument {
            what: "this engine has no online backup".into(),
            limit: 0,
        })
    }
}

/// How a durable store runs (the durability part of [`crate::DbOptions`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// When writes become durable.
    pub(crate) sync: SyncMode,
    /// Checkpoint once the engine has logged this many bytes since the last one.
    pub(crate) checkpoint_bytes: u64,
    /// Fuzzy checkpoints, or quiet ones only.
    pub(crate) fuzzy_checkpoints: bool,
    /// Checkpoints and `Batch`'s boundary fsyncs on background threads, or in the writer that
    /// triggers them (deterministic: what the power-loss simulation needs).
    pub(crate) background: bool,
}

/// What a store shares with its background threads.
pub(crate) struct Core<E> {
    pub(crate) engine: E,
    pub(crate) wal: Arc<Wal>,
    pub(crate) poison: Poison,
    checkpoints: AtomicU64,
    /// A checkpoint is requested or running.
    checkpointing: AtomicBool,
    /// One checkpoint at a time (the checkpoint thread's, `checkpoint()`'s, `close()`'s).
    checkpoint_lock: Mutex<()>,
    /// The LSN the last durable checkpoint recovers from.
    durable_checkpoint: AtomicU64,
    fuzzy: bool,
}

/// An engine over the durability layer: the store's files, log, threads and cadence.
pub(crate) struct Durable<E: Engine> {
    core: Arc<Core<E>>,
    options: Options,
    /// The lock on the directory's lock file, held for as long as the store is open.
    _lock: Option<Box<dyn LockGuard>>,
    closed: AtomicBool,
    cadence: SyncCadence,
    checkpointer: Arc<Trigger>,
    checkpoint_thread: Mutex<Option<JoinHandle<()>>>,
}

impl<E: Engine> Durable<E> {
    /// The engine.
    #[inline]
    pub(crate) fn engine(&self) -> &E {
        &self.core.engine
    }

    /// [`crate::Error::Poisoned`] once the store is poisoned.
    #[inline]
    pub(crate) fn check_open(&self) -> Result<()> {
        self.core.poison.check()
    }

    /// The poisoned state.
    #[inline]
    pub(crate) fn poison(&self) -> &Poison {
        &self.core.poison
    }

    /// Checkpoints since open.
    pub(crate) fn checkpoints(&self) -> u64 {
        self.core.checkpoints.load(Ordering::Relaxed)
    }

    /// The durable points the cadence asked for ([`SyncCadence::due_count`]).
    pub(crate) fn syncs_due(&self) -> u64 {
        self.cadence.due_count()
    }

    /// Durability and checkpoint duties after a write of `ops` operations whose last log record
    /// is `lsn`: the cadence's sync, and a checkpoint once the engine has logged
    /// `checkpoint_bytes` since the last or its frees call for one ([`Engine::frees_due`]) (the
    /// checkpoint thread's, or this writer's without background threads).
    #[inline]
    pub(crate) fn after_write(&self, ops: u64, lsn: u64) -> Result<()> {
        let wal = &self.core.wal;
        let r = self.cadence.written(ops, |due| match due {
            Due::Write => wal.sync_to(lsn),
            Due::Boundary => wal.sync(),
        });
        self.core.poison.guard(r)?;
        if (self.core.engine.logged_bytes() > self.options.checkpoint_bytes
            || self.core.engine.frees_due())
            && !self.core.checkpointing.swap(true, Ordering::AcqRel)
        {
            if self.options.background {
                self.checkpointer.request();
            } else {
                // Without waiting: an online backup holds checkpoints off for its whole copy.
                let r = self.core.try_checkpoint_now();
                self.core.checkpointing.store(false, Ordering::Release);
                self.core.poison.guard(r)?;
            }
        }
        Ok(())
    }

    /// Makes every write so far durable.
    pub(crate) fn sync(&self) -> Result<()> {
        self.check_open()?;
        let r = self.core.wal.sync();
        self.cadence.synced();
        self.core.poison.guard(r)
    }

    /// A fuzzy checkpoint in the caller ([`Core::checkpoint_now`]).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        self.check_open()?;
        let r = self.core.checkpoint_now();
        self.core.poison.guard(r)
    }

    /// Stops the threads, then a quiet checkpoint. A poisoned store closes without one and
    /// returns [`crate::Error::Poisoned`].
    pub(crate) fn close(&self) -> Result<()> {
        self.stop_threads();
        let r = self.close_inner();
        self.closed.store(true, Ordering::Release);
        r
    }

    fn close_inner(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        // A poisoned store cannot checkpoint; reopening recovers what reached disk.
        self.check_open()?;
        self.core.checkpoint_quiet()
    }

    /// Stops the checkpoint thread and the log sync thread (after the checkpoint or sync each
    /// may be running).
    fn stop_threads(&self) {
        self.checkpointer.stop();
        if let Some(t) = self.checkpoint_thread.lock().take() {
            let _ = t.join();
        }
        self.cadence.stop();
    }

    /// Ends the store the way a crash would: no checkpoint, no flush of the log's buffer or of
    /// dirty pages. For tests of recovery.
    pub(crate) fn simulate_crash(&self) {
        self.stop_threads();
        self.closed.store(true, Ordering::Release);
    }
}

impl<E: Engine> Drop for Durable<E> {
    fn drop(&mut self) {
        self.stop_threads();
        let _ = self.close_inner();
    }
}
