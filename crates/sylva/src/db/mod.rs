//! `Db`: the durable database — the slotted-page B+tree of [`crate::btree`] paged through the
//! [`crate::buffer`] pool onto a [`crate::io::PageFile`], with a [`crate::wal`] write-ahead log
//! and recovery. The design follows the vmcache integration of "B-Trees Are Back" (section 7) and
//! the persistence modes of the PA-Tree paper (section III.C).
//!
//! A directory holds three files: `data.sylva` (the page file), `wal.log` (the log) and `LOCK`
//! (held with `flock` while a process has the database open).
//!
//! **Node store.** The tree's logic is unchanged; only its node store differs: [`store`] maps
//! the tree's latches onto the pool's page-state words (optimistic reads, exclusive writes; a
//! read of an evicted page loads it) and turns the tree's change notifications into log records.
//!
//! **Logging (physiological, redo only).** Every change to a page is logged while its latch is
//! held, and the record's LSN is stored in the page header:
//! - a leaf put or delete is a small record naming the page and the key (and value);
//! - everything else that changes pages (split, merge, root growth, layout conversion, the lazy
//!   sort of a fingerprinting leaf) logs after-images of every page it changed, and the ids of
//!   pages it freed;
//! - the first change to a page after a checkpoint logs its full image instead of the small
//!   record ("full-page writes"), so recovery never depends on a page's on-disk bytes written
//!   after the checkpoint: a torn page write is harmless.
//! The adaptive layout's operation counter is a hint: changing it alone is not logged and does
//! not dirty the page.
//!
//! **Recovery** reads the checkpoint (tree root, record count, the LSN the log starts at) from
//! the page file's meta page, then redoes every intact log record from there: an image is
//! installed if the page's LSN is older; a put or delete is applied to its page if the page's
//! LSN is older. Redo is therefore idempotent. The log's torn tail is cut and reported. Recovery
//! ends with a checkpoint.
//!
//! **Checkpoints** stop writers briefly (a writers' lock), flush every dirty page (each after the
//! log covering it), write the meta page (free list, root, record count, log start) and empty
//! the log. They run when the log passes `checkpoint_bytes`, on `checkpoint()` and on `close()`.
//!
//! **Write batches** take the writers' lock exclusively and log the whole batch first as one
//! record, then apply it; if a crash cuts the batch's page records short, recovery applies the
//! batch again from that record (every op is idempotent and nothing else was logged after it).
//!
//! **Durability.** `SyncMode::Always`: a write is durable before it returns (group commit: the
//! fsync is shared by concurrent writers and happens after the leaf latch is released);
//! `Batch { ops, interval }`: durable at the next batch boundary or `sync()`; `Never`: at
//! `sync()`, `checkpoint()` or `close()`.
//!
//! **Failure.** Any error inside a write other than bad input (a failed write or fsync, a
//! corrupt page) poisons the database: every later call returns [`Error::Poisoned`] until it is
//! reopened, and recovery decides what really reached disk.

mod options;

use std::ops::Bound;
use std::path::Path;

use crate::error::{Error, Result};
use crate::io::Io;

pub use options::{DbOptions, OPTION_KEYS};

/// An atomic group of puts and deletes for [`Db::write`]: after a crash either all of them
/// happened or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push(BatchOp::Put(key.to_vec(), value.to_vec()));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.ops.push(BatchOp::Delete(key.to_vec()));
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

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
    /// Bytes in the log file.
    pub wal_bytes: u64,
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
    /// An intact record beyond the cut (under `SyncMode::Always` that is damage to acknowledged
    /// data, not a torn tail).
    pub intact_after_cut: Option<u64>,
    /// A write batch whose page records were cut short was applied again from its log record.
    pub batch_reapplied: bool,
}

/// A durable, ordered key-value database in a directory. Cheap to share between threads
/// (`&Db` is `Sync`); every method may be called concurrently.
pub struct Db {
    _todo: (),
}

/// An ordered iterator over a key range, forward or reverse; see [`Db::range`].
///
/// A cursor copies one leaf at a time and holds no latch between calls, so it never blocks
/// writers; it sees every record that was in the range for its whole life, and records changed
/// meanwhile may or may not appear (read-committed, per leaf).
pub struct Cursor<'db> {
    _db: &'db Db,
}

impl Db {
    /// Opens the database in `dir`, creating the directory and an empty database if there is
    /// none. Errors: [`Error::Locked`] if another process has it open, [`Error::NotSylva`] for a
    /// directory holding other files or a foreign `data.sylva`, [`Error::UnsupportedVersion`],
    /// checksum and corruption errors from recovery.
    pub fn open(dir: impl AsRef<Path>, options: DbOptions) -> Result<Db> {
        let _ = (dir.as_ref(), options);
        todo!()
    }

    /// Opens a database over the given page-file and log I/O, without a directory or lock file
    /// (for fault-injection tests). An empty page file is initialised.
    pub fn open_io(page_io: Box<dyn Io>, wal_io: Box<dyn Io>, options: DbOptions) -> Result<Db> {
        let _ = (page_io, wal_io, options);
        todo!()
    }

    /// What recovery did when this database was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        todo!()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _ = key;
        todo!()
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (key, value);
        todo!()
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let _ = key;
        todo!()
    }

    /// Applies `batch` atomically (all or nothing across a crash), durable per the sync mode.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        let _ = batch;
        todo!()
    }

    /// An iterator over the keys in `(lower, upper)`, in ascending order; `.rev()` on the
    /// result iterates descending.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Cursor<'_> {
        let _ = (lower, upper);
        todo!()
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        todo!()
    }

    /// Writes every dirty page, records a checkpoint and empties the log.
    pub fn checkpoint(&self) -> Result<()> {
        todo!()
    }

    /// Counts and cache figures.
    pub fn stats(&self) -> DbStats {
        todo!()
    }

    /// Verifies every page checksum in the file and the tree's structure.
    pub fn check(&self) -> Result<crate::btree::CheckReport> {
        todo!()
    }

    /// Checkpoints and closes. Dropping a `Db` does the same but cannot report errors.
    pub fn close(self) -> Result<()> {
        todo!()
    }
}

impl Cursor<'_> {
    /// Turns the cursor around: it now yields the range in descending order, starting from the
    /// top of the range.
    pub fn rev(self) -> Self {
        todo!()
    }

    /// Moves to the first key `>= key` (forward) or the last key `<= key` (reverse), within
    /// the range.
    pub fn seek(&mut self, key: &[u8]) {
        let _ = key;
        todo!()
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        todo!()
    }
}

#[allow(dead_code)]
fn unused(_: Error) {}
