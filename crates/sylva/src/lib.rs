//! sylva: an embedded, ordered key-value storage engine built from five B-tree designs of recent
//! database research.
//!
//! Every engine implements [`KvStore`], the contract in `DESIGN.md`: byte-string keys in bytewise
//! order, point reads and writes, ordered scans, unordered range maps, `sync` and stats. Bad
//! input is an [`Error`], never a panic.
//!
//! Engines:
//! - [`MemMap`]: std `BTreeMap` under a `RwLock`; the model for tests and the floor for
//!   benchmarks.
//! - [`btree::BTree`]: the slotted-page B+tree of "B-Trees Are Back" over [`page`] nodes.
//! - [`mem::bptree`]: the BP-tree (in-memory concurrent B+tree with buffered-partitioned-array
//!   leaves) and its sorted-leaf baseline.
//! - [`Db`]: the durable database — the slotted-page tree paged through the [`buffer`] pool onto
//!   an [`io`] page file, with the [`wal`] write-ahead log, recovery, checkpoints, atomic write
//!   batches and cursors.
#![warn(missing_docs)]

pub mod btree;
pub mod buffer;
mod db;
mod error;
#[doc(hidden)]
pub mod fuzz;
pub mod io;
mod kv;
pub mod mem;
mod memmap;
pub mod page;
mod sync;
pub mod wal;

pub use db::{
    Cursor, Db, DbOptions, DbStats, RecoveryReport, WriteBatch, DATA_FILE, LOCK_FILE,
    NEW_DATA_FILE, OPTION_KEYS as DB_OPTION_KEYS, WAL_FILE, WAL_FILE_2,
};
pub use error::{Error, Result};
pub use kv::{KvStore, Limits, Stats, Visitor};
pub use memmap::{MemMap, MEMMAP_MAX_KEY, MEMMAP_MAX_VALUE};
pub use wal::SyncMode;
/// The durability modes under the name `DESIGN.md` and the issues use (`Sync::Always`, ...).
pub use wal::SyncMode as Sync;
