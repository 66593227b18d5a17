//! Regression (PA-Tree mode, session 43): two workers over one small pool livelocked.
//!
//! A task whose read latch met a page another worker held (loading it, writing it back, or
//! latched) was made ready again at once and missed again at once, for good: its worker was
//! never without a ready task, so the read it had queued itself was never handed to the kernel
//! (a queued read goes out with a batch, a due probe or a wait with nothing ready), and the
//! other worker's tasks spun the same way on that page. Both threads ran at full CPU for
//! minutes, finishing nothing. Now such a task waits for its worker's next collection or a
//! short bounded time, and the worker that has nothing else ready collects or waits.
//!
//! Each test runs two workers at once over a pool of 32 pages and a tree of far more: the
//! database's shared worker (lookups submitted from four threads) with a session's worker on a
//! thread of its own, or two sessions on two threads. Every answer must be the model's, in
//! seconds: a test still running after a minute fails the test binary (a livelock never ends).

#![allow(clippy::unwrap_used)]

mod patree_common;

use std::collections::HashMap;

use patree_common::{load, options, within, Model};
use sylva::{BackendKind, PaDb, PaResult};

/// A loaded database, its model and its keys in order.
fn loaded(backend: BackendKind) -> (tempfile::TempDir, PaDb, Model, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let db = PaDb::open(dir.path().join("db"), options(backend)).unwrap();
    let model = load(&db, 10_000);
    let keys = model.keys().cloned().collect();
    (dir, db, model, keys)
}

/// 400 lookups through a session of `db`, up to 24 in flight, starting at key `seed`'s stride;
/// each answer must be the model's.
fn session_gets(db: &PaDb, model: &Model, keys: &[Vec<u8>], seed: usize) {
    let mut session = db.session().unwrap();
    let mut want = HashMap::new();
    for i in 0..400usize {
        if session.outstanding() >= 24 {
            let (tag, r) = session.wait_any().unwrap();
            assert_eq!(r.unwrap(), want.remove(&tag).unwrap(), "tag {tag}");
        }
        let key = &keys[(seed + i * 4099) % keys.len()];
        session.submit_get(i as u64, key);
        want.insert(i as u64, PaResult::Got(model.get(key).cloned()));
    }
    while let Some((tag, r)) = session.wait_any() {
        assert_eq!(r.unwrap(), want.remove(&tag).unwrap(), "tag {tag}");
    }
    assert!(want.is_empty(), "every lookup finished");
}

/// Lookups on the shared worker from four threads, 16 in flight each, while a session on a
/// fifth thread runs its own.
fn shared_worker_and_session(backend: BackendKind) {
    let (_dir, db, model, keys) = loaded(backend);
    within(60, "shared_worker_and_session", || {
        std::thread::scope(|s| {
            for t in 0..4usize {
                let (db, model, keys) = (&db, &model, &keys);
                s.spawn(move || {
                    for round in 0..10usize {
                        let ops: Vec<_> = (0..16usize)
                            .map(|j| {
                                let key = &keys[(t * 131 + round * 977 + j * 613) % keys.len()];
                                (key, db.submit_get(key))
                            })
                            .collect();
                        for (key, op) in ops {
                            assert_eq!(op.wait().unwrap(), model.get(key).cloned());
                        }
                    }
                });
            }
            s.spawn(|| session_gets(&db, &model, &keys, 0));
        });
    });
    db.db().check().unwrap();
    db.close().unwrap();
}

/// Two sessions on two threads at once.
fn two_sessions(backend: BackendKind) {
    let (_dir, db, model, keys) = loaded(backend);
    within(60, "two_sessions", || {
        std::thread::scope(|s| {
            s.spawn(|| session_gets(&db, &model, &keys, 0));
            s.spawn(|| session_gets(&db, &model, &keys, 2048));
        });
    });
    db.db().check().unwrap();
    db.close().unwrap();
}

fn uring_refused() -> bool {
    match sylva::exec::open_backend(BackendKind::Uring, 8) {
        Ok(_) => false,
        Err(e) => {
            eprintln!("skipped: the kernel refuses io_uring: {e}");
            true
        }
    }
}

#[test]
fn shared_worker_and_session_inline() {
    shared_worker_and_session(BackendKind::Inline);
}

#[test]
fn shared_worker_and_session_uring() {
    if !uring_refused() {
        shared_worker_and_session(BackendKind::Uring);
    }
}

#[test]
fn two_sessions_inline() {
    two_sessions(BackendKind::Inline);
}

#[test]
fn two_sessions_uring() {
    if !uring_refused() {
        two_sessions(BackendKind::Uring);
    }
}
