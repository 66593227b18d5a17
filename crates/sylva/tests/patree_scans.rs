//! Scans and range maps of the PA-Tree mode (`PaDb`, issue 20) run on its worker: the worker
//! gathers whole leaves a chunk at a time, stopping at each leaf not in memory (a pool of 32
//! pages against a tree of hundreds) and going on once its read is in. Checked against a model:
//! scans from many starts and limits, range maps spanning many chunks, visitors that stop
//! early, values stored out of line or escaped, keys in buckets, scans submitted from several
//! threads at once, scans and range maps in flight in a session, and scans beside writers
//! (sorted, unique, every key no writer touches present).

#![allow(clippy::unwrap_used)]

mod patree_common;

use patree_common::{counter, key, load, options, value, Model};
use sylva::{BackendKind, KvStore, PaDb, PaResult};

fn model_scan(model: &Model, start: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range(start.to_vec()..)
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn model_range(model: &Model, start: &[u8], end: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    if start >= end {
        return Vec::new();
    }
    model
        .range(start.to_vec()..end.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn kv_scan(db: &PaDb, start: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut got = Vec::new();
    let n = KvStore::scan(db, start, limit, &mut |k, v| {
        got.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    assert_eq!(n, got.len());
    got
}

fn scans_match_the_model(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(backend)).unwrap();
    let n = 12_000u64;
    let mut model = load(&db, n);
    // Two keys longer than the tree takes (in buckets), one of them sharing its bucket.
    let long = |tail: u8| {
        let mut k = b"k00500000".to_vec();
        k.resize(2000, b'x');
        k.push(tail);
        k
    };
    for (k, v) in [
        (long(1), b"long one".to_vec()),
        (long(2), b"long two".to_vec()),
    ] {
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    let misses_before = counter(&db, "worker_misses");

    // Scans from stored keys, keys between them, before the first and past the last.
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    let mut starts: Vec<Vec<u8>> = vec![Vec::new(), b"k".to_vec(), b"z".to_vec(), long(0)];
    for i in (0..keys.len()).step_by(397) {
        starts.push(keys[i].clone());
        let mut between = keys[i].clone();
        between.push(0);
        starts.push(between);
    }
    for (j, start) in starts.iter().enumerate() {
        let limit = [0, 1, 7, 100, 1500][j % 5];
        assert_eq!(
            kv_scan(&db, start, limit),
            model_scan(&model, start, limit),
            "scan from {start:?}, {limit}"
        );
        assert_eq!(
            db.submit_scan(start, limit).wait().unwrap(),
            model_scan(&model, start, limit),
            "submit_scan from {start:?}, {limit}"
        );
    }
    // The whole tree in one range map: about a megabyte of records, several chunks.
    let all = db.submit_range(b"", b"\xff").wait().unwrap();
    assert_eq!(all, model_range(&model, b"", b"\xff"));
    let mut shown = 0;
    let n_all = KvStore::map_range(&db, b"", b"\xff", &mut |k, v| {
        assert_eq!(model.get(k).map(Vec::as_slice), Some(v));
        shown += 1;
        true
    })
    .unwrap();
    assert_eq!((n_all, shown), (model.len(), model.len()));
    // Ranges between keys, empty and reversed ones.
    for w in keys.windows(2).step_by(1111) {
        let at = keys.iter().position(|k| k == &w[1]).unwrap();
        let (a, b) = (&w[0], &keys[(at + 900).min(keys.len() - 1)]);
        assert_eq!(
            db.submit_range(a, b).wait().unwrap(),
            model_range(&model, a, b)
        );
        assert_eq!(db.submit_range(b, a).wait().unwrap(), Vec::new());
        assert_eq!(db.submit_range(a, a).wait().unwrap(), Vec::new());
    }
    // A visitor that stops: the walk ends there, counting the record that stopped it.
    let mut seen = 0;
    let stopped = KvStore::map_range(&db, b"", b"\xff", &mut |_, _| {
        seen += 1;
        seen < 5000
    })
    .unwrap();
    assert_eq!((stopped, seen), (5000, 5000));
    assert!(
        counter(&db, "worker_misses") > misses_before + 100,
        "scans on the worker should have missed pages"
    );
    db.db().check().unwrap();
    db.close().unwrap();
}

#[test]
fn scans_match_the_model_inline() {
    scans_match_the_model(BackendKind::Inline);
}

#[test]
fn scans_match_the_model_uring() {
    if let Err(e) = sylva::exec::open_backend(BackendKind::Uring, 8) {
        eprintln!("skipped: the kernel refuses io_uring: {e}");
        return;
    }
    scans_match_the_model(BackendKind::Uring);
}

/// Scans submitted 16 at a time from each of four threads, all in flight on the shared worker
/// together, each equal to the model's.
fn scans_from_threads(db: &PaDb, model: &Model, keys: &[Vec<u8>]) {
    std::thread::scope(|s| {
        for t in 0..4usize {
            s.spawn(move || {
                for round in 0..10usize {
                    let ops: Vec<_> = (0..16usize)
                        .map(|j| {
                            let at = (t * 131 + round * 977 + j * 613) % keys.len();
                            let start = keys[at].clone();
                            let limit = 1 + (j * 37) % 300;
                            let op = db.submit_scan(&start, limit);
                            (start, limit, op)
                        })
                        .collect();
                    for (start, limit, op) in ops {
                        assert_eq!(op.wait().unwrap(), model_scan(model, &start, limit));
                    }
                }
            });
        }
    });
}

/// A session keeps scans, range maps of several chunks and gets in flight together; results
/// come back under their tags, equal to the model's.
fn scans_in_a_session(db: &PaDb, model: &Model, keys: &[Vec<u8>]) {
    let mut session = db.session().unwrap();
    let mut want = std::collections::HashMap::new();
    for tag in 0..200u64 {
        if session.outstanding() >= 24 {
            let (tag, r) = session.wait_any().unwrap();
            assert_eq!(r.unwrap(), want.remove(&tag).unwrap(), "tag {tag}");
        }
        let at = (tag as usize * 4099) % keys.len();
        let start = &keys[at];
        if tag % 4 == 0 {
            // About 3,000 records: more than one chunk.
            let end = &keys[(at + 3000).min(keys.len() - 1)];
            session.submit_range(tag, start, end);
            want.insert(tag, PaResult::Scanned(model_range(model, start, end)));
        } else {
            session.submit_get(tag, start);
            want.insert(tag, PaResult::Got(model.get(start).cloned()));
            let tag = tag + 1_000_000;
            session.submit_scan(tag, start, 50);
            want.insert(tag, PaResult::Scanned(model_scan(model, start, 50)));
        }
    }
    while let Some((tag, r)) = session.wait_any() {
        assert_eq!(r.unwrap(), want.remove(&tag).unwrap(), "tag {tag}");
    }
    assert!(want.is_empty());
    assert!(session.counters().misses > 100, "{:?}", session.counters());
}

/// [`scans_from_threads`] and [`scans_in_a_session`] alone, then both at once (two workers
/// over one pool of 32 pages).
#[test]
fn scans_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let model = load(&db, 10_000);
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    scans_from_threads(&db, &model, &keys);
    scans_in_a_session(&db, &model, &keys);
    std::thread::scope(|s| {
        s.spawn(|| scans_from_threads(&db, &model, &keys));
        s.spawn(|| scans_in_a_session(&db, &model, &keys));
    });
    db.db().check().unwrap();
    db.close().unwrap();
}

/// Scans on the worker beside writers that put and delete the odd keys: every scan is sorted
/// and without duplicates, and holds every even key in its range, with its value.
#[test]
fn scans_beside_writers() {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let n = 8_000u64;
    let model = load(&db, n);
    let stable: Model = (0..n)
        .filter(|i| i % 2 == 0)
        .map(|i| (key(i), value(i)))
        .collect();
    assert!(stable.iter().all(|(k, v)| model.get(k) == Some(v)));
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let db = &db;
            s.spawn(move || {
                for round in 0..3u64 {
                    for i in (1..n).step_by(2).filter(|i| (i / 2) % 2 == t) {
                        if (i + round) % 3 == 0 {
                            db.delete(&key(i)).unwrap();
                        } else {
                            db.put(&key(i), &[round as u8; 150]).unwrap();
                        }
                    }
                }
            });
        }
        for _ in 0..2 {
            let (db, stable) = (&db, &stable);
            s.spawn(move || {
                for round in 0..30usize {
                    let start = key((round as u64 * 2_003) % n);
                    let got = kv_scan(db, &start, 400);
                    assert!(
                        got.windows(2).all(|w| w[0].0 < w[1].0),
                        "unsorted or duplicated"
                    );
                    let Some(last) = got.last() else { continue };
                    let want: Vec<_> = stable.range(start.clone()..=last.0.clone()).collect();
                    let have: Vec<_> = got.iter().filter(|(k, _)| stable.contains_key(k)).collect();
                    assert_eq!(have.len(), want.len(), "a stable key missing from a scan");
                    for ((hk, hv), (wk, wv)) in have.into_iter().zip(want) {
                        assert_eq!((hk, hv), (wk, wv));
                    }
                }
            });
        }
    });
    db.db().check().unwrap();
    db.close().unwrap();
}

/// Polls `f` on this thread until it is ready, parking between polls until woken.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::sync::Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            return r;
        }
        std::thread::park();
    }
}

/// A `PaOp` is a `Future` (and `Send`): a range map of several chunks awaited gives the model's
/// records, each chunk submitted as the last one's arrives; gets, puts and scans polled side by
/// side, round robin, finish with the model's answers.
#[test]
fn operations_are_futures() {
    fn send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let mut model = load(&db, 10_000);
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    let (start, end) = (&keys[100], &keys[9_000]);
    let op = db.submit_range(start, end);
    send(&op);
    assert_eq!(block_on(op).unwrap(), model_range(&model, start, end));
    for round in 0..20usize {
        let at = |j: usize| (round * 389 + j * 613) % keys.len();
        let gets: Vec<_> = (0..16).map(|j| db.submit_get(&keys[at(j)])).collect();
        let scan = db.submit_scan(&keys[at(16)], 200);
        let put = db.submit_put(&keys[at(17)], b"new");
        let got = block_on(async {
            let mut values = Vec::new();
            for g in gets {
                values.push(g.await.unwrap());
            }
            (values, scan.await.unwrap(), put.await)
        });
        for (j, v) in got.0.iter().enumerate() {
            assert_eq!(v.as_ref(), model.get(&keys[at(j)]), "get {j}");
        }
        assert_eq!(got.1, model_scan(&model, &keys[at(16)], 200));
        got.2.unwrap();
        model.insert(keys[at(17)].clone(), b"new".to_vec());
    }
    assert_eq!(
        kv_scan(&db, b"", usize::MAX),
        model_scan(&model, b"", usize::MAX)
    );
    db.close().unwrap();
}
