//! Recovery redoes deferred splits: a database that moved records between leaves and split two
//! leaves into three, copied as a crash would leave it (the log synced, no checkpoint since the
//! start, most pages never written), reopens to the same records, the same tree pages, and a
//! tree that passes `check()`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use sylva::{Db, DbOptions, KvStore, SyncMode};

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn counter(db: &Db, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |c| c.1)
}

/// Copies the database's files while it is open and idle: what `kill -9` would leave.
fn crash_copy(from: &Path, to: &Path) {
    for f in ["data.sylva", "wal.log"] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
}

#[test]
fn redistributions_and_2to3_splits_are_redone_from_the_log() {
    let (dir, copy) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = DbOptions {
        sync: SyncMode::Never,
        // A small pool writes some pages back (each after its log), most never.
        cache_bytes: 64 * 4096,
        checkpoint_bytes: 1 << 40,
        direct_io: false,
        ..DbOptions::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let checkpoints = counter(&db, "checkpoints");
    let mut model = BTreeMap::new();
    for n in 0..30_000u64 {
        let k = mix(n).to_be_bytes().to_vec();
        // Values of varying length, so leaves balance bytes, not counts.
        let v = vec![(n % 251) as u8; 20 + (mix(!n) % 120) as usize];
        db.put(&k, &v).unwrap();
        model.insert(k, v);
        if n % 7 == 0 {
            let k = mix(n / 2).to_be_bytes();
            db.delete(&k).unwrap();
            model.remove(&k[..]);
        }
    }
    assert!(counter(&db, "redistributions") > 100);
    assert!(counter(&db, "splits_2to3") > 10);
    assert_eq!(
        counter(&db, "checkpoints"),
        checkpoints,
        "a checkpoint would shorten the redo"
    );
    db.sync().unwrap();
    let pages = db.stats().tree_pages;
    crash_copy(dir.path(), copy.path());
    drop(db);

    let db = Db::open(copy.path(), options).unwrap();
    assert!(db.recovery().cut_bytes == 0, "{:?}", db.recovery());
    let report = db.check().unwrap();
    assert_eq!(report.records, model.len() as u64);
    assert_eq!(db.stats().tree_pages, pages, "tree pages after redo");
    let mut got = BTreeMap::new();
    for item in db.range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded) {
        let (k, v) = item.unwrap();
        got.insert(k, v);
    }
    assert!(got == model, "contents after redo differ from the model");
}
