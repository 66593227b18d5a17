//! Giving space back: the free run at the file's end leaves the file (issue 23, "Space"), and a
//! summary of the free space for `stats`.
//!
//! **What goes.** Only pages free *now* at the file's end: [`PageFile::shrink_at_next_checkpoint`]
//! asks the next checkpoint to begin to take the free run that ends at the page count out of the
//! file (the page count drops to its first page), and that checkpoint's meta page records the
//! shorter file; [`PageFile::truncate_to_page_count`] then cuts the bytes. Deferred frees are
//! not taken (the checkpoint in force may still point at them: they become free when that
//! checkpoint commits, and the next shrink takes them), nor the free space's own pages (the
//! checkpoint in force reads them); a free-space page among the free pages at the end has its
//! region rewritten by the shrinking checkpoint, on the lowest free page there is, so that the
//! next shrink finds its old place free. Pages are never moved: a free page below a page in use
//! stays in the file (returning such holes would mean relocating the pages above them, and
//! every reference to them).
//!
//! **Order, and why a crash at any point is harmless.**
//! 1. The checkpoint begins (under the owner's writers' lock): the run leaves the free pages and
//!    the page count drops. Allocations after this grow the file from the new count, over
//!    pages that were free, as any allocation may reuse a free page.
//! 2. The checkpoint writes its free-space pages, fsyncs, writes the meta page with the new
//!    count, fsyncs ([`PageFile::checkpoint`]). A crash before the meta page is durable leaves
//!    the old checkpoint in force and the file as long as it was: nothing was cut.
//! 3. Only then is the file truncated, to the page count of that moment (at least the count
//!    the meta page records: pages allocated since are kept), and fsynced. A crash between the
//!    meta page and the truncation (or one that loses the truncation) leaves a file *longer*
//!    than its page count, which is a valid file: pages past the count are not part of it, open
//!    never reads them, and the file grows over them again (the same state a crash leaves when
//!    a writer grew the file during a checkpoint's fsyncs).
//!
//! The reverse order (truncate, then meta page) would leave, after a crash between the two,
//! the old checkpoint in force over a file shorter than its page count. It records in use some
//! of the cut pages (tree pages freed at once since it, which its tree reaches until redo
//! replays the frees): a read of one would find the file ending before it, a corruption error.
//!
//! **Concurrency.** The truncation holds the free-space lock, so no page can be allocated past
//! the count it truncates to while it runs; pages below the count are never cut. A reader that
//! followed a stale reference into the cut range (an out-of-line value overwritten meanwhile)
//! gets a corruption error for a page past the end, as it would get a checksum mismatch for a
//! reused run: the database looks the key up again (`crate::db`'s reads do).

use super::free_space::Shrunk;
use super::PageFile;
use crate::error::Result;

/// The pages of a page file not in use, as extents ([`PageFile::free_extents`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreeExtents {
    /// Pages not in use: free, freed with a deferred free, or kept for a running checkpoint
    /// (as [`PageFile::free_pages`]).
    pub pages: u64,
    /// Runs of consecutive such pages.
    pub extents: u64,
    /// Pages in the longest run.
    pub largest: u64,
    /// Pages of the runs at the file's end, up to the last page in use (passing over pages
    /// holding the free space, which a compaction moves): what a compaction gives back, once a
    /// checkpoint has made the deferred frees among them free (less a page or two, for the
    /// free space's own pages if no free page below is left for them).
    pub at_end: u64,
    /// Pages holding the free space itself (region bitmaps, directory pages).
    pub space_pages: u64,
}

/// What a compaction's checkpoints did to the page file ([`PageFile::last_shrink`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShrinkStep {
    /// Pages the last shrinking checkpoint took off the file's end.
    pub pages: u64,
    /// Free-space pages it rewrote lower in the file, so that the next shrink may take their
    /// places too.
    pub moved: u64,
    /// Free pages at the file's end now, or among the free space's pages there: what more
    /// shrinking checkpoints can give back.
    pub free_near_end: u64,
}

impl PageFile {
    /// The free space as extents: how many pages, in how many runs, the longest, and how many
    /// at the file's end (module docs).
    pub fn free_extents(&self) -> FreeExtents {
        let st = self.state.lock();
        let runs = st.space.not_in_use_runs();
        // From the end down, over free runs and over the free space's own pages (which a
        // compaction moves out of the way).
        let (mut p, mut at_end) = (st.space.page_count, 0);
        let mut below = runs.iter().rev().peekable();
        loop {
            if let Some(&&(s, l)) = below.peek().filter(|&&&(s, l)| s + l == p) {
                at_end += l;
                p = s;
                below.next();
            } else if p > super::FIRST_DATA_PAGE && st.space.is_space(p - 1) {
                p -= 1;
            } else {
                break;
            }
        }
        FreeExtents {
            pages: runs.iter().map(|&(_, l)| l).sum(),
            extents: runs.len() as u64,
            largest: runs.iter().map(|&(_, l)| l).max().unwrap_or(0),
            at_end,
            space_pages: st.space.space_pages(),
        }
    }

    /// Makes the next checkpoint to begin take the free run at the file's end out of the file
    /// (module docs): its meta page records the shorter file. The caller then truncates with
    /// [`PageFile::truncate_to_page_count`] once that checkpoint is durable.
    pub fn shrink_at_next_checkpoint(&self) {
        self.state.lock().space.request_shrink();
    }

    /// What the last checkpoint that began shrinking did, and what is free at the end now.
    pub fn last_shrink(&self) -> ShrinkStep {
        let st = self.state.lock();
        let Shrunk { pages, moved } = st.space.shrunk();
        ShrinkStep {
            pages,
            moved,
            free_near_end: st.space.free_near_end(),
        }
    }

    /// The file's length in bytes (at least the page count's worth, unless pages at the end
    /// were allocated and not yet written; more after a crash that kept a truncation from
    /// happening, module docs).
    pub fn file_len(&self) -> Result<u64> {
        self.io.file_len()
    }

    /// Cuts the file to its page count (never below the count the last meta page written
    /// records), if it is longer, and fsyncs it. Call it only after the checkpoint recording
    /// the shorter count is durable (module docs, "Order"). Returns the file's length before
    /// and after.
    pub fn truncate_to_page_count(&self) -> Result<(u64, u64)> {
        let (before, after) = {
            let st = self.state.lock();
            let pages = st.space.page_count.max(st.space.recorded_count());
            let keep = pages.saturating_mul(self.page_size as u64);
            let len = self.io.file_len()?;
            if len > keep {
                self.io.set_file_len(keep)?;
            }
            (len, len.min(keep))
        };
        if after < before {
            self.io.sync()?;
        }
        Ok((before, after))
    }
}
