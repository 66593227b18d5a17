//! Four threads put, get, delete and scan through at least 1,000 reorganizations: every read
//! sees the thread's own last write, scans are sorted and without duplicates and always hold
//! the keys nobody touches, and afterwards `check()` passes (segments disjoint and covering,
//! records on their model's page, no page used twice) with the exact record count. And reads
//! that miss the cache beside a writer whose evictions rewrite their pages never answer with a
//! version older than one acknowledged before the read began.

#![allow(clippy::unwrap_used)]

mod db_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use db_common::Rng;
use sylva::{KvStore, SyncMode, TreeLine, TreeLineOptions};

const THREADS: u64 = 4;
/// Keys no thread writes: every full scan must show all of them.
const UNTOUCHED: u64 = 500;

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

/// A temporary directory in memory where there is one (the tests measure no disk).
fn shm_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    tempfile::tempdir_in(if shm.is_dir() {
        shm
    } else {
        std::path::Path::new("/tmp")
    })
    .unwrap()
}

fn counter(db: &TreeLine, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|c| c.1)
        .unwrap()
}

#[test]
fn four_threads_through_a_thousand_reorganizations() {
    through_a_thousand_reorganizations(0);
}

/// The same with neighbours taken into reorganizations: each locked O only if no flush is in
/// it, while the other threads flush, read and reorganize beside.
#[test]
fn four_threads_through_a_thousand_reorganizations_of_neighbours_too() {
    through_a_thousand_reorganizations(2);
}

fn through_a_thousand_reorganizations(radius: usize) {
    let dir = shm_dir();
    let mut o = TreeLineOptions {
        sync: SyncMode::Never,
        goal: 4,
        epsilon: 2,
        radius,
        forecast: false,
        direct_io: false,
        checkpoint_bytes: 4 << 20,
        bins: 16,
        ..TreeLineOptions::default()
    };
    o.set("cache_records", "200").unwrap();
    o.cache_bytes += (8 << 20) + 8192 + (4 << 20) + 4096 + (256 << 10);
    let db = TreeLine::open(dir.path(), o).unwrap();
    for i in 0..UNTOUCHED {
        db.put(&key(i * THREADS * 1_000_000 + 999_999), b"still here")
            .unwrap();
    }
    let done = AtomicBool::new(false);
    let models: Vec<BTreeMap<[u8; 8], Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, done) = (&db, &done);
                s.spawn(move || {
                    let mut rng = Rng::new(t + 1);
                    let mut model = BTreeMap::new();
                    let mut ops = 0u64;
                    while !done.load(Ordering::Relaxed) && ops < 400_000 {
                        ops += 1;
                        // Keys of thread t: t + THREADS·n, mostly new ones (so pages fill and
                        // segments reorganize), sometimes one written before.
                        let n = if rng.below(4) == 0 {
                            rng.below(ops / 2 + 1)
                        } else {
                            ops
                        };
                        let k = key(t + THREADS * n);
                        match rng.below(100) {
                            0..=59 => {
                                let v = vec![(ops % 251) as u8; 250 + (ops % 100) as usize];
                                db.put(&k, &v).unwrap();
                                model.insert(k, v);
                            }
                            60..=74 => {
                                let was = db.delete(&k).unwrap();
                                assert_eq!(was, model.remove(&k).is_some(), "delete's answer");
                            }
                            75..=97 => {
                                assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "get");
                            }
                            _ => {
                                // Short scans from a random key; a full one now and then.
                                let full = ops % 4000 == 98;
                                let (start, limit) = if full {
                                    (Vec::new(), usize::MAX)
                                } else {
                                    (key(rng.below(1 << 40)).to_vec(), 100)
                                };
                                let mut prev: Option<Vec<u8>> = None;
                                let mut untouched = 0;
                                let n = KvStore::scan(db, &start, limit, &mut |k, v| {
                                    assert!(k >= start.as_slice(), "scan before its start");
                                    assert!(prev.as_deref().is_none_or(|p| p < k), "scan order");
                                    prev = Some(k.to_vec());
                                    untouched += u64::from(v == b"still here");
                                    true
                                })
                                .unwrap();
                                assert!(n <= limit);
                                if full {
                                    assert_eq!(untouched, UNTOUCHED, "a scan lost untouched keys");
                                }
                            }
                        }
                        if t == 0
                            && ops.is_multiple_of(1000)
                            && counter(db, "reorganizations") >= 1000
                        {
                            done.store(true, Ordering::Relaxed);
                        }
                    }
                    model
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let reorgs = counter(&db, "reorganizations");
    let ops: u64 = models.iter().map(|m| m.len() as u64).sum();
    eprintln!("{reorgs} reorganizations, {ops} live keys written by the threads");
    assert!(reorgs >= 1000, "only {reorgs} reorganizations");
    let live: usize = models.iter().map(BTreeMap::len).sum();
    for m in &models {
        for (k, v) in m {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        }
    }
    let report = db.check().unwrap();
    assert_eq!(report.records, live as u64 + UNTOUCHED);
    assert_eq!(KvStore::stats(&db).records, live as u64 + UNTOUCHED);
}

/// Keys the writer overwrites with rising versions while the readers read them.
const VERSIONED: u64 = 2_000;

#[test]
fn reads_that_miss_beside_a_writer_see_no_older_version() {
    let dir = shm_dir();
    let mut o = TreeLineOptions {
        sync: SyncMode::Never,
        goal: 8,
        epsilon: 2,
        forecast: false,
        direct_io: false,
        checkpoint_bytes: 4 << 20,
        ..TreeLineOptions::default()
    };
    // A cache of some 300 records over 2,000 read ones: most reads miss, and the writer's
    // evictions rewrite pages all the time (each write's victim is mostly dirty).
    o.set("cache_records", "300").unwrap();
    o.cache_bytes += (8 << 20) + (4 << 20) + (256 << 10);
    let db = TreeLine::open(dir.path(), o).unwrap();
    let value = |version: u64| {
        let mut v = version.to_be_bytes().to_vec();
        v.resize(120, 7);
        v
    };
    for i in 0..VERSIONED {
        db.put(&key(i), &value(0)).unwrap();
    }
    // What the writer has had acknowledged, per key.
    let acked: Vec<AtomicU64> = (0..VERSIONED).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Rng::new(99);
            for version in 1..=60_000u64 {
                let i = rng.below(VERSIONED);
                db.put(&key(i), &value(version)).unwrap();
                acked[i as usize].fetch_max(version, Ordering::SeqCst);
                // New keys now and then, so segments fill and reorganize under the readers.
                if version % 4 == 0 {
                    db.put(&key(VERSIONED + version), &value(version)).unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        for t in 0..2 {
            let (db, acked, done) = (&db, &acked, &done);
            s.spawn(move || {
                let mut rng = Rng::new(t + 1);
                let mut seen = vec![0u64; VERSIONED as usize];
                while !done.load(Ordering::SeqCst) {
                    let i = rng.below(VERSIONED) as usize;
                    let floor = acked[i].load(Ordering::SeqCst).max(seen[i]);
                    let v = db
                        .get(&key(i as u64))
                        .unwrap()
                        .expect("a versioned key is gone");
                    let got = u64::from_be_bytes(v[..8].try_into().unwrap());
                    assert!(got >= floor, "key {i}: version {got} read after {floor}");
                    seen[i] = got;
                }
            });
        }
    });
    let (misses, rereads) = (counter(&db, "cache_misses"), counter(&db, "miss_rereads"));
    eprintln!("{misses} misses, {rereads} read again");
    assert!(misses > 10_000, "only {misses} misses");
    db.check().unwrap();
}
