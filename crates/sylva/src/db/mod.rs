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
//! `Db` is the first engine of the durability layer, [`crate::durable`]: the directory and its
//! lock, opening and recovery's order, the checkpoint and log sync threads, the `SyncMode`
//! cadence and the poisoned state are its, and this module supplies what is the tree's (the
//! [`crate::durable::Engine`] of [`engine`]): redo of its log records, the pages a checkpoint
//! writes, the state the meta page keeps. A directory holds four files: `data.sylva` (the page
//! file), `wal.log` and `wal.2.log` (the log's two segments) and `LOCK` (held with `flock` while
//! a process has the database open). Every file operation goes through [`crate::io::Vfs`] and
//! [`crate::io::Io`], so the power-loss simulation ([`crate::io::SimFs`]) can stand under all of
//! it. A new database is built under a temporary name and renamed into place, each name made
//! durable by its directory's fsync ([`Db::open_in`]): a crash while creating leaves a directory
//! that opens.
//!
//! **Values of any size** ([`overflow`]): a value too long for a leaf is stored out of line in
//! a run of contiguous pages, the leaf keeping its key and a 17-byte reference; overwrites and
//! deletes free the run with a deferred free, in the same log record as the leaf change.
//!
//! **Long keys** ([`buckets`], state version 6): keys up to 16 KiB at every page size; one longer
//! than the tree takes (776 bytes with 4 KiB pages) lives in a bucket, a record under its first
//! 776 bytes whose value, stored as any value, holds every key sharing them with its value.
//!
//! **Online backup** ([`Db::backup_to`], [`crate::durable::backup`]): the page file copied while
//! writers go on and checkpoints wait, then the log from the last checkpoint; the copy's
//! recovery replays it. The tree's part is noting the runs it writes without logging their bytes.
//!
//! **Space** ([`Db::compact`], [`compact`]): the free pages at the page file's end given back to
//! the file system while writers go on; pages are not moved, so holes stay (and are reused).
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
//! LSN is older. Redo is therefore idempotent. Puts and deletes, which touch one leaf each, are
//! applied in groups of up to 32 MiB sorted by page (each page's in log order), so each leaf is
//! searched while it is in the CPU's caches (`recovery.rs`). The log's torn tail is cut and
//! reported. Recovery ends with a quiet checkpoint.
//!
//! **Checkpoints are fuzzy** (ARIES' fuzzy checkpoints, with PostgreSQL's full-page writes):
//! writers are held back (a writers' lock) only while the checkpoint rotates the log to its
//! other segment and notes the next LSN, the record count and the free space; then every dirty
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
//! writer that reaches it does not wait for it ([`crate::SyncCadence`]); `Never`: at `sync()`,
//! `checkpoint()` or `close()`. With [`DbOptions::background`] off there are no threads: the
//! writer that reaches a batch boundary or the checkpoint threshold does the work itself, and a
//! checkpoint writes its dirty pages one run at a time; with them, [`FLUSH_WRITERS`] runs are in
//! flight at once.
//!
//! **Failure.** Any error inside a write other than bad input (a failed write or fsync, a
//! corrupt page) poisons the database: every later call returns [`Error::Poisoned`] until it is
//! reopened, and recovery decides what really reached disk.
//!
//! [`Error::Poisoned`]: crate::Error::Poisoned

mod backup;
mod batch;
pub mod buckets;
mod check;
mod compact;
mod cursor;
pub mod dump;
mod engine;
mod kv;
pub(crate) mod log;
mod mappings;
mod options;
pub mod overflow;
mod pa;
mod recovery;
pub(crate) mod runcache;
mod state;
mod store;

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::btree::{self, BTree};
use crate::buffer::{BufferPool, PoolOptions};
use crate::durable::{self, dir, Durable, RecoveryReport};
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::{Io, OsFs, Vfs};
use crate::kv::Limits;
use engine::PagedTree;
use runcache::RunCache;
pub use runcache::RunCacheStats;
use store::PoolStore;

use batch::BatchOp;
use buckets::Buckets;

pub use batch::WriteBatch;
pub use compact::CompactReport;
pub use cursor::Cursor;
pub use dump::{verify_dump, DumpReader, DumpWriter, LoadReport};
pub use options::{DbOptions, OPTION_KEYS};
pub use pa::{parse_probe, KeyValue, PaDb, PaOp, PaOptions, PaResult, PaSession, PA_OPTION_KEYS};

/// Writes a checkpoint's flush of the pool keeps in flight with background threads
/// ([`BufferPool::set_flush_writers`]), as the run cache's write-backs do.
const FLUSH_WRITERS: usize = 8;

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
    /// Values stored out of line (`db::overflow`; counted by [`Db::stats`]'s walk, 0 in
    /// quick stats).
    pub overflow_values: u64,
    /// Pages in out-of-line values' runs (as `overflow_values`; not in `tree_pages`).
    pub overflow_pages: u64,
    /// Bytes of out-of-line values (as `overflow_values`).
    pub overflow_bytes: u64,
    /// The page file's length in bytes (more than `file_pages` pages after a crash kept a
    /// compaction from truncating it; less while pages allocated at the end are not yet
    /// written).
    pub file_bytes: u64,
    /// Runs of consecutive free pages (free, or freed by a delete or overwrite and free after
    /// the next checkpoint), as `free_pages` counts them: how scattered the free space is.
    pub free_extents: u64,
    /// Pages in the longest such run.
    pub largest_free_extent: u64,
    /// Free pages at the end of the file: what [`Db::compact`] gives back to the file system.
    pub free_pages_at_end: u64,
    /// Pages holding the free space's own records (region bitmaps; not in `free_pages`).
    pub free_space_pages: u64,
    /// The run cache's counters (out-of-line values in memory, `db::runcache`).
    pub run_cache: RunCacheStats,
}

/// Out-of-line values counted by a walk.
#[derive(Debug, Default, Clone, Copy)]
struct RunCount {
    values: u64,
    pages: u64,
    bytes: u64,
}

/// A durable, ordered key-value database in a directory. Share it between threads by reference
/// (`Db` is `Sync`); every method may be called concurrently.
pub struct Db {
    durable: Durable<PagedTree>,
    options: DbOptions,
    /// Where the page file lives (for error messages).
    path: PathBuf,
    recovery: RecoveryReport,
    /// Where keys split between the tree and buckets (state version 6; [`buckets`]).
    buckets: Option<Buckets>,
    /// Held by every write of a key in a bucket, before the store's write gate ([`buckets`]).
    bucket_lock: parking_lot::Mutex<()>,
}

impl Db {
    /// Opens the database in `dir`, creating the directory and an empty database if there is
    /// none. Errors: [`Error::Locked`] if another process (or another `Db` in this one) has it
    /// open, [`Error::NotSylva`] for a directory holding other files or a foreign `data.sylva`,
    /// [`Error::UnsupportedVersion`], and checksum or corruption errors from recovery.
    ///
    /// [`Error::Locked`]: crate::Error::Locked
    /// [`Error::NotSylva`]: crate::Error::NotSylva
    /// [`Error::UnsupportedVersion`]: crate::Error::UnsupportedVersion
    pub fn open(dir: impl AsRef<Path>, options: DbOptions) -> Result<Db> {
        Self::open_in(&OsFs, dir.as_ref(), options)
    }

    /// [`Db::open`] on the file system `vfs` (a simulated one in crash tests).
    ///
    /// A new database is built whole under a temporary name ([`crate::NEW_DATA_FILE`], the
    /// log's segments beside it), made durable, and only then renamed to [`crate::DATA_FILE`];
    /// the rename is made durable before anything is written to it. So after a crash the
    /// directory holds either a database or an unfinished creation, which holds nothing
    /// acknowledged and is started over. Every name the database needs (the directory itself in
    /// its parent, the log's segments) is durable before `open` returns.
    pub fn open_in(vfs: &dyn Vfs, dir: &Path, options: DbOptions) -> Result<Db> {
        let create = dir::Create {
            page_size: options.page_size,
            direct_io: options.direct_io,
        };
        Self::start(dir::open_dir(vfs, dir, create)?, options)
    }

    /// Opens a database over the given page-file and log I/O (the log's two segments), without
    /// a directory or lock file (for fault-injection tests). An empty page file is initialised.
    pub fn open_io(
        page_io: Box<dyn Io>,
        wal_io: [Box<dyn Io>; 2],
        options: DbOptions,
    ) -> Result<Db> {
        Self::start(dir::open_io(page_io, wal_io, options.page_size)?, options)
    }

    /// Opens the tree over `files` through the durability layer (recovery included).
    fn start(files: dir::Files, options: DbOptions) -> Result<Db> {
        let path = files.path.clone();
        let durable_options = durable::Options {
            sync: options.sync,
            checkpoint_bytes: options.checkpoint_bytes,
            fuzzy_checkpoints: options.fuzzy_checkpoints,
            background: options.background,
        };
        let (durable, recovery) = Durable::start(
            files,
            durable_options,
            |file, wal, state, checkpoint_lsn| {
                wal.set_write_behind(options.log_write_behind);
                let file = Arc::new(file);
                let mut pool = BufferPool::new(
                    file.clone(),
                    Some(wal.clone()),
                    PoolOptions {
                        budget_bytes: options.cache_bytes,
                        ..PoolOptions::default()
                    },
                )?;
                // The pool holds the tree's nodes only (out-of-line values are read past it).
                pool.accept_only(&[PageKind::BTreeLeaf, PageKind::BTreeInner]);
                if options.background {
                    // A checkpoint's scattered leaves leave several writes at a time.
                    pool.set_flush_writers(FLUSH_WRITERS);
                }
                // A database this build creates tags its values (out-of-line values); one
                // created before keeps its untagged values.
                let tags = state.map_or(Some(overflow::Tags::RefShape), |s: state::State| s.tags);
                let runs = Arc::new(RunCache::new(
                    options.cache_bytes,
                    options.run_cache,
                    options.background,
                ));
                if runs.enabled() {
                    // Values whose records do not carry them are in the file before the log's
                    // syncs (`overflow`, "Writing").
                    wal.set_before_sync(Arc::new(runcache::UnloggedRuns {
                        runs: runs.clone(),
                        file: file.clone(),
                    }));
                    if options.background {
                        runs.start_write_behind(file);
                    }
                }
                let mut store = PoolStore::new(pool, wal, checkpoint_lsn, tags, runs);
                store.logged_value_max = options
                    .logged_value_max
                    .min(options::MAX_LOGGED_VALUE as usize);
                let layout = state.map_or(options.layout, |s: state::State| s.layout);
                let tree_options = btree::Options {
                    layout,
                    page_size: store.page_size_bytes(),
                    redistribute: options.redistribute,
                };
                let mut tree = match state {
                    None => BTree::with_store(store, tree_options)?,
                    Some(s) => BTree::open_store(store, tree_options, s.meta_page, s.records)?,
                };
                // A database this build creates takes long keys; one created before keeps its
                // limits (`btree::limits`).
                let long_keys = state.is_none_or(|s| s.long_keys);
                if long_keys {
                    tree.use_long_keys();
                }
                // A database this build creates keeps longer keys in buckets.
                let buckets = (long_keys && state.is_none_or(|s| s.buckets))
                    .then(|| Buckets::for_tree(tree.limits().max_key));
                Ok(PagedTree {
                    tree,
                    layout,
                    long_keys,
                    buckets,
                    pending_batch: None,
                    leaf_redo: recovery::LeafRedo::default(),
                })
            },
        )?;
        let layout = durable.engine().layout;
        let buckets = durable.engine().buckets;
        Ok(Db {
            durable,
            options: DbOptions { layout, ..options },
            path,
            recovery,
            buckets,
            bucket_lock: parking_lot::Mutex::new(()),
        })
    }

    /// The tree.
    #[inline]
    pub(crate) fn tree(&self) -> &BTree<PoolStore> {
        &self.durable.engine().tree
    }

    /// What recovery did when this database was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The options in force (an existing database keeps its layout and page size).
    pub fn options(&self) -> DbOptions {
        self.options
    }

    /// Key and value size limits: values up to 4 GiB − 1 (stored out of line past what fits a
    /// leaf, `db::overflow`); in a database created before out-of-line values, what fits a leaf.
    /// Keys up to [`buckets::MAX_KEY_LEN`] (16 KiB; state version 6), or what the tree takes in
    /// a database created before.
    pub fn limits(&self) -> Limits {
        let mut l = self.tree().limits();
        if self.tagged() {
            l.max_value = overflow::MAX_VALUE_LEN;
        }
        if self.buckets.is_some() {
            l.max_key = buckets::MAX_KEY_LEN;
        }
        l
    }

    /// The buckets of `key`'s database if `key` lives in one ([`buckets`]).
    #[inline]
    fn bucket_of(&self, key: &[u8]) -> Option<Buckets> {
        self.buckets.filter(|b| b.holds(key))
    }

    /// Where keys split between the tree and buckets, if they do.
    #[inline]
    pub(crate) fn buckets(&self) -> Option<Buckets> {
        self.buckets
    }

    /// Whether values are tagged and may be out of line ([`overflow`]).
    #[inline]
    fn tagged(&self) -> bool {
        self.tree().store.escaped
    }

    /// How this database's stored values are told apart ([`overflow::Tags`]).
    #[inline]
    pub(crate) fn tags(&self) -> overflow::Tags {
        self.tree().store.tags
    }

    #[inline]
    pub(crate) fn check_open(&self) -> Result<()> {
        self.durable.check_open()
    }

    /// Poisons the database on any failure of a write other than bad input.
    #[inline]
    fn guard<T>(&self, r: Result<T>) -> Result<T> {
        self.durable.poison().guard(r)
    }

    /// Poisons the database when a read fails with an I/O error ([`durable::poison`]).
    #[inline]
    pub(crate) fn guard_read<T>(&self, r: Result<T>) -> Result<T> {
        self.durable.poison().guard_read(r)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Looks `key` up; on a hit copies the value into `out` and returns `true`.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.check_open()?;
        if let Some(b) = self.bucket_of(key) {
            let r = buckets::get(self.tree(), b, key, out);
            return self.guard_read(r);
        }
        let r = self.tree().get_into(key, out);
        let found = self.guard_read(r)?;
        if !found || !self.tagged() || !overflow::is_tagged(out, self.tags()) {
            return Ok(found);
        }
        let r = self.resolve(key, out);
        self.guard_read(r)
    }

    /// Turns the stored value of `key` in `out` into the value ([`overflow::resolve`]).
    fn resolve(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        overflow::resolve(self.tree(), key, out)
    }

    /// The value of a record a scan read as `stored`: itself, or resolved into `buf`; `None`
    /// if the key was deleted meanwhile.
    pub(crate) fn scan_value<'a>(
        &self,
        key: &[u8],
        stored: &'a [u8],
        buf: &'a mut Vec<u8>,
    ) -> Result<Option<&'a [u8]>> {
        if !self.tagged() || !overflow::is_tagged(stored, self.tags()) {
            return Ok(Some(stored));
        }
        buf.clear();
        buf.extend_from_slice(stored);
        Ok(self.resolve(key, buf)?.then_some(&buf[..]))
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_open()?;
        if let Some(b) = self.bucket_of(key) {
            let r = {
                let _lock = self.bucket_lock.lock();
                buckets::put(self.tree(), b, key, value)
            };
            let lsn = self.guard(r)?;
            return self.after_write(1, lsn);
        }
        let r = overflow::put(self.tree(), key, value);
        let lsn = self.guard(r)?;
        self.after_write(1, lsn)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_open()?;
        let r = match self.bucket_of(key) {
            Some(b) => {
                let _lock = self.bucket_lock.lock();
                buckets::delete(self.tree(), b, key)
            }
            None => self.tree().delete_logged(key),
        };
        let (found, lsn) = self.guard(r)?;
        if found {
            self.after_write(1, lsn)?;
        }
        Ok(found)
    }

    /// Applies `batch` atomically (all or nothing across a crash), durable per the sync mode.
    /// A batch holds other writers back while it applies. The whole batch is logged as one
    /// record first, so its keys and values together are limited to the log's record size
    /// (64 MiB): a longer batch is refused with [`Error::InvalidArgument`] before anything is
    /// applied (put values of more than that on their own).
    ///
    /// [`Error::InvalidArgument`]: crate::Error::InvalidArgument
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.check_batch(batch)?;
        if batch.ops.is_empty() {
            return Ok(());
        }
        let store = &self.tree().store;
        let long = batch.ops.iter().any(|op| match op {
            BatchOp::Put(k, _) | BatchOp::Delete(k) => self.bucket_of(k).is_some(),
        });
        let _lock = long.then(|| self.bucket_lock.lock());
        let r = (|| {
            let _gate = store.exclusive();
            let mut buf = Vec::new();
            batch.log_record(&mut buf);
            store.append_record(&buf)?;
            for op in &batch.ops {
                match op {
                    BatchOp::Put(k, v) => batch::apply_put(self.tree(), self.buckets, k, v)?,
                    BatchOp::Delete(k) => batch::apply_delete(self.tree(), self.buckets, k)?,
                }
            }
            log::batch_end(&mut buf);
            store.append_record(&buf)
        })();
        let lsn = self.guard(r)?;
        self.after_write(batch.ops.len() as u64, lsn)
    }

    /// Whether the database is open and `batch`'s keys and values are within the limits.
    pub(crate) fn check_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.check_open()?;
        let limits = self.limits();
        for op in &batch.ops {
            match op {
                BatchOp::Put(k, v) => {
                    limits.check_key(k)?;
                    limits.check_value(v)?;
                }
                BatchOp::Delete(k) => limits.check_key(k)?,
            }
        }
        Ok(())
    }

    /// Durability and checkpoint duties after a write of `ops` operations whose last log record
    /// is `lsn` ([`Durable::after_write`]).
    #[inline]
    fn after_write(&self, ops: u64, lsn: u64) -> Result<()> {
        self.durable.after_write(ops, lsn)
    }

    /// An iterator over the keys in `(lower, upper)`, in ascending order; `.rev()` on the
    /// result iterates descending.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Cursor<'_> {
        Cursor::new(self, lower, upper)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.durable.sync()
    }

    /// Writes every dirty page and records a checkpoint, while writers go on (a fuzzy
    /// checkpoint, module docs); afterwards recovery redoes only the log appended since it began.
    pub fn checkpoint(&self) -> Result<()> {
        self.durable.checkpoint()
    }

    /// Counts and cache figures, with the fill factor (which walks every leaf), the out-of-line
    /// values and the free extents.
    pub fn stats(&self) -> DbStats {
        let height = self.tree().height().unwrap_or(0);
        let (record_bytes, runs, bucket_keys) = self.record_bytes();
        let mut s = self.quick_stats();
        s.records += bucket_keys;
        s.height = height;
        s.overflow_values = runs.values;
        s.overflow_pages = runs.pages;
        s.overflow_bytes = runs.bytes;
        s.tree_pages = s.tree_pages.saturating_sub(runs.pages);
        s.fill_factor = record_bytes as f64 / (s.tree_pages.max(1) * s.page_size as u64) as f64;
        let file = self.tree().store.pool.file();
        let free = file.free_extents();
        s.file_bytes = file.file_len().unwrap_or(0);
        s.free_extents = free.extents;
        s.largest_free_extent = free.largest;
        s.free_pages_at_end = free.at_end;
        s.free_space_pages = free.space_pages;
        s
    }

    /// Counts and cache figures without the height, fill factor, out-of-line values and free
    /// extents (no page reads).
    fn quick_stats(&self) -> DbStats {
        let store = &self.tree().store;
        let pool = store.pool.stats();
        let file = store.pool.file();
        let tree = self.tree().stats();
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
            checkpoints: self.durable.checkpoints(),
            overflow_values: 0,
            overflow_pages: 0,
            overflow_bytes: 0,
            file_bytes: 0,
            free_extents: 0,
            largest_free_extent: 0,
            free_pages_at_end: 0,
            free_space_pages: 0,
            run_cache: store.runs.stats(),
        }
    }

    /// Key and value bytes of the records held in tree pages (an out-of-line value counts as
    /// its reference), the out-of-line values, and the keys buckets hold beyond one each (a
    /// full walk; for `stats`).
    fn record_bytes(&self) -> (u64, RunCount, u64) {
        let mut bytes = 0u64;
        let mut runs = RunCount::default();
        let mut bucket_keys = 0u64;
        let mut buf = Vec::new();
        let ps = self.tree().store.pool.file().page_size();
        let (tagged, tags) = (self.tagged(), self.tags());
        let _ = self.tree().walk(&[], None, usize::MAX, &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
            if tagged && overflow::is_ref(v, tags) {
                if let Ok(overflow::Stored::Ref(r)) = overflow::classify(v, 0, tags) {
                    runs.values += 1;
                    runs.pages += r.pages(ps);
                    runs.bytes += u64::from(r.len);
                }
            }
            if let Some(b) = self.buckets.filter(|b| b.is_bucket_key(k)) {
                if let Ok(Some(bucket)) = self.scan_value(k, v, &mut buf) {
                    if let Ok(entries) = b.decode(k, bucket) {
                        bucket_keys += entries.len().saturating_sub(1) as u64;
                    }
                }
            }
            true
        });
        (bytes, runs, bucket_keys)
    }

    /// Checkpoints and closes. Dropping a `Db` does the same but cannot report errors. A
    /// poisoned database closes without a checkpoint and returns [`Error::Poisoned`].
    ///
    /// [`Error::Poisoned`]: crate::Error::Poisoned
    pub fn close(self) -> Result<()> {
        self.durable.close()
    }

    /// Drops the database the way a crash would: no checkpoint, no flush of the log's buffer or
    /// of dirty pages. For tests of recovery.
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.durable.simulate_crash();
    }

    /// Where the page file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests;
