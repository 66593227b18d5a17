//! The adaptive layout (paper section 5): key-adaption picks fingerprinting leaves for
//! string-like keys, comparison leaves for keys with good heads and dense leaves for dense
//! integers; operation-adaption moves string leaves to the comparison layout under scans and
//! back under point reads.

#![allow(clippy::unwrap_used)]

use sylva::btree::{BTree, Layout, Options};
use sylva::KvStore;

fn adaptive() -> BTree {
    BTree::new(Options {
        layout: Layout::Adaptive,
        page_size: 4096,
        ..Options::default()
    })
    .unwrap()
}

/// Title-like keys from a small vocabulary: within a leaf many neighbours share their first
/// four bytes even after prefix truncation, so heads are poor.
fn title(i: u64) -> Vec<u8> {
    const WORDS: [&str; 10] = [
        "List", "History", "Battle", "National", "Saint", "United", "Lake", "Mount", "River",
        "County",
    ];
    let (a, b) = (WORDS[(i % 10) as usize], WORDS[(i / 10 % 10) as usize]);
    format!("{a}_of_{b}_{}", i / 100).into_bytes()
}

#[test]
fn string_keys_adapt_to_the_operation_mix() {
    let t = adaptive();
    let n = 20_000;
    for i in 0..n {
        t.put(&title(i), &i.to_le_bytes()).unwrap();
    }
    let loaded = t.check().unwrap();
    assert!(
        loaded.fingerprint_leaves * 2 > loaded.leaves,
        "after loading string keys {} of {} leaves use fingerprints",
        loaded.fingerprint_leaves,
        loaded.leaves
    );
    // Scans raise the counters: fingerprinting leaves turn into comparison leaves, except those
    // too full to hold their records with 10-byte slots (the conversion is abandoned).
    for i in 0..150_000 {
        t.scan(&title(i * 7 % n), 10, &mut |_, _| true).unwrap();
    }
    let scanned = t.check().unwrap();
    assert!(
        scanned.fingerprint_leaves * 2 < loaded.fingerprint_leaves,
        "after scans {} fingerprinting leaves remain of {}",
        scanned.fingerprint_leaves,
        loaded.fingerprint_leaves
    );
    // Point reads lower them again.
    for i in 0..400_000 {
        assert!(t.get(&title(i * 13 % n)).unwrap().is_some());
    }
    let read = t.check().unwrap();
    assert!(
        read.fingerprint_leaves * 2 > read.leaves,
        "after point reads {} of {} leaves use fingerprints",
        read.fingerprint_leaves,
        read.leaves
    );
    let mut count = 0;
    t.scan(b"", usize::MAX, &mut |_, _| {
        count += 1;
        true
    })
    .unwrap();
    assert_eq!(count, n);
}

#[test]
fn integer_keys_use_comparison_or_dense_leaves() {
    let sparse = adaptive();
    let mut x = 0x1234_5678u32;
    for i in 0..30_000u64 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        sparse.put(&x.to_be_bytes(), &i.to_le_bytes()).unwrap();
    }
    let r = sparse.check().unwrap();
    assert_eq!(r.fingerprint_leaves, 0, "random integers have good heads");
    let dense = adaptive();
    for i in 0..30_000u32 {
        dense
            .put(&((i * 7919) % 30_000).to_be_bytes(), &[7; 8])
            .unwrap();
    }
    let r = dense.check().unwrap();
    assert!(
        r.dense_leaves * 2 > r.leaves,
        "{} of {} leaves dense",
        r.dense_leaves,
        r.leaves
    );
    assert_eq!(r.fingerprint_leaves, 0);
}
