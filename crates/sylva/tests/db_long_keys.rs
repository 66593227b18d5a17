//! Long keys (issue 23): a database this build creates (state version 6) takes keys up to
//! `sylva::DB_MAX_KEY_LEN` (16 KiB) at every page size. The tree itself takes keys up to
//! `sylva::btree::long_max_key_len` of its node (777 bytes with 4 KiB pages); longer keys live in
//! buckets under their first 776 bytes (`db::buckets`), which several keys may share. A record of
//! a long key and a value that would not fit the record budget stores the value out of line; a
//! key one byte too long is refused with `InvalidArgument`. Scans keep key order across long
//! shared prefixes and across buckets, splits at every level keep `check()` clean, and reopen and
//! crash recovery (the log's redo, batches applied again) bring long keys back exactly.

mod db_common;

use std::collections::BTreeMap;
use std::ops::Bound;

use db_common::{assert_same_contents, tmp, Rng};
use sylva::{Db, DbOptions, Error, KvStore, PaDb, PaOptions, PaResult, SyncMode, WriteBatch};

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
        assert_eq!(limit, sylva::DB_MAX_KEY_LEN);
        assert!(limit >= 1024, "{page_size}: {limit}");
        let tree = sylva::btree::long_max_key_len(page_size - 32);
        let inline = sylva::btree::max_value_len(page_size - 32);
        let mut want = Model::new();
        let mut tag = 0;
        for len in [
            255,
            tree - 2,
            tree - 1,
            tree,
            tree + 1,
            1000,
            1024,
            4000,
            limit,
        ] {
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
    // Keys up to 3,000 bytes: in the tree up to 776, in buckets above.
    let limit = db.limits().max_key.min(3000);
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

/// 20,000 keys at the tree's limit (4 KiB pages: 776 bytes, the longest kept in the tree itself)
/// in 1,000 groups of 20 sharing a 700-byte prefix, so
/// that separators inside a group are some 700 bytes and inner nodes over several groups (no
/// common prefix to truncate) hold a few each: splits at every level, the tree grows tall, and
/// `check()` stays clean through a reopen.
#[test]
fn many_long_keys_split_every_level() {
    let dir = tmp();
    let opts = options(4096, SyncMode::Never);
    let db = Db::open(dir.path(), opts).expect("open");
    let limit = sylva::btree::long_max_key_len(4096 - 32) - 1;
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
            // Checkpoints run by the writer that passes the threshold, so the last puts before
            // a crash are after the last checkpoint and recovery has records to redo.
            background: false,
            ..options(page_size, SyncMode::Always)
        };
        let mut want = Model::new();
        let mut rng = Rng::new(page_size as u64);
        for round in 0..4u64 {
            let db = Db::open(dir.path(), opts).expect("open");
            assert_same_contents(&db, &want, &format!("{page_size}: round {round}"));
            // Keys of one tag are prefixes of each other: those over 776 bytes share a bucket.
            let limit = db.limits().max_key.min(3000);
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
            let (k, v) = (key(round, 300), value(round, 10));
            db.put(&k, &v).expect("a last put");
            want.insert(k, v);
            db.simulate_crash();
        }
        let db = Db::open(dir.path(), opts).expect("open after the last crash");
        assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
        assert_same_contents(&db, &want, &format!("{page_size}: recovered"));
    }
}

/// A key of the model test's key space (4 KiB pages, buckets under 776-byte prefixes): one of six
/// 776-byte bases cut to 700, 775 or 776 bytes (kept in the tree), or a base with a suffix of
/// 1 to 40 bytes from a three-letter alphabet (many sharing a bucket), or with a long random tail
/// (a bucket of its own most of the time), or a base changed in its last byte.
fn model_key(rng: &mut Rng) -> Vec<u8> {
    let mut k = key(1 + rng.below(6), 776);
    match rng.below(6) {
        0 => k.truncate([700, 775, 776][rng.below(3) as usize]),
        1 => k[775] = [0, 0xFF][rng.below(2) as usize],
        2 => {
            let n = 1 + rng.below(40) as usize;
            k.extend(std::iter::repeat_with(|| [0u8, b'a', 0xFF][rng.below(3) as usize]).take(n));
        }
        3 => {
            let n = rng.below(1300) as usize;
            k.extend_from_slice(&key(rng.below(30), n));
        }
        _ => k.extend(std::iter::repeat_with(|| b'a').take(1 + rng.below(3) as usize)),
    }
    k
}

/// Checks forward and backward ranges between keys of the key space (present or not, long or
/// short), a seek into the middle of a bucket, and `scan` and `map_range` from and to long keys.
fn check_ranges(db: &Db, want: &Model, rng: &mut Rng, what: &str) {
    for _ in 0..20 {
        let (a, b) = (model_key(rng), model_key(rng));
        let (lo, hi) = (a.clone().min(b.clone()), a.max(b));
        let bounds = [
            (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])),
            (Bound::Excluded(&lo[..]), Bound::Included(&hi[..])),
            (Bound::Included(&lo[..]), Bound::Unbounded),
            (Bound::Unbounded, Bound::Excluded(&hi[..])),
        ];
        for (l, h) in bounds {
            let expect: Vec<&Vec<u8>> = want.range::<[u8], _>((l, h)).map(|(k, _)| k).collect();
            let got: Vec<Vec<u8>> = db.range(l, h).map(|r| r.expect("range").0).collect();
            assert!(got.iter().eq(expect.iter().copied()), "{what}: forward");
            let got: Vec<Vec<u8>> = db.range(l, h).rev().map(|r| r.expect("rev").0).collect();
            assert!(
                got.iter().eq(expect.iter().rev().copied()),
                "{what}: backward"
            );
        }
        let mut c = db.range(Bound::Unbounded, Bound::Unbounded);
        c.seek(&lo);
        let got = c.next().map(|r| r.expect("seek").0);
        assert_eq!(
            got.as_ref(),
            want.range(lo.clone()..).next().map(|(k, _)| k),
            "{what}: seek"
        );
        let mut c = db.range(Bound::Unbounded, Bound::Unbounded).rev();
        c.seek(&hi);
        let got = c.next().map(|r| r.expect("seek back").0);
        let expect = want.range(..=hi.clone()).next_back().map(|(k, _)| k);
        assert_eq!(got.as_ref(), expect, "{what}: seek backward");
        let mut seen = Vec::new();
        let n = db
            .scan(&lo, 7, &mut |k, v| {
                seen.push((k.to_vec(), v.to_vec()));
                true
            })
            .expect("scan");
        let expect: Vec<(Vec<u8>, Vec<u8>)> = want
            .range(lo.clone()..)
            .take(7)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(n, expect.len(), "{what}: scan count");
        assert!(seen == expect, "{what}: scan");
        let mut seen = Model::new();
        db.map_range(&lo, &hi, &mut |k, v| {
            seen.insert(k.to_vec(), v.to_vec());
            true
        })
        .expect("map_range");
        let expect: Model = want
            .range(lo.clone()..hi.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(seen == expect, "{what}: map_range");
    }
}

/// A model test of long keys with 4 KiB pages: puts (values from empty to out of line),
/// deletes and write batches over a key space whose long keys crowd into shared buckets, with
/// reopens after a clean close and after a crash (`SyncMode::Always`: everything acknowledged
/// survives), a small pool and frequent checkpoints. After each reopen the contents, every key's
/// get, `check()` (every bucket decoded, its keys counted, every run referenced once, free ∪ used
/// = file) and ranges across buckets agree with the model.
#[test]
fn long_keys_model_with_reopens_and_crashes() {
    let dir = tmp();
    let opts = DbOptions {
        checkpoint_bytes: 256 << 10,
        cache_bytes: 24 * 4096,
        ..options(4096, SyncMode::Always)
    };
    let mut rng = Rng::new(23);
    let mut want = Model::new();
    let mut db = Db::open(dir.path(), opts).expect("open");
    let sizes = [0usize, 1, 5, 17, 100, 752, 3000, 70_000];
    for round in 0..8u64 {
        for i in 0..250u64 {
            let tag = round * 1000 + i;
            match rng.below(10) {
                0..=4 => {
                    let (k, v) = (
                        model_key(&mut rng),
                        value(tag, sizes[rng.below(8) as usize]),
                    );
                    db.put(&k, &v).expect("put");
                    want.insert(k, v);
                }
                5 | 6 => {
                    let k = model_key(&mut rng);
                    assert_eq!(db.delete(&k).expect("delete"), want.remove(&k).is_some());
                }
                7 => {
                    let mut batch = WriteBatch::new();
                    for j in 0..1 + rng.below(5) {
                        let k = model_key(&mut rng);
                        if rng.below(3) == 0 {
                            batch.delete(&k);
                            want.remove(&k);
                        } else {
                            let v = value(tag + j, sizes[rng.below(7) as usize]);
                            batch.put(&k, &v);
                            want.insert(k, v);
                        }
                    }
                    db.write(&batch).expect("batch");
                }
                _ => {
                    let k = model_key(&mut rng);
                    assert_eq!(db.get(&k).expect("get").as_ref(), want.get(&k), "get");
                }
            }
        }
        let what = format!("round {round}");
        check_ranges(&db, &want, &mut rng, &what);
        if round % 2 == 0 {
            db.simulate_crash();
        } else {
            db.close().expect("close");
        }
        db = Db::open(dir.path(), opts).expect("reopen");
        assert_same_contents(&db, &want, &format!("{what}, reopened"));
        let stats = db.stats();
        assert_eq!(stats.records, want.len() as u64, "{what}: stats");
    }
    let long = want.keys().filter(|k| k.len() > 776).count();
    let buckets: std::collections::BTreeSet<&[u8]> = want
        .keys()
        .filter(|k| k.len() > 776)
        .map(|k| &k[..776])
        .collect();
    assert!(
        long > 100 && buckets.len() * 4 < long,
        "{long} long keys in {} buckets",
        buckets.len()
    );
    // Everything deleted: the buckets' runs are freed and the file is all free but the tree.
    for k in want.keys() {
        assert!(db.delete(k).expect("delete"), "delete");
    }
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_eq!(db.check().expect("check").records, 0);
    assert_eq!(db.stats().overflow_values, 0);
}

/// A bucket's value limit and the key limit past 1 KiB at 4 KiB pages, and the PA mode's point
/// operations on long keys (run on the calling thread).
#[test]
fn long_keys_limits_and_the_pa_mode() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(4096, SyncMode::Never)).expect("open");
    let limit = db.limits().max_key;
    assert!(limit >= 1024);
    let long = key(5, limit);
    refused(db.put(&[&long[..], b"x"].concat(), b""), limit, "put");
    db.put(&long, b"at the limit").expect("put at the limit");
    let pa = PaDb::over(db, PaOptions::default()).expect("pa");
    let k = key(6, 1024);
    pa.put(&k, &[7u8; 3000]).expect("pa put");
    assert_eq!(pa.get(&k).expect("pa get"), Some(vec![7u8; 3000]));
    assert_eq!(
        pa.get(&long).expect("pa get"),
        Some(b"at the limit".to_vec())
    );
    assert!(pa.delete(&k).expect("pa delete"));
    assert_eq!(pa.get(&k).expect("pa get"), None);
    refused(pa.get(&[&long[..], b"x"].concat()), limit, "pa get");
    // A session: long keys beside short ones, finished on the calling thread.
    let mut session = pa.session().expect("session");
    session.submit_put(1, &k, b"again");
    session.submit_put(2, b"short", b"s");
    let mut done = 0;
    while let Some((tag, r)) = session.wait_any() {
        assert!(matches!(r.expect("put"), PaResult::Put), "{tag}");
        done += 1;
    }
    assert_eq!(done, 2);
    session.submit_get(3, &k);
    session.submit_delete(4, b"short");
    session.submit_delete(5, &k);
    let mut got = std::collections::BTreeMap::new();
    while let Some((tag, r)) = session.wait_any() {
        got.insert(tag, r.expect("op"));
    }
    assert!(
        matches!(&got[&3], PaResult::Got(Some(v)) if v == b"again"),
        "{got:?}"
    );
    assert!(matches!(got[&4], PaResult::Deleted(true)), "{got:?}");
    assert!(matches!(got[&5], PaResult::Deleted(true)), "{got:?}");
    drop(session);
    let db = pa.db();
    assert_eq!(db.check().expect("check").records, 1);
}
