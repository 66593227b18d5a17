//! A read miss notes its page under the shared lock, reads it with no lock held and admits the
//! record under the exclusive lock ([`super::store::Store::plan_miss`], `read_miss`,
//! `admit_miss`): the interleavings that decide whether what it read may still be cached, run
//! one step at a time.

#![allow(clippy::unwrap_used)]

use crate::io::{Io, MemIo};
use crate::kv::KvStore;
use crate::treeline::store::MissRead;
use crate::treeline::{TreeLine, TreeLineOptions};
use crate::SyncMode;

/// A store in memory with no background threads, no forecasting and no checkpoint of its
/// own (also for `treeline::scan`'s tests).
pub(super) fn store() -> TreeLine {
    store_with_budget(TreeLineOptions::default().cache_bytes)
}

/// The same store with `cache_bytes` as given.
pub(super) fn store_with_budget(cache_bytes: u64) -> TreeLine {
    TreeLine::open_io(
        Box::new(MemIo::new(Vec::new())),
        [
            Box::new(MemIo::new(Vec::new())) as Box<dyn Io>,
            Box::new(MemIo::new(Vec::new())),
        ],
        TreeLineOptions {
            sync: SyncMode::Never,
            background: false,
            forecast: false,
            checkpoint_bytes: 1 << 40,
            cache_bytes,
            ..TreeLineOptions::default()
        },
    )
    .unwrap()
}

fn key(i: u64) -> [u8; 8] {
    (i * 7919).to_be_bytes()
}

fn counter(db: &TreeLine, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|c| c.0 == name)
        .unwrap()
        .1
}

/// `key(100)`'s miss, its pages read.
fn miss(db: &TreeLine) -> MissRead {
    let store = db.store();
    let plan = store.plan_miss(&store.inner.read(), &key(100)).unwrap();
    store.read_miss(plan, &key(100))
}

/// While a reader waits for the exclusive lock: `key(100)` put, and its entry's eviction, which
/// writes the page and leaves the key uncached again.
fn put_flush_and_evict(db: &TreeLine) {
    db.put(&key(100), b"new").unwrap();
    let store = db.store();
    let mut inner = store.inner.write();
    store
        .flush_key(&mut inner, &key(100), false, false)
        .unwrap();
    let slot = inner.cache.slot_of(&key(100)).unwrap();
    inner.cache.remove(slot).unwrap();
}

/// A store of 200 records on their pages, `key(100)` not cached.
fn with_uncached_key() -> TreeLine {
    let db = store();
    for i in 0..200 {
        db.put(&key(i), b"old").unwrap();
    }
    db.checkpoint().unwrap();
    let mut inner = db.store().inner.write();
    let slot = inner.cache.slot_of(&key(100)).unwrap();
    inner.cache.remove(slot).unwrap();
    drop(inner);
    db
}

#[test]
fn a_miss_whose_page_was_rewritten_and_its_entry_evicted_reads_again() {
    let db = with_uncached_key();
    let store = db.store();
    let read = miss(&db);
    assert_eq!(read.found.as_ref().unwrap().0.as_deref(), Some(&b"old"[..]));
    put_flush_and_evict(&db);
    let mut out = Vec::new();
    assert!(store
        .admit_miss(&mut store.inner.write(), &key(100), read, &mut out)
        .unwrap());
    assert_eq!(out, b"new", "the page read before the flush was admitted");
    assert_eq!(counter(&db, "miss_rereads"), 1);
    assert_eq!(db.get(&key(100)).unwrap().as_deref(), Some(&b"new"[..]));
}

#[test]
fn a_miss_whose_key_a_writer_cached_answers_from_the_cache() {
    let db = with_uncached_key();
    let store = db.store();
    let read = miss(&db);
    db.put(&key(100), b"new").unwrap();
    let mut out = Vec::new();
    assert!(store
        .admit_miss(&mut store.inner.write(), &key(100), read, &mut out)
        .unwrap());
    assert_eq!(out, b"new");
    assert_eq!(counter(&db, "miss_rereads"), 0);
}

#[test]
fn a_miss_whose_pages_are_unchanged_admits_what_it_read() {
    let db = with_uncached_key();
    let store = db.store();
    let read = miss(&db);
    // A write elsewhere in the store that writes no page.
    db.put(&key(1), b"other").unwrap();
    let reads = counter(&db, "page_reads");
    let mut out = Vec::new();
    assert!(store
        .admit_miss(&mut store.inner.write(), &key(100), read, &mut out)
        .unwrap());
    assert_eq!(out, b"old");
    assert_eq!(
        (counter(&db, "miss_rereads"), counter(&db, "page_reads")),
        (0, reads)
    );
    assert!(
        store.inner.read().cache.slot_of(&key(100)).is_some(),
        "admitted"
    );
}

#[test]
fn a_miss_whose_segment_was_reorganized_reads_again() {
    let db = with_uncached_key();
    let store = db.store();
    let read = miss(&db);
    db.put(&key(100), b"new").unwrap();
    {
        // A reorganization takes the dirty entry along to new pages (the old ones are not
        // written again), and the entry is then evicted clean.
        let mut inner = store.inner.write();
        let seg = inner.index.segment_of(&key(100)).unwrap();
        crate::treeline::reorg::reorganize(store, &mut inner, &seg, true).unwrap();
        assert!(!inner.cache.get(&key(100)).unwrap().dirty);
        let slot = inner.cache.slot_of(&key(100)).unwrap();
        inner.cache.remove(slot).unwrap();
    }
    let mut out = Vec::new();
    assert!(store
        .admit_miss(&mut store.inner.write(), &key(100), read, &mut out)
        .unwrap());
    assert_eq!(out, b"new", "the replaced segment's page was admitted");
    assert_eq!(counter(&db, "miss_rereads"), 1);
}

/// A read that met a page being written (torn: its checksum fails) while a flush rewrote it is
/// read again; the same failure with the page unchanged is the answer.
#[test]
fn a_failed_read_counts_only_if_its_page_is_unchanged() {
    let torn = || {
        Err(crate::Error::ChecksumMismatch {
            page: 1,
            expected: 1,
            got: 2,
        })
    };
    let db = with_uncached_key();
    let store = db.store();
    let mut read = miss(&db);
    read.found = torn();
    let mut out = Vec::new();
    let r = store.admit_miss(&mut store.inner.write(), &key(100), read, &mut out);
    assert!(
        matches!(r, Err(crate::Error::ChecksumMismatch { .. })),
        "{r:?}"
    );

    let mut read = miss(&db);
    read.found = torn();
    put_flush_and_evict(&db);
    assert!(store
        .admit_miss(&mut store.inner.write(), &key(100), read, &mut out)
        .unwrap());
    assert_eq!(out, b"new");
}
