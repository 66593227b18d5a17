//! Database directories written by format version 1, checked in under `tests/fixtures/`, must
//! keep opening with the same contents; a deliberately damaged copy must give a clear error.
//! A format change that breaks these is a version bump (see docs/format.md), not a fixture
//! update.
//!
//! - `db-v1/`: a cleanly closed database (empty log): records inserted, a block of them deleted
//!   (so leaves merged and pages were freed), some overwritten.
//! - `db-v1-log/`: the same database reopened, written to under `SyncMode::Always` and then
//!   abandoned without a checkpoint, as a `kill -9` would leave it: opening replays its log.
//! - `db-v1-bitflip/`: `db-v1` with one byte flipped in the middle of a leaf page the tree uses.
//! - `db-v1-log-wal2/`: like `db-v1-log`, written after the log format became version 2 (records
//!   carry their synced gap; the directory and page formats are unchanged). Written by
//!   `regenerate_wal_v2`.
//!
//! Each directory holds `data.sylva` and `wal.log` (no `LOCK`: `open` creates it). Tests open
//! copies, since opening may write (recovery ends with a checkpoint).
//!
//! The fixtures were written by `regenerate` (ignored; run it only when adding a new version's
//! fixtures: `cargo test -p sylva --test db_fixtures -- --ignored regenerate`).

mod db_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use db_common::{contents, differences, ordered_key, tagged_value};
use sylva::io::page_header::{PageKind, PAGE_MAGIC};
use sylva::{Db, DbOptions, Error, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const PAGE_SIZE: usize = 4096;
const FILES: [&str; 2] = ["data.sylva", "wal.log"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Copies a fixture directory's files to a temporary directory.
fn scratch(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for f in FILES {
        std::fs::copy(fixture(name).join(f), dir.path().join(f))
            .unwrap_or_else(|e| panic!("copy {name}/{f}: {e}"));
    }
    dir
}

fn options(sync: SyncMode) -> DbOptions {
    DbOptions {
        sync,
        cache_bytes: 64 * PAGE_SIZE as u64,
        page_size: PAGE_SIZE,
        direct_io: false,
        ..DbOptions::default()
    }
}

fn value(n: u64, version: u64) -> Vec<u8> {
    tagged_value(&ordered_key(n), version, 30 + (n % 50) as usize)
}

/// The writes that made `db-v1`, applied to `db` and to the returned model.
fn write_v1(db: &Db) -> Model {
    let mut model = Model::new();
    let mut put = |n: u64, version: u64| {
        db.put(&ordered_key(n), &value(n, version)).expect("put");
        model.insert(ordered_key(n), value(n, version));
    };
    for n in 0..800 {
        put(n, 1);
    }
    for n in (0..800).step_by(5) {
        put(n, 2);
    }
    for n in 250..600 {
        db.delete(&ordered_key(n)).expect("delete");
        model.remove(&ordered_key(n));
    }
    model
}

/// The contents of `db-v1`.
fn v1_records() -> Model {
    let mut model = Model::new();
    for n in (0..250).chain(600..800) {
        let version = if n % 5 == 0 { 2 } else { 1 };
        model.insert(ordered_key(n), value(n, version));
    }
    model
}

/// The writes `db-v1-log`'s log holds on top of `db-v1`, applied to `db` and `model`.
fn write_log(db: &Db, model: &mut Model) {
    for n in 1000..1060 {
        db.put(&ordered_key(n), &value(n, 3)).expect("put");
        model.insert(ordered_key(n), value(n, 3));
    }
    for n in (0..250).step_by(3) {
        db.delete(&ordered_key(n)).expect("delete");
        model.remove(&ordered_key(n));
    }
    for n in 600..650 {
        db.put(&ordered_key(n), &value(n, 4)).expect("put");
        model.insert(ordered_key(n), value(n, 4));
    }
}

/// The contents of `db-v1-log` after recovery.
fn v1_log_records() -> Model {
    let mut model = v1_records();
    for n in 1000..1060 {
        model.insert(ordered_key(n), value(n, 3));
    }
    for n in (0..250).step_by(3) {
        model.remove(&ordered_key(n));
    }
    for n in 600..650 {
        model.insert(ordered_key(n), value(n, 4));
    }
    model
}

fn save(from: &Path, name: &str) {
    let to = fixture(name);
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).expect("mkdir");
    for f in FILES {
        std::fs::copy(from.join(f), to.join(f)).expect("copy");
    }
}

#[test]
#[ignore = "writes the fixtures; run only when adding a format version"]
fn regenerate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("create");
    let mut model = write_v1(&db);
    assert_eq!(model, v1_records());
    db.close().expect("close");
    save(dir.path(), "db-v1");

    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("reopen");
    write_log(&db, &mut model);
    assert_eq!(model, v1_log_records());
    db.simulate_crash();
    save(dir.path(), "db-v1-log");

    // Flip a byte in the first leaf page the tree uses: one `check()` reports.
    let data = std::fs::read(fixture("db-v1").join("data.sylva")).expect("read");
    for (id, page) in data.chunks(PAGE_SIZE).enumerate() {
        if &page[0..4] != PAGE_MAGIC || PageKind::from_u8(page[6]) != Some(PageKind::BTreeLeaf) {
            continue;
        }
        let mut damaged = data.clone();
        damaged[id * PAGE_SIZE + PAGE_SIZE / 2] ^= 0x20;
        let try_dir = tempfile::tempdir().expect("tempdir");
        std::fs::copy(
            fixture("db-v1").join("wal.log"),
            try_dir.path().join("wal.log"),
        )
        .expect("copy");
        std::fs::write(try_dir.path().join("data.sylva"), &damaged).expect("write");
        let used = match Db::open(try_dir.path(), options(SyncMode::Always)) {
            Ok(db) => {
                matches!(db.check(), Err(Error::ChecksumMismatch { page, .. }) if page == id as u64)
            }
            Err(_) => true,
        };
        if used {
            std::fs::write(try_dir.path().join("data.sylva"), &damaged).expect("write");
            std::fs::copy(
                fixture("db-v1").join("wal.log"),
                try_dir.path().join("wal.log"),
            )
            .expect("copy");
            save(try_dir.path(), "db-v1-bitflip");
            return;
        }
    }
    panic!("no leaf page of db-v1 is used by the tree");
}

#[test]
fn db_v1_opens_with_its_records() {
    let dir = scratch("db-v1");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("open the v1 fixture");
    assert_eq!(db.recovery().records_redone, 0, "a clean v1 database");
    assert_eq!(db.recovery().cut_bytes, 0);
    let want = v1_records();
    let got = contents(&db).expect("a full scan");
    assert!(got == want, "db-v1: {}", differences(&got, &want, 10));
    for n in [0u64, 5, 249, 250, 599, 600, 799, 800] {
        assert_eq!(
            db.get(&ordered_key(n)).expect("get"),
            want.get(&ordered_key(n)).cloned(),
            "get({n})"
        );
    }
    let report = db.check().expect("check");
    assert_eq!(report.records, want.len() as u64);
    let stats = db.stats();
    assert_eq!(stats.page_size, PAGE_SIZE);
    assert_eq!(stats.records, want.len() as u64);
    assert!(
        stats.free_pages > 0,
        "db-v1 was written with freed pages (merges after deletes): {stats:?}"
    );
    // And it still takes writes.
    db.put(b"new", b"record").expect("put");
    db.close().expect("close");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("reopen");
    assert_eq!(db.get(b"new").expect("get"), Some(b"record".to_vec()));
}

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate_wal_v2() {
    let dir = scratch("db-v1");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("open");
    let mut model = v1_records();
    write_log(&db, &mut model);
    assert_eq!(model, v1_log_records());
    db.simulate_crash();
    save(dir.path(), "db-v1-log-wal2");
}

fn replays(name: &str, wal_version: u8) {
    let wal = std::fs::read(fixture(name).join("wal.log")).expect("read the log");
    assert_eq!(wal[8], wal_version, "{name}'s log format version");
    let dir = scratch(name);
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("open the fixture");
    assert!(
        db.recovery().records_redone > 0,
        "{name}'s log holds records to redo: {:?}",
        db.recovery()
    );
    assert_eq!(db.recovery().intact_after_cut, None);
    let want = v1_log_records();
    let got = contents(&db).expect("a full scan");
    assert!(got == want, "{name}: {}", differences(&got, &want, 10));
    let report = db.check().expect("check");
    assert_eq!(report.records, want.len() as u64);
}

#[test]
fn db_v1_log_is_replayed() {
    replays("db-v1-log", 1);
}

#[test]
fn db_v1_with_a_version_2_log_is_replayed() {
    replays("db-v1-log-wal2", 2);
}

#[test]
fn db_v1_with_a_flipped_bit_gives_a_checksum_error() {
    let want = v1_records();
    let clear = |e: &Error| {
        matches!(
            e,
            Error::ChecksumMismatch { .. } | Error::Corruption { .. } | Error::LogCorruption { .. }
        )
    };
    let dir = scratch("db-v1-bitflip");
    match Db::open(dir.path(), options(SyncMode::Always)) {
        Err(e) => assert!(clear(&e), "open failed with {e:?}"),
        Ok(db) => match db.check() {
            Err(e) => assert!(clear(&e), "check() failed with {e:?}"),
            Ok(r) => panic!("check() passed on the damaged fixture: {r:?}"),
        },
    }
    // Reads: right or a clear error, at least one error.
    let dir = scratch("db-v1-bitflip");
    let Ok(db) = Db::open(dir.path(), options(SyncMode::Always)) else {
        return;
    };
    let mut errors = 0;
    for (k, v) in &want {
        match db.get(k) {
            Ok(got) => assert_eq!(
                got.as_ref(),
                Some(v),
                "a wrong value from the damaged fixture"
            ),
            Err(e) => {
                assert!(clear(&e) || matches!(e, Error::Poisoned), "get gave {e:?}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "every get succeeded on the damaged fixture");
}

/// The page format version of the newest meta page of a database's page file.
fn page_file_version(dir: &Path) -> u16 {
    let bytes = std::fs::read(dir.join("data.sylva")).expect("read the page file");
    (0..2)
        .filter_map(|slot| {
            sylva::io::decode_meta_page(&bytes[slot * PAGE_SIZE..(slot + 1) * PAGE_SIZE]).ok()
        })
        .max_by_key(|m| m.sequence)
        .expect("a meta page")
        .version
}

/// A version 1 database is upgraded to page format version 2 by its next checkpoint (here
/// close's); written to, closed and reopened, it holds the fixture's records and the new ones.
#[test]
fn db_v1_is_upgraded_to_page_format_version_2() {
    let dir = scratch("db-v1");
    assert_eq!(page_file_version(dir.path()), 1, "the fixture is version 1");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("open the v1 fixture");
    let mut want = v1_records();
    for n in 2000..2300 {
        db.put(&ordered_key(n), &value(n, 5)).expect("put");
        want.insert(ordered_key(n), value(n, 5));
    }
    for n in (600..800).step_by(2) {
        db.delete(&ordered_key(n)).expect("delete");
        want.remove(&ordered_key(n));
    }
    db.close().expect("close");
    assert_eq!(page_file_version(dir.path()), 2, "the checkpoint upgraded");
    let db = Db::open(dir.path(), options(SyncMode::Always)).expect("reopen");
    let got = contents(&db).expect("a full scan");
    assert!(got == want, "upgraded: {}", differences(&got, &want, 10));
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    db.close().expect("close");
    assert_eq!(page_file_version(dir.path()), 2);
}
