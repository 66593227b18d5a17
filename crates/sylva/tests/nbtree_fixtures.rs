//! Stored NB-tree stores, opened by every build: `tests/fixtures/nbtree-v1` (state version 1:
//! a committed s-tree of several levels and 100 writes in the log after the last commit),
//! `nbtree-v2` (the same writes in state version 2: d-trees in pieces) and `nbtree-v3` (version
//! 3: Bloom filters of probe scheme 1) must open, replay their log, answer every lookup and hold
//! exactly their records, and still after their first commit (in version 3), more writes and a
//! reopen; `nbtree-v1-bitflip` (one bit flipped in a d-tree leaf) must answer every lookup
//! correctly or with `ChecksumMismatch`, and `check()` must refuse it. A copy of `nbtree-v3`
//! with one bit flipped, in each of its pages in turn (d-tree leaves and inner nodes, Bloom
//! pages, manifest pages, meta and free-space pages), must be refused with `ChecksumMismatch`
//! or `Corruption` (the newest meta page: `LogCorruption`, the log no longer reaching back to
//! the checkpoint before) or answer exactly the fixture's records.
//! `SYLVA_WRITE_FIXTURES=1 cargo test -p sylva --test nbtree_fixtures -- --ignored` writes
//! the current version's fixture (`nbtree-v3`) again; the older ones pin their versions and are
//! not rewritten.

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

/// The fixture of the current state version.
const CURRENT: &str = "nbtree-v3";

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
    model_to(3100)
}

/// The records after [`write`] of `0..end`.
fn model_to(end: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in 0..end {
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
    let dir = fixture(CURRENT);
    let _ = std::fs::remove_dir_all(&dir);
    let nb = NbTree::open(&dir, options(SyncMode::Always)).unwrap();
    write(&nb, 0..3000);
    nb.checkpoint().unwrap();
    write(&nb, 3000..3100);
    nb.simulate_crash();
    let _ = std::fs::remove_file(dir.join("LOCK"));
    if std::env::var("SYLVA_WRITE_FIXTURES").as_deref() != Ok("bitflip") {
        return;
    }
    // `nbtree-v1-bitflip` was made from version 1 and stays; SYLVA_WRITE_FIXTURES=bitflip also
    // makes `{CURRENT}-bitflip` from the current version.
    let bad = fixture(&format!("{CURRENT}-bitflip"));
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
        let trial = copy(&format!("{CURRENT}-bitflip"));
        let nb = NbTree::open(trial.path(), options(SyncMode::Never)).unwrap();
        if model().keys().any(|k| nb.get(k).is_err()) {
            return;
        }
    }
    panic!("no live leaf found");
}

#[test]
fn the_version_1_fixture_opens_replays_its_log_and_holds_its_records() {
    opens_replays_and_holds("nbtree-v1");
}

#[test]
fn the_version_2_fixture_opens_replays_its_log_and_holds_its_records() {
    opens_replays_and_holds("nbtree-v2");
}

#[test]
fn the_version_3_fixture_opens_replays_its_log_and_holds_its_records() {
    opens_replays_and_holds("nbtree-v3");
}

/// The state version in the newer meta page of the store in `dir`.
fn state_version(dir: &Path) -> u32 {
    let data = std::fs::read(dir.join("data.sylva")).unwrap();
    let at =
        |m: usize, off: usize| u64::from_le_bytes(data[m * 4096 + off..][..8].try_into().unwrap());
    let newer = (0..2).max_by_key(|&m| at(m, 40)).unwrap();
    assert_eq!(&data[newer * 4096 + 80..][..8], b"sylvaNB\0");
    at(newer, 88) as u32
}

/// Every record of `model` is found by a lookup (through the Bloom filters, whichever probe
/// scheme each was built with) and by the scan.
fn holds(nb: &NbTree, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(nb.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
    }
    assert_eq!(&scan_all(nb), model);
}

fn scan_all(nb: &NbTree) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut got = BTreeMap::new();
    nb.scan(&[], usize::MAX, &mut |k, v| {
        got.insert(k.to_vec(), v.to_vec());
        true
    })
    .expect("scan");
    got
}

fn opens_replays_and_holds(name: &str) {
    let dir = copy(name);
    let nb = NbTree::open(dir.path(), options(SyncMode::Never)).unwrap();
    assert_eq!(nb.recovery().records_redone, 110, "{:?}", nb.recovery());
    holds(&nb, &model());
    let height = nb.counters().iter().find(|c| c.0 == "height").unwrap().1;
    assert!(height >= 2, "the fixture's s-tree has levels: {height}");
    nb.check().unwrap();
    // `check` committed (in the current version); a reopen reads that commit, and more writes
    // put new d-trees beside the fixture's.
    nb.close().expect("close");
    assert_eq!(state_version(dir.path()), 3);
    let nb = NbTree::open(dir.path(), options(SyncMode::Never)).expect("reopen");
    holds(&nb, &model());
    nb.check().expect("check after reopen");
    write(&nb, 3100..6000);
    nb.checkpoint().unwrap();
    holds(&nb, &model_to(6000));
    nb.check().expect("check after more writes");
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

/// Damage is refused, never misread: `Err` must be `ChecksumMismatch` or `Corruption`, or
/// `LogCorruption` where the newest meta page is damaged and the log no longer reaches back to
/// the checkpoint before it (whose records, without the log, would be a wrong answer).
fn refused(what: &str, e: Error) -> &'static str {
    match e {
        Error::ChecksumMismatch { .. } => "ChecksumMismatch",
        Error::Corruption { .. } => "Corruption",
        Error::LogCorruption { detail, .. } if detail.contains("newest checkpoint is damaged") => {
            "LogCorruption"
        }
        e => panic!("{what}: damage gave {e:?}, not ChecksumMismatch or Corruption"),
    }
}

/// What opening a copy of the current fixture with one bit flipped came to.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// `open` refused the store (with this error).
    RefusedAtOpen(&'static str),
    /// The store opened; some lookups, the scan or `check()` refused (never misread).
    RefusedLater {
        lookups_refused: usize,
        scan: bool,
        check: bool,
    },
    /// The store opened and held exactly its records, `check()` clean: the damage was in a page
    /// nothing reads (a free page, or the older meta page).
    Unharmed,
}

/// Opens a copy of the current fixture with byte `at` of `data.sylva` XORed with `bit`, and
/// reads all of it: every answer is the fixture's record or a refusal.
fn open_flipped(at: usize, bit: u8) -> Outcome {
    let dir = copy(CURRENT);
    let path = dir.path().join("data.sylva");
    let mut data = std::fs::read(&path).unwrap();
    data[at] ^= bit;
    std::fs::write(&path, &data).unwrap();
    let what = format!("byte {at} of page {}", at / 4096);
    let nb = match NbTree::open(dir.path(), options(SyncMode::Never)) {
        Ok(nb) => nb,
        Err(e) => return Outcome::RefusedAtOpen(refused(&what, e)),
    };
    let mut lookups_refused = 0;
    for (k, v) in model() {
        match nb.get(&k) {
            Ok(got) => assert_eq!(got, Some(v), "{what}: key {k:?} misread"),
            Err(e) => {
                refused(&what, e);
                lookups_refused += 1;
            }
        }
    }
    let mut got = BTreeMap::new();
    let scan = nb.scan(&[], usize::MAX, &mut |k, v| {
        got.insert(k.to_vec(), v.to_vec());
        true
    });
    let scan = match scan {
        Ok(_) => {
            assert_eq!(got, model(), "{what}: the scan misread");
            false
        }
        Err(e) => {
            refused(&what, e);
            true
        }
    };
    let check = match nb.check() {
        Ok(_) => false,
        Err(e) => {
            refused(&what, e);
            true
        }
    };
    if lookups_refused == 0 && !scan && !check {
        Outcome::Unharmed
    } else {
        Outcome::RefusedLater {
            lookups_refused,
            scan,
            check,
        }
    }
}

/// One bit flipped in each page of the current fixture in turn (a copy per page): a d-tree leaf or
/// inner page, a Bloom page, a manifest page and a meta page of the live store are each refused
/// with `ChecksumMismatch` or `Corruption`, never a panic or a wrong answer; the older meta page
/// and free pages are not read, so their damage changes nothing.
#[test]
fn one_bit_flipped_in_any_page_of_the_current_fixture_is_refused_never_misread() {
    let data = std::fs::read(fixture(CURRENT).join("data.sylva")).unwrap();
    let pages = data.len() / 4096;
    let newer_meta = (0..2)
        .max_by_key(|&m| u64::from_le_bytes(data[m * 4096 + 40..m * 4096 + 48].try_into().unwrap()))
        .unwrap();
    let mut by_kind: BTreeMap<u8, Vec<(usize, Outcome)>> = BTreeMap::new();
    for page in 0..pages {
        let base = page * 4096;
        let kind = data[base + 6];
        // Meta pages: the manifest head's page id in the state; others: a byte of the engine's
        // bytes near their start (slots, a Bloom header, the manifest head's fields).
        let at = if kind == 1 { base + 80 + 32 } else { base + 40 };
        by_kind
            .entry(kind)
            .or_default()
            .push((page, open_flipped(at, 0x04)));
    }
    eprintln!("{by_kind:#?}");
    let outcomes = |kind: u8| by_kind.get(&kind).map(Vec::as_slice).unwrap_or_default();
    // The newer meta page names the live manifest.
    let meta = outcomes(1);
    assert!(
        matches!(meta[newer_meta].1, Outcome::RefusedAtOpen(_)),
        "{meta:?}"
    );
    assert_eq!(
        meta[1 - newer_meta].1,
        Outcome::Unharmed,
        "the older meta page is not read"
    );
    for (kind, name) in [
        (32, "d-tree leaf"),
        (33, "d-tree inner"),
        (34, "Bloom"),
        (35, "manifest"),
    ] {
        assert!(
            outcomes(kind).iter().any(|o| o.1 != Outcome::Unharmed),
            "no {name} page's damage was refused: {:?}",
            outcomes(kind)
        );
    }
}
