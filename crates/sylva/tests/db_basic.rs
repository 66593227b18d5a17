//! The durable `Db`: recovery after a simulated crash, data larger than the pool, cursors
//! against a model, batches, and the errors at the edges (locked, foreign directory).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::Bound;

use sylva::{Db, DbOptions, Error, SyncMode, WriteBatch};

mod db_common;
use db_common::tmp;

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(0x9E37_79B9) % 100_000_000).into_bytes()
}

fn opts(sync: SyncMode, cache_pages: u64) -> DbOptions {
    DbOptions {
        sync,
        cache_bytes: cache_pages * 4096,
        checkpoint_bytes: 1 << 20,
        ..DbOptions::default()
    }
}

#[test]
fn acknowledged_writes_survive_a_crash_and_recovery_redoes_the_log() {
    let dir = tmp();
    let path = dir.path().join("db");
    let mut model = BTreeMap::new();
    let db = Db::open(&path, opts(SyncMode::Always, 32)).unwrap();
    for i in 0..5000u64 {
        let v = format!("value-{i}").into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
        if i % 7 == 0 {
            assert!(db.delete(&key(i / 2)).unwrap() == model.remove(&key(i / 2)).is_some());
        }
    }
    db.simulate_crash();
    let db = Db::open(&path, opts(SyncMode::Always, 32)).unwrap();
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let all: Vec<_> = db
        .range(Bound::Unbounded, Bound::Unbounded)
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    db.check().unwrap();
}

/// A log with a hole: in records written but never synced, recovery cuts there and opens (a power
/// failure can leave that: the OS writes unsynced pages back in any order); in synced records,
/// which later records say were durable, it refuses rather than lose acknowledged data.
#[test]
fn a_hole_in_unsynced_log_records_is_cut_and_one_in_synced_records_is_refused() {
    let options = || DbOptions {
        sync: SyncMode::Never,
        checkpoint_bytes: 1 << 30,
        ..DbOptions::default()
    };
    let value = vec![5u8; 200];
    let write_log = |path: &std::path::Path| -> (u64, u64) {
        let db = Db::open(path, options()).unwrap();
        for i in 0..3000u64 {
            db.put(&key(i), &value).unwrap();
        }
        db.sync().unwrap();
        let synced = std::fs::metadata(path.join(sylva::WAL_FILE)).unwrap().len();
        // More than the log's 1 MiB write-behind buffer, so most of it reaches the file unsynced.
        for i in 3000..9000u64 {
            db.put(&key(i), &value).unwrap();
        }
        db.simulate_crash();
        let written = std::fs::metadata(path.join(sylva::WAL_FILE)).unwrap().len();
        assert!(written > synced + (512 << 10), "{synced} {written}");
        (synced, written)
    };
    let flip = |path: &std::path::Path, at: u64| {
        let wal = path.join(sylva::WAL_FILE);
        let mut bytes = std::fs::read(&wal).unwrap();
        bytes[at as usize] ^= 0x10;
        std::fs::write(&wal, bytes).unwrap();
    };

    let dir = tmp();
    let path = dir.path().join("tail");
    let (synced, written) = write_log(&path);
    flip(&path, synced + (written - synced) / 2);
    let db = Db::open(&path, options()).unwrap();
    let report = db.recovery().clone();
    assert!(
        report.cut_bytes > 0 && report.intact_after_cut.is_some(),
        "{report:?}"
    );
    for i in 0..3000u64 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "{i}");
    }
    assert!(
        db.get(&key(8999)).unwrap().is_none(),
        "records after the hole are cut"
    );
    db.check().unwrap();
    db.close().unwrap();

    let path = dir.path().join("synced");
    let (synced, _) = write_log(&path);
    flip(&path, synced / 2);
    let err = Db::open(&path, options()).err().expect("refused");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
}

#[test]
fn data_far_larger_than_the_pool_round_trips() {
    let dir = tmp();
    let path = dir.path().join("db");
    let db = Db::open(&path, opts(SyncMode::Never, 16)).unwrap();
    let value = vec![7u8; 100];
    for i in 0..20_000u64 {
        db.put(&key(i), &value).unwrap();
    }
    let s = db.stats();
    assert!(s.tree_pages > 16 * 8, "{s:?}");
    assert!(s.resident_pages <= s.budget_pages + 2, "{s:?}");
    assert!(s.cache_misses > 0);
    db.close().unwrap();
    let db = Db::open(&path, opts(SyncMode::Never, 16)).unwrap();
    assert_eq!(db.recovery().records_redone, 0);
    for i in 0..20_000u64 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "{i}");
    }
    assert_eq!(db.check().unwrap().records, 20_000);
}

#[test]
fn cursors_match_a_model_in_both_directions() {
    let dir = tmp();
    let db = Db::open(dir.path().join("db"), opts(SyncMode::Never, 64)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000u64 {
        let k = key(i);
        db.put(&k, &k).unwrap();
        model.insert(k.clone(), k);
    }
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    let bounds = |i: usize, kind: u8| -> Bound<&[u8]> {
        match kind {
            0 => Bound::Unbounded,
            1 => Bound::Included(&keys[i]),
            _ => Bound::Excluded(&keys[i]),
        }
    };
    for (a, b) in [(0, 2999), (10, 20), (500, 2500), (1234, 1234), (7, 8)] {
        for lk in 0..3 {
            for uk in 0..3 {
                if a == b && lk == 2 && uk == 2 {
                    continue; // BTreeMap refuses equal excluded bounds
                }
                let (lo, hi) = (bounds(a, lk), bounds(b, uk));
                let want: Vec<_> = model
                    .range::<[u8], _>((lo, hi))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = db.range(lo, hi).map(|r| r.unwrap()).collect();
                assert_eq!(got, want, "{a} {lk} {b} {uk}");
                let got: Vec<_> = db.range(lo, hi).rev().map(|r| r.unwrap()).collect();
                let mut want = want;
                want.reverse();
                assert_eq!(got, want, "rev {a} {lk} {b} {uk}");
            }
        }
    }
    let mut c = db.range(Bound::Unbounded, Bound::Unbounded);
    c.seek(b"key5");
    let first = c.next().unwrap().unwrap().0;
    assert_eq!(
        Some(&first),
        model
            .range::<[u8], _>((Bound::Included(&b"key5"[..]), Bound::Unbounded))
            .next()
            .map(|e| e.0)
    );
    let mut c = db.range(Bound::Unbounded, Bound::Unbounded).rev();
    c.seek(b"key5");
    let first = c.next().unwrap().unwrap().0;
    assert_eq!(
        Some(&first),
        model
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(&b"key5"[..])))
            .next_back()
            .map(|e| e.0)
    );
}

#[test]
fn batches_apply_whole_and_survive_a_crash() {
    let dir = tmp();
    let path = dir.path().join("db");
    let db = Db::open(&path, opts(SyncMode::Always, 32)).unwrap();
    db.put(b"gone", b"x").unwrap();
    let mut b = WriteBatch::new();
    for i in 0..500u64 {
        b.put(&key(i), b"batch");
    }
    b.delete(b"gone");
    db.write(&b).unwrap();
    let mut bad = WriteBatch::new();
    bad.put(b"ok", b"1").put(&[], b"empty key is invalid");
    assert!(matches!(db.write(&bad), Err(Error::InvalidArgument { .. })));
    db.simulate_crash();
    let db = Db::open(&path, opts(SyncMode::Always, 32)).unwrap();
    for i in 0..500u64 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"batch"[..]));
    }
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert_eq!(db.get(b"ok").unwrap(), None);
}

#[test]
fn a_second_open_is_locked_and_foreign_directories_are_refused() {
    let dir = tmp();
    let path = dir.path().join("db");
    let db = Db::open(&path, DbOptions::default()).unwrap();
    assert!(matches!(
        Db::open(&path, DbOptions::default()),
        Err(Error::Locked { .. })
    ));
    drop(db);
    Db::open(&path, DbOptions::default()).unwrap();

    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), b"hello").unwrap();
    assert!(matches!(
        Db::open(&foreign, DbOptions::default()),
        Err(Error::NotSylva { .. })
    ));
    std::fs::write(foreign.join("data.sylva"), vec![0x42u8; 8192]).unwrap();
    assert!(Db::open(&foreign, DbOptions::default()).is_err());
}
