//! sylva: an embedded, ordered key-value storage engine built from five B-tree designs of recent
//! database research.
//!
//! Every engine implements [`KvStore`], the contract in `DESIGN.md`: byte-string keys in bytewise
//! order, point reads and writes, ordered scans, unordered range maps, `sync` and stats. Bad
//! input is an [`Error`], never a panic.
//!
//! Engines:
//! - [`Db`]: the durable database — the slotted-page B+tree of "B-Trees Are Back" paged through a
//!   buffer pool onto a page file, with a write-ahead log, recovery, checkpoints, atomic
//!   [`WriteBatch`]es and [`Cursor`]s. [`DbOptions`] and [`SyncMode`] say how it runs. It
//!   stands on the durability layer every disk engine shares (the directory and its lock,
//!   recovery, checkpoints, the `SyncMode` cadence, the poisoned state), whose cadence,
//!   [`SyncCadence`], is public: `sylva bench`'s peer adapters sync on it too.
//! - [`BTree`]: the same slotted-page B+tree in memory ([`BTreeOptions`], [`Layout`]).
//! - [`BpTreeStore`]: the BP-tree, an in-memory concurrent B+tree with
//!   buffered-partitioned-array leaves, and its sorted-leaf baseline ([`BpTreeOptions`],
//!   [`BaselineOptions`]).
//! - [`TreeLine`]: the update-in-place store of the TreeLine thesis — a record cache, segments of
//!   contiguous pages placed by linear models, insert forecasting — on the same durability layer
//!   ([`TreeLineOptions`]).
//! - [`MemMap`]: std `BTreeMap` under a `RwLock`; the model for tests and the floor for
//!   benchmarks.
//!
//! ```
//! use std::ops::Bound;
//! use sylva::{Db, DbOptions, SyncMode, WriteBatch};
//!
//! # fn main() -> sylva::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! // Every write is durable when it returns (`SyncMode::Batch` groups them instead).
//! let options = DbOptions { sync: SyncMode::Always, ..DbOptions::default() };
//! let db = Db::open(dir.path(), options)?;
//! db.put(b"apple", b"red")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow").put(b"cherry", b"dark red").delete(b"apple");
//! db.write(&batch)?; // all of it, or after a crash none of it
//! assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));
//! let keys: Vec<Vec<u8>> = db
//!     .range(Bound::Included(&b"b"[..]), Bound::Unbounded)
//!     .map(|r| r.map(|(k, _)| k))
//!     .collect::<sylva::Result<_>>()?;
//! assert_eq!(keys, [b"banana".to_vec(), b"cherry".to_vec()]);
//! db.close()?;
//!
//! // Reopened, the database recovers what was acknowledged.
//! let db = Db::open(dir.path(), DbOptions::default())?;
//! assert_eq!(db.get(b"apple")?, None);
//! # Ok(())
//! # }
//! ```
//!
//! The layers under the engines (page file, log, buffer pool, node formats) are private; the
//! `internals` feature makes them public for the `sylva` command's tools, the tests and the fuzz
//! targets. They are not a stable interface.
#![warn(missing_docs)]
// Without `internals`, items only the tools and tests use are unreachable; the lints see them with
// the feature on (the workspace build enables it through the `sylva` command).
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

// The storage layers are public with the `internals` feature and private without it. Each is
// declared twice rather than by a macro, so that `cargo fmt` (which does not look into macros)
// formats their files.
#[cfg(feature = "internals")]
pub mod btree;
#[cfg(not(feature = "internals"))]
mod btree;
#[cfg(feature = "internals")]
pub mod buffer;
#[cfg(not(feature = "internals"))]
mod buffer;
mod db;
mod durable;
mod error;
#[cfg(feature = "internals")]
pub mod exec;
#[cfg(not(feature = "internals"))]
mod exec;
/// One entry point per decoder of on-disk bytes, for the fuzz targets and their stable tests.
#[doc(hidden)]
#[cfg(feature = "internals")]
pub mod fuzz;
/// One entry point per decoder of on-disk bytes, for the fuzz targets and their stable tests.
#[doc(hidden)]
#[cfg(not(feature = "internals"))]
mod fuzz;
#[cfg(feature = "internals")]
pub mod io;
#[cfg(not(feature = "internals"))]
mod io;
mod kv;
#[cfg(feature = "internals")]
pub mod mem;
#[cfg(not(feature = "internals"))]
mod mem;
mod memmap;
/// The Nested B-tree (issue 22).
#[cfg(feature = "internals")]
pub mod nbtree;
/// The Nested B-tree (issue 22).
#[cfg(not(feature = "internals"))]
mod nbtree;
#[cfg(feature = "internals")]
pub mod page;
#[cfg(not(feature = "internals"))]
mod page;
mod sync;
#[cfg(feature = "internals")]
pub mod treeline;
#[cfg(not(feature = "internals"))]
mod treeline;
#[cfg(feature = "internals")]
pub mod util;
#[cfg(not(feature = "internals"))]
mod util;
#[cfg(feature = "internals")]
pub mod wal;
#[cfg(not(feature = "internals"))]
mod wal;

pub use btree::{BTree, CheckReport, Layout, Options as BTreeOptions};
/// The longest key of a `Db` created by this build (state version 6), at every page size:
/// keys longer than its tree takes live in buckets (`docs/format.md`, "Long keys in buckets").
pub use db::buckets::MAX_KEY_LEN as DB_MAX_KEY_LEN;
/// The PA-Tree mode (issue 20): a `Db` whose point operations one worker thread runs, many at
/// a time, and the options of its worker.
pub use db::{parse_probe, KeyValue, PaDb, PaOp, PaOptions, PaResult, PaSession, PA_OPTION_KEYS};
/// Dump and load streams of a `Db`'s records (`docs/format.md`, "Dump stream").
pub use db::{verify_dump, DumpReader, DumpWriter, LoadReport};
pub use db::{
    CompactReport, Cursor, Db, DbOptions, DbStats, RunCacheStats, WriteBatch,
    OPTION_KEYS as DB_OPTION_KEYS,
};
pub use durable::{
    BackupOptions, BackupProgress, BackupReport, Due, RecoveryReport, SyncCadence, DATA_FILE,
    DEFAULT_DEVICE_SHARE, LOCK_FILE, NEW_DATA_FILE, PARTIAL_DATA_FILE, WAL_FILE, WAL_FILE_2,
};
pub use error::{Error, Result};
pub use exec::sched::{LatencyModel, PriorityPolicy, ProbePolicy};
pub use exec::worker::{WorkerCounters, WorkerOptions};
pub use exec::BackendKind;
pub use kv::{KvStore, Limits, Stats, Visitor};
pub use mem::bptree::{BaselineOptions, BpTreeOptions, BpTreeStore, TreeStats as BpTreeStats};
pub use memmap::{MemMap, MEMMAP_MAX_KEY, MEMMAP_MAX_VALUE};
pub use nbtree::{NbCheckReport, NbTree, NbTreeOptions, OPTION_KEYS as NBTREE_OPTION_KEYS};
pub use treeline::{
    TreeLine, TreeLineCheck, TreeLineOptions, MAX_KEY as TREELINE_MAX_KEY,
    OPTION_KEYS as TREELINE_OPTION_KEYS,
};
pub use wal::SyncMode;

/// The file system under a database: [`Db::open_in`] runs one on any [`Vfs`](vfs::Vfs), the
/// operating system's ([`OsFs`](vfs::OsFs)) or a simulated disk that loses, keeps or tears
/// unsynced writes at a power loss ([`SimFs`](vfs::SimFs)), for testing what an application
/// built on sylva does after a crash.
pub mod vfs {
    pub use crate::io::{
        Fault, Io, LockGuard, OpenFile, Opened, OsFs, SimFs, SimOptions, Vfs, SECTOR,
    };
}
