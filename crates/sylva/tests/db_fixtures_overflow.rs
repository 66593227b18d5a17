//! Database directories with out-of-line values (issue 23) and a log of format version 4
//! holding RUNS records, checked in under `tests/fixtures/`: `db-v3-overflow/` (database state
//! version 3, values escaped by their first byte) and `db-v4-overflow/` (state version 4, only
//! values of a reference's shape escaped; `docs/format.md`, "Out-of-line values"). Opening a
//! copy recovers exactly its contents (runs written, logged and freed by the log's records),
//! `check` passes, and the files keep their versions. A format change that breaks this is a
//! version bump, not a fixture update.
//!
//! Each fixture: 4 KiB pages; keys `n` for n below 60 (12 decimal digits) with values whose
//! length cycles through inline, escaped (first byte 0xFF; in version 4 also 17- and 18-byte
//! values of a reference's shape) and out-of-line sizes up to 20 KB, closed (a checkpoint);
//! reopened, every third key overwritten with another size (runs freed and written) and every
//! seventh deleted under `SyncMode::Always`, then abandoned without a checkpoint, as a
//! `kill -9` would leave it. Written by the build of its version with `regenerate_v4`
//! (ignored): `cargo test -p sylva --test db_fixtures_overflow -- --ignored regenerate_v4`.

mod db_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use db_common::{contents, differences, fixture_options, ordered_key, state_version};
use sylva::Db;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const FILES: [&str; 3] = ["data.sylva", "wal.log", "wal.2.log"];
const KEYS: u64 = 60;

/// The fixture of database state `version`.
fn dir(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/db-v{version}-overflow"))
}

/// The value of key `n` written in phase `tag` into the fixture of state `version`.
fn value(version: u32, n: u64, tag: u64) -> Vec<u8> {
    const V3: [usize; 9] = [0, 5, 700, 757, 758, 759, 3000, 4049, 20_000];
    const V4: [usize; 11] = [0, 5, 17, 18, 700, 757, 758, 759, 3000, 4049, 20_000];
    let lens: &[usize] = if version == 3 { &V3 } else { &V4 };
    let len = lens[((n + tag) % lens.len() as u64) as usize];
    let mut v = format!("{n}#{tag}|").into_bytes();
    v.resize(len.max(v.len()), b'a' + (n % 26) as u8);
    v.truncate(len);
    if n.is_multiple_of(4) && !v.is_empty() {
        v[0] = 0xFF;
    } else if version == 4 && n % 4 == 1 && v.len() >= 18 {
        // 0xFE, 0xFF, 16 bytes: a reference's shape behind one 0xFE (when 18 bytes long).
        v[0] = 0xFE;
        v[1] = 0xFF;
    }
    v
}

fn model(version: u32) -> Model {
    let mut m: Model = (0..KEYS)
        .map(|n| (ordered_key(n), value(version, n, 1)))
        .collect();
    for n in 0..KEYS {
        if n.is_multiple_of(7) {
            m.remove(&ordered_key(n));
        } else if n.is_multiple_of(3) {
            m.insert(ordered_key(n), value(version, n, 2));
        }
    }
    m
}

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate_v4() {
    let (version, dir) = (4, dir(4));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, fixture_options()).expect("create");
    for n in 0..KEYS {
        db.put(&ordered_key(n), &value(version, n, 1)).expect("put");
    }
    db.close().expect("close");
    let db = Db::open(&dir, fixture_options()).expect("reopen");
    for n in 0..KEYS {
        if n.is_multiple_of(7) {
            db.delete(&ordered_key(n)).expect("delete");
        } else if n.is_multiple_of(3) {
            db.put(&ordered_key(n), &value(version, n, 2))
                .expect("overwrite");
        }
    }
    db.simulate_crash();
    let _ = std::fs::remove_file(dir.join("LOCK"));
}

/// The log format version in a segment's header (bytes 8..12).
fn log_version(path: &Path) -> u32 {
    let b = std::fs::read(path).expect("read the log");
    u32::from_le_bytes([b[8], b[9], b[10], b[11]])
}

#[test]
fn a_version_3_database_with_runs_in_a_version_4_log_recovers_exactly() {
    recovers_exactly(3);
}

#[test]
fn a_version_4_database_with_runs_in_a_version_4_log_recovers_exactly() {
    recovers_exactly(4);
}

fn recovers_exactly(version: u32) {
    let scratch = tempfile::tempdir().expect("tempdir");
    for f in FILES {
        std::fs::copy(dir(version).join(f), scratch.path().join(f)).expect("copy the fixture");
    }
    assert_eq!(
        state_version(&scratch.path().join("data.sylva")),
        version,
        "the fixture's database state version"
    );
    let logs: Vec<u32> = ["wal.log", "wal.2.log"]
        .iter()
        .map(|f| log_version(&scratch.path().join(f)))
        .collect();
    assert!(
        logs.contains(&4),
        "the fixture's logs are version 4: {logs:?}"
    );
    let db = Db::open(scratch.path(), fixture_options()).expect("open the fixture");
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    let want = model(version);
    let got = contents(&db).expect("a full scan");
    assert!(got == want, "{}", differences(&got, &want, 10));
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    let s = db.stats();
    assert!(s.overflow_values >= 10, "{s:?}");
    // A database created before long keys (state version 5) keeps its key limit: its leaves may
    // hold records longer than the long-key limits allow beside long fences.
    let max_key = sylva::btree::max_key_len(4096 - 32);
    assert_eq!(db.limits().max_key, max_key);
    match db.put(&vec![b'k'; max_key + 1], b"v") {
        Err(sylva::Error::InvalidArgument { limit, .. }) => assert_eq!(limit, max_key),
        other => panic!("a key past the old limit: {other:?}"),
    }
    // Larger values still go in: the database takes values of any size.
    db.put(b"later", &vec![1u8; 100_000]).expect("put");
    db.close().expect("close");
    // The database keeps its version (and so its rule for escapes) across a checkpoint.
    assert_eq!(state_version(&scratch.path().join("data.sylva")), version);
    let db = Db::open(scratch.path(), fixture_options()).expect("reopen");
    assert_eq!(
        db.get(b"later").expect("get").map(|v| v.len()),
        Some(100_000)
    );
    let got = contents(&db).expect("a full scan after the checkpoint");
    let mut want = want;
    want.insert(b"later".to_vec(), vec![1u8; 100_000]);
    assert!(got == want, "{}", differences(&got, &want, 10));
}
