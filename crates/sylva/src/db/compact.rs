//! `Db::compact`: the free space at the end of the page file given back to the file system, while
//! readers and writers go on (issue 23, "Space").
//!
//! Deleting or overwriting an out-of-line value frees its run of pages with a deferred free
//! ([`super::overflow`]); a checkpoint makes them allocatable, and later runs and tree pages
//! reuse them, but the file never gets shorter by itself. `compact` runs checkpoints that take
//! the free pages at the file's end out of it, then truncates the file (the durability layer's
//! `crate::durable::compact`; the order of the meta page and the truncation, and why a crash at
//! any point loses nothing acknowledged, is in `crate::io::page_file::shrink`).
//!
//! It does not move pages: a free page below a page in use stays in the file, reused by the
//! next allocations (the best-fit allocator takes the shortest free run that fits, so holes
//! fill before the file grows). Giving holes back would need relocation: copying the pages
//! above them down and rewriting every reference (child pointers in inner nodes, run
//! references in leaves) under the log, as a redo-logged operation of its own; not built.
//! `stats` says what compaction would give back ([`DbStats::free_pages_at_end`]) and how
//! scattered the rest is ([`DbStats::free_extents`], [`DbStats::largest_free_extent`]).
//!
//! [`DbStats::free_pages_at_end`]: super::DbStats::free_pages_at_end
//! [`DbStats::free_extents`]: super::DbStats::free_extents
//! [`DbStats::largest_free_extent`]: super::DbStats::largest_free_extent

use std::time::Duration;

use super::{Db, DbStats};
use crate::error::Result;

/// What [`Db::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    /// The page file's length in bytes before.
    pub bytes_before: u64,
    /// The page file's length in bytes after.
    pub bytes_after: u64,
    /// Bytes per page.
    pub page_size: usize,
    /// Free pages left inside the file (holes below pages in use, which compaction does not
    /// move), as [`crate::DbStats::free_pages`] counts them.
    pub free_pages_left: u64,
    /// Checkpoints it ran (module docs of `crate::durable::compact`).
    pub checkpoints: u32,
    /// How long it took.
    pub duration: Duration,
}

impl CompactReport {
    /// Bytes given back to the file system.
    pub fn bytes_returned(&self) -> u64 {
        self.bytes_before.saturating_sub(self.bytes_after)
    }
}

impl Db {
    /// Gives the free pages at the end of the page file back to the file system (module docs
    /// of `db::compact`): checkpoints (which make the runs that deletes and overwrites freed
    /// allocatable), then the file truncated after its last page in use. Readers and
    /// writers go on meanwhile, held back only as each checkpoint begins; other checkpoints
    /// and online backups wait for it. A failure poisons the database, as a failed checkpoint
    /// does.
    pub fn compact(&self) -> Result<CompactReport> {
        let c = self.durable.compact()?;
        let file = self.tree().store.pool.file();
        Ok(CompactReport {
            bytes_before: c.bytes_before,
            bytes_after: c.bytes_after,
            page_size: file.page_size(),
            free_pages_left: file.free_pages(),
            checkpoints: c.checkpoints,
            duration: c.duration,
        })
    }
}

impl DbStats {
    /// Bytes in free pages (`free_pages` pages).
    pub fn free_bytes(&self) -> u64 {
        self.free_pages * self.page_size as u64
    }

    /// Bytes in out-of-line values' runs (`overflow_pages` pages; `overflow_bytes` of them are
    /// the values, the rest run headers and the last pages' padding).
    pub fn overflow_run_bytes(&self) -> u64 {
        self.overflow_pages * self.page_size as u64
    }
}
