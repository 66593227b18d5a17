//! A checkpoint's flush of the run cache: every value dirty when it began written, the fillers
//! between dirty runs with them ([`super`]'s module docs, "Holes", "stale writes").

use std::collections::hash_map::Entry as MapEntry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{run_pages, RunCache, Victim, WRITERS, WRITE_BYTES};
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::wal::Wal;

impl RunCache {
    /// Writes every value dirty now to the file (a checkpoint's, before the page file's
    /// fsync), then waits for any write-back in progress (module docs, "stale writes").
    /// The fillers among them fill holes between the dirty runs, and every filler this flush
    /// saw leaves (module docs, "Holes").
    pub(crate) fn flush(&self, pool: &BufferPool, wal: &Wal) -> Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let ps = pool.file().page_size();
        // Pages, not values: holding every dirty value here would keep the memory of those the
        // clock evicts meanwhile until the flush ends; a batch takes its values when it runs.
        let (dirty, fillers) = {
            let inner = self.inner.read();
            let mut all: Vec<Found> = inner
                .map
                .iter()
                .filter(|(_, e)| e.dirty || e.freed)
                .map(|(&first, e)| Found {
                    first,
                    pages: run_pages(e.len(), ps),
                    dirty: e.dirty,
                })
                .collect();
            drop(inner);
            all.sort_unstable_by_key(|f| f.first);
            holes_filled(all)
        };
        let result = self.flush_dirty(&dirty, pool, wal, ps);
        let mut inner = self.inner.write();
        for first in fillers {
            if let MapEntry::Occupied(o) = inner.map.entry(first) {
                if o.get().freed && !o.get().dirty {
                    let e = o.remove();
                    self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
                }
            }
        }
        drop(inner);
        result
    }

    /// [`RunCache::flush`]'s writes: the runs of `dirty` (sorted by first page, fillers among
    /// them) in batches, then the barrier.
    fn flush_dirty(&self, dirty: &[Found], pool: &BufferPool, wal: &Wal, ps: usize) -> Result<()> {
        let mut at = 0;
        while at < dirty.len() {
            // A batch: about one write's worth of runs (a few per writer when writing in
            // parallel), so eviction is held back that long.
            let batch_bytes = if self.parallel {
                WRITE_BYTES * WRITERS * 4
            } else {
                WRITE_BYTES
            };
            let mut end = at + 1;
            let mut bytes = dirty[at].pages as usize * ps;
            while end < dirty.len() && bytes < batch_bytes {
                bytes += dirty[end].pages as usize * ps;
                end += 1;
            }
            let mut buf = self.writeback.lock();
            // Those still cached, dirty or fillers (a write-back may have written them, a free
            // or the clock dropped them; their pages are not reused before the checkpoint
            // ends, so an entry at the same first page is the one found).
            let victims: Vec<Victim> = {
                let inner = self.inner.read();
                dirty[at..end]
                    .iter()
                    .filter_map(|f| {
                        let e = inner.map.get(&f.first)?;
                        (e.dirty || e.freed).then(|| e.victim(f.first))
                    })
                    .collect()
            };
            let batch: Vec<&Victim> = victims.iter().collect();
            self.write_refs(&batch, pool.file(), Some(wal), &mut buf)?;
            let mut inner = self.inner.write();
            for v in batch {
                if let MapEntry::Occupied(mut o) = inner.map.entry(v.first) {
                    if Arc::ptr_eq(&o.get().value, &v.value) {
                        if o.get().freed {
                            let e = o.remove();
                            self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
                        } else {
                            o.get_mut().dirty = false;
                        }
                    }
                }
            }
            at = end;
        }
        drop(self.writeback.lock());
        drop(self.unlogged_lock.lock());
        Ok(())
    }
}

/// An entry a checkpoint's flush found dirty or a filler: its run's first page and pages.
#[derive(Clone, Copy)]
struct Found {
    first: u64,
    pages: u64,
    /// Dirty (else a filler).
    dirty: bool,
}

/// A flush's entries (sorted by first page) as the runs to write, each filler among them lying
/// between dirty runs with nothing but fillers between (module docs, "Holes"), and the first
/// pages of every filler.
fn holes_filled(all: Vec<Found>) -> (Vec<Found>, Vec<u64>) {
    let mut fillers = Vec::new();
    let mut write = Vec::new();
    // Fillers since the last dirty run, contiguous with it (kept if a dirty run follows them).
    let mut pending: Vec<Found> = Vec::new();
    // The page after the last run written or pending, if a filler may continue from there.
    let mut next: Option<u64> = None;
    for f in all {
        if next != Some(f.first) {
            pending.clear();
            next = None;
        }
        if f.dirty {
            write.append(&mut pending);
            write.push(f);
            next = Some(f.first + f.pages);
        } else {
            fillers.push(f.first);
            if next.is_some() {
                pending.push(f);
                next = Some(f.first + f.pages);
            }
        }
    }
    (write, fillers)
}
