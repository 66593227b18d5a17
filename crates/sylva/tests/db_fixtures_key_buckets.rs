//! A database directory of state version 6 (keys longer than the tree takes in buckets, issue
//! 23; `docs/format.md`, "Long keys in buckets") checked in under
//! `tests/fixtures/db-v6-key-buckets/`: opening a copy recovers exactly its contents, `check`
//! passes and counts every key of every bucket, the key limit is 16 KiB and the file keeps its
//! version. A format change that breaks this is a version bump, not a fixture update.
//!
//! The fixture: 4 KiB pages; 50 keys of 700 to 3,000 bytes in five groups sharing 800-byte
//! prefixes (so the keys over 776 bytes of a group share one bucket), with values from empty to
//! 6 KB, closed (a checkpoint); reopened, every third key overwritten with another size and
//! every seventh deleted under `SyncMode::Always`, some of it in write batches, then abandoned
//! without a checkpoint, as a `kill -9` would leave it. Written with `regenerate_v6` (ignored):
//! `cargo test -p sylva --test db_fixtures_key_buckets -- --ignored regenerate_v6`.

mod db_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use db_common::{
    fixture_key, fixture_model, fixture_options, fixture_value, open_fixture_copy, state_version,
    write_fixture,
};
use sylva::Db;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 50;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db-v6-key-buckets")
}

/// Key `n`: an 800-byte prefix shared by its group of 10, then `n`, filled to 700–3,000 bytes
/// (the 700- and 776-byte ones kept in the tree, the others in their group's bucket).
fn key(n: u64) -> Vec<u8> {
    fixture_key(n, 800, &[700, 776, 777, 801, 806, 1024, 2000, 3000])
}

fn value(n: u64, tag: u64) -> Vec<u8> {
    fixture_value(n, tag, &[0, 5, 17, 40, 300, 752, 1500, 6000])
}

fn model() -> Model {
    fixture_model(KEYS, key, value)
}

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate_v6() {
    write_fixture(&dir(), KEYS, key, value, true);
}

#[test]
fn a_version_6_database_with_key_buckets_recovers_exactly() {
    let want = model();
    let (scratch, db) = open_fixture_copy(&dir(), 6, &want);
    let data = scratch.path().join("data.sylva");
    assert_eq!(db.limits().max_key, 16 * 1024);
    for (k, v) in &want {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "get");
    }
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    assert_eq!(db.stats().records, want.len() as u64);
    let later = vec![b'z'; 1024];
    db.put(&later, &[1u8; 500]).expect("put");
    db.close().expect("close");
    assert_eq!(state_version(&data), 6, "the version survives a checkpoint");
    let db = Db::open(scratch.path(), fixture_options()).expect("reopen");
    assert_eq!(db.get(&later).expect("get"), Some(vec![1u8; 500]));
    db.check().expect("check");
}
