//! Write batches of the PA-Tree mode (`PaDb::write`, `PaSession::submit_write`, issue 20) run on
//! its worker: each fetches its leaves with the write gate open, then closes the gate without
//! waiting and applies its ops, waiting with the gate closed for any leaf evicted meanwhile (a
//! pool of 32 pages against a tree of hundreds). Checked against a model: batches of puts and
//! deletes with repeated keys, escaped values and values stored out of line (which run through
//! `Db::write` on the caller), many in flight on the shared worker and in a session, beside
//! single writers and a thread checkpointing in a loop; bad batches apply nothing. Crash
//! atomicity is `power_loss_patree`'s.

#![allow(clippy::unwrap_used)]

mod patree_common;

use patree_common::{counter, key, load, options, value, within, Model};
use sylva::{BackendKind, Error, KvStore, PaDb, PaResult, WriteBatch};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A batch of 1–40 ops on record numbers `≡ lane (mod lanes)` below `n`, a quarter of them
/// deletes, applied to `model` as it is built (a later op on a key wins, as in the store).
fn batch(rng: &mut Rng, n: u64, lanes: u64, lane: u64, model: &mut Model) -> WriteBatch {
    let mut b = WriteBatch::new();
    for _ in 0..1 + rng.below(40) {
        let i = rng.below(n / lanes) * lanes + lane;
        if rng.below(4) == 0 {
            b.delete(&key(i));
            model.remove(&key(i));
        } else {
            let v = value(i + rng.below(3) * 1000);
            b.put(&key(i), &v);
            model.insert(key(i), v);
        }
    }
    b
}

fn contents(db: &PaDb) -> Model {
    let mut all = Model::new();
    KvStore::scan(db, b"", usize::MAX, &mut |k, v| {
        all.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    all
}

fn batches_match_the_model(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = PaDb::open(&path, options(backend)).unwrap();
    let n = 9_000u64;
    let mut model = load(&db, 6_000);
    let misses = counter(&db, "worker_misses");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // One at a time: batches may share keys.
    for _ in 0..150 {
        let b = batch(&mut rng, n, 1, 0, &mut model);
        db.write(&b).unwrap();
    }
    // Eight in flight at a time, on keys of different residues mod 8: they commute.
    for _ in 0..40 {
        let batches: Vec<_> = (0..8)
            .map(|lane| batch(&mut rng, n, 8, lane, &mut model))
            .collect();
        let ops: Vec<_> = batches.iter().map(|b| db.submit_write(b)).collect();
        for op in ops {
            op.wait().unwrap();
        }
    }
    assert!(
        counter(&db, "worker_misses") > misses + 100,
        "the batches' fetches should have missed pages"
    );
    // Splits on the worker made room as misses do: their dirty victims went through the
    // worker's backend.
    assert!(counter(&db, "worker_alloc_writebacks") > 0);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(contents(&db), model);
    assert_eq!(db.db().check().unwrap().records, model.len() as u64);
    db.close().unwrap();
    let db = PaDb::open(&path, options(backend)).unwrap();
    assert_eq!(contents(&db), model);
    db.close().unwrap();
}

#[test]
fn batches_match_the_model_inline() {
    within(120, "batches_match_the_model_inline", || {
        batches_match_the_model(BackendKind::Inline)
    });
}

#[test]
fn batches_match_the_model_uring() {
    if let Err(e) = sylva::exec::open_backend(BackendKind::Uring, 8) {
        eprintln!("skipped: the kernel refuses io_uring: {e}");
        return;
    }
    // Eight batches in flight over a pool of 32 pages evict each other's leaves: the apply
    // phase misses, the gate closed, while the others find it closed (they wait as held
    // tasks; made ready at once, they starved the holder for good).
    within(120, "batches_match_the_model_uring", || {
        batches_match_the_model(BackendKind::Uring)
    });
}

/// A session keeps batches (each round eight, on keys of different residues mod 9, so in any
/// order) and gets of keys no batch touches (residue 0) in flight together.
#[test]
fn batches_in_a_session() {
    within(120, "batches_in_a_session", batches_in_a_session_within);
}

fn batches_in_a_session_within() {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let n = 6_000u64;
    let mut model = load(&db, n);
    let fixed = model.clone();
    let mut rng = Rng(7);
    let mut session = db.session().unwrap();
    let mut want = std::collections::HashMap::new();
    for round in 0..40u64 {
        for lane in 1..9u64 {
            let tag = round * 100 + lane;
            session.submit_write(tag, &batch(&mut rng, n, 9, lane, &mut model));
            want.insert(tag, PaResult::Written);
            let g = key(rng.below(n / 9) * 9);
            session.submit_get(tag + 50, &g);
            want.insert(tag + 50, PaResult::Got(fixed.get(&g).cloned()));
        }
        while let Some((tag, r)) = session.wait_any() {
            assert_eq!(r.unwrap(), want.remove(&tag).unwrap(), "tag {tag}");
        }
    }
    assert!(want.is_empty());
    drop(session);
    assert_eq!(contents(&db), model);
    db.db().check().unwrap();
    db.close().unwrap();
}

/// Single puts and deletes from one thread, batches from two threads through the shared worker
/// and from a session (four in flight, on keys of different residues), and a thread
/// checkpointing in a loop (which closes the write gate the batches close too). Each writer
/// has its own keys (a residue mod 8) and its own model of them: the store ends as the union.
#[test]
fn batches_beside_writers_and_checkpoints() {
    within(
        120,
        "batches_beside_writers_and_checkpoints",
        beside_writers,
    );
}

fn beside_writers() {
    const LANES: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let n = 9_000u64;
    let loaded = load(&db, 8_000);
    let lane_of = |lane: u64| -> Model {
        (lane..8_000)
            .step_by(LANES as usize)
            .map(|i| (key(i), loaded[&key(i)].clone()))
            .collect()
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut want = Model::new();
    std::thread::scope(|s| {
        let checkpoints = s.spawn(|| {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                db.db().checkpoint().unwrap();
                n += 1;
            }
            n
        });
        let db = &db;
        let singles = s.spawn(move || {
            let mut mine = lane_of(0);
            let mut rng = Rng(11);
            for _ in 0..600 {
                let i = rng.below(n / LANES) * LANES;
                if rng.below(4) == 0 {
                    db.delete(&key(i)).unwrap();
                    mine.remove(&key(i));
                } else {
                    let v = value(i + 2000);
                    db.put(&key(i), &v).unwrap();
                    mine.insert(key(i), v);
                }
            }
            vec![mine]
        });
        let threads: Vec<_> = (1..3u64)
            .map(|lane| {
                s.spawn(move || {
                    let mut mine = lane_of(lane);
                    let mut rng = Rng(lane + 11);
                    for _ in 0..150 {
                        db.write(&batch(&mut rng, n, LANES, lane, &mut mine))
                            .unwrap();
                    }
                    vec![mine]
                })
            })
            .collect();
        let session = s.spawn(move || {
            let mut mine: Vec<Model> = (4..LANES).map(lane_of).collect();
            let mut rng = Rng(3);
            let mut session = db.session().unwrap();
            for round in 0..40 {
                for (j, m) in mine.iter_mut().enumerate() {
                    let b = batch(&mut rng, n, LANES, 4 + j as u64, m);
                    session.submit_write(round * 10 + j as u64, &b);
                }
                while let Some((_, r)) = session.wait_any() {
                    assert_eq!(r.unwrap(), PaResult::Written);
                }
            }
            mine
        });
        let writers = std::iter::once(singles).chain(threads).chain([session]);
        for mine in writers.flat_map(|w| w.join().unwrap()) {
            want.extend(mine);
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(checkpoints.join().unwrap() > 0);
    });
    // Lane 3 was left alone.
    want.extend(lane_of(3));
    assert_eq!(contents(&db), want);
    db.db().check().unwrap();
    db.close().unwrap();
}

/// A batch with a key or value over the limits applies nothing and fails with
/// `InvalidArgument`, through the shared worker and a session alike; an empty batch is done.
#[test]
fn bad_batches_apply_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(BackendKind::Auto)).unwrap();
    let model = load(&db, 2_000);
    let limits = KvStore::limits(&db);
    let mut bad = WriteBatch::new();
    bad.put(&key(5), b"changed");
    bad.delete(&key(6));
    bad.put(&vec![b'k'; limits.max_key + 1], b"v");
    assert!(matches!(db.write(&bad), Err(Error::InvalidArgument { .. })));
    let mut bad_value = WriteBatch::new();
    bad_value.delete(&key(7));
    bad_value.put(&key(8), &vec![1u8; limits.max_value + 1]);
    let mut session = db.session().unwrap();
    session.submit_write(1, &bad_value);
    session.submit_write(2, &WriteBatch::new());
    let mut results: Vec<_> = std::iter::from_fn(|| session.wait_any()).collect();
    results.sort_by_key(|r| r.0);
    assert!(matches!(results[0].1, Err(Error::InvalidArgument { .. })));
    assert_eq!(results[1].1.as_ref().unwrap(), &PaResult::Written);
    drop(session);
    db.write(&WriteBatch::new()).unwrap();
    assert_eq!(contents(&db), model);
    db.close().unwrap();
}
