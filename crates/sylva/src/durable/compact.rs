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
//! that deletes and overwrites freed), the next gives those back (or moves a free-space page
//! at the end out of their way), and more (at most [`MAX_ROUNDS`] in all) follow while more
//! than one free page is left at the end. One may stay: a region page rewritten by a
//! shrinking checkpoint needs a page other than its copy in force, and when no free page is
//! left below the end, the end is where it goes. Writers are held back only as each checkpoint begins (as
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
            // One free page near the end is the slack a region page's next copy needs (it
            // cannot overwrite the copy the checkpoint in force reads): giving it back would
            // only trade places with that copy.
            let more = step.free_near_end > 1;
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
