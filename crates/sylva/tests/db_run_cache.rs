//! The run cache (`db::runcache`): out-of-line values kept in memory and written back later.
//! Puts leave their runs in memory; gets of them are served there; a checkpoint writes them
//! with few writes (runs allocated one after another leave together); a value freed before
//! its write-back is never written; over its budget the cache writes back and drops values,
//! and everything reads back right, after a reopen too, with `check` passing.

mod db_common;

use std::collections::BTreeMap;

use db_common::{assert_same_contents, options, tagged_value, tmp};
use sylva::{Db, SyncMode};

fn key(i: u64) -> Vec<u8> {
    format!("run{i:06}").into_bytes()
}

#[test]
fn puts_stay_in_memory_until_a_checkpoint_writes_them_together() {
    let dir = tmp();
    // 4 MiB: the cache may hold 3 MiB, more than the 2,000 values of 1 KiB below.
    let opts = options(SyncMode::Never, 1024);
    let db = Db::open(dir.path(), opts).expect("open");
    let mut want = BTreeMap::new();
    let n = 2000;
    for i in 0..n {
        let (k, v) = (key(i), tagged_value(&key(i), i, 1024));
        db.put(&k, &v).expect("put");
        want.insert(k, v);
    }
    let before = db.stats().run_cache;
    assert_eq!(before.values, n, "every value cached: {before:?}");
    assert_eq!(before.runs_written, 0, "no run written before a checkpoint");
    for (k, v) in &want {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
    let read = db.stats().run_cache;
    assert_eq!(
        read.hits - before.hits,
        n,
        "gets served from memory: {read:?}"
    );
    assert_eq!(read.misses, before.misses, "no get read the file: {read:?}");
    db.checkpoint().expect("checkpoint");
    let after = db.stats().run_cache;
    assert_eq!(after.runs_written, n, "{after:?}");
    // 2,000 one-page runs allocated one after another: about 8 MiB in writes of up to 1 MiB.
    assert!(
        after.writes <= 32,
        "runs that follow one another are written together: {after:?}"
    );
    assert_eq!(after.values, n, "written values stay cached, clean");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
    db.check().expect("check");
}

#[test]
fn a_value_freed_before_its_write_back_is_never_written() {
    let dir = tmp();
    let opts = options(SyncMode::Never, 1024);
    let db = Db::open(dir.path(), opts).expect("open");
    let mut want = BTreeMap::new();
    for i in 0..100 {
        db.put(&key(i), &tagged_value(&key(i), i, 3000))
            .expect("put");
    }
    // Half overwritten, a quarter deleted, before any write-back.
    for i in 0..50 {
        let v = tagged_value(&key(i), 1000 + i, 5000);
        db.put(&key(i), &v).expect("overwrite");
        want.insert(key(i), v);
    }
    for i in 50..75 {
        assert!(db.delete(&key(i)).expect("delete"));
    }
    for i in 75..100 {
        want.insert(key(i), tagged_value(&key(i), i, 3000));
    }
    // The freed ones stay as fillers (`runcache`, "Holes"); the 75 freed runs come first in
    // the file, with no dirty run before them, so none fills a hole.
    assert_eq!(
        db.stats().run_cache.values,
        150,
        "freed values stay as fillers until the checkpoint"
    );
    db.checkpoint().expect("checkpoint");
    let stats = db.stats().run_cache;
    assert_eq!(
        stats.runs_written, 75,
        "only the values still referenced are written"
    );
    assert_eq!(stats.values, 75, "the checkpoint dropped the fillers");
    assert_same_contents(&db, &want, "after the checkpoint");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
    db.check().expect("check");
}

#[test]
fn over_its_budget_the_cache_writes_back_and_drops_values() {
    let dir = tmp();
    // 256 KiB in all: the cache holds at most 192 KiB, a dozen of these 16 KiB values.
    let opts = options(SyncMode::Never, 64);
    let db = Db::open(dir.path(), opts).expect("open");
    let mut want = BTreeMap::new();
    let cap = opts.cache_bytes / 4 * 3;
    for i in 0..400 {
        let (k, v) = (key(i), tagged_value(&key(i), i, 16 << 10));
        db.put(&k, &v).expect("put");
        want.insert(k, v);
        let s = db.stats();
        assert!(
            s.run_cache.bytes <= cap + cap / 8,
            "the cache stays within its budget: {:?}",
            s.run_cache
        );
        assert!(
            s.run_cache.bytes + s.budget_pages * 4096 <= opts.cache_bytes + 16 * 4096,
            "the pool's budget moves down by what the cache holds: {s:?}"
        );
    }
    let s = db.stats().run_cache;
    assert!(
        s.runs_written >= 380,
        "values beyond the budget were written back: {s:?}"
    );
    assert!(
        s.writes < s.runs_written,
        "write-backs group runs that follow one another: {s:?}"
    );
    assert_same_contents(&db, &want, "running");
    let s = db.stats().run_cache;
    assert!(s.misses > 0, "values dropped are read from the file: {s:?}");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
    db.check().expect("check");
}

#[test]
fn without_the_run_cache_every_run_is_written_at_its_put() {
    let dir = tmp();
    let mut opts = options(SyncMode::Never, 1024);
    opts.run_cache = false;
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..20 {
        db.put(&key(i), &tagged_value(&key(i), i, 2000))
            .expect("put");
    }
    for i in 0..20 {
        assert!(db.get(&key(i)).expect("get").is_some());
    }
    let s = db.stats().run_cache;
    assert_eq!((s.values, s.hits, s.runs_written), (0, 0, 0), "{s:?}");
    db.close().expect("close");
}

#[test]
fn runs_freed_call_for_a_checkpoint_so_overwrites_reuse_their_pages() {
    // Values longer than the log carries add little to the log, so `checkpoint_bytes` alone
    // never comes; the runs their overwrites free must bring the checkpoint that makes those
    // pages reusable, or every overwrite takes new pages at the file's end.
    let dir = tmp();
    let opts = sylva::DbOptions {
        checkpoint_bytes: 1 << 40,
        // The cache holds the values, so the test measures the file, not evictions.
        cache_bytes: 512 << 20,
        // Checkpoints in the writer, so each has ended when the put that asked for it returns.
        background: false,
        ..options(SyncMode::Never, 0)
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let len = 256 << 10;
    let keys = 8;
    let rounds = 80; // 8 keys × 79 overwrites × 256 KiB (65 pages each): 160 MiB freed.
    let mut want = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..keys {
            let (k, v) = (key(i), tagged_value(&key(i), round * keys + i, len));
            db.put(&k, &v).expect("put");
            want.insert(k, v);
        }
    }
    let stats = db.stats();
    assert!(
        stats.checkpoints >= 3,
        "160 MiB freed, more than twice the least that calls for a checkpoint (and one at \
         open): {} checkpoints",
        stats.checkpoints
    );
    // Without those checkpoints the file would hold every run ever written (160 MiB and
    // more); with them, the live values, what was freed since the last checkpoint (64 MiB at
    // most before the next is asked for) and what the checkpoint in force still points at.
    assert!(
        stats.file_bytes < 100 << 20,
        "overwrites reuse freed pages: the file has {} bytes",
        stats.file_bytes
    );
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
    db.check().expect("check");
}
