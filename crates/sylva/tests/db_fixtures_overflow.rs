//! A database directory of database state version 3 with out-of-line values (issue 23), and a
//! log of format version 4 holding RUNS records, checked in under
//! `tests/fixtures/db-v3-overflow/`: opening a copy recovers exactly its contents (runs
//! written, logged and freed by the log's records), `check` passes, and the file keeps its
//! versions. A format change that breaks this is a version bump, not a fixture update.
//!
//! The fixture: 4 KiB pages; keys `n` for n below 60 (12 decimal digits) with values whose
//! length cycles through inline, escaped (first byte 0xFF) and out-of-line sizes up to 20 KB,
//! closed (a checkpoint); reopened, every third key overwritten with another size (runs freed
//! and written) and every seventh deleted under `SyncMode::Always`, then abandoned without a
//! checkpoint, as a `kill -9` would leave it. Written by `regenerate` (ignored):
//! `cargo test -p sylva --test db_fixtures_overflow -- --ignored regenerate`.

mod db_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use db_common::{contents, differences, ordered_key};
use sylva::{Db, DbOptions, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const FILES: [&str; 3] = ["data.sylva", "wal.log", "wal.2.log"];
const KEYS: u64 = 60;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db-v3-overflow")
}

fn options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 * 4096,
        page_size: 4096,
        direct_io: false,
        background: false,
        ..DbOptions::default()
    }
}

/// The value of key `n` written in phase `tag`.
fn value(n: u64, tag: u64) -> Vec<u8> {
    let len = [0, 5, 700, 757, 758, 759, 3000, 4049, 20_000][((n + tag) % 9) as usize];
    let mut v = format!("{n}#{tag}|").into_bytes();
    v.resize(len.max(v.len()), b'a' + (n % 26) as u8);
    v.truncate(len);
    if n.is_multiple_of(4) && !v.is_empty() {
        v[0] = 0xFF;
    }
    v
}

fn model() -> Model {
    let mut m: Model = (0..KEYS).map(|n| (ordered_key(n), value(n, 1))).collect();
    for n in 0..KEYS {
        if n.is_multiple_of(7) {
            m.remove(&ordered_key(n));
        } else if n.is_multiple_of(3) {
            m.insert(ordered_key(n), value(n, 2));
        }
    }
    m
}

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate() {
    let _ = std::fs::remove_dir_all(dir());
    let db = Db::open(dir(), options()).expect("create");
    for n in 0..KEYS {
        db.put(&ordered_key(n), &value(n, 1)).expect("put");
    }
    db.close().expect("close");
    let db = Db::open(dir(), options()).expect("reopen");
    for n in 0..KEYS {
        if n.is_multiple_of(7) {
            db.delete(&ordered_key(n)).expect("delete");
        } else if n.is_multiple_of(3) {
            db.put(&ordered_key(n), &value(n, 2)).expect("overwrite");
        }
    }
    db.simulate_crash();
    let _ = std::fs::remove_file(dir().join("LOCK"));
}

/// The log format version in a segment's header (bytes 8..12).
fn log_version(path: &Path) -> u32 {
    let b = std::fs::read(path).expect("read the log");
    u32::from_le_bytes([b[8], b[9], b[10], b[11]])
}

#[test]
fn a_version_3_database_with_runs_in_a_version_4_log_recovers_exactly() {
    let scratch = tempfile::tempdir().expect("tempdir");
    for f in FILES {
        std::fs::copy(dir().join(f), scratch.path().join(f)).expect("copy the fixture");
    }
    let logs: Vec<u32> = ["wal.log", "wal.2.log"]
        .iter()
        .map(|f| log_version(&scratch.path().join(f)))
        .collect();
    assert!(
        logs.contains(&4),
        "the fixture's logs are version 4: {logs:?}"
    );
    let db = Db::open(scratch.path(), options()).expect("open the fixture");
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    let want = model();
    let got = contents(&db).expect("a full scan");
    assert!(got == want, "{}", differences(&got, &want, 10));
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    let s = db.stats();
    assert!(s.overflow_values >= 10, "{s:?}");
    // Larger values still go in: the database takes values of any size.
    db.put(b"later", &vec![1u8; 100_000]).expect("put");
    db.close().expect("close");
    let db = Db::open(scratch.path(), options()).expect("reopen");
    assert_eq!(
        db.get(b"later").expect("get").map(|v| v.len()),
        Some(100_000)
    );
}
