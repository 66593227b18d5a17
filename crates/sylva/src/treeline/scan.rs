//! Range scans (§4.1.3): a segment's pages merged with the record cache, the cache's entries
//! winning and its delete markers hiding records.

use std::collections::HashMap;

use super::index::Segment;
use super::locks::{PageLock, SegMode, SegmentLock};
use super::page::Record;
use super::store::{Inner, Store};
use crate::error::Result;

/// Whether `seg`'s model places every key of its range `[seg.lower, upper)` in key order
/// across its pages: every such key shares the model's prefix (its input is then
/// non-decreasing in key order) and the slope is not negative. Keys of a segment's range that
/// do not share the prefix its records shared at the reorganization land on the page their
/// input names, out of order ([`super::model`]).
fn ordered_pages(seg: &Segment, upper: Option<&[u8]>) -> bool {
    let p = seg.model.prefix_len as usize;
    let shared = p == 0
        || upper.is_some_and(|u| seg.lower.len() >= p && u.len() >= p && seg.lower[..p] == u[..p]);
    shared && seg.model.slope >= 0.0
}

impl Store {
    /// The records of the segment holding `from` with keys `>= from` (and `< end`), the cache
    /// merged over the pages (its entries win, delete markers hide), up to `limit`; and the
    /// segment's upper bound (where the next batch starts).
    ///
    /// Where the segment's model keeps key order across its pages (every key of the range
    /// shares the model's prefix, [`ordered_pages`]), only the pages from `from`'s on are
    /// read, and first only as many as `limit` records at the goal's fill need (§4.1.3 checks
    /// "the appropriate data page(s)"; a short scan of a 16-page segment read all 16 and their
    /// overflow pages): the merge is exact up to the last key read, and the rest of the
    /// segment is read if that leaves the scan short.
    ///
    /// Locks (§4.8.3): the segment's IR lock and the S locks of its pages from the first read
    /// on are taken under the shared state lock (if one is not free, the state lock is let go
    /// until it is, and the segment looked up again); the pages are read with the state lock
    /// let go, and merged with the cache under it again. The locks keep the pages as they were
    /// read until the merge: no flush writes one (X), no reorganization installs (OX), so the
    /// cache's dirty entries at the merge and the pages read make one state.
    pub(crate) fn scan_segment(
        &self,
        from: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Record>, Option<Vec<u8>>)> {
        let (seg, upper, _locks, relinked) = self.lock_scan(from)?;
        let n = seg.pages as usize;
        let stop = match (upper.as_deref(), end) {
            (Some(u), Some(e)) => Some(u.min(e)),
            (u, e) => u.or(e),
        };
        let (start, mut read_to) = if ordered_pages(&seg, upper.as_deref()) {
            let start = seg.page_of(from);
            let need = limit.div_ceil(self.options.goal.max(1)).saturating_add(1);
            (start, start.saturating_add(need).min(n))
        } else {
            (0, n)
        };
        let mut disk = self.read_pages(&relinked, &seg, start..read_to)?.records;
        loop {
            // Keys past the last one read may lie on pages not read yet (pages read without a
            // record bound nothing: the rest is read).
            let exact_to = match disk.last() {
                _ if read_to == n => None,
                Some(r) => Some(r.0.as_slice()),
                None => {
                    disk = self.read_pages(&relinked, &seg, read_to..n)?.records;
                    read_to = n;
                    None
                }
            };
            let out = self.merge_cache(&self.inner.read(), &disk, from, stop, exact_to, limit)?;
            if out.len() >= limit || read_to == n {
                return Ok((out, upper));
            }
            // Pages of a model that keeps key order hold larger keys the later they are.
            disk.extend(self.read_pages(&relinked, &seg, read_to..n)?.records);
            read_to = n;
        }
    }

    /// The segment holding `from`, its upper bound, its IR lock and the S locks of its pages
    /// from `from`'s on (or all, [`ordered_pages`]), and its pages' overflow links as recovery
    /// corrected them; the state lock is not held on return.
    #[allow(clippy::type_complexity)]
    fn lock_scan(
        &self,
        from: &[u8],
    ) -> Result<(
        Segment,
        Option<Vec<u8>>,
        (SegmentLock<'_>, Vec<PageLock<'_>>),
        HashMap<u64, u64>,
    )> {
        loop {
            let inner = self.inner.read();
            let (seg, upper) = inner.index.find(from)?;
            let first = if ordered_pages(&seg, upper.as_deref()) {
                seg.page_of(from)
            } else {
                0
            };
            let pages = seg.first + first as u64..seg.first + u64::from(seg.pages);
            let Some(seg_lock) = self.locks.try_segment(seg.first, SegMode::Ir) else {
                drop(inner);
                drop(self.locks.segment(seg.first, SegMode::Ir));
                continue;
            };
            let mut page_locks = Vec::with_capacity(pages.clone().count());
            let mut busy = None;
            for id in pages.clone() {
                match self.locks.try_page(id, false) {
                    Some(l) => page_locks.push(l),
                    None => {
                        busy = Some(id);
                        break;
                    }
                }
            }
            if let Some(id) = busy {
                drop((inner, page_locks, seg_lock));
                drop(self.locks.page(id, false));
                continue;
            }
            let relinked = pages
                .filter_map(|id| inner.relinked.get(&id).map(|&link| (id, link)))
                .collect();
            return Ok((seg, upper, (seg_lock, page_locks), relinked));
        }
    }

    /// Merges the cache's entries in `[from, stop)` over `disk` (sorted), up to `limit`
    /// records, and, with `exact_to`, none past that key.
    fn merge_cache(
        &self,
        inner: &Inner,
        disk: &[Record],
        from: &[u8],
        stop: Option<&[u8]>,
        exact_to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Record>> {
        // The dirty entries only: a clean one repeats its page, which its S lock kept as read.
        let dirty = inner.cache.dirty_where(from, stop, |_| true)?;
        let mut out = Vec::new();
        let mut d = disk
            .iter()
            .skip_while(|r| r.0.as_slice() < from)
            .take_while(|r| stop.is_none_or(|s| r.0.as_slice() < s))
            .peekable();
        let mut c = dirty
            .into_iter()
            .filter_map(|d| inner.cache.entry(d.slot))
            .take_while(|e| exact_to.is_none_or(|x| e.key <= x))
            .peekable();
        while out.len() < limit {
            let take_cache = match (d.peek(), c.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(r), Some(e)) => {
                    if e.key <= r.0.as_slice() {
                        if e.key == r.0.as_slice() {
                            d.next();
                        }
                        true
                    } else {
                        false
                    }
                }
            };
            if take_cache {
                if let Some(e) = c.next() {
                    if let Some(v) = e.value {
                        out.push((e.key.to_vec(), v.to_vec()));
                    }
                }
            } else if let Some(r) = d.next() {
                out.push(r.clone());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::kv::KvStore;
    use crate::treeline::TreeLine;

    fn key(i: u64) -> [u8; 8] {
        (i * 16).to_be_bytes()
    }

    fn counter(db: &TreeLine, name: &str) -> u64 {
        KvStore::stats(db)
            .counters
            .iter()
            .find(|c| c.0 == name)
            .unwrap()
            .1
    }

    /// 20,000 dense keys on their pages (segments of 16 pages), none cached.
    fn store() -> TreeLine {
        let db = crate::treeline::miss_tests::store();
        for i in 0..20_000 {
            db.put(&key(i), &i.to_be_bytes()).unwrap();
        }
        db.checkpoint().unwrap();
        let mut inner = db.store().inner.write();
        for i in 0..20_000 {
            let slot = inner.cache.slot_of(&key(i)).unwrap();
            inner.cache.remove(slot).unwrap();
        }
        assert!(inner.index.all().unwrap().iter().any(|s| s.pages == 16));
        drop(inner);
        db
    }

    fn scan(db: &TreeLine, from: u64, limit: usize) -> Vec<u64> {
        let mut got = Vec::new();
        KvStore::scan(db, &key(from), limit, &mut |k, _| {
            got.push(u64::from_be_bytes(k.try_into().unwrap()) / 16);
            true
        })
        .unwrap();
        got
    }

    /// While a reorganization holds OX on a segment (Phase IV), a scan of it and a read that
    /// misses the cache wait (§4.8.1, §4.8.3), and then find the segment as the index has it.
    #[test]
    fn readers_of_a_segment_wait_for_its_ox_lock() {
        use crate::treeline::locks::SegMode;
        use std::sync::atomic::{AtomicBool, Ordering};
        let db = store();
        let store = db.store();
        let seg = store.inner.read().index.segment_of(&key(10_000)).unwrap();
        let mut ox = store.locks.segment(seg.first, SegMode::O);
        ox.upgrade();
        let (scanned, read) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            let scan = s.spawn(|| {
                let got = scan(&db, 10_000, 10);
                scanned.store(true, Ordering::SeqCst);
                got
            });
            let get = s.spawn(|| {
                let got = db.get(&key(10_001)).unwrap();
                read.store(true, Ordering::SeqCst);
                got
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                !scanned.load(Ordering::SeqCst),
                "a scan read a segment under OX"
            );
            assert!(
                !read.load(Ordering::SeqCst),
                "a read miss read a segment under OX"
            );
            drop(ox);
            assert_eq!(scan.join().unwrap(), (10_000..10_010).collect::<Vec<_>>());
            assert_eq!(get.join().unwrap(), Some(10_001u64.to_be_bytes().to_vec()));
        });
    }

    #[test]
    fn a_short_scan_reads_the_pages_it_needs_not_its_segment() {
        let db = store();
        let (segments, reads) = (counter(&db, "index_entries"), counter(&db, "page_reads"));
        assert!(segments < 100, "{segments} segments");
        let got = scan(&db, 10_010, 10);
        assert_eq!(got, (10_010..10_020).collect::<Vec<_>>());
        let read = counter(&db, "page_reads") - reads;
        assert!(read <= 3, "a scan of 10 records read {read} pages");
    }

    #[test]
    fn a_scan_whose_first_pages_are_deleted_in_the_cache_reads_on() {
        let db = store();
        // 300 deleted records (delete markers, cached) after the start: the first pages read
        // hold only those.
        for i in 10_000..10_300 {
            assert!(db.delete(&key(i)).unwrap());
        }
        assert_eq!(scan(&db, 10_000, 20), (10_300..10_320).collect::<Vec<_>>());
        // And a long scan across segments sees every record once, in order.
        let all = scan(&db, 0, usize::MAX);
        let want: Vec<u64> = (0..10_000).chain(10_300..20_000).collect();
        assert_eq!(all, want);
    }
}
