//! `FreeSpace`: which pages of the file are free, in memory and as the checkpoint records it.
//! The design is in the module docs of [`super`] ("Free space"); this file is its bookkeeping,
//! with no I/O: [`FreeSpace::plan`] says what a checkpoint writes, the page file writes it, and
//! [`FreeSpace::commit`] or [`FreeSpace::abort`] says how it went.
//!
//! A page id below the page count is exactly one of:
//! - **free**: in `free`, allocatable now;
//! - **deferred**: freed by [`FreeSpace::free_run_deferred`], in `deferred` (since the last
//!   checkpoint began) or in the running checkpoint's `deferred` (recorded free by it,
//!   allocatable once it is durable);
//! - **reserved**: taken from `free` when a checkpoint began, for its free-space pages;
//! - **a free-space page**: in `space` (the current checkpoint's region and overflow pages,
//!   pages `retired` from it, and the running checkpoint's new pages);
//! - **meta** (ids 0 and 1) or **in use** (the owner's): everything else.
//!
//! On disk (a region bitmap) a page is marked when it is anything but meta or in use, as of the
//! state the checkpoint records. `dirty` holds the regions whose marks may differ from their
//! page's; only those are written.

use std::collections::{BTreeMap, BTreeSet};

use super::encoding::{
    encode_directory, encode_region, entries_per_page, inline_entries, region_pages,
};
use super::extents::Extents;
use crate::error::{Error, Result};

mod tail;

/// The first page id that holds data (0 and 1 are the meta pages).
const FIRST: u64 = super::FIRST_DATA_PAGE;

/// A region page read at open: region index, page id, and the runs of pages it marks.
pub(super) type RegionRuns = (u64, u64, Vec<(u64, u64)>);

/// The free space of a page file (module docs).
pub(super) struct FreeSpace {
    page_size: usize,
    /// Pages one region bitmap covers.
    per_region: u64,
    /// Pages in the file (allocated or free), meta pages included.
    pub(super) page_count: u64,
    free: Extents,
    /// Freed with a deferred free since the last checkpoint began.
    deferred: Extents,
    /// Deferred frees the begun or running checkpoint records free: allocatable once it is
    /// durable.
    recorded: Extents,
    /// Frees waiting for a meta page: (sequence, first, pages), freed for reuse at once when
    /// the checkpoint with that sequence (or a later one) commits ([`FreeSpace::free_run_after`]).
    after: Vec<(u64, u64, u64)>,
    /// Pages free when the begun checkpoint began, kept for its free-space pages.
    reserved: Vec<u64>,
    /// The current checkpoint's region pages: region → (page, pages it marks).
    regions: BTreeMap<u64, (u64, u32)>,
    /// The current checkpoint's directory overflow pages, in chain order.
    overflow: Vec<u64>,
    /// Pages that hold no part of the current free space but may of an older checkpoint's
    /// (a version 1 free list; a failed checkpoint's pages): free after the next checkpoint.
    retired: Vec<u64>,
    /// Every free-space page: `regions`' and `overflow`'s pages, `retired`, and a running
    /// checkpoint's new pages.
    space: BTreeSet<u64>,
    /// Regions whose marks may have changed since the last checkpoint began.
    dirty: BTreeSet<u64>,
    /// The pages of the region last added to `dirty` (the hot path skips the set for them).
    last_dirty: std::ops::Range<u64>,
    /// Directory entries the last meta page written holds itself (None: not known to match
    /// the overflow pages, so the next checkpoint rewrites the directory).
    inline_cap: Option<usize>,
    /// The checkpoint that began and has not planned yet.
    begun: Option<Begun>,
    /// The checkpoint planned and not yet committed or aborted.
    running: Option<Running>,
    /// The next checkpoint to begin gives back the free run at the file's end
    /// ([`FreeSpace::shrink_tail`]).
    shrink: bool,
    /// What the last checkpoint that began shrinking gave back.
    shrunk: Shrunk,
    /// The page count the last meta page written records (at open: the one read): the file
    /// is never truncated below it ([`super::shrink`]).
    recorded_count: u64,
    /// Pages the file grew by for runs that no free run held: while the free pages in all
    /// were as many (holes too short), and while they were fewer.
    pub(super) grown_fragmented: u64,
    pub(super) grown_short: u64,
}

/// What a checkpoint that began shrinking the file did ([`FreeSpace::shrink_tail`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Shrunk {
    /// Pages it took off the file's end.
    pub(super) pages: u64,
    /// Free-space pages among the free pages below them that it rewrites elsewhere (the next
    /// shrink may then take their places too).
    pub(super) moved: u64,
}

/// The state a checkpoint records, noted as it began.
struct Begun {
    page_count: u64,
    /// Regions dirty as it began, and the marks it records for them (and for the region
    /// holding the page count, into which the file may grow).
    dirty: BTreeSet<u64>,
    bitmaps: BTreeMap<u64, Vec<u8>>,
}

/// What a planned checkpoint changes once it is durable.
struct Running {
    /// The page count its meta page records.
    page_count: u64,
    written: BTreeSet<u64>,
    new_pages: Vec<u64>,
    released: Vec<u64>,
    regions: BTreeMap<u64, (u64, u32)>,
    overflow: Option<Vec<u64>>,
    inline_cap: usize,
}

/// A checkpoint's pages, laid out.
struct Layout {
    plan: Plan,
    released: Vec<u64>,
    regions: BTreeMap<u64, (u64, u32)>,
    overflow: Option<Vec<u64>>,
}

/// What a checkpoint writes: free-space pages (unsealed bodies) and the meta page's fields.
pub(super) struct Plan {
    /// Page count the meta page records.
    pub page_count: u64,
    /// (page id, body) of each free-space page to write before the meta page.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// First directory overflow page (0: none).
    pub overflow_head: u64,
    /// Directory entries in all.
    pub entries: u64,
    /// The entries the meta page holds itself.
    pub inline: Vec<(u64, u64)>,
    /// Pages the region bitmaps mark, in all.
    pub marked: u64,
}

fn bad_free(start: u64, n: u64) -> Error {
    Error::InvalidArgument {
        what: format!(
            "pages {start}..{} cannot be freed (not allocated data pages)",
            start.saturating_add(n)
        ),
        limit: 0,
    }
}

fn set_bits(bits: &mut [u8], from: u64, len: u64) {
    for p in from..from + len {
        bits[(p / 8) as usize] |= 1 << (p % 8);
    }
}

fn corrupt(page: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        page,
        detail: detail.into(),
    }
}

impl FreeSpace {
    /// The free space of a file of `page_count` pages, all in use (or meta).
    pub(super) fn new(page_size: usize, page_count: u64) -> Self {
        FreeSpace {
            page_size,
            per_region: region_pages(page_size),
            page_count,
            free: Extents::default(),
            deferred: Extents::default(),
            after: Vec::new(),
            recorded: Extents::default(),
            reserved: Vec::new(),
            regions: BTreeMap::new(),
            overflow: Vec::new(),
            retired: Vec::new(),
            space: BTreeSet::new(),
            dirty: BTreeSet::new(),
            last_dirty: 0..0,
            inline_cap: None,
            begun: None,
            running: None,
            shrink: false,
            shrunk: Shrunk::default(),
            recorded_count: page_count,
            grown_fragmented: 0,
            grown_short: 0,
        }
    }

    /// The free space a version 2 checkpoint recorded: its region pages (region, page, marks
    /// as runs) and its directory's `overflow` pages; `inline_cap` is the number of entries
    /// its meta page had room for. Every free-space page must be a data page, listed once and
    /// marked.
    pub(super) fn from_regions(
        page_size: usize,
        page_count: u64,
        regions: Vec<RegionRuns>,
        overflow: Vec<u64>,
        inline_cap: usize,
    ) -> Result<Self> {
        let mut fs = FreeSpace::new(page_size, page_count);
        let region_count = page_count.div_ceil(fs.per_region);
        for (region, page, runs) in regions {
            if region >= region_count || !(FIRST..page_count).contains(&page) {
                return Err(corrupt(
                    page,
                    format!(
                        "directory entry: region {region} (the file has {region_count}) in page \
                         {page} (data pages are {FIRST}..{page_count})"
                    ),
                ));
            }
            if !fs.space.insert(page) || fs.regions.contains_key(&region) {
                return Err(corrupt(page, "the directory lists a page or region twice"));
            }
            let mut marked = 0u64;
            for (s, l) in runs {
                if s < FIRST || s.saturating_add(l) > page_count || !fs.free.insert(s, l) {
                    return Err(corrupt(
                        page,
                        format!(
                            "region page marks pages {s}..{} outside the file's data pages \
                             {FIRST}..{page_count}",
                            s.saturating_add(l)
                        ),
                    ));
                }
                marked += l;
            }
            fs.regions.insert(region, (page, marked as u32));
        }
        for &p in &overflow {
            if !(FIRST..page_count).contains(&p) || !fs.space.insert(p) {
                return Err(corrupt(
                    p,
                    "a directory page outside the file or listed twice",
                ));
            }
        }
        for &p in &fs.space {
            if !fs.free.remove(p, 1) {
                return Err(corrupt(p, "a free-space page its region marks in use"));
            }
        }
        fs.overflow = overflow;
        fs.inline_cap = Some(inline_cap);
        Ok(fs)
    }

    /// The free space a version 1 checkpoint recorded: the free page `ids` and the pages of
    /// its free list (free after the next checkpoint, which writes every region that marks
    /// anything: all of them are dirty).
    pub(super) fn from_free_list(
        page_size: usize,
        page_count: u64,
        ids: &[u64],
        chain: Vec<u64>,
    ) -> Result<Self> {
        let mut fs = FreeSpace::new(page_size, page_count);
        for &id in ids {
            if !(FIRST..page_count).contains(&id) || !fs.free.insert(id, 1) {
                return Err(corrupt(
                    id,
                    format!("free page id {id} outside the file or listed twice"),
                ));
            }
        }
        for &p in &chain {
            if fs.free.contains(p) || !fs.space.insert(p) {
                return Err(corrupt(p, "a free-list page is also listed free"));
            }
        }
        let runs: Vec<(u64, u64)> = fs.free.iter().collect();
        for (s, l) in runs {
            fs.mark(s, l);
        }
        for &p in &chain {
            fs.mark(p, 1);
        }
        fs.retired = chain;
        Ok(fs)
    }

    #[inline]
    fn region(&self, id: u64) -> u64 {
        id / self.per_region
    }

    /// Notes that the marks of pages `first..first + n` change.
    #[inline]
    fn mark(&mut self, first: u64, n: u64) {
        if first >= self.last_dirty.start && first.saturating_add(n) <= self.last_dirty.end {
            return;
        }
        let a = self.region(first);
        let b = self.region(first.saturating_add(n.max(1) - 1));
        for r in a..=b {
            self.dirty.insert(r);
        }
        let base = b.saturating_mul(self.per_region);
        self.last_dirty = base..base.saturating_add(self.per_region);
    }

    /// Free pages, deferred frees and reserved pages (neither in use nor holding free space).
    pub(super) fn free_pages(&self) -> u64 {
        self.free.pages()
            + self.deferred.pages()
            + self.recorded.pages()
            + self.reserved.len() as u64
    }

    /// Pages the current checkpoint's region pages mark.
    pub(super) fn marked(&self) -> u64 {
        self.regions.values().map(|&(_, m)| u64::from(m)).sum()
    }

    /// The current checkpoint's directory overflow pages.
    #[cfg(test)]
    pub(super) fn overflow_pages(&self) -> &[u64] {
        &self.overflow
    }

    /// Pages holding free space (the current checkpoint's, and a running one's).
    pub(super) fn space_pages(&self) -> u64 {
        self.space.len() as u64
    }

    /// Whether `id` is anything but in use or a meta page.
    pub(super) fn is_free(&self, id: u64) -> bool {
        self.free.contains(id)
            || self.deferred.contains(id)
            || self.recorded.contains(id)
            || self.space.contains(&id)
            || self.reserved.contains(&id)
    }

    /// Allocates `n` contiguous pages (a free run, else the file grows).
    #[inline]
    pub(super) fn allocate_run(&mut self, n: u64) -> u64 {
        let n = n.max(1);
        let first = match self.free.take(n) {
            Some(s) => s,
            None => {
                if self.free.pages() >= n {
                    self.grown_fragmented += n;
                } else {
                    self.grown_short += n;
                }
                let s = self.page_count;
                self.page_count = s.saturating_add(n);
                s
            }
        };
        self.mark(first, n);
        first
    }

    /// Allocates `n` pages as pieces of at least `min` pages each (the last may be shorter):
    /// the shortest free run that holds the rest if there is one, else the longest free run
    /// if it holds `min`, else the rest as new pages at the end of the file. A writer of long
    /// runs whose readers need only `min` contiguous pages so reuses holes too short for it.
    pub(super) fn allocate_pieces(&mut self, n: u64, min: u64) -> Vec<(u64, u64)> {
        let mut pieces = Vec::new();
        let mut rest = n;
        while rest > 0 {
            let (first, len) = match self.free.take(rest) {
                Some(s) => (s, rest),
                None => match self.free.take_longest(min) {
                    Some(run) => run,
                    None => (self.allocate_run(rest), rest),
                },
            };
            self.mark(first, len);
            pieces.push((first, len));
            rest -= len;
        }
        pieces
    }

    /// Whether `first..first + n` are data pages that are not deferred frees, reserved or
    /// holding free space (the caller checks the free pages).
    fn in_use(&self, first: u64, n: u64) -> bool {
        let end = first.saturating_add(n);
        n > 0
            && first >= FIRST
            && end <= self.page_count
            && !self.deferred.overlaps(first, n)
            && !self.recorded.overlaps(first, n)
            && self.space.range(first..end).next().is_none()
            && !self.reserved.iter().any(|p| (first..end).contains(p))
    }

    /// Frees `first..first + n` for reuse now.
    pub(super) fn free_run(&mut self, first: u64, n: u64) -> Result<()> {
        // `insert` refuses pages already free.
        if !self.in_use(first, n) || !self.free.insert(first, n) {
            return Err(bad_free(first, n));
        }
        self.mark(first, n);
        Ok(())
    }

    /// Frees `first..first + n` for reuse once the next checkpoint to begin is durable.
    pub(super) fn free_run_deferred(&mut self, first: u64, n: u64) -> Result<()> {
        if !self.in_use(first, n) || self.free.overlaps(first, n) {
            return Err(bad_free(first, n));
        }
        self.deferred.insert(first, n);
        self.mark(first, n);
        Ok(())
    }

    /// Frees `first..first + n` for reuse once the checkpoint with meta sequence `sequence` is
    /// durable (`durable`: the sequence of the last meta page written; at once if that is
    /// `sequence` or later). Until then the pages stay in use, and the checkpoint that makes
    /// them free recorded them in use: for an owner whose recovery rebuilds the free space from
    /// its own state (the NB-tree's complement of its live runs), not from the bitmaps.
    pub(super) fn free_run_after(
        &mut self,
        sequence: u64,
        durable: u64,
        first: u64,
        n: u64,
    ) -> Result<()> {
        if sequence <= durable {
            return self.free_run(first, n);
        }
        if !self.in_use(first, n)
            || self
                .after
                .iter()
                .any(|&(_, f, l)| f < first + n && first < f + l)
        {
            return Err(bad_free(first, n));
        }
        self.after.push((sequence, first, n));
        Ok(())
    }

    /// The lengths of the free runs (allocatable now), for space reports.
    pub(super) fn free_run_lengths(&self) -> Vec<u64> {
        self.free.iter().map(|(_, l)| l).collect()
    }

    /// Frees waiting for `free_run_after`, as runs (tests and checks).
    pub(super) fn waiting_after(&self) -> u64 {
        self.after.iter().map(|&(_, _, l)| l).sum()
    }

    /// Marks `id` in use, as redo does for a page the log shows allocated: it leaves the free
    /// (or deferred) pages, or the file grows to hold it (the pages skipped become free).
    pub(super) fn ensure_allocated(&mut self, id: u64) -> Result<()> {
        if id < FIRST
            || self.space.contains(&id)
            || self.reserved.contains(&id)
            || id >= u64::MAX / self.page_size as u64
        {
            return Err(corrupt(id, "the log allocates a meta or free-space page"));
        }
        if id >= self.page_count {
            let old = self.page_count;
            self.free.insert(old, id - old);
            self.page_count = id + 1;
            self.mark(old, id + 1 - old);
        } else if self.free.remove(id, 1)
            || self.deferred.remove(id, 1)
            || self.recorded.remove(id, 1)
        {
            self.mark(id, 1);
        }
        Ok(())
    }

    /// The marks region `r` records now: every page below the page count that is free,
    /// deferred, reserved or holding free space.
    fn bitmap(&self, r: u64) -> Vec<u8> {
        let mut bits = vec![0u8; (self.per_region / 8) as usize];
        let base = r.saturating_mul(self.per_region);
        let end = base.saturating_add(self.per_region).min(self.page_count);
        if base >= end {
            return bits;
        }
        for set in [&self.free, &self.deferred, &self.recorded] {
            for (s, l) in set.clipped(base, end) {
                set_bits(&mut bits, s - base, l);
            }
        }
        for &p in self.space.range(base..end).chain(&self.reserved) {
            if (base..end).contains(&p) {
                set_bits(&mut bits, p - base, 1);
            }
        }
        bits
    }

    /// The page count the last meta page written records.
    pub(super) fn recorded_count(&self) -> u64 {
        self.recorded_count
    }

    /// Whether `id` holds free space (a region or directory page, current, retired or new).
    pub(super) fn is_space(&self, id: u64) -> bool {
        self.space.contains(&id)
    }

    /// Gives back what a begun checkpoint took (it will not be planned).
    pub(super) fn abandon_begun(&mut self) {
        if let Some(b) = self.begun.take() {
            self.dirty.extend(b.dirty);
            self.last_dirty = 0..0;
            for p in std::mem::take(&mut self.reserved) {
                self.free.insert(p, 1);
            }
            for (s, l) in self.recorded.drain() {
                self.deferred.insert(s, l);
            }
        }
    }

    /// Notes the state the next checkpoint records (see [`super::PageFile::begin_fuzzy`]):
    /// the deferred frees so far, the marks of the dirty regions, and free pages for its
    /// free-space pages.
    pub(super) fn begin(&mut self) {
        self.abandon_begun();
        let shrinking = std::mem::take(&mut self.shrink);
        let tail = if shrinking { self.shrink_tail() } else { 0 };
        let dirty = std::mem::take(&mut self.dirty);
        self.last_dirty = 0..0;
        self.recorded = std::mem::take(&mut self.deferred);
        // Enough for every dirty region and the directory, unless the file grows meanwhile
        // (then the checkpoint grows it for the rest). Free when it began, these pages stay
        // marked whatever happens to them.
        let entries = self.regions.len() + dirty.len();
        let cap = self.inline_cap.unwrap_or(0);
        let want = dirty.len()
            + entries
                .saturating_sub(cap)
                .div_ceil(entries_per_page(self.page_size));
        while self.reserved.len() < want {
            // Shrinking, as low as possible: what is left free at the end is given back next.
            let page = if shrinking {
                self.free.take_lowest()
            } else {
                self.free.take(1)
            };
            match page {
                Some(p) => self.reserved.push(p),
                None => break,
            }
        }
        if shrinking && self.reserved.len() < want && tail > 0 {
            // No free page below the run given back: its first pages hold the checkpoint's
            // own, rather than pages the file would grow by after them.
            let keep = ((want - self.reserved.len()) as u64).min(tail);
            self.reserved
                .extend(self.page_count..self.page_count + keep);
            self.page_count += keep;
            self.shrunk.pages -= keep;
        }
        // After the reservation: the pages the shrink kept for it are marked.
        let mut bitmaps = BTreeMap::new();
        for r in dirty.iter().copied().chain([self.region(self.page_count)]) {
            bitmaps.entry(r).or_insert_with(|| self.bitmap(r));
        }
        self.begun = Some(Begun {
            page_count: self.page_count,
            dirty,
            bitmaps,
        });
    }

    /// What the checkpoint (begun, or beginning now) writes, for a meta page with an owner's
    /// area of `user_len` bytes. Its new pages leave the free space now; [`FreeSpace::commit`]
    /// once its meta page is durable, [`FreeSpace::abort`] if it failed.
    pub(super) fn plan(&mut self, user_len: usize) -> Result<Plan> {
        self.abort();
        if self.begun.is_none() {
            self.begin();
        }
        let Some(b) = self.begun.take() else {
            return Err(corrupt(0, "no checkpoint began"));
        };
        let start = b.page_count;
        let per = self.per_region;
        let cap = inline_entries(self.page_size, user_len);
        let per_page = entries_per_page(self.page_size);
        // Whether region `r` holds pages of `start..end` (the file's growth since it began).
        let grown_since = |r: u64, end: u64| {
            let base = r.saturating_mul(per);
            start.max(base) < end.min(base.saturating_add(per))
        };
        // Regions to write: those dirty as it began, and those the file grew into since
        // (pages grown since are after the state it records: they are marked free, and redo
        // allocates again those whose records survive). New pages come from the reserved ones,
        // else the file grows, which may add a region to write: repeat until enough.
        let mut grown = 0u64;
        let (written, need) = loop {
            let end = self.page_count.saturating_add(grown);
            let mut written = b.dirty.clone();
            if end > start {
                written.extend(self.region(start)..=self.region(end - 1));
            }
            let marked_regions = written
                .iter()
                .filter(|&&r| {
                    b.bitmaps.get(&r).is_some_and(|m| m.iter().any(|&x| x != 0))
                        || grown_since(r, end)
                })
                .count();
            let entries =
                self.regions.keys().filter(|r| !written.contains(r)).count() + marked_regions;
            let rewrite_dir = self.inline_cap != Some(cap) || !written.is_empty();
            let overflow_pages = if rewrite_dir {
                entries.saturating_sub(cap).div_ceil(per_page)
            } else {
                0
            };
            let need = (marked_regions + overflow_pages) as u64;
            if self.reserved.len() as u64 + grown >= need {
                break (written, need as usize);
            }
            grown += 1;
        };
        let end = self.page_count.saturating_add(grown);
        let from_reserved = need.min(self.reserved.len());
        let mut ids: Vec<u64> = self.reserved.drain(..from_reserved).collect();
        ids.extend(self.page_count..end);
        self.page_count = end;
        for p in std::mem::take(&mut self.reserved) {
            self.free.insert(p, 1);
        }
        self.space.extend(ids.iter().copied());
        let laid_out = self.lay_out(b, &written, &ids, (start, end), cap);
        let mut running = Running {
            page_count: end,
            written,
            new_pages: ids,
            released: Vec::new(),
            regions: BTreeMap::new(),
            overflow: None,
            inline_cap: cap,
        };
        match laid_out {
            Ok(l) => {
                running.released = l.released;
                running.regions = l.regions;
                running.overflow = l.overflow;
                self.running = Some(running);
                Ok(l.plan)
            }
            Err(e) => {
                self.running = Some(running);
                self.abort();
                Err(e)
            }
        }
    }

    /// Lays out the checkpoint that began as `b`: the pages of the regions in `written` and of
    /// the directory, on the pages `ids`, for a file of pages `0..end` of which those from
    /// `start` on grew since it began.
    fn lay_out(
        &self,
        mut b: Begun,
        written: &BTreeSet<u64>,
        ids: &[u64],
        (start, end): (u64, u64),
        cap: usize,
    ) -> Result<Layout> {
        let per = self.per_region;
        let per_page = entries_per_page(self.page_size);
        let mut next = ids.iter().copied();
        let mut take = || {
            next.next()
                .ok_or_else(|| corrupt(0, "a checkpoint counted too few pages for its free space"))
        };
        let mut regions = self.regions.clone();
        let mut released = self.retired.clone();
        let mut writes = Vec::new();
        for &r in written {
            let mut bits = b
                .bitmaps
                .remove(&r)
                .unwrap_or_else(|| vec![0u8; (per / 8) as usize]);
            let base = r.saturating_mul(per);
            let (lo, hi) = (start.max(base), end.min(base.saturating_add(per)));
            if lo < hi {
                set_bits(&mut bits, lo - base, hi - lo);
            }
            let marked: u32 = bits.iter().map(|b| b.count_ones()).sum();
            if let Some((old, _)) = regions.remove(&r) {
                released.push(old);
            }
            if marked > 0 {
                let id = take()?;
                let mut body = vec![0u8; self.page_size];
                encode_region(&mut body, r, marked, &bits);
                writes.push((id, body));
                regions.insert(r, (id, marked));
            }
        }
        let entries: Vec<(u64, u64)> = regions.iter().map(|(&r, &(p, _))| (r, p)).collect();
        let inline_n = entries.len().min(cap);
        let overflow = if self.inline_cap != Some(cap) || !written.is_empty() {
            released.extend(self.overflow.iter().copied());
            let chunks: Vec<&[(u64, u64)]> = entries[inline_n..].chunks(per_page).collect();
            let pages = chunks
                .iter()
                .map(|_| take())
                .collect::<Result<Vec<u64>>>()?;
            for (i, chunk) in chunks.iter().enumerate() {
                let mut body = vec![0u8; self.page_size];
                encode_directory(&mut body, pages.get(i + 1).copied().unwrap_or(0), chunk);
                writes.push((pages[i], body));
            }
            Some(pages)
        } else {
            None
        };
        if next.next().is_some() {
            return Err(corrupt(
                0,
                "a checkpoint counted too many pages for its free space",
            ));
        }
        let overflow_head = overflow
            .as_ref()
            .unwrap_or(&self.overflow)
            .first()
            .copied()
            .unwrap_or(0);
        let plan = Plan {
            page_count: end,
            writes,
            overflow_head,
            entries: entries.len() as u64,
            inline: entries[..inline_n].to_vec(),
            marked: regions.values().map(|&(_, m)| u64::from(m)).sum(),
        };
        Ok(Layout {
            plan,
            released,
            regions,
            overflow,
        })
    }

    /// The planned checkpoint's meta page (sequence `sequence`) is durable: the free-space
    /// pages it replaced, the deferred frees it records and the frees waiting for it
    /// ([`FreeSpace::free_run_after`]) become free.
    pub(super) fn commit(&mut self, sequence: u64) {
        let mut waiting = std::mem::take(&mut self.after);
        waiting.retain(|&(s, first, n)| {
            if s > sequence {
                return true;
            }
            // Checked when it was queued; nothing frees pages in use by another.
            if self.free.insert(first, n) {
                self.mark(first, n);
            }
            false
        });
        self.after = waiting;
        let Some(r) = self.running.take() else {
            return;
        };
        for p in r.released {
            self.space.remove(&p);
            self.free.insert(p, 1);
        }
        for (s, l) in self.recorded.drain() {
            self.free.insert(s, l);
        }
        self.retired.clear();
        self.regions = r.regions;
        if let Some(o) = r.overflow {
            self.overflow = o;
        }
        self.inline_cap = Some(r.inline_cap);
        self.recorded_count = r.page_count;
    }

    /// The planned checkpoint failed: the current free space stays; its new pages are retired
    /// (its meta page may have reached the disk), its regions dirty again, and the deferred
    /// frees it recorded wait for the next one.
    pub(super) fn abort(&mut self) {
        let Some(r) = self.running.take() else {
            return;
        };
        self.dirty.extend(r.written);
        self.last_dirty = 0..0;
        for (s, l) in self.recorded.drain() {
            self.deferred.insert(s, l);
        }
        self.retired.extend(r.new_pages);
        self.inline_cap = None;
    }
}
