//! Space after a load (issue 22's file-size target; `docs/results/nbtree.md`, session 4): a
//! load of random keys into an empty store leaves a file of at most the live runs plus what
//! one cascade may hold beyond them, and at most 1.5× the raw bytes.
//!
//! Why that bound. A file page is a page of a live run, a page of a run replaced but not yet
//! freed (named by the durable manifest until the next commit), or a hole. Holes are reused:
//! a d-tree's run is in pieces, so any hole of 1 MiB serves (before, a merged d-tree, larger
//! than the run it replaces, needed one contiguous hole and the file grew at its end: 2.02×
//! the raw bytes at 3M records). A cascade commits inside itself after each child it rewrites
//! once it has written σ/4 since its last commit, so what it holds beyond the live runs is at
//! most one child's rewrite (a d-tree of at most about 2σ: a child over σ that just took σ) plus
//! the σ/4 before it, and the replaced run of a child split right after its merge (2σ more).
//! With σ = 256 KiB and ~100 σ of data, that is a few percent of the file; the 1.5× is the
//! issue's bar (§7 keeps d-nodes full), met with room at the 40σ-plus sizes measured.

use sylva::{NbTree, NbTreeOptions, SyncMode};

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters()
        .iter()
        .find(|c| c.0 == name)
        .expect("a counter of that name")
        .1
}

#[test]
fn a_load_leaves_the_file_within_the_live_runs_and_one_cascade() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory");
    let sigma = 256u64 << 10;
    let nb = NbTree::open(
        dir.path().join("nb"),
        NbTreeOptions {
            sync: SyncMode::Never,
            sigma: Some(sigma),
            fanout: 3,
            deamortize: false,
            ..NbTreeOptions::default()
        },
    )
    .expect("open");
    // 8-byte random keys and 100-byte values, as the bench's shape (128 there): ~85σ of data.
    let n = 200_000u64;
    for i in 0..n {
        let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
        nb.put(&k, &[(i % 251) as u8; 100]).expect("put");
    }
    nb.checkpoint().expect("checkpoint");
    let report = nb.check().expect("check");
    let counters = nb.counters();
    eprintln!("{report:?}\n{counters:?}");
    let page = 4096u64;
    let file = counter(&nb, "file_pages") * page;
    let live = counter(&nb, "live_run_pages") * page;
    let raw = n * (8 + 100);
    // One child's rewrite (at most about 2σ of records: over σ after taking σ), the σ/4 written
    // before the commit that precedes it, and a run replaced by a split right after its merge
    // (2σ), each in pages: a leaf holds at least 3/4 of a page of records here, plus the
    // pieces' last partial megabytes (one per d-tree written between two commits).
    let one_cascade = (2 * sigma + sigma / 4 + 2 * sigma) * 4 / 3 + 8 * (1 << 20);
    assert!(
        file <= live + one_cascade,
        "file {file} bytes: live runs {live} + {} beyond them, over one cascade's {one_cascade}: \
         {counters:?}",
        file - live
    );
    assert!(
        file * 2 <= raw * 3,
        "file {file} bytes for {raw} raw bytes: over 1.5x ({:.2}x): {counters:?}",
        file as f64 / raw as f64
    );
    for i in (0..n).step_by(997) {
        let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
        assert_eq!(
            nb.get(&k).expect("get"),
            Some(vec![(i % 251) as u8; 100]),
            "key {i}"
        );
    }
}
