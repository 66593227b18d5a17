//! Space: overwriting the same keys round after round does not grow the file without bound.
//! Replaced runs are freed (once the commit that replaced them is durable) and reused, so after the
//! first rounds the file stops growing: over 10 rounds of overwrites of 20,000 keys, the last
//! five rounds add nothing to the file. The live runs hold at most 3× the live record bytes
//! (older versions of overwritten keys wait in lower levels, as in an LSM tree, and flushed
//! prefixes wait for lazy removal); the file beyond them is free space, its high-water mark
//! set while a cascade's new runs and the runs they replace coexist.

#![allow(clippy::unwrap_used)]

use sylva::{NbTree, NbTreeOptions, SyncMode};

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters().iter().find(|c| c.0 == name).unwrap().1
}

#[test]
fn the_file_stops_growing_over_rounds_of_overwrites() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let nb = NbTree::open(
        dir.path().join("nb"),
        NbTreeOptions {
            sync: SyncMode::Never,
            sigma: Some(256 << 10),
            deamortize: false,
            ..NbTreeOptions::default()
        },
    )
    .unwrap();
    let keys = 20_000u64;
    let mut pages = Vec::new();
    for round in 0..10u64 {
        for i in 0..keys {
            let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
            nb.put(&k, &[round as u8; 100]).unwrap();
        }
        nb.checkpoint().unwrap();
        pages.push(counter(&nb, "file_pages"));
    }
    let report = nb.check().unwrap();
    eprintln!("{report:?} {:?}", nb.counters());
    let live = keys * (8 + 1 + 100);
    let runs = report.run_pages * 4096;
    assert!(
        pages[9] <= pages[4],
        "the file grew in the last five rounds: pages after each round {pages:?}"
    );
    assert!(
        runs <= 3 * live,
        "{runs} bytes of runs for {live} live bytes: {report:?}"
    );
    for i in (0..keys).step_by(101) {
        let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
        assert_eq!(nb.get(&k).unwrap(), Some(vec![9; 100]));
    }
}
