//! Long keys (issue 23): a database this build creates (state version 5) takes keys up to
//! `sylva::btree::long_max_key_len` of its node (the page less its 32-byte header): 777 bytes with
//! 4 KiB pages, 1,596 with 8 KiB, 3,235 with 16 KiB. A record of a long key and a value that
//! would not fit the record budget stores the value out of line; a key one byte too long is
//! refused with `InvalidArgument`. Scans keep key order across long shared prefixes, splits at
//! every level keep `check()` clean, and reopen and crash recovery (the log's redo) bring long
//! keys back exactly.

mod db_common;

use std::collections::BTreeMap;
use std::ops::Bound;

use db_common::{assert_same_contents, tmp, Rng};
use sylva::{Db, DbOptions, Error, KvStore, SyncMode, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(page_size: usize, sync: SyncMode) -> DbOptions {
    DbOptions {
        sync,
        page_size,
        cache_bytes: 256 * page_size as u64,
        direct_io: false,
        ..DbOptions::default()
    }
}

/// A key of `len` bytes: `tag` in front, then bytes that depend on `tag` and the position.
fn key(tag: u64, len: usize) -> Vec<u8> {
    let mut k = format!("{tag:08}:").into_bytes();
    let mut x = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while k.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        k.push(x as u8);
    }
    k.truncate(len);
    k
}

fn value(tag: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (tag as usize * 31 + i) as u8).collect()
}

fn refused<T: std::fmt::Debug>(r: sylva::Result<T>, limit: usize, what: &str) {
    match r {
        Err(Error::InvalidArgument { limit: l, .. }) => assert_eq!(l, limit, "{what}"),
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn keys_up_to_the_limit_at_every_page_size() {
    for page_size in [4096usize, 8192, 16384, 65536] {
        let dir = tmp();
        let opts = options(page_size, SyncMode::Never);
        let db = Db::open(dir.path(), opts).expect("open");
        let limit = db.limits().max_key;
        assert_eq!(limit, sylva::btree::long_max_key_len(page_size - 32));
        assert!(limit >= 777, "{page_size}: {limit}");
        if page_size >= 8192 {
            assert!(limit >= 1024, "{page_size}: {limit}");
        }
        let inline = sylva::btree::max_value_len(page_size - 32);
        let mut want = Model::new();
        let mut tag = 0;
        for len in [255, 777, 1000, 1024, limit] {
            for vlen in [0, 8, inline / 2, inline, inline + 1, 5000, 70_000] {
                tag += 1;
                let (k, v) = (key(tag, len), value(tag, vlen));
                if len > limit {
                    refused(db.put(&k, &v), limit, "a key past the limit");
                    continue;
                }
                db.put(&k, &v).expect("put");
                want.insert(k, v);
            }
        }
        // One byte past the limit: refused by every operation, without a panic.
        let long = key(9999, limit + 1);
        refused(db.put(&long, b""), limit, "put");
        refused(db.get(&long), limit, "get");
        refused(db.delete(&long), limit, "delete");
        refused(db.write(WriteBatch::new().put(&long, b"x")), limit, "batch");
        assert_same_contents(&db, &want, &format!("{page_size}"));
        // Overwrite with another size, then delete some.
        let keys: Vec<Vec<u8>> = want.keys().cloned().collect();
        for (i, k) in keys.iter().enumerate() {
            match i % 3 {
                0 => drop(want.remove(k).map(|_| db.delete(k).expect("delete"))),
                1 => {
                    let v = value(i as u64, (i * 997) % 9000);
                    db.put(k, &v).expect("overwrite");
                    want.insert(k.clone(), v);
                }
                _ => {}
            }
        }
        db.close().expect("close");
        let db = Db::open(dir.path(), opts).expect("reopen");
        assert_eq!(db.limits().max_key, limit, "the limit survives a reopen");
        assert_same_contents(&db, &want, &format!("{page_size}, reopened"));
    }
}

/// Keys of every length up to the limit that share prefixes of hundreds of bytes, some of them
/// prefixes of others: forward, backward and bounded scans see them in byte order.
#[test]
fn scans_order_long_keys_sharing_long_prefixes() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(4096, SyncMode::Never)).expect("open");
    let limit = db.limits().max_key;
    let mut rng = Rng::new(7);
    let mut want = Model::new();
    let prefixes: Vec<Vec<u8>> = (0..4).map(|p| key(p, 300 + 100 * p as usize)).collect();
    for i in 0..3000u64 {
        let p = &prefixes[rng.below(4) as usize];
        let mut k = p.clone();
        let len = p.len() + rng.below((limit - p.len()) as u64 + 1) as usize;
        while k.len() < len {
            k.push([0u8, 1, 0x7F, 0xFF][rng.below(4) as usize]);
        }
        let v = value(i, [0, 9, 40, 2000][rng.below(4) as usize]);
        db.put(&k, &v).expect("put");
        want.insert(k, v);
    }
    assert_same_contents(&db, &want, "prefixes");
    let backward: Vec<Vec<u8>> = db
        .range(Bound::Unbounded, Bound::Unbounded)
        .rev()
        .map(|r| r.expect("backward").0)
        .collect();
    assert!(backward.iter().eq(want.keys().rev()), "a backward scan");
    for _ in 0..50 {
        let keys: Vec<&Vec<u8>> = want.keys().collect();
        let a = keys[rng.below(keys.len() as u64) as usize].clone();
        let mut b = keys[rng.below(keys.len() as u64) as usize].clone();
        b.truncate(b.len() - rng.below(3) as usize);
        let (lo, hi) = (a.clone().min(b.clone()), a.max(b));
        let got: Vec<Vec<u8>> = db
            .range(Bound::Included(&lo), Bound::Excluded(&hi))
            .map(|r| r.expect("range").0)
            .collect();
        let expect: Vec<Vec<u8>> = want
            .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
            .map(|(k, _)| k.clone())
            .collect();
        assert!(got == expect, "a bounded scan");
        let mut n = 0;
        db.scan(&lo, 17, &mut |k, _| {
            n += 1;
            k >= lo.as_slice()
        })
        .expect("scan");
        assert_eq!(n, want.range(lo.clone()..).take(17).count(), "scan");
    }
}

/// 20,000 keys at the limit (4 KiB pages) in 1,000 groups of 20 sharing a 700-byte prefix, so
/// that separators inside a group are some 700 bytes and inner nodes over several groups (no
/// common prefix to truncate) hold a few each: splits at every level, the tree grows tall, and
/// `check()` stays clean through a reopen.
#[test]
fn many_long_keys_split_every_level() {
    let dir = tmp();
    let opts = options(4096, SyncMode::Never);
    let db = Db::open(dir.path(), opts).expect("open");
    let limit = db.limits().max_key;
    let mut want = Model::new();
    for i in 0..20_000u64 {
        let mut k = key(db_common::splitmix(i % 1000), 700);
        k.extend_from_slice(format!("{:016x}", db_common::splitmix(i)).as_bytes());
        k.extend_from_slice(&key(i, limit - k.len()));
        assert_eq!(k.len(), limit);
        let v = value(i, 8);
        db.put(&k, &v).expect("put");
        want.insert(k, v);
    }
    let report = db.check().expect("check");
    assert_eq!(report.records, 20_000);
    eprintln!("{report:?}");
    assert!(report.height >= 5, "{report:?}");
    assert!(report.inner >= 1000, "{report:?}");
    // Half deleted: merges at every level.
    for (i, k) in want.keys().cloned().collect::<Vec<_>>().iter().enumerate() {
        if i % 2 == 0 {
            assert!(db.delete(k).expect("delete"));
            want.remove(k);
        }
    }
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "after deletes, reopened");

    // Random 1 KiB keys with 8 KiB pages.
    let dir = tmp();
    let opts = options(8192, SyncMode::Never);
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..20_000u64 {
        db.put(&key(db_common::splitmix(i), 1024), &value(i, 8))
            .expect("put");
    }
    let report = db.check().expect("check");
    assert_eq!(report.records, 20_000);
    assert!(report.height >= 3, "{report:?}");
}

/// Under `SyncMode::Always`, long keys (with inline and out-of-line values, overwritten and
/// deleted) survive a crash: recovery redoes them from the log.
#[test]
fn long_keys_survive_a_crash() {
    for page_size in [4096usize, 16384] {
        let dir = tmp();
        let opts = DbOptions {
            checkpoint_bytes: 1 << 20,
            cache_bytes: 16 * page_size as u64,
            ..options(page_size, SyncMode::Always)
        };
        let mut want = Model::new();
        let mut rng = Rng::new(page_size as u64);
        for round in 0..4u64 {
            let db = Db::open(dir.path(), opts).expect("open");
            assert_same_contents(&db, &want, &format!("{page_size}: round {round}"));
            let limit = db.limits().max_key;
            for i in 0..600u64 {
                let tag = round * 1000 + i;
                let k = key(
                    rng.below(400),
                    200 + rng.below((limit - 199) as u64) as usize,
                );
                match rng.below(5) {
                    0 => {
                        db.delete(&k).expect("delete");
                        want.remove(&k);
                    }
                    1 => {
                        let v = value(tag, 20_000);
                        db.write(WriteBatch::new().put(&k, &v)).expect("batch");
                        want.insert(k, v);
                    }
                    _ => {
                        let v = value(tag, [0, 10, 300, 1500][rng.below(4) as usize]);
                        db.put(&k, &v).expect("put");
                        want.insert(k, v);
                    }
                }
            }
            db.simulate_crash();
        }
        let db = Db::open(dir.path(), opts).expect("open after the last crash");
        assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
        assert_same_contents(&db, &want, &format!("{page_size}: recovered"));
    }
}
