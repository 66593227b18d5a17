//! Space after random inserts (issue 5's target: at most 1.5× the raw key and value bytes, 96
//! bytes of page per record of an 8-byte key and a 56-byte value), for the in-memory tree and
//! the database file.
//!
//! Why the bounds hold: with 50/50 splits alone, leaves after random inserts are on average
//! ln 2 ≈ 69% full (Yao 1978). With deferred splits (`Options::redistribute`: records move into
//! a neighbour with room, else two full leaves split into three) every leaf that has a neighbour
//! is at least 2/3 full after its split, and the average settles at 81–87% (a simulation of the
//! policy, and about 83% measured here). A leaf of the default `adaptive` layout holds at most
//! `(4096 − 96-byte header and hints − fences) / (10-byte slot + 8 + 56) ≈ 54` such records, so
//! the bound of 0.78 × 54 records per leaf lies below what redistribution reaches and well above
//! the ln 2 ≈ 37 that plain splits reach; the test also asserts the latter, so it fails if
//! redistribution stops working.

#![allow(clippy::unwrap_used)]

use sylva::btree::{BTree, CheckReport, Layout, Options};
use sylva::{Db, DbOptions, KvStore, SyncMode};

/// Records in each test: enough for thousands of leaves, so the average is stable.
const RECORDS: u64 = 100_000;
/// Leaf capacity in records of 64 bytes (8-byte key, 56-byte value) with 4 KiB pages.
const CAPACITY: f64 = 54.0;
/// The space target in bytes of page per record.
const TARGET: f64 = 96.0;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Record `i`: a random 8-byte key (a bijection of `i`) and a 56-byte value.
fn record(i: u64) -> ([u8; 8], [u8; 56]) {
    let mut v = [0u8; 56];
    v[..8].copy_from_slice(&i.to_le_bytes());
    (mix(i ^ 0x5EED).to_be_bytes(), v)
}

fn load_tree(layout: Layout, redistribute: bool) -> (BTree, CheckReport) {
    let t = BTree::new(Options {
        layout,
        redistribute,
        ..Options::default()
    })
    .unwrap();
    for i in 0..RECORDS {
        let (k, v) = record(i);
        t.put(&k, &v).unwrap();
    }
    let report = t.check().unwrap();
    assert_eq!(report.records, RECORDS);
    (t, report)
}

fn per_leaf(r: &CheckReport) -> f64 {
    r.records as f64 / r.leaves as f64
}

fn counter(stats: &sylva::Stats, name: &str) -> u64 {
    stats
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |c| c.1)
}

#[test]
fn random_inserts_fill_leaves_to_b_star_levels() {
    let (on, r_on) = load_tree(Layout::Adaptive, true);
    let (_, r_off) = load_tree(Layout::Adaptive, false);
    let bound = 0.78 * CAPACITY;
    eprintln!(
        "adaptive: {:.1} records per leaf with redistribution, {:.1} without",
        per_leaf(&r_on),
        per_leaf(&r_off)
    );
    assert!(
        per_leaf(&r_on) >= bound,
        "{:.1} records per leaf with redistribution, want ≥ {bound:.1}",
        per_leaf(&r_on)
    );
    assert!(
        per_leaf(&r_off) < bound,
        "{:.1} records per leaf with plain splits: the bound does not tell the policies apart",
        per_leaf(&r_off)
    );
    let stats = on.stats();
    assert!(counter(&stats, "redistributions") > 0);
    assert!(counter(&stats, "splits_2to3") > 0);
    let per_record = stats.bytes_used.unwrap() as f64 / RECORDS as f64;
    eprintln!("btree: {per_record:.1} bytes per record");
    assert!(
        per_record <= TARGET,
        "{per_record:.1} bytes per record, target {TARGET}"
    );
}

#[test]
fn every_comparison_leaf_layout_fills_better() {
    for layout in [Layout::Baseline, Layout::Hints, Layout::Fingerprint] {
        let (_, on) = load_tree(layout, true);
        let (_, off) = load_tree(layout, false);
        eprintln!(
            "{layout:?}: {:.1} records per leaf with redistribution, {:.1} without",
            per_leaf(&on),
            per_leaf(&off)
        );
        assert!(
            per_leaf(&on) >= 1.12 * per_leaf(&off),
            "{layout:?}: {:.1} records per leaf with redistribution, {:.1} without",
            per_leaf(&on),
            per_leaf(&off)
        );
    }
}

#[test]
fn database_file_meets_the_space_target() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        DbOptions {
            sync: SyncMode::Never,
            cache_bytes: 64 << 20,
            direct_io: false,
            ..DbOptions::default()
        },
    )
    .unwrap();
    for i in 0..RECORDS {
        let (k, v) = record(i);
        db.put(&k, &v).unwrap();
    }
    db.check().unwrap();
    let stats = KvStore::stats(&db);
    assert!(counter(&stats, "redistributions") > 0);
    db.close().unwrap();
    // The page file after close: every page written, the log emptied.
    let file_bytes = std::fs::metadata(dir.path().join("data.sylva"))
        .unwrap()
        .len();
    let per_record = file_bytes as f64 / RECORDS as f64;
    eprintln!("db: {per_record:.1} bytes of page file per record");
    assert!(
        per_record <= TARGET,
        "{per_record:.1} bytes of page file per record, target {TARGET}"
    );
}
