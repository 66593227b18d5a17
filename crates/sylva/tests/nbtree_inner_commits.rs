//! Commit points (module docs of `nbtree::cascade`): a cascade that goes down several levels
//! commits inside itself between them, so the runs it replaced so far can be reused before it
//! ends. By counters: inner commits happen, and the most a cascade writes between two of its
//! commits is less than the most one writes in all. The store then reopens after a crash with
//! every synced record and passes `check()` (the `kill -9` and power-loss tests crash inside
//! cascades, at and between inner commits).

#![allow(clippy::unwrap_used)]

use sylva::{NbTree, NbTreeOptions, SyncMode};

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters().iter().find(|c| c.0 == name).unwrap().1
}

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn options() -> NbTreeOptions {
    NbTreeOptions {
        sync: SyncMode::Never,
        sigma: Some(256 << 10),
        deamortize: false,
        ..NbTreeOptions::default()
    }
}

#[test]
fn deep_cascades_commit_inside_themselves() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let path = dir.path().join("nb");
    let nb = NbTree::open(&path, options()).unwrap();
    // About 25σ of records: an s-tree of three or four levels.
    let n = 60_000u64;
    for i in 0..n {
        nb.put(&key(i), &[i as u8; 100]).unwrap();
    }
    let (inner, between, whole) = (
        counter(&nb, "inner_commits"),
        counter(&nb, "max_uncommitted_bytes"),
        counter(&nb, "max_cascade_bytes"),
    );
    eprintln!("{:?}", nb.counters());
    assert!(counter(&nb, "height") >= 3, "{:?}", nb.counters());
    assert!(inner > 0, "no inner commit: {:?}", nb.counters());
    assert!(
        between < whole,
        "a cascade wrote {between} bytes between commits and {whole} in all"
    );
    nb.sync().unwrap();
    nb.simulate_crash();
    let nb = NbTree::open(&path, options()).unwrap();
    nb.check().unwrap();
    for i in 0..n {
        assert_eq!(
            nb.get(&key(i)).unwrap(),
            Some(vec![i as u8; 100]),
            "key {i}"
        );
    }
    nb.close().unwrap();
}
