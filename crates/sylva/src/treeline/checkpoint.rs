//! A checkpoint's flush: every dirty cache entry written to its page (the thesis has no
//! checkpoints: it ran without a log, §5.1.1; its flushes are the evictions of §4.2.2).
//!
//! - **Key order.** The dirty entries are taken in key order, so the entries of one page go
//!   together (one flush writes them all) and the pages of a segment come one after another:
//!   the group ([`super::group`]) writes consecutive pages with one I/O, and one log sync
//!   covers up to 256 pages.
//! - **Segments read whole.** A flush rewrites a page, so it reads it first. When two or more
//!   base pages of a multi-page segment have dirty entries, the segment's base pages are read
//!   with one I/O (the same `read_run` a scan uses) and each page's flush takes its copy from
//!   there: up to 16 reads become one. A page's copy is forgotten once the page is written, and
//!   the whole pre-read when a reorganization starts or the flush lets the lock go.
//! - **The lock a group at a time.** The exclusive state lock is taken for up to
//!   [`GROUP_PAGES`] pages and released in between, so readers and writers go on during a
//!   fuzzy checkpoint's flush and a quiet one's first (a quiet one's second runs with writers
//!   held back and finds what they dirtied meanwhile). Its page reads and its
//!   reorganizations' Phases II and III keep the lock, unlike an eviction's
//!   ([`super::flush`], [`super::reorg`]): with the lock let go for them, writers run beside
//!   the flush and give it more to write, checkpoints come further apart, and pages freed
//!   deferred are held longer (measured: `docs/results/treeline.md`, session 46).

use std::sync::atomic::Ordering;

use super::flush::InnerGuard;
use super::group::GROUP_PAGES;
use super::index::Segment;
use super::store::{Counters, Inner, Store};
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::AlignedBuf;

/// How far ahead (in dirty entries) a flush looks for other dirty pages of a segment.
const LOOK_AHEAD: usize = 4096;

/// A segment's base pages read with one I/O (module docs).
pub(crate) struct Preread {
    first: u64,
    pages: usize,
    buf: AlignedBuf,
    /// Bit `k`: page `k`'s copy is still the page's content.
    current: u32,
}

impl Preread {
    /// The copy of page `id`, if it is one of these pages and has not been written since.
    pub(crate) fn page(&self, id: u64, page_size: usize) -> Option<&[u8]> {
        let k = id.checked_sub(self.first)? as usize;
        if k >= self.pages || self.current & (1 << k) == 0 {
            return None;
        }
        self.buf.get(k * page_size..(k + 1) * page_size)
    }

    /// Page `id` is being written: its copy is no longer current.
    pub(crate) fn forget(&mut self, id: u64) {
        if let Some(k) = id
            .checked_sub(self.first)
            .filter(|&k| k < self.pages as u64)
        {
            self.current &= !(1 << k);
        }
    }
}

impl Store {
    /// Writes every dirty entry to its page, then the group out (module docs). Entries
    /// dirtied meanwhile may stay dirty (a checkpoint calls it again with writers held back).
    pub(crate) fn flush_all(&self) -> Result<()> {
        let slots = match self.list_dirty() {
            Ok(slots) => slots,
            Err(e) => {
                self.flush_list_bytes.store(0, Ordering::Relaxed);
                self.drop_group();
                return Err(e);
            }
        };
        let mut at = 0;
        let mut result = Ok(());
        while at < slots.len() {
            let mut inner = self.inner.write();
            let r = self.flush_some(&mut inner, &slots, &mut at);
            inner.preread = None;
            drop(inner);
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        drop(slots);
        self.flush_list_bytes.store(0, Ordering::Relaxed);
        if let Err(e) = result {
            self.drop_group();
            return Err(e);
        }
        self.write_group().inspect_err(|_| self.drop_group())
    }

    /// The slots of the dirty entries in key order, as the cache's ordered map holds them. The
    /// list, 4 bytes an entry, is charged against the budget and room is made for it first:
    /// after a phase of updates it lists about a million entries (4 MB), and a checkpoint run
    /// with no writers (a bench's finishing one) would otherwise hold it above the budget,
    /// nothing evicting meanwhile.
    pub(crate) fn list_dirty(&self) -> Result<Vec<u32>> {
        let mut inner = self.inner.write();
        self.flush_list_bytes
            .store(inner.cache.dirty() * 4, Ordering::Relaxed);
        self.evict_to_budget(&mut inner)?;
        let slots = inner.cache.dirty_slots()?;
        self.flush_list_bytes
            .store(slots.capacity() * 4, Ordering::Relaxed);
        Ok(slots)
    }

    /// Flushes the entries of `slots` from `at` on until [`GROUP_PAGES`] pages have joined
    /// the group or the slots run out.
    fn flush_some(&self, inner: &mut InnerGuard<'_>, slots: &[u32], at: &mut usize) -> Result<()> {
        let joined = self.groups.joined.load(Ordering::Relaxed);
        // The segment of the last key (its range, and the reorganizations counted then): the
        // next key, usually in it, needs no index lookup.
        let mut current: Option<(Vec<u8>, Option<Vec<u8>>, u64)> = None;
        while *at < slots.len()
            && self.groups.joined.load(Ordering::Relaxed) - joined < GROUP_PAGES as u64
        {
            let i = *at;
            *at += 1;
            let Some(key) = inner
                .cache
                .entry(slots[i])
                .filter(|e| e.dirty)
                .map(|e| e.key.to_vec())
            else {
                continue;
            };
            let reorgs = self.counters.reorganizations.load(Ordering::Relaxed);
            let same = current.as_ref().is_some_and(|(lower, upper, r)| {
                *r == reorgs && key >= *lower && upper.as_ref().is_none_or(|u| key < *u)
            });
            if !same {
                let (seg, upper) = inner.index.find(&key)?;
                inner.preread = None;
                if seg.pages > 1
                    && Self::dirty_pages(inner, &slots[i..], &seg, upper.as_deref()) > 1
                {
                    inner.preread = Some(self.preread(&seg)?);
                }
                current = Some((seg.lower, upper, reorgs));
            }
            // Its page reads and reorganizations keep the state lock (module docs).
            self.flush_key(inner, &key, false, false)?;
        }
        Ok(())
    }

    /// How many pages of `seg` (whose range ends at `upper`) the dirty entries of `slots`
    /// (sorted by key, from the first in `seg`) fall on, looking a bounded way ahead.
    fn dirty_pages(inner: &Inner, slots: &[u32], seg: &Segment, upper: Option<&[u8]>) -> u32 {
        let mut pages = 0u32;
        for &s in slots.iter().take(LOOK_AHEAD) {
            let Some(e) = inner.cache.entry(s) else {
                continue;
            };
            if upper.is_some_and(|u| e.key >= u) {
                break;
            }
            if e.dirty && e.key >= seg.lower.as_slice() {
                pages |= 1 << seg.page_of(e.key).min(31);
            }
        }
        pages.count_ones()
    }

    /// Reads the base pages of `seg` with one I/O.
    fn preread(&self, seg: &Segment) -> Result<Preread> {
        let n = seg.pages as usize;
        self.settle(seg.first, n as u64)?;
        let mut buf = self.file.buffer(n);
        self.file
            .read_run(seg.first, &mut buf, &vec![PageKind::SegmentPage; n])?;
        Counters::add(&self.counters.page_reads, n as u64);
        Ok(Preread {
            first: seg.first,
            pages: n,
            buf,
            current: if n >= 32 { u32::MAX } else { (1 << n) - 1 },
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::Ordering;

    /// A checkpoint's list of dirty entries is charged with room made for it: while the list
    /// exists the store is within its budget, not above it by the list's 4 bytes an entry.
    #[test]
    fn the_list_of_dirty_entries_is_made_room_for() {
        let budget = 16u64 << 20;
        let db = crate::treeline::miss_tests::store_with_budget(budget);
        // More records than the budget holds: the cache is full, most of it dirty.
        for i in 0..200_000u64 {
            db.put(&(i * 7919).to_be_bytes(), &[i as u8; 56]).unwrap();
        }
        let store = db.store();
        let slots = store.list_dirty().unwrap();
        assert!(slots.len() > 10_000, "{} dirty entries", slots.len());
        let memory = store.memory(&store.inner.read());
        assert!(
            memory <= budget as usize,
            "{memory} bytes held with the list of {} dirty entries, the budget {budget}",
            slots.len()
        );
        drop(slots);
        store.flush_list_bytes.store(0, Ordering::Relaxed);
        db.checkpoint().unwrap();
        assert_eq!(db.store().inner.read().cache.dirty(), 0);
    }
}
