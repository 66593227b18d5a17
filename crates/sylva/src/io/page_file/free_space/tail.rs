//! The free space's part in giving space back (`super::super::shrink`, whose module docs have the
//! order of the steps and why a crash at any point is harmless): which pages at the file's end
//! are free, and taking them out of the file for the checkpoint that begins.

use super::{FreeSpace, Shrunk, FIRST};

impl FreeSpace {
    /// Asks the next checkpoint to begin to give back the free run at the file's end.
    pub(in crate::io::page_file) fn request_shrink(&mut self) {
        self.shrink = true;
    }

    /// What the last checkpoint that began shrinking gave back.
    pub(in crate::io::page_file) fn shrunk(&self) -> Shrunk {
        self.shrunk
    }

    /// Pages of the free run (allocatable now) that ends at the file's end: what the next
    /// shrinking checkpoint gives back.
    pub(in crate::io::page_file) fn free_at_end(&self) -> u64 {
        let end = self.page_count;
        match self.free.run_of(end.saturating_sub(1)) {
            Some((s, l)) if s + l == end => l,
            _ => 0,
        }
    }

    /// The pages not in use (free, deferred, reserved; not the free space's own pages), as
    /// coalesced runs `(first, pages)` in page order.
    pub(in crate::io::page_file) fn not_in_use_runs(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = self
            .free
            .iter()
            .chain(self.deferred.iter())
            .chain(self.recorded.iter())
            .chain(self.reserved.iter().map(|&p| (p, 1)))
            .collect();
        runs.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for (s, l) in runs {
            match out.last_mut() {
                Some((ps, pl)) if *ps + *pl == s => *pl += l,
                _ => out.push((s, l)),
            }
        }
        out
    }

    /// Takes the free run that ends at the file's end out of the file, for the checkpoint that
    /// begins (`super::shrink`): the page count drops to its first page, so the checkpoint
    /// records the shorter file and allocations grow it from there again. Only pages free now
    /// go (not deferred frees, which the checkpoint in force may still point at, nor the free
    /// space's own pages, which it reads); the regions they were in are rewritten without
    /// them. The free space's pages just below, among free pages, have their regions rewritten
    /// too (their new pages taken as low as possible, [`FreeSpace::begin`]), so that the next
    /// shrink finds them free. Returns the pages it took (some of which `begin` may keep for
    /// the checkpoint's own pages).
    pub(super) fn shrink_tail(&mut self) -> u64 {
        let end = self.page_count;
        let given = self.free_at_end();
        let start = end - given;
        let mut moved = 0;
        let mut p = start;
        while p > FIRST {
            if self.space.contains(&(p - 1)) {
                let region = self.regions.iter().find(|(_, &(page, _))| page == p - 1);
                if let Some((&r, _)) = region {
                    self.dirty.insert(r);
                }
                moved += 1;
                p -= 1;
            } else if let Some((s, _)) = self.free.run_of(p - 1) {
                p = s;
            } else {
                break;
            }
        }
        if given > 0 {
            self.free.remove(start, given);
            for r in self.region(start)..=self.region(end - 1) {
                self.dirty.insert(r);
            }
            self.page_count = start;
        }
        if self.free.pages() == 0 {
            // Nowhere lower to move them to: they would come back at the end.
            moved = 0;
        }
        self.shrunk = Shrunk {
            pages: given,
            moved,
        };
        given
    }

    /// Free pages at the file's end, or among free-space pages there: what shrinking
    /// checkpoints can give back (the free-space pages moved lower first).
    pub(in crate::io::page_file) fn free_near_end(&self) -> u64 {
        let (mut p, mut free) = (self.page_count, 0);
        while p > FIRST {
            if self.space.contains(&(p - 1)) {
                p -= 1;
            } else if let Some((s, _)) = self.free.run_of(p - 1) {
                free += p - s;
                p = s;
            } else {
                break;
            }
        }
        free
    }
}
