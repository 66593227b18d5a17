//! Semi-dense leaves (node kind 4) in the durable `Db`: they pass through a buffer pool far
//! smaller than the data (evicted and read back with their checksums), through the log (page
//! images without their free gap, and PUT/DELETE redone on them) and through recovery, across a
//! clean close and a simulated crash, with `check()` each time.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::Bound;

use sylva::btree::{CheckReport, Layout};
use sylva::{Db, DbOptions, SyncMode};

mod db_common;
use db_common::tmp;

fn opts(layout: Layout) -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 24 * 4096,
        checkpoint_bytes: 1 << 20,
        layout,
        ..DbOptions::default()
    }
}

/// Key `n` of a dense 32-bit key set, visited in a scattered order by `i`.
fn scattered(i: u32, n: u32) -> u32 {
    ((u64::from(i) * 7919 + 17) % u64::from(n)) as u32
}

fn value(k: u32, round: u32) -> Vec<u8> {
    // Mostly 8 bytes; every 5th key a longer value (semi-dense leaves take any length).
    let len = if k.is_multiple_of(5) {
        8 + (k % 17) as usize
    } else {
        8
    };
    let mut v = vec![round as u8; len];
    v[..4].copy_from_slice(&k.to_le_bytes());
    v
}

/// Compares the whole database with the model, checks it, and returns the check's report.
fn assert_same(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> CheckReport {
    let all: Vec<_> = db
        .range(Bound::Unbounded, Bound::Unbounded)
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(all.len(), model.len());
    assert!(
        all.iter()
            .zip(model)
            .all(|(a, b)| a.0 == *b.0 && a.1 == *b.1),
        "database differs from the model"
    );
    for (k, v) in model.iter().step_by(11) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    db.check().unwrap()
}

#[test]
fn semi_dense_leaves_survive_close_reopen_and_crash_recovery() {
    let dir = tmp();
    let path = dir.path().join("db");
    let n = 30_000u32;
    let mut model = BTreeMap::new();
    let db = Db::open(&path, opts(Layout::Semidense)).unwrap();
    for i in 0..n {
        let k = scattered(i, n);
        db.put(&k.to_be_bytes(), &value(k, 0)).unwrap();
        model.insert(k.to_be_bytes().to_vec(), value(k, 0));
    }
    let r = assert_same(&db, &model);
    assert!(
        r.semi_dense_leaves * 10 > r.leaves * 9,
        "{} of {} leaves semi-dense",
        r.semi_dense_leaves,
        r.leaves
    );
    assert!(
        db.stats().cache_misses > 0,
        "the pool evicted and re-read pages"
    );
    db.close().unwrap();

    // Reopening keeps the layout, whatever the options ask for.
    let db = Db::open(&path, opts(Layout::Adaptive)).unwrap();
    assert_eq!(db.options().layout, Layout::Semidense);
    let r2 = assert_same(&db, &model);
    assert_eq!(r2, r);

    // Changes after the checkpoint: overwrites with other lengths, deletes that empty leaves
    // (merges), inserts that convert and split leaves; then a crash.
    for i in 0..n / 2 {
        let k = scattered(i, n);
        if k.is_multiple_of(3) {
            db.delete(&k.to_be_bytes()).unwrap();
            model.remove(&k.to_be_bytes()[..]);
        } else {
            db.put(&k.to_be_bytes(), &value(k + 1, 1)).unwrap();
            model.insert(k.to_be_bytes().to_vec(), value(k + 1, 1));
        }
    }
    for k in n..n + 3000 {
        db.put(&k.to_be_bytes(), &value(k, 2)).unwrap();
        model.insert(k.to_be_bytes().to_vec(), value(k, 2));
    }
    // A key of another length lands in a semi-dense leaf and converts it back.
    let odd = [0, 0, 0x10, 0, 7];
    db.put(&odd, b"five-byte key").unwrap();
    model.insert(odd.to_vec(), b"five-byte key".to_vec());
    db.simulate_crash();

    let db = Db::open(&path, opts(Layout::Semidense)).unwrap();
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    let r3 = assert_same(&db, &model);
    assert!(r3.semi_dense_leaves * 2 > r3.leaves, "{r3:?}");
    assert!(
        r3.leaves > r3.semi_dense_leaves,
        "the five-byte key's leaf is a comparison leaf"
    );

    // A second crash straight after recovery's checkpoint, then a clean close.
    for k in (0..n).step_by(4) {
        db.put(&k.to_be_bytes(), &value(k, 3)).unwrap();
        model.insert(k.to_be_bytes().to_vec(), value(k, 3));
    }
    db.simulate_crash();
    let db = Db::open(&path, opts(Layout::Semidense)).unwrap();
    assert_same(&db, &model);
    db.close().unwrap();
    let db = Db::open(&path, opts(Layout::Semidense)).unwrap();
    assert_same(&db, &model);
}
