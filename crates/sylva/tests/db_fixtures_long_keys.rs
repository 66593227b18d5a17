//! A database directory of state version 5 (long keys, issue 23; `docs/format.md`, "Key and
//! record limits") checked in under `tests/fixtures/db-v5-long-keys/`: opening a copy recovers
//! exactly its contents, `check` passes, the limits are the long-key ones and the file keeps its
//! version. A format change that breaks this is a version bump, not a fixture update.
//!
//! The fixture: 4 KiB pages; 60 keys of 255 to 777 bytes sharing a 250-byte prefix in groups,
//! with values from empty to 20 KB (a long key's value goes out of line from a few dozen bytes
//! up), closed (a checkpoint); reopened, every third key overwritten with another size and every
//! seventh deleted under `SyncMode::Always`, then abandoned without a checkpoint, as a `kill -9`
//! would leave it. Written with `regenerate_v5` (ignored):
//! `cargo test -p sylva --test db_fixtures_long_keys -- --ignored regenerate_v5`.

mod db_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use db_common::{
    fixture_key, fixture_model, fixture_options, fixture_value, open_fixture_copy, state_version,
    write_fixture,
};
use sylva::Db;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 60;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db-v5-long-keys")
}

/// Key `n`: a 250-byte prefix shared by its group of 10, then `n`, filled to 255–777 bytes.
fn key(n: u64) -> Vec<u8> {
    fixture_key(n, 250, &[255, 300, 500, 700, 776, 777])
}

fn value(n: u64, tag: u64) -> Vec<u8> {
    fixture_value(n, tag, &[0, 5, 17, 40, 300, 752, 3000, 20_000])
}

fn model() -> Model {
    fixture_model(KEYS, key, value)
}

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate_v5() {
    write_fixture(&dir(), KEYS, key, value, false);
}

#[test]
fn a_version_5_database_with_long_keys_recovers_exactly() {
    let want = model();
    let (scratch, db) = open_fixture_copy(&dir(), 5, &want);
    let data = scratch.path().join("data.sylva");
    assert_eq!(db.limits().max_key, 777);
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    assert!(db.stats().overflow_values >= 10, "{:?}", db.stats());
    let later = vec![b'z'; 777];
    db.put(&later, &[1u8; 500]).expect("put");
    db.close().expect("close");
    assert_eq!(state_version(&data), 5, "the version survives a checkpoint");
    let db = Db::open(scratch.path(), fixture_options()).expect("reopen");
    assert_eq!(db.get(&later).expect("get"), Some(vec![1u8; 500]));
    db.check().expect("check");
}
