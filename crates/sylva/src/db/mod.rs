//! `Db`: the durable database — the slotted-page B+tree of [`crate::btree`] paged through the
//! [`crate::buffer`] pool onto a [`crate::io::PageFile`], with a [`crate::wal`] write-ahead log
//! and recovery. The design follows the vmcache integration of "B-Trees Are Back" (section 7) and
//! the persistence modes of the PA-Tree paper (section III.C).
//!
//! ```
//! use std::ops::Bound;
//! use sylva::{Db, DbOptions, SyncMode, WriteBatch};
//!
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("db");
//! let db = Db::open(&dir, DbOptions { sync: SyncMode::Always, ..DbOptions::default() })?;
//! db.put(b"apple", b"red")?;
//! db.write(WriteBatch::new().put(b"banana", b"yellow").delete(b"apple"))?;
//! assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
//! let keys: Vec<Vec<u8>> = db
//!     .range(Bound::Included(&b"a"[..]), Bound::Unbounded)
//!     .rev()
//!     .map(|r| r.map(|(k, _)| k))
//!     .collect::<sylva::Result<_>>()?;
//! assert_eq!(keys, vec![b"banana".to_vec()]);
//! db.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A directory holds four files: `data.sylva` (the page file), `wal.log` and `wal.2.log` (the
//! log's two segments) and `LOCK` (held with `flock` while a process has the database open).
//! Every file operation goes through [`crate::io::Vfs`] and [`crate::io::Io`], so the power-loss
//! simulation ([`crate::io::SimFs`]) can stand under all of it. A new database is built under a
//! temporary name and renamed into place, each name made durable by its directory's fsync
//! ([`Db::open_in`]): a crash while creating leaves a directory that opens.
//!
//! **Node store.** The tree's logic is unchanged; only its node store differs: [`store`] maps
//! the tree's latches onto the pool's page-state words (optimistic reads, exclusive writes; a
//! read of an evicted page loads it) and turns the tree's change notifications into log records.
//!
//! **Logging (physiological, redo only).** Every change to a page is logged while its latch is
//! held, and the record's LSN is stored in the page header:
//! - a leaf put or delete is a small record naming the page and the key (and value);
//! - everything else that changes pages (split, merge, root growth, the deferred splits of
//!   [`crate::btree`] — records moved between neighbouring leaves, two leaves split into three —,
//!   layout conversion, the lazy sort of a fingerprinting leaf) logs after-images of every page
//!   it changed, and the ids of pages it freed; except that a split's or a deferred split's
//!   parent is logged as its edit (separators removed and inserted, [`crate::btree::ParentEdit`],
//!   replayed by the tree's own code): a parent's image was a third of such a record;
//! - the first change to a page after a checkpoint logs its full image instead of the small
//!   record ("full-page writes"), so recovery never depends on a page's on-disk bytes written
//!   after the checkpoint: a torn page write is harmless.
//!
//! The adaptive layout's operation counter is a hint: changing it alone is not logged and does
//! not dirty the page.
//!
//! **Recovery** reads the checkpoint (tree root, record count, the LSN the log starts at) from
//! the page file's meta page, then redoes every intact log record from there: an image is
//! installed if the page's LSN is older; a put or delete is applied to its page if the page's
//! LSN is older. Redo is therefore idempotent. The log's torn tail is cut and reported. Recovery
//! ends with a quiet checkpoint.
//!
//! **Checkpoints are fuzzy** (ARIES' fuzzy checkpoints, with PostgreSQL's full-page writes):
//! writers are held back (a writers' lock) only while the checkpoint rotates the log to its
//! other segment and notes the next LSN, the record count and the free list; then every dirty
//! page is written while writers go on, and the meta page records what was noted. Recovery
//! redoes the log from the noted LSN. That is correct whatever state the pages were written in,
//! because every page changed after that LSN logged its full image first: redo installs the
//! image and replays the page's later records, so the pages' disk versions after the LSN never
//! matter and the record count follows from the records. Before, a checkpoint also held writers
//! back while it flushed every page dirtied during its first pass, which under updates spread
//! over the whole tree was most of the tree again: stalls of seconds (`docs/results/db.md`).
//! A background thread runs them when the log passes `checkpoint_bytes` (the writer that notices
//! only wakes it); `checkpoint()` runs one in the caller. That thread runs at a lower CPU
//! priority (nice 10): a checkpoint is mostly waiting on writes, and on a machine with as many
//! busy threads as cores its bursts of CPU (sealing pages, the kernel's side of the writes)
//! would otherwise come out of the foreground threads' time; the checkpoint a 10M-record load
//! leaves running took a quarter of a two-thread lookup run's throughput on two cores
//! (`docs/results/db.md`). The log's old segment is dropped at
//! the next rotation, once a durable checkpoint no longer needs it. At open (after redo) and at
//! `close()` the checkpoint is *quiet*: writers are held back while the last dirty pages are
//! written, and both log segments are emptied.
//!
//! **Write batches** take the writers' lock exclusively and log the whole batch first as one
//! record, then apply it; if a crash cuts the batch's page records short, recovery applies the
//! batch again from that record (every op is idempotent and nothing else was logged after it),
//! logging it as a live batch is logged, so a page it changes and an eviction writes back is
//! explained by a record if recovery itself is cut short.
//!
//! **Durability.** `SyncMode::Always`: a write is durable before it returns (group commit: the
//! fsync is shared by concurrent writers and happens after the leaf latch is released);
//! `Batch { ops, interval }`: durable at the next batch boundary (after `ops` writes or once
//! `interval` has passed) or `sync()`; the boundary's fsync runs on a log sync thread, so the
//! writer that reaches it does not wait for it ([`log_sync_loop`]); `Never`: at `sync()`,
//! `checkpoint()` or `close()`. With [`DbOptions::background`] off there are no threads: the
//! writer that reaches a batch boundary or the checkpoint threshold does the work itself.
//!
//! **Failure.** Any error inside a write other than bad input (a failed write or fsync, a
//! corrupt page) poisons the database: every later call returns [`Error::Poisoned`] until it is
//! reopened, and recovery decides what really reached disk.

mod background;
mod batch;
mod checkpoint;
mod create;
mod cursor;
mod kv;
pub(crate) mod log;
mod options;
mod recovery;
mod state;
mod store;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::btree::{self, BTree, CheckReport};
use crate::buffer::{BufferPool, PoolOptions};
use crate::error::{Error, Result};
use crate::io::{create_dir_all_durable, Io, LockGuard, OpenFile, OsFs, Vfs};
use crate::io::{Meta, PageFile, FIRST_DATA_PAGE};
use crate::kv::Limits;
use crate::wal::{SyncMode, Wal};
use store::PoolStore;

use background::{checkpoint_loop, log_sync_loop, Trigger};
use batch::BatchOp;
use create::create_files;
use state::State;

pub use batch::WriteBatch;
pub use cursor::Cursor;
pub use options::{DbOptions, OPTION_KEYS};

/// The page file in a database directory.
pub const DATA_FILE: &str = "data.sylva";
/// The write-ahead log in a database directory (its first segment).
pub const WAL_FILE: &str = "wal.log";
/// The write-ahead log's second segment (see [`crate::wal::Wal::rotate`]).
pub const WAL_FILE_2: &str = "wal.2.log";
/// The lock file in a database directory.
pub const LOCK_FILE: &str = "LOCK";
/// A page file being created: renamed to [`DATA_FILE`] once the new database is whole.
pub const NEW_DATA_FILE: &str = "data.sylva.new";

/// What `Db::stats` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DbStats {
    /// Live records.
    pub records: u64,
    /// Page size in bytes.
    pub page_size: usize,
    /// Pages in the file (including meta and free pages).
    pub file_pages: u64,
    /// Free pages in the file.
    pub free_pages: u64,
    /// Tree pages (inner and leaf, including the tree's metadata page).
    pub tree_pages: u64,
    /// Levels from the root to the leaves.
    pub height: u32,
    /// Record bytes (keys and values) over tree page bytes.
    pub fill_factor: f64,
    /// Page accesses that found the page in the pool.
    pub cache_hits: u64,
    /// Pages read from the file.
    pub cache_misses: u64,
    /// Pages written to the file.
    pub page_writes: u64,
    /// Pages resident in the pool now.
    pub resident_pages: u64,
    /// The pool's budget in pages.
    pub budget_pages: u64,
    /// Bytes in the log's files (both segments), buffered records included.
    pub wal_bytes: u64,
    /// Bytes appended to the log since open.
    pub wal_written: u64,
    /// Of `wal_written`, the records holding a leaf's full image because a put or delete was its
    /// first change since a checkpoint (full-page writes).
    pub wal_fpw_written: u64,
    /// Checkpoints since open.
    pub checkpoints: u64,
}

/// What recovery found when the database was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records redone.
    pub records_redone: u64,
    /// Bytes of torn or corrupt log tail cut off.
    pub cut_bytes: u64,
    /// File offset of an intact record beyond the cut. Recovery opens only when none of them
    /// says the cut records had been synced (so they were never acknowledged as durable: the OS
    /// wrote an unsynced flush back out of order before a power failure); otherwise it refuses
    /// with `Error::Corruption`.
    pub intact_after_cut: Option<u64>,
    /// A write batch whose page records were cut short was applied again from its log record.
    pub batch_reapplied: bool,
    /// What was wrong with the page file's older meta page (the checkpoint before the one
    /// recovered from), if anything: a torn write by a crash during a checkpoint, or damage.
    /// Harmless (the next checkpoint rewrites it); `sylva check` reports it.
    pub older_meta_damage: Option<String>,
}

/// A durable, ordered key-value database in a directory. Share it between threads by reference
/// (`Db` is `Sync`); every method may be called concurrently.
pub struct Db {
    core: Arc<Core>,
    options: DbOptions,
    /// Where the page file lives (for error messages).
    path: PathBuf,
    /// The lock on the directory's lock file, held for as long as the database is open.
    _lock: Option<Box<dyn LockGuard>>,
    closed: AtomicBool,
    recovery: RecoveryReport,
    /// Writes since the last sync (`SyncMode::Batch`), and when that sync was.
    unsynced: AtomicU64,
    last_sync: Mutex<Instant>,
    checkpointer: Arc<Trigger>,
    checkpoint_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// `SyncMode::Batch`'s log sync thread (`None` in the other modes).
    syncer: Option<Arc<Trigger>>,
    sync_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What a `Db` shares with its checkpoint thread.
struct Core {
    tree: BTree<PoolStore>,
    layout: btree::Layout,
    poisoned: AtomicBool,
    checkpoints: AtomicU64,
    /// A checkpoint is requested or running.
    checkpointing: AtomicBool,
    /// One checkpoint at a time (the checkpoint thread's, `checkpoint()`'s, `close()`'s).
    checkpoint_lock: Mutex<()>,
    /// The LSN the last durable checkpoint recovers from.
    durable_checkpoint: AtomicU64,
    /// [`DbOptions::fuzzy_checkpoints`].
    fuzzy: bool,
}

impl Db {
    /// Opens the database in `dir`, creating the directory and an empty database if there is
    /// none. Errors: [`Error::Locked`] if another process (or another `Db` in this one) has it
    /// open, [`Error::NotSylva`] for a directory holding other files or a foreign `data.sylva`,
    /// [`Error::UnsupportedVersion`], and checksum or corruption errors from recovery.
    pub fn open(dir: impl AsRef<Path>, options: DbOptions) -> Result<Db> {
        Self::open_in(&OsFs, dir.as_ref(), options)
    }

    /// [`Db::open`] on the file system `vfs` (a simulated one in crash tests).
    ///
    /// A new database is built whole under a temporary name ([`NEW_DATA_FILE`], the log's
    /// segments beside it), made durable, and only then renamed to [`DATA_FILE`]; the rename
    /// is made durable before anything is written to it. So after a crash the directory holds
    /// either a database or an unfinished creation, which holds nothing acknowledged and is
    /// started over. Every name the database needs (the directory itself in its parent, the
    /// log's segments) is durable before `open` returns.
    pub fn open_in(vfs: &dyn Vfs, dir: &Path, options: DbOptions) -> Result<Db> {
        create_dir_all_durable(vfs, dir)?;
        let data = dir.join(DATA_FILE);
        let exists = vfs.exists(&data)?;
        if !exists {
            for name in vfs.list(dir)? {
                if ![LOCK_FILE, WAL_FILE, WAL_FILE_2, NEW_DATA_FILE]
                    .iter()
                    .any(|n| name == *n)
                {
                    return Err(Error::NotSylva {
                        path: dir.to_path_buf(),
                        expected: "database directory",
                        detail: format!(
                            "it holds {} but no {DATA_FILE}; refusing to create a database among other files",
                            name.to_string_lossy()
                        ),
                    });
                }
            }
        }
        let lock = vfs.lock(&dir.join(LOCK_FILE), dir)?;
        if !exists {
            create_files(vfs, dir, &options)?;
        }
        let opened = vfs.open(
            &data,
            OpenFile {
                create: false,
                direct: options.direct_io,
            },
        )?;
        let (file, meta) = PageFile::open_io(opened.io, opened.direct)?;
        // A version 1 directory has no second segment: it is created here.
        let segment = |name: &str| -> Result<Box<dyn Io>> {
            let how = OpenFile {
                create: true,
                direct: false,
            };
            Ok(vfs.open(&dir.join(name), how)?.io)
        };
        let wal_io = [segment(WAL_FILE)?, segment(WAL_FILE_2)?];
        // Every name the database needs made durable before anything is acknowledged, whoever
        // created it: a process that died (`kill -9`) between a creation and its directory's
        // fsync leaves a name that exists but would not survive a power loss.
        // (The directory's own name and its ancestors': `create_dir_all_durable` above.)
        vfs.sync_dir(dir)?;
        Self::start(file, Some(meta), wal_io, options, Some(lock), data)
    }

    /// Opens a database over the given page-file and log I/O (the log's two segments), without
    /// a directory or lock file (for fault-injection tests). An empty page file is initialised.
    pub fn open_io(
        page_io: Box<dyn Io>,
        wal_io: [Box<dyn Io>; 2],
        options: DbOptions,
    ) -> Result<Db> {
        let path = page_io.path().to_path_buf();
        let (file, meta) = if page_io.file_len()? == 0 {
            (
                PageFile::create_io(page_io, options.page_size, false)?,
                None,
            )
        } else {
            let (f, m) = PageFile::open_io(page_io, false)?;
            (f, Some(m))
        };
        Self::start(file, meta, wal_io, options, None, path)
    }

    fn start(
        file: PageFile,
        meta: Option<Meta>,
        wal_io: [Box<dyn Io>; 2],
        options: DbOptions,
        lock: Option<Box<dyn LockGuard>>,
        path: PathBuf,
    ) -> Result<Db> {
        // A process that died (`kill -9`) may have left page-file writes the OS holds but has
        // not written: the meta page this open reads among them. Durable first, before anything
        // acknowledged is built on them (the log's segments are synced at open for the same
        // reason).
        file.sync()?;
        let state = match &meta {
            Some(m) => State::decode(&path, &m.user)?,
            None => None,
        };
        let checkpoint_lsn = state.map_or(1, |s| s.checkpoint_lsn);
        let file_meta_damage = file.meta_damage_at_open().map(str::to_owned);
        let (wal, recovered) = Wal::open_segments(wal_io, checkpoint_lsn)?;
        let wal = Arc::new(wal);
        let pool = BufferPool::new(
            file,
            Some(wal.clone()),
            PoolOptions {
                budget_bytes: options.cache_bytes,
                ..PoolOptions::default()
            },
        )?;
        let store = PoolStore::new(pool, wal, checkpoint_lsn);
        let layout = state.map_or(options.layout, |s| s.layout);
        let tree_options = btree::Options {
            layout,
            page_size: store.page_size_bytes(),
            redistribute: options.redistribute,
        };
        let tree = match state {
            None => BTree::with_store(store, tree_options)?,
            Some(s) => BTree::open_store(store, tree_options, s.meta_page, s.records)?,
        };
        let mut db = Db {
            core: Arc::new(Core {
                tree,
                layout,
                poisoned: AtomicBool::new(false),
                checkpoints: AtomicU64::new(0),
                checkpointing: AtomicBool::new(false),
                checkpoint_lock: Mutex::new(()),
                durable_checkpoint: AtomicU64::new(checkpoint_lsn),
                fuzzy: options.fuzzy_checkpoints,
            }),
            options: DbOptions { layout, ..options },
            path,
            _lock: lock,
            closed: AtomicBool::new(false),
            recovery: RecoveryReport {
                older_meta_damage: file_meta_damage,
                cut_bytes: recovered.cut_bytes,
                intact_after_cut: recovered.intact_after_cut,
                ..RecoveryReport::default()
            },
            unsynced: AtomicU64::new(0),
            last_sync: Mutex::new(Instant::now()),
            checkpointer: Arc::default(),
            checkpoint_thread: Mutex::new(None),
            syncer: (options.background && matches!(options.sync, SyncMode::Batch { .. }))
                .then(Arc::default),
            sync_thread: Mutex::new(None),
        };
        if state.is_some() {
            db.redo(checkpoint_lsn)?;
        }
        if state.is_none() || db.recovery.records_redone > 0 || recovered.cut_bytes > 0 {
            db.core.checkpoint_quiet()?;
        }
        db.core.tree.store.logging.store(true, Ordering::Release);
        if !options.background {
            return Ok(db);
        }
        let (core, checkpointer) = (db.core.clone(), db.checkpointer.clone());
        let thread = std::thread::Builder::new()
            .name("sylva-checkpoint".into())
            .spawn(move || checkpoint_loop(core, checkpointer))
            .map_err(|e| Error::io_at(&db.path, e))?;
        *db.checkpoint_thread.lock() = Some(thread);
        if let Some(syncer) = &db.syncer {
            let (core, syncer) = (db.core.clone(), syncer.clone());
            let thread = std::thread::Builder::new()
                .name("sylva-log-sync".into())
                .spawn(move || log_sync_loop(core, syncer))
                .map_err(|e| Error::io_at(&db.path, e))?;
            *db.sync_thread.lock() = Some(thread);
        }
        Ok(db)
    }

    /// What recovery did when this database was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The options in force (an existing database keeps its layout and page size).
    pub fn options(&self) -> DbOptions {
        self.options
    }

    /// Key and value size limits.
    pub fn limits(&self) -> Limits {
        self.core.tree.limits()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.core.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Poisons the database on any failure of a write other than bad input.
    fn guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !matches!(e, Error::InvalidArgument { .. }) {
                self.core.poisoned.store(true, Ordering::Release);
            }
        }
        r
    }

    /// Poisons the database when a read fails with an I/O error: a read may have written back
    /// a dirty page to make room, and a failed write must not be retried silently.
    pub(crate) fn guard_read<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Io { .. } | Error::Poisoned) = &r {
            self.core.poisoned.store(true, Ordering::Release);
        }
        r
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Looks `key` up; on a hit copies the value into `out` and returns `true`.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.check_open()?;
        let r = self.core.tree.get_into(key, out);
        self.guard_read(r)
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_open()?;
        let r = self.core.tree.put_logged(key, value);
        let lsn = self.guard(r)?;
        self.after_write(1, lsn)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_open()?;
        let r = self.core.tree.delete_logged(key);
        let (found, lsn) = self.guard(r)?;
        if found {
            self.after_write(1, lsn)?;
        }
        Ok(found)
    }

    /// Applies `batch` atomically (all or nothing across a crash), durable per the sync mode.
    /// A batch holds other writers back while it applies.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.check_open()?;
        let limits = self.core.tree.limits();
        for op in &batch.ops {
            match op {
                BatchOp::Put(k, v) => {
                    limits.check_key(k)?;
                    limits.check_value(v)?;
                }
                BatchOp::Delete(k) => limits.check_key(k)?,
            }
        }
        if batch.ops.is_empty() {
            return Ok(());
        }
        let store = &self.core.tree.store;
        let r = (|| {
            let _gate = store.exclusive();
            let mut buf = Vec::new();
            log::batch(
                &mut buf,
                batch.ops.iter().map(|op| match op {
                    BatchOp::Put(k, v) => (k.as_slice(), Some(v.as_slice())),
                    BatchOp::Delete(k) => (k.as_slice(), None),
                }),
            );
            store.append_record(&buf)?;
            for op in &batch.ops {
                match op {
                    BatchOp::Put(k, v) => self.core.tree.put(k, v)?,
                    BatchOp::Delete(k) => drop(self.core.tree.delete(k)?),
                }
            }
            log::batch_end(&mut buf);
            store.append_record(&buf)
        })();
        let lsn = self.guard(r)?;
        self.after_write(batch.ops.len() as u64, lsn)
    }

    /// Durability and checkpoint duties after a write of `ops` operations whose last log record
    /// is `lsn`.
    fn after_write(&self, ops: u64, lsn: u64) -> Result<()> {
        let wal = &self.core.tree.store.wal;
        let r = match self.options.sync {
            SyncMode::Always => wal.sync_to(lsn),
            SyncMode::Batch {
                ops: batch_ops,
                interval,
            } => {
                let n = self.unsynced.fetch_add(ops, Ordering::Relaxed) + ops;
                if n >= batch_ops || self.last_sync.lock().elapsed() >= interval {
                    self.unsynced.store(0, Ordering::Relaxed);
                    *self.last_sync.lock() = Instant::now();
                    match &self.syncer {
                        Some(syncer) if syncer.request() => Ok(()),
                        _ => wal.sync(),
                    }
                } else {
                    Ok(())
                }
            }
            SyncMode::Never => Ok(()),
        };
        self.guard(r)?;
        if self.core.tree.store.log_bytes.load(Ordering::Relaxed) > self.options.checkpoint_bytes
            && !self.core.checkpointing.swap(true, Ordering::AcqRel)
        {
            if self.options.background {
                self.checkpointer.request();
            } else {
                let r = self.core.checkpoint_now();
                self.core.checkpointing.store(false, Ordering::Release);
                self.guard(r)?;
            }
        }
        Ok(())
    }

    /// An iterator over the keys in `(lower, upper)`, in ascending order; `.rev()` on the
    /// result iterates descending.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Cursor<'_> {
        Cursor::new(self, lower, upper)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.check_open()?;
        let r = self.core.tree.store.wal.sync();
        self.unsynced.store(0, Ordering::Relaxed);
        *self.last_sync.lock() = Instant::now();
        self.guard(r)
    }

    /// Writes every dirty page and records a checkpoint, while writers go on (a fuzzy
    /// checkpoint, module docs); afterwards recovery redoes only the log appended since it began.
    pub fn checkpoint(&self) -> Result<()> {
        self.check_open()?;
        let r = self.core.checkpoint_now();
        self.guard(r)
    }

    /// Counts and cache figures, with the fill factor (which walks every leaf).
    pub fn stats(&self) -> DbStats {
        let height = self.core.tree.height().unwrap_or(0);
        let record_bytes = self.record_bytes();
        let mut s = self.quick_stats();
        s.height = height;
        s.fill_factor = record_bytes as f64 / (s.tree_pages.max(1) * s.page_size as u64) as f64;
        s
    }

    /// Counts and cache figures without the height and fill factor (no page reads).
    fn quick_stats(&self) -> DbStats {
        let store = &self.core.tree.store;
        let pool = store.pool.stats();
        let file = store.pool.file();
        let tree = self.core.tree.stats();
        let tree_pages = tree
            .counters
            .iter()
            .find(|(n, _)| *n == "pages")
            .map_or(0, |c| c.1);
        DbStats {
            records: tree.records,
            page_size: file.page_size(),
            file_pages: file.page_count(),
            free_pages: file.free_pages(),
            tree_pages,
            height: 0,
            fill_factor: 0.0,
            cache_hits: pool.hits,
            cache_misses: pool.misses,
            page_writes: pool.writebacks,
            resident_pages: pool.resident,
            budget_pages: pool.budget_pages,
            wal_bytes: store.wal.bytes(),
            wal_written: store.log_written.load(Ordering::Relaxed),
            wal_fpw_written: store.log_fpw.load(Ordering::Relaxed),
            checkpoints: self.core.checkpoints.load(Ordering::Relaxed),
        }
    }

    /// Key and value bytes of all records (a full walk; for `stats`).
    fn record_bytes(&self) -> u64 {
        let mut bytes = 0u64;
        let _ = self.core.tree.walk(&[], None, usize::MAX, &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
            true
        });
        bytes
    }

    /// Checkpoints, then verifies the checksum of every page in use in the file and the tree's
    /// structure. Run it on a quiet database: concurrent writers may cause spurious reports.
    pub fn check(&self) -> Result<CheckReport> {
        self.checkpoint()?;
        let file = self.core.tree.store.pool.file();
        let mut frame = file.buffer(1);
        for id in FIRST_DATA_PAGE..file.page_count() {
            if file.is_free(id) {
                continue;
            }
            file.read_frame(id, &mut frame)?;
        }
        self.core.tree.check()
    }

    /// Checkpoints and closes. Dropping a `Db` does the same but cannot report errors. A
    /// poisoned database closes without a checkpoint and returns [`Error::Poisoned`].
    pub fn close(self) -> Result<()> {
        self.stop_checkpointer();
        let r = self.close_inner();
        self.closed.store(true, Ordering::Release);
        r
    }

    fn close_inner(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        // A poisoned database cannot checkpoint; reopening recovers what reached disk.
        self.check_open()?;
        self.core.checkpoint_quiet()
    }

    /// Stops the checkpoint thread and the log sync thread (after the checkpoint or sync each
    /// may be running).
    fn stop_checkpointer(&self) {
        self.checkpointer.stop();
        if let Some(t) = self.checkpoint_thread.lock().take() {
            let _ = t.join();
        }
        if let Some(syncer) = &self.syncer {
            syncer.stop();
        }
        if let Some(t) = self.sync_thread.lock().take() {
            let _ = t.join();
        }
    }

    /// Drops the database the way a crash would: no checkpoint, no flush of the log's buffer or
    /// of dirty pages. For tests of recovery.
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.stop_checkpointer();
        self.closed.store(true, Ordering::Release);
    }

    /// Where the page file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop_checkpointer();
        let _ = self.close_inner();
    }
}

#[cfg(test)]
mod tests;
