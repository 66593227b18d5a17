//! A page's flush (§4.2.2, §4.5.1): the dirty cache entries of one base page applied to it
//! (and its overflow page), written once; and the segment and page locks it holds (§4.8.2).
//!
//! A flush runs in three steps, so that its page reads need not hold the store's state lock
//! ([`Store::inner`]), which every cache hit and write also takes:
//!
//! 1. **Plan**, under the state lock: the segment's IW lock and the page's X lock
//!    ([`super::locks`]) are taken, and the page's dirty entries copied out with their LSNs.
//! 2. **Read and merge**, with the state lock let go when it has to read (an eviction's flush;
//!    a checkpoint's flush whose segment it pre-read does not): the page and its overflow page
//!    are read and the entries placed. The locks keep the page as it was: no other flush
//!    writes it (X), no reorganization replaces its segment (IW excludes O).
//! 3. **Write**, under the state lock again: the pages are built and join the group
//!    ([`super::group`]); each entry written is clean (or, a delete marker, gone) only if its
//!    LSN is still the one copied (a write meanwhile keeps it dirty, for the next flush), and
//!    its key's presence on the page is noted either way.
//!
//! While the lock is let go, writers and readers of other pages go on; a write to an entry of
//! this page goes to the cache as always. A read miss of a key on this page reads it with no
//! page lock (it checks the page's count of writes, [`super::store::WriteStripes`]).
//!
//! A flush that cannot place its entries gives its locks back and reorganizes the segment
//! ([`super::reorg`]), which takes O. An eviction whose victim's segment or page is locked by
//! another (a reorganization building, a flush in flight) takes another victim rather than
//! wait, up to [`SKIPS`] of them.

use parking_lot::RwLockWriteGuard;

use super::checkpoint::Preread;
use super::index::Segment;
use super::locks::{PageLock, SegMode, SegmentLock};
use super::model::input;
use super::page::{self, Header, Record};
use super::store::{distinct, Counters, Inner, PagePair, Store};
use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::io::AlignedBuf;
use crate::page::common_prefix;
use crate::page::slotted::SLOT_LEN_HEADS;

/// The store's state lock, held exclusively.
pub(crate) type InnerGuard<'a> = RwLockWriteGuard<'a, Inner>;

/// Victims an eviction passes over because their page is locked before it waits for one.
pub(crate) const SKIPS: usize = 64;

/// A dirty entry copied out for a flush.
struct Entry {
    slot: u32,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    lsn: u64,
}

/// What step 1 copied out.
struct Plan {
    seg: Segment,
    upper: Option<Vec<u8>>,
    k: usize,
    relinked: Option<u64>,
    entries: Vec<Entry>,
    /// More puts were dirty than two pages could take (module docs of `flush_page` below).
    truncated: bool,
}

/// What step 2 made of the page.
struct Merged {
    pair: PagePair,
    base: Vec<Record>,
    over: Vec<Record>,
    /// Distinct keys on the two pages before and after.
    before: u64,
    after: u64,
    /// Entries (by index) placed or removed, with whether their key was on the page.
    written: Vec<(usize, bool)>,
    /// Entries whose old version left the page though the new one did not fit.
    moved_out: Vec<usize>,
    new_overflow: bool,
    left_over: bool,
}

/// How a flush ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Every dirty entry of the page was written.
    All,
    /// Some did not fit: the segment needs a reorganization.
    Full,
}

impl Store {
    /// Writes `page` (built, not sealed) as page `id` of `kind`, covering log records up to
    /// `lsn`: its image logged first if it is the page's first write since the checkpoint
    /// began, and the log durable to the page's LSN before it is written (the WAL rule): it
    /// waits in the group for that ([`super::group`]).
    pub(crate) fn write_page(
        &self,
        inner: &mut Inner,
        id: u64,
        kind: PageKind,
        page: &mut AlignedBuf,
        lsn: u64,
    ) -> Result<()> {
        let ps = self.page_size();
        self.writes.bump(id);
        if let Some(p) = inner.preread.as_mut() {
            p.forget(id);
        }
        let mut page_lsn = lsn;
        if inner.imaged.insert(id) {
            super::log::page_image(&mut inner.log_buf, id, kind, &page[..ps]);
            let l = self.wal.append(&inner.log_buf)?;
            self.add_log_bytes(inner.log_buf.len());
            Counters::add(&self.counters.page_images, 1);
            page_lsn = page_lsn.max(l);
        }
        self.group_page(id, kind, &page[..ps], page_lsn)
    }

    /// The IW lock of `seg` and the X lock of its base page `id`, if both are free. If not,
    /// the state lock is let go until they are (then `None`: what was looked up under it must
    /// be looked up again) or, with `skip`, at once.
    fn lock_page<'s>(
        &'s self,
        guard: &mut InnerGuard<'_>,
        seg: &Segment,
        id: u64,
        skip: bool,
    ) -> Option<(SegmentLock<'s>, PageLock<'s>)> {
        if let Some(s) = self.locks.try_segment(seg.first, SegMode::Iw) {
            if let Some(p) = self.locks.try_page(id, true) {
                return Some((s, p));
            }
        }
        if !skip {
            RwLockWriteGuard::unlocked(guard, || {
                let _s = self.locks.segment(seg.first, SegMode::Iw);
                let _p = self.locks.page(id, true);
            });
        }
        None
    }

    /// Writes the dirty cache entries of the page `key` belongs to into it (and its overflow
    /// page), reorganizing while they do not fit, until `key`'s entry is clean. With
    /// `unlock_io`, page reads and a reorganization's Phases II and III let the state lock
    /// go (module docs); with `skip`, returns `false` (the entry still dirty) when the page
    /// or its segment is locked by another, rather than wait.
    pub(crate) fn flush_key(
        &self,
        guard: &mut InnerGuard<'_>,
        key: &[u8],
        unlock_io: bool,
        skip: bool,
    ) -> Result<bool> {
        // Each round writes at least one record: after a reorganization the page's overflow
        // page is empty and takes one.
        for _ in 0..10_000 {
            if !guard.cache.get(key).is_some_and(|e| e.dirty) {
                return Ok(true);
            }
            let (seg, upper) = guard.index.find(key)?;
            let k = seg.page_of(key);
            let base_id = seg.first + k as u64;
            let Some(locks) = self.lock_page(guard, &seg, base_id, skip) else {
                if skip {
                    return Ok(false);
                }
                continue;
            };
            let plan = self.plan_flush(guard, seg, upper, k)?;
            let pre = guard
                .preread
                .as_ref()
                .is_some_and(|p| p.page(base_id, self.page_size()).is_some());
            let merged = if unlock_io && !pre {
                RwLockWriteGuard::unlocked(guard, || self.merge_flush(&plan, None))
            } else {
                self.merge_flush(&plan, guard.preread.as_ref())
            }?;
            let seg = plan.seg.clone();
            let flushed = self.finish_flush(guard, plan, merged)?;
            drop(locks);
            if flushed == Flushed::Full {
                super::reorg::reorganize(self, guard, &seg, unlock_io)?;
            }
        }
        Err(Error::Corruption {
            page: 0,
            detail: "a record could not be placed on its page after many reorganizations".into(),
        })
    }

    /// Step 1: the dirty entries of page `k` of `seg`, copied. No more puts than the two
    /// pages could take are taken in one flush (the rest stay dirty, for the next round after
    /// a reorganization): a cache holding many dirty entries of one page (the first flush of a
    /// load: every record in one segment) would otherwise copy them all each round, a
    /// transient the budget does not cover.
    fn plan_flush(
        &self,
        inner: &Inner,
        seg: Segment,
        upper: Option<Vec<u8>>,
        k: usize,
    ) -> Result<Plan> {
        let dirty = inner
            .cache
            .dirty_where(&seg.lower, upper.as_deref(), |key| seg.page_of(key) == k)?;
        let prefix = upper.as_deref().map_or(0, |u| common_prefix(&seg.lower, u));
        let mut collect = 2 * (self.page_size() - page::BODY_AT);
        let mut truncated = false;
        let mut entries = Vec::with_capacity(dirty.len());
        for d in dirty {
            let Some(e) = inner.cache.entry(d.slot) else {
                continue;
            };
            if let Some(v) = e.value {
                let c = SLOT_LEN_HEADS + e.key.len().saturating_sub(prefix) + v.len();
                if c > collect {
                    truncated = true;
                    break;
                }
                collect -= c;
            }
            entries.push(Entry {
                slot: d.slot,
                key: e.key.to_vec(),
                value: e.value.map(<[u8]>::to_vec),
                lsn: d.lsn,
            });
        }
        let base_id = seg.first + k as u64;
        Ok(Plan {
            relinked: inner.relinked.get(&base_id).copied(),
            seg,
            upper,
            k,
            entries,
            truncated,
        })
    }

    /// Step 2: reads the page pair (or takes the checkpoint's copy) and places the entries.
    /// Deletes and the old versions of updated records leave first; records already on disk
    /// never move between the two pages (a crash between their writes must not lose one).
    fn merge_flush(&self, plan: &Plan, preread: Option<&Preread>) -> Result<Merged> {
        let (seg, upper) = (&plan.seg, plan.upper.as_deref());
        let (mut pair, link) = self.read_base_at(seg, plan.k, preread, plan.relinked)?;
        if link != 0 {
            pair.overflow = Some((
                link,
                self.read_overflow(link, pair.base_id, seg.production)?,
            ));
        }
        let (mut base, mut over) = Self::pair_records(&pair)?;
        let before = distinct(&base, &over);
        let prefix = upper.map_or(0, |u| common_prefix(&seg.lower, u));
        let cost = |k: &[u8], v: &[u8]| SLOT_LEN_HEADS + k.len().saturating_sub(prefix) + v.len();
        let body = |recs: &[Record]| {
            page::body_bytes(
                &seg.lower,
                upper,
                recs.iter().map(|(k, v)| (&k[..], &v[..])),
            )
        };
        let room = self.page_size() - page::BODY_AT;
        let mut written = Vec::new();
        let mut inserts = Vec::new();
        for (i, e) in plan.entries.iter().enumerate() {
            let mut was = false;
            for list in [&mut base, &mut over] {
                if let Ok(at) = list.binary_search_by(|r| r.0.as_slice().cmp(&e.key)) {
                    list.remove(at);
                    was = true;
                }
            }
            match e.value {
                None => written.push((i, was)),
                Some(_) => inserts.push((i, was)),
            }
        }
        let (mut base_bytes, mut over_bytes) = (body(&base), body(&over));
        let mut new_overflow = false;
        let mut left_over = plan.truncated;
        let mut moved_out = Vec::new();
        for (i, was) in inserts {
            let e = &plan.entries[i];
            let value = e.value.as_deref().unwrap_or_default();
            let c = cost(&e.key, value);
            let to_base = base_bytes + c <= room;
            if to_base || over_bytes + c <= room {
                let list = if to_base { &mut base } else { &mut over };
                let at = list.partition_point(|r| r.0 < e.key);
                list.insert(at, (e.key.clone(), value.to_vec()));
                if to_base {
                    base_bytes += c;
                } else {
                    over_bytes += c;
                    new_overflow |= pair.overflow.is_none();
                }
                written.push((i, was));
            } else {
                left_over = true;
                if was {
                    // Its old version leaves the page now; the entry stays dirty.
                    moved_out.push(i);
                }
            }
        }
        let after = distinct(&base, &over);
        Ok(Merged {
            pair,
            base,
            over,
            before,
            after,
            written,
            moved_out,
            new_overflow,
            left_over,
        })
    }

    /// Step 3: builds and writes the pages (the overflow page, then the base page that links
    /// it; the group writes them in page order, and Check I recovers a crash between the two
    /// whichever reached the file), then settles the cache entries (module docs).
    fn finish_flush(&self, inner: &mut Inner, plan: Plan, m: Merged) -> Result<Flushed> {
        let flushed = if m.left_over {
            Flushed::Full
        } else {
            Flushed::All
        };
        let Merged {
            mut pair,
            base,
            over,
            ..
        } = m;
        if m.written.is_empty() {
            self.recycle(pair);
            return Ok(flushed);
        }
        let (seg, upper) = (&plan.seg, plan.upper.as_deref());
        let max_lsn = m
            .written
            .iter()
            .map(|&(i, _)| plan.entries[i].lsn)
            .max()
            .unwrap_or(0);
        if pair.overflow.is_some() || !over.is_empty() {
            let over_id = match &pair.overflow {
                Some((id, _)) => *id,
                None => {
                    let id = self.file.allocate();
                    inner.imaged.remove(&id);
                    Counters::add(&self.counters.overflow_pages, 1);
                    id
                }
            };
            let header = Header {
                link: pair.base_id,
                ..pair.header
            };
            let mut buf = self.file.buffer(1);
            page::build(
                &mut buf,
                over_id,
                &header,
                &seg.lower,
                upper,
                over.iter().map(|(k, v)| (&k[..], &v[..])),
            )?;
            self.write_page(inner, over_id, PageKind::SegmentOverflow, &mut buf, max_lsn)?;
            pair.overflow = Some((over_id, buf));
        }
        let header = Header {
            link: pair.overflow.as_ref().map_or(0, |(id, _)| *id),
            ..pair.header
        };
        let base_id = pair.base_id;
        page::build(
            &mut pair.base,
            base_id,
            &header,
            &seg.lower,
            upper,
            base.iter().map(|(k, v)| (&k[..], &v[..])),
        )?;
        self.write_page(
            inner,
            base_id,
            PageKind::SegmentPage,
            &mut pair.base,
            max_lsn,
        )?;
        self.recycle(pair);
        inner.relinked.remove(&base_id);
        if m.new_overflow {
            // The index's entry as it is now: another page's flush may have counted its own.
            let mut s = inner.index.segment_of(&seg.lower)?;
            s.overflows += 1;
            inner.index.update(&s)?;
        }
        inner.disk_records = inner.disk_records + m.after - m.before;
        for i in m.moved_out {
            if let Some(s) = inner.cache.slot_of(&plan.entries[i].key) {
                inner.cache.set_on_disk(s, false);
            }
        }
        for (i, was) in m.written {
            let e = &plan.entries[i];
            let is_put = e.value.is_some();
            if is_put && !was && self.options.forecast {
                inner.tracker.record(input(&e.key, 0));
            }
            Self::written(inner, e.slot, &e.key, e.lsn, is_put)?;
        }
        Ok(flushed)
    }

    /// A cache entry copied at `lsn` from `slot` is on its page now (`is_put`: as a record;
    /// else removed): clean (a delete marker: gone) if it is still that entry at that LSN; if
    /// it was written again meanwhile, dirty still, and the page's presence of its key noted.
    pub(crate) fn written(
        inner: &mut Inner,
        slot: u32,
        key: &[u8],
        lsn: u64,
        is_put: bool,
    ) -> Result<()> {
        let Some(s) = inner.cache.slot_of(key) else {
            return Ok(());
        };
        if s != slot || inner.cache.dirty_lsn(s)? != Some(lsn) {
            inner.cache.set_on_disk(s, is_put);
            Ok(())
        } else if is_put {
            inner.cache.set_clean(s)
        } else {
            inner.cache.remove(s).map(|_| ())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::Flushed;
    use crate::treeline::miss_tests::store_with_budget;
    use crate::treeline::TreeLine;

    fn key(i: u64) -> [u8; 8] {
        (i * 7919).to_be_bytes()
    }

    /// 100 records on their pages, key 50's rewritten and dirty in the cache.
    fn one_dirty_entry() -> TreeLine {
        let db = store_with_budget(64 << 20);
        for i in 0..100 {
            db.put(&key(i), b"first").unwrap();
        }
        db.checkpoint().unwrap();
        db.put(&key(50), b"second").unwrap();
        db
    }

    /// A flush of a page whose segment a reorganization holds (O) passes over it when asked
    /// to (an eviction's), else waits, with the state lock let go, until the O lock is gone.
    #[test]
    fn a_flush_passes_over_or_waits_for_a_segment_under_o() {
        use crate::treeline::locks::SegMode;
        use std::sync::atomic::{AtomicBool, Ordering};
        let db = one_dirty_entry();
        let store = db.store();
        let seg = store.inner.read().index.segment_of(&key(50)).unwrap();
        let o = store.locks.segment(seg.first, SegMode::O);
        {
            let mut inner = store.inner.write();
            assert!(
                !store.flush_key(&mut inner, &key(50), true, true).unwrap(),
                "passed over"
            );
            assert!(inner.cache.get(&key(50)).unwrap().dirty);
        }
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let flush = s.spawn(|| {
                let r = store.flush_key(&mut store.inner.write(), &key(50), true, false);
                done.store(true, Ordering::SeqCst);
                r
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                !done.load(Ordering::SeqCst),
                "a flush wrote in a segment under O"
            );
            // The state lock was let go meanwhile: a cache hit goes on.
            assert_eq!(db.get(&key(50)).unwrap().as_deref(), Some(&b"second"[..]));
            drop(o);
            assert!(flush.join().unwrap().unwrap());
        });
        assert!(!store.inner.read().cache.get(&key(50)).unwrap().dirty);
    }

    /// Step 3 of a flush finds the entry written again while step 2 read its page without the
    /// state lock: the entry stays dirty with its newer value (marked clean, it would be
    /// evicted and the page's older value read back), and the page's presence of its key is
    /// noted.
    #[test]
    fn an_entry_written_while_its_page_is_read_stays_dirty() {
        let db = one_dirty_entry();
        let store = db.store();
        let (plan, merged) = {
            let inner = store.inner.write();
            let (seg, upper) = inner.index.find(&key(50)).unwrap();
            let k = seg.page_of(&key(50));
            let plan = store.plan_flush(&inner, seg, upper, k).unwrap();
            assert_eq!(plan.entries.len(), 1);
            drop(inner);
            let merged = store.merge_flush(&plan, None).unwrap();
            (plan, merged)
        };
        // What another writer does while the page is read.
        db.put(&key(50), b"third").unwrap();
        {
            let mut inner = store.inner.write();
            assert_eq!(
                store.finish_flush(&mut inner, plan, merged).unwrap(),
                Flushed::All
            );
            let e = inner.cache.get(&key(50)).unwrap();
            assert!(
                e.dirty,
                "the newer write was marked clean with the older one on its page"
            );
            assert_eq!((e.value, e.on_disk), (Some(&b"third"[..]), Some(true)));
        }
        db.checkpoint().unwrap();
        let inner = store.inner.read();
        let s = inner.cache.slot_of(&key(50)).unwrap();
        drop(inner);
        store.inner.write().cache.remove(s).unwrap();
        assert_eq!(
            db.get(&key(50)).unwrap().as_deref(),
            Some(&b"third"[..]),
            "read from its page"
        );
        assert_eq!(db.check().unwrap().records, 100);
    }
}
