//! Compaction: the free pages at the page file's end given back to the file system while writers
//! go on (issue 23, "Space"). The page file's side (what goes, and the order of the meta page
//! and the truncation that makes a crash at any point harmless) is in the module docs of
//! `crate::io::page_file::shrink`; this is the durability layer's: which checkpoints, under
//! which lock.
//!
//! With the checkpoint lock held (so no other checkpoint, and no online backup, runs
//! meanwhile), checkpoints are run one after another, each asked to shrink the file as it
//! begins ([`crate::io::PageFile::shrink_at_next_checkpoint`]): the first gives back what is
//! free at the end already and makes the deferred frees free (the runs of out-of-line values
//! that deletes and overwrites freed), the next gives those back, and a third (at most
//! [`MAX_ROUNDS`] in all) follows while the last one found more free at the end or moved a
//! free-space page out of the way. Writers are held back only as each checkpoint begins (as
//! for any fuzzy checkpoint). Then the file is truncated to its page count.

use std::time::{Duration, Instant};

use super::{Core, Durable, Engine};
use crate::error::Result;

/// Checkpoints a compaction runs at most.
pub(crate) const MAX_ROUNDS: u32 = 4;

/// What a compaction did to the page file (the durability layer's part of
/// [`crate::CompactReport`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compacted {
    /// The page file's length before.
    pub(crate) bytes_before: u64,
    /// And after.
    pub(crate) bytes_after: u64,
    /// Checkpoints it ran.
    pub(crate) checkpoints: u32,
    /// How long it took.
    pub(crate) duration: Duration,
}

impl<E: Engine> Durable<E> {
    /// Gives the free pages at the page file's end back to the file system (module docs); a
    /// failure poisons the store, as a failed checkpoint does.
    pub(crate) fn compact(&self) -> Result<Compacted> {
        self.check_open()?;
        let r = self.core.compact();
        self.core.poison.guard(r)
    }
}

impl<E: Engine> Core<E> {
    fn compact(&self) -> Result<Compacted> {
        let started = Instant::now();
        let _one = self.checkpoint_lock.lock();
        let file = self.engine.page_file();
        let bytes_before = file.file_len()?;
        let mut checkpoints = 0;
        loop {
            file.shrink_at_next_checkpoint();
            self.checkpoint_locked()?;
            checkpoints += 1;
            let step = file.last_shrink();
            let more = step.free_near_end > 0 || step.moved > 0;
            if checkpoints >= MAX_ROUNDS || !more {
                break;
            }
        }
        // The last checkpoint is durable: its meta page counts no page past the end.
        let (_, bytes_after) = file.truncate_to_page_count()?;
        Ok(Compacted {
            bytes_before,
            bytes_after,
            checkpoints,
            duration: started.elapsed(),
        })
    }
}
