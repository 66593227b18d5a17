//! Eviction (§4.2.2) with a dirty victim's pages read outside the lock.
//!
//! A write, or a read miss admitting its record, evicts until the store is within its budget.
//! A clean victim leaves at once. A dirty victim's page must be read, updated with every dirty
//! entry of that page, and written (the write waits in the group, [`super::group`]); the read
//! is the slow part, and under the exclusive lock it held up every other thread, cache hits
//! included. So the evicting thread notes the victim's segment, its page and the page's count
//! of writes ([`super::store::WriteStripes`]) under the lock, releases the lock while it reads
//! the page and its overflow page, and takes the lock back to flush. It uses what it read only
//! if the index still names the same segment (same first page and production ID) and the page's
//! count is unchanged: a flush that rewrote the page, or a reorganization that replaced the
//! segment, would have changed one of them (the same check as a read miss's,
//! [`super::store::Store::admit_miss`]). Else the flush reads the page again under the lock
//! (`flush_rereads`), as it did before.
//!
//! Anything may happen while the lock is released: another thread may flush the victim, evict
//! it, write it again, or reorganize its segment. The victim is therefore taken back by its
//! key, and only if it is still cached and dirty is its page flushed; a batch is cached whole
//! before its writer evicts (a reader never sees part of one).
//!
//! This is not the thesis's locking (§4.8: segment locks IR/IW/O/OX, page locks S/X): the
//! page's state is validated after the read instead of locked during it, as the thesis
//! suggests for the index ("an opportunistic concurrency scheme", §4.3.2). Reorganizations and
//! the group's write-out still run under the exclusive lock.

use parking_lot::RwLockWriteGuard;

use super::index::Segment;
use super::store::{Counters, Inner, PagePair, Store};
use crate::error::Result;

/// A dirty victim's page pair, read with the lock released, and what it was read for.
pub(crate) struct PreRead {
    first: u64,
    production: u64,
    /// The base page's index in its segment.
    page: usize,
    /// The base page's count of writes when the read was planned.
    writes: u64,
    pair: Result<PagePair>,
}

impl Store {
    /// Evicts entries (writing dirty victims' pages) until the store is within its budget,
    /// releasing the lock while a dirty victim's pages are read (module docs).
    pub(crate) fn evict_to_budget(&self, inner: &mut RwLockWriteGuard<'_, Inner>) -> Result<()> {
        if inner.redoing {
            return Ok(());
        }
        let budget = self.options.cache_bytes as usize;
        while self.memory(inner) > budget {
            if inner.cache.compact_if_loose() {
                continue;
            }
            let Some(v) = inner.cache.victim() else {
                return Ok(());
            };
            let Some(e) = inner.cache.entry(v) else {
                continue;
            };
            if !e.dirty {
                inner.cache.remove(v)?;
                continue;
            }
            let key = e.key.to_vec();
            let pre = self.pre_read(inner, &key)?;
            // The victim again, by its key: while the lock was released its slot may have been
            // freed, or given to another key.
            if !inner.cache.get(&key)?.is_some_and(|e| e.dirty) {
                continue;
            }
            self.flush_key_with(inner, &key, Some(pre))?;
            // The flush removed a delete marker's entry and kept a put's, clean.
            if let Some(s) = inner.cache.slot_of(&key)? {
                inner.cache.remove(s)?;
            }
        }
        Ok(())
    }

    /// Reads the page pair `key` is flushed to, with the lock released.
    fn pre_read(&self, inner: &mut RwLockWriteGuard<'_, Inner>, key: &[u8]) -> Result<PreRead> {
        let seg = inner.index.segment_of(key)?;
        let page = seg.page_of(key);
        let base_id = seg.first + page as u64;
        let relinked = inner.relinked.get(&base_id).copied();
        let writes = self.writes.of(base_id);
        let pair = RwLockWriteGuard::unlocked(inner, || self.read_pair_at(&seg, page, relinked));
        Ok(PreRead {
            first: seg.first,
            production: seg.production,
            page,
            writes,
            pair,
        })
    }

    /// The pair of page `k` of `seg` a flush reads: `pre`'s if it was read for that page and
    /// the page is unchanged since (its read error then too: a torn read of a page being
    /// written counts only if the page turns out unchanged), else read now, under the lock.
    pub(crate) fn flush_pair(
        &self,
        inner: &Inner,
        seg: &Segment,
        k: usize,
        pre: Option<PreRead>,
    ) -> Result<PagePair> {
        if let Some(p) = pre {
            let base_id = seg.first + k as u64;
            if p.first == seg.first
                && p.production == seg.production
                && p.page == k
                && self.writes.of(base_id) == p.writes
            {
                return p.pair;
            }
            Counters::add(&self.counters.flush_rereads, 1);
        }
        self.read_pair(inner, seg, k)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::kv::KvStore;
    use crate::treeline::miss_tests::store;
    use crate::treeline::TreeLine;

    fn key(i: u64) -> [u8; 8] {
        (i * 7919).to_be_bytes()
    }

    fn counter(db: &TreeLine, name: &str) -> u64 {
        KvStore::stats(db).counters.iter().find(|c| c.0 == name).unwrap().1
    }

    /// 200 records on their pages, none dirty; then `key(100)` written again, dirty.
    fn with_dirty_key() -> TreeLine {
        let db = store();
        for i in 0..200 {
            db.put(&key(i), b"old").unwrap();
        }
        db.checkpoint().unwrap();
        db.put(&key(100), b"new").unwrap();
        db
    }

    /// A key other than `key(100)` on `key(100)`'s page.
    fn page_mate(db: &TreeLine) -> [u8; 8] {
        let inner = db.store().inner.read();
        let seg = inner.index.segment_of(&key(100)).unwrap();
        let k = seg.page_of(&key(100));
        (0..200).map(key).find(|m| *m != key(100) && seg.page_of(m) == k).unwrap()
    }

    /// Drops `k`'s (clean) entry, so that a get reads its page.
    fn uncache(db: &TreeLine, k: &[u8]) {
        let mut inner = db.store().inner.write();
        let slot = inner.cache.slot_of(k).unwrap().unwrap();
        assert!(!inner.cache.entry(slot).unwrap().dirty);
        inner.cache.remove(slot).unwrap();
    }

    #[test]
    fn an_unchanged_page_read_unlocked_is_flushed_without_reading_it_again() {
        let db = with_dirty_key();
        let store = db.store();
        let mut inner = store.inner.write();
        let pre = store.pre_read(&mut inner, &key(100)).unwrap();
        let reads = page_reads(&db);
        store.flush_key_with(&mut inner, &key(100), Some(pre)).unwrap();
        assert_eq!(page_reads(&db), reads, "the page was read again");
        drop(inner);
        assert_eq!(counter(&db, "flush_rereads"), 0);
        uncache(&db, &key(100));
        assert_eq!(db.get(&key(100)).unwrap().as_deref(), Some(&b"new"[..]));
        db.check().unwrap();
    }

    /// `page_reads`, while the caller holds the lock (`stats` takes it).
    fn page_reads(db: &TreeLine) -> u64 {
        db.store().counters.page_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// While the evicting thread reads with the lock released, another flushes the same page
    /// with a page-mate's write: the page read before that flush must not be written back (the
    /// mate's record would be lost from the page).
    #[test]
    fn a_page_rewritten_while_it_was_read_unlocked_is_read_again() {
        let db = with_dirty_key();
        let mate = page_mate(&db);
        let store = db.store();
        let pre = store.pre_read(&mut store.inner.write(), &key(100)).unwrap();
        db.put(&mate, b"mate").unwrap();
        store.flush_key(&mut store.inner.write(), &mate).unwrap();
        db.put(&key(100), b"newer").unwrap();
        store.flush_key_with(&mut store.inner.write(), &key(100), Some(pre)).unwrap();
        assert_eq!(counter(&db, "flush_rereads"), 1);
        uncache(&db, &mate);
        uncache(&db, &key(100));
        assert_eq!(db.get(&mate).unwrap().as_deref(), Some(&b"mate"[..]));
        assert_eq!(db.get(&key(100)).unwrap().as_deref(), Some(&b"newer"[..]));
        db.check().unwrap();
    }

    #[test]
    fn a_segment_reorganized_while_its_page_was_read_unlocked_is_read_again() {
        let db = with_dirty_key();
        let store = db.store();
        let pre = store.pre_read(&mut store.inner.write(), &key(100)).unwrap();
        {
            let mut inner = store.inner.write();
            let seg = inner.index.segment_of(&key(100)).unwrap();
            crate::treeline::reorg::reorganize(store, &mut inner, &seg).unwrap();
        }
        db.put(&key(100), b"newer").unwrap();
        store.flush_key_with(&mut store.inner.write(), &key(100), Some(pre)).unwrap();
        assert_eq!(counter(&db, "flush_rereads"), 1);
        uncache(&db, &key(100));
        assert_eq!(db.get(&key(100)).unwrap().as_deref(), Some(&b"newer"[..]));
        db.check().unwrap();
    }

    /// A torn read (its checksum fails) of a page rewritten meanwhile is read again; with the
    /// page unchanged, the failure is the answer.
    #[test]
    fn a_failed_read_counts_only_if_its_page_is_unchanged() {
        let torn = || Err(crate::Error::ChecksumMismatch { page: 1, expected: 1, got: 2 });
        let db = with_dirty_key();
        let store = db.store();
        let mut pre = store.pre_read(&mut store.inner.write(), &key(100)).unwrap();
        pre.pair = torn();
        let r = store.flush_key_with(&mut store.inner.write(), &key(100), Some(pre));
        assert!(matches!(r, Err(crate::Error::ChecksumMismatch { .. })), "{r:?}");

        let db = with_dirty_key();
        let mate = page_mate(&db);
        let store = db.store();
        let mut pre = store.pre_read(&mut store.inner.write(), &key(100)).unwrap();
        pre.pair = torn();
        db.put(&mate, b"mate").unwrap();
        store.flush_key(&mut store.inner.write(), &mate).unwrap();
        db.put(&key(100), b"newer").unwrap();
        store.flush_key_with(&mut store.inner.write(), &key(100), Some(pre)).unwrap();
        uncache(&db, &key(100));
        assert_eq!(db.get(&key(100)).unwrap().as_deref(), Some(&b"newer"[..]));
    }
}
