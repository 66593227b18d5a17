//! What the PA-Tree tests on a small pool share: the options (32 pages of 4 KiB, far fewer than
//! the tree's), keys and values, and a load through the shared worker with its model.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;

use sylva::{BackendKind, DbOptions, KvStore, PaDb, PaOptions, SyncMode};

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A `PaDb` over `backend` with a pool of 32 pages, writes not synced.
pub fn options(backend: BackendKind) -> PaOptions {
    PaOptions {
        db: DbOptions {
            sync: SyncMode::Never,
            cache_bytes: 32 * 4096,
            ..DbOptions::default()
        },
        backend,
        ..PaOptions::default()
    }
}

/// Key `i`: ten bytes, in an order other than `i`'s.
pub fn key(i: u64) -> Vec<u8> {
    format!("k{:08}", i.wrapping_mul(7919) % 1_000_003).into_bytes()
}

/// Values of 20–80 bytes; every 97th begins with an escape-worthy byte, every 1,000th is stored
/// out of line.
pub fn value(i: u64) -> Vec<u8> {
    if i % 1000 == 1 {
        return vec![(i % 251) as u8; 9000];
    }
    let mut v = vec![(i % 251) as u8; 20 + (i % 61) as usize];
    if i.is_multiple_of(97) {
        v[0] = 0xFE;
    }
    v[1..9].copy_from_slice(&i.to_le_bytes());
    v
}

/// Puts records `0..n` through the shared worker, 64 in flight at a time; returns the model.
pub fn load(db: &PaDb, n: u64) -> Model {
    let mut model = Model::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
        let ops: Vec<_> = chunk
            .iter()
            .map(|&i| {
                model.insert(key(i), value(i));
                db.submit_put(&key(i), &value(i))
            })
            .collect();
        for op in ops {
            op.wait().unwrap();
        }
    }
    model
}

/// Runs `f`; exits the test binary failing if it has not returned within `secs` seconds (a
/// livelocked worker never finishes its tasks).
pub fn within(secs: u64, test: &'static str, f: impl FnOnce()) {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let timeout = std::time::Duration::from_secs(secs);
        if wait.recv_timeout(timeout) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            eprintln!("{test}: not finished after {secs} s (a worker livelocked?)");
            std::process::exit(101);
        }
    });
    f();
    drop(done);
}

/// The value of the counter `name` in `db`'s stats (the workers' included).
pub fn counter(db: &PaDb, name: &str) -> u64 {
    let stats = KvStore::stats(db);
    stats
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}
