//! Large values under concurrency (issue 23): writers overwrite and delete keys whose values go
//! out of line while readers get and scan them and checkpoints run, so freed runs are reused
//! while readers may still hold references to them. Every value a reader sees must be one a
//! writer wrote for that key, whole (a reader that loses the race to a reused run looks the key
//! up again instead of returning wrong bytes or a spurious checksum error), and `check` passes
//! at the end.

mod db_common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use db_common::{options, tmp, Rng};
use sylva::{Db, DbOptions, KvStore, SyncMode};

const KEYS: u64 = 16;

/// The value of write `version` to key `key`: its length and every byte follow from both, so a
/// reader can tell a whole value from a torn or foreign one.
fn value(key: u64, version: u64) -> Vec<u8> {
    let len = 700 + ((version * 7919 + key * 104_729) % 150_000) as usize;
    let mut v = vec![(version % 253) as u8; len];
    v[..8].copy_from_slice(&version.to_le_bytes());
    v[8..16].copy_from_slice(&key.to_le_bytes());
    v
}

fn verify(key: u64, v: &[u8]) {
    assert!(v.len() >= 16, "a value of {} bytes for key {key}", v.len());
    let version = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
    assert_eq!(
        v,
        &value(key, version)[..],
        "key {key}: a value that is not write {version}'s whole"
    );
}

fn key_bytes(k: u64) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

#[test]
fn readers_never_see_torn_or_foreign_values_while_runs_are_freed_and_reused() {
    let dir = tmp();
    let db = Db::open(
        dir.path(),
        DbOptions {
            checkpoint_bytes: 1 << 20,
            ..options(SyncMode::Never, 128)
        },
    )
    .expect("open");
    let version = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, version, stop) = (&db, &version, &stop);
            s.spawn(move || {
                let mut rng = Rng::new(w);
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.below(KEYS);
                    if rng.below(8) == 0 {
                        db.delete(&key_bytes(k)).expect("delete");
                    } else {
                        let v = version.fetch_add(1, Ordering::Relaxed);
                        db.put(&key_bytes(k), &value(k, v)).expect("put");
                    }
                }
            });
        }
        for r in 0..2u64 {
            let (db, stop, reads) = (&db, &stop, &reads);
            s.spawn(move || {
                let mut rng = Rng::new(100 + r);
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.below(KEYS);
                    if db.get_into(&key_bytes(k), &mut buf).expect("get") {
                        verify(k, &buf);
                    }
                    if rng.below(10) == 0 {
                        KvStore::scan(db, b"key", 4, &mut |key, v| {
                            let n: u64 = std::str::from_utf8(&key[3..])
                                .expect("utf8")
                                .parse()
                                .expect("number");
                            verify(n, v);
                            true
                        })
                        .expect("scan");
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.checkpoint().expect("checkpoint");
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 100, "the readers read");
    assert!(db.stats().checkpoints > 5, "checkpoints ran");
    for k in 0..KEYS {
        if let Some(v) = db.get(&key_bytes(k)).expect("get") {
            verify(k, &v);
        }
    }
    db.check().expect("check");
}
