//! Stored NB-tree stores, opened by every build: `tests/fixtures/nbtree-v1` (state version 1:
//! a committed s-tree of several levels and 100 writes in the log after the last commit) must
//! open, replay its log and hold exactly its records; `nbtree-v1-bitflip` (one bit flipped in a
//! d-tree leaf) must answer every lookup correctly or with `ChecksumMismatch`, and `check()`
//! must refuse it. `SYLVA_WRITE_FIXTURES=1 cargo test -p sylva --test nbtree_fixtures --
//! --ignored` writes them again (only for a new format version: they pin the old one).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sylva::{Error, NbTree, NbTreeOptions, SyncMode};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const FILES: [&str; 3] = ["data.sylva", "wal.log", "wal.2.log"];

fn options(sync: SyncMode) -> NbTreeOptions {
    NbTreeOptions {
        sync,
        sigma: Some(64 << 10),
        fanout: 3,
        deamortize: false,
        ..NbTreeOptions::default()
    }
}

/// The records the fixture holds: a pure function of the index.
fn model() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 0..3100u32 {
        let k = (i.wrapping_mul(7919) % 100_000).to_be_bytes().to_vec();
        if i % 10 == 9 {
            m.remove(&((i - 5).wrapping_mul(7919) % 100_000).to_be_bytes()[..]);
        }
        m.insert(k, vec![(i % 251) as u8; 20 + (i % 50) as usize]);
    }
    m
}

fn write(nb: &NbTree, range: std::ops::Range<u32>) {
    for i in range {
        let k = (i.wrapping_mul(7919) % 100_000).to_be_bytes();
        if i % 10 == 9 {
            nb.delete(&((i - 5).wrapping_mul(7919) % 100_000).to_be_bytes())
                .unwrap();
        }
        nb.put(&k, &vec![(i % 251) as u8; 20 + (i % 50) as usize])
            .unwrap();
    }
}

/// A copy of fixture `name` in a fresh directory (opening writes to it).
fn copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in FILES {
        std::fs::copy(fixture(name).join(f), dir.path().join(f)).unwrap();
    }
    dir
}

#[test]
#[ignore]
fn write_fixtures() {
    if std::env::var("SYLVA_WRITE_FIXTURES").is_err() {
        return;
    }
    let dir = fixture("nbtree-v1");
    let _ = std::fs::remove_dir_all(&dir);
    let nb = NbTree::open(&dir, options(SyncMode::Always)).unwrap();
    write(&nb, 0..3000);
    nb.checkpoint().unwrap();
    write(&nb, 3000..3100);
    nb.simulate_crash();
    let _ = std::fs::remove_file(dir.join("LOCK"));
    let bad = fixture("nbtree-v1-bitflip");
    let _ = std::fs::remove_dir_all(&bad);
    std::fs::create_dir_all(&bad).unwrap();
    for f in FILES {
        std::fs::copy(dir.join(f), bad.join(f)).unwrap();
    }
    // A leaf of a live d-tree (the file also holds replaced ones, free now): the first, from
    // the file's end, whose damage a lookup meets.
    let data = std::fs::read(bad.join("data.sylva")).unwrap();
    for leaf in (2..data.len() / 4096).rev() {
        if &data[leaf * 4096..leaf * 4096 + 4] != b"SYpg" || data[leaf * 4096 + 6] != 32 {
            continue;
        }
        let mut damaged = data.clone();
        damaged[leaf * 4096 + 2000] ^= 0x10;
        std::fs::write(bad.join("data.sylva"), &damaged).unwrap();
        let trial = copy("nbtree-v1-bitflip");
        let nb = NbTree::open(trial.path(), options(SyncMode::Never)).unwrap();
        if model().keys().any(|k| nb.get(k).is_err()) {
            return;
        }
    }
    panic!("no live leaf found");
}

#[test]
fn the_version_1_fixture_opens_replays_its_log_and_holds_its_records() {
    let dir = copy("nbtree-v1");
    let nb = NbTree::open(dir.path(), options(SyncMode::Never)).unwrap();
    assert_eq!(nb.recovery().records_redone, 110, "{:?}", nb.recovery());
    let mut got = BTreeMap::new();
    nb.scan(&[], usize::MAX, &mut |k, v| {
        got.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    assert_eq!(got, model());
    let height = nb.counters().iter().find(|c| c.0 == "height").unwrap().1;
    assert!(height >= 2, "the fixture's s-tree has levels: {height}");
    nb.check().unwrap();
}

#[test]
fn the_bit_flipped_fixture_is_refused_page_by_page_never_misread() {
    let dir = copy("nbtree-v1-bitflip");
    let nb = NbTree::open(dir.path(), options(SyncMode::Never)).unwrap();
    let mut refused = 0;
    for (k, v) in model() {
        match nb.get(&k) {
            Ok(got) => assert_eq!(got, Some(v)),
            Err(Error::ChecksumMismatch { .. }) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(refused > 0, "no lookup reached the damaged leaf");
    assert!(matches!(nb.check(), Err(Error::ChecksumMismatch { .. })));
}
