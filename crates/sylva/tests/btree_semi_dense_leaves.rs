//! Semi-dense leaves in the tree (issue 4, paper section 3.5): which key sets get them, what they
//! save, and the edge cases of their preconditions (mixed key lengths, values of any length,
//! keys with a non-numeric part, numeric parts at the top of the key width, 1- and 2-byte keys
//! whose leaves have no upper fence), each compared with a model and checked structurally.

#![allow(clippy::unwrap_used)]

mod btree_common;

use btree_common::{assert_same, counter, put, tree, Model};
use sylva::btree::{BTree, Layout};
use sylva::KvStore;

fn del(t: &BTree, m: &mut Model, k: &[u8]) {
    assert_eq!(t.delete(k).unwrap(), m.remove(k).is_some(), "delete {k:?}");
}

fn bytes(t: &BTree) -> u64 {
    t.stats().bytes_used.unwrap()
}

/// `n` distinct 32-bit keys from `[0, n / density)` in a scattered order.
fn keys_at_density(n: u64, density: f64) -> Vec<u32> {
    let range = (n as f64 / density) as u64;
    // Every `step`-th number of the range, then a bijective shuffle of the order.
    let step = range / n;
    let mut keys: Vec<u32> = (0..n).map(|i| (i * step) as u32).collect();
    let len = keys.len() as u64;
    for i in 0..len {
        let j = (i * 7919 + 13) % len;
        keys.swap(i as usize, j as usize);
    }
    keys
}

#[test]
fn dense_random_keys_become_semi_dense_leaves() {
    let (s, h) = (tree(Layout::Semidense, 4096), tree(Layout::Hints, 4096));
    let mut m = Model::new();
    for k in keys_at_density(40_000, 1.0) {
        let v = u64::from(k).to_le_bytes().to_vec();
        h.put(&k.to_be_bytes(), &v).unwrap();
        put(&s, &mut m, k.to_be_bytes().to_vec(), v);
    }
    let r = assert_same(&s, &m);
    assert!(
        r.semi_dense_leaves * 10 > r.leaves * 9,
        "{} of {} leaves semi-dense",
        r.semi_dense_leaves,
        r.leaves
    );
    assert_eq!(r.dense_leaves + r.fingerprint_leaves, 0);
    // The paper: 40% less space than hints at 100% density.
    let (sb, hb) = (bytes(&s), bytes(&h));
    assert!(
        sb * 10 < hb * 7,
        "semi-dense leaves use {sb} bytes, hints {hb}"
    );
    // Overwrites with values of other lengths (semi-dense leaves take any value length), then
    // deletes of most records: leaves compact, empty out, merge.
    for i in (0..40_000u32).step_by(3) {
        put(
            &s,
            &mut m,
            i.to_be_bytes().to_vec(),
            vec![7; (i % 23) as usize],
        );
    }
    assert_same(&s, &m);
    for i in (0..40_000u32).filter(|i| i % 10 != 0) {
        del(&s, &mut m, &i.to_be_bytes());
    }
    let r = assert_same(&s, &m);
    assert!(counter(&s, "merges") > 0);
    // At 10% density what is left is mostly comparison leaves again, or semi-dense leaves that
    // still pay for their slots.
    assert!(r.leaves * 10 < 40_000 / 2, "{} leaves", r.leaves);
}

#[test]
fn sparse_keys_stay_in_comparison_leaves() {
    // At 5% density a semi-dense leaf would spend more on empty slots than it saves.
    let (s, h) = (tree(Layout::Semidense, 4096), tree(Layout::Hints, 4096));
    let mut m = Model::new();
    for k in keys_at_density(30_000, 0.05) {
        h.put(&k.to_be_bytes(), &[1; 8]).unwrap();
        put(&s, &mut m, k.to_be_bytes().to_vec(), vec![1; 8]);
    }
    let r = assert_same(&s, &m);
    assert_eq!(r.semi_dense_leaves, 0);
    assert_eq!(bytes(&s), bytes(&h));
}

#[test]
fn half_dense_keys_use_semi_dense_leaves_and_save_space() {
    let (s, h) = (tree(Layout::Semidense, 4096), tree(Layout::Hints, 4096));
    let mut m = Model::new();
    for k in keys_at_density(30_000, 0.5) {
        h.put(&k.to_be_bytes(), &[2; 8]).unwrap();
        put(&s, &mut m, k.to_be_bytes().to_vec(), vec![2; 8]);
    }
    let r = assert_same(&s, &m);
    assert!(r.semi_dense_leaves * 2 > r.leaves);
    assert!(bytes(&s) < bytes(&h));
}

#[test]
fn mixed_key_lengths_leave_the_semi_dense_layout() {
    let s = tree(Layout::Semidense, 2048);
    let mut m = Model::new();
    for k in keys_at_density(20_000, 1.0) {
        put(&s, &mut m, k.to_be_bytes().to_vec(), vec![1; 8]);
    }
    assert!(s.check().unwrap().semi_dense_leaves > 0);
    let before = counter(&s, "conversions");
    for i in (0..20_000u32).step_by(7) {
        // A 5-byte key right after a 4-byte one: not the leaf's key length.
        let mut k = i.to_be_bytes().to_vec();
        k.push(1);
        put(&s, &mut m, k, vec![2; 8]);
        if i % 1000 == 0 {
            put(&s, &mut m, (i as u16).to_be_bytes().to_vec(), vec![3; 8]);
            put(&s, &mut m, vec![(i / 1000) as u8], vec![4; 8]);
        }
    }
    assert!(
        counter(&s, "conversions") > before,
        "semi-dense leaves converted back"
    );
    let r = assert_same(&s, &m);
    assert!(r.leaves > r.semi_dense_leaves);
}

#[test]
fn keys_with_a_non_numeric_part() {
    // ("wiki", n) and ("wikj", n) style keys: 4 non-numeric bytes and a dense numeric part; the
    // leaf holding the boundary between the two names cannot be semi-dense.
    let s = tree(Layout::Semidense, 4096);
    let mut m = Model::new();
    for name in [&b"wiki"[..], b"wikj", b"wikk"] {
        for n in keys_at_density(6000, 1.0) {
            let mut k = name.to_vec();
            k.extend_from_slice(&n.to_be_bytes());
            put(&s, &mut m, k, n.to_le_bytes().to_vec());
        }
    }
    let r = assert_same(&s, &m);
    assert!(r.semi_dense_leaves * 10 > r.leaves * 8, "{r:?}");
    for n in (0..6000u32).step_by(2) {
        let mut k = b"wikj".to_vec();
        k.extend_from_slice(&n.to_be_bytes());
        del(&s, &mut m, &k);
    }
    assert_same(&s, &m);
}

#[test]
fn numeric_parts_at_the_top_of_the_key_width() {
    let s = tree(Layout::Semidense, 2048);
    let mut m = Model::new();
    // 4-byte keys up to u32::MAX: the last leaf has no upper fence and its slots end at the
    // key width.
    for i in (u32::MAX - 3000)..=u32::MAX {
        put(&s, &mut m, i.to_be_bytes().to_vec(), vec![5; 4]);
    }
    // 6-byte keys whose numeric part wraps into the non-numeric prefix.
    for i in (u32::MAX - 1500)..=u32::MAX {
        let mut k = b"a\xff".to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        put(&s, &mut m, k, vec![7; 8]);
    }
    for i in 0..1500u32 {
        let mut k = b"b\x00".to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        put(&s, &mut m, k, vec![8; 8]);
    }
    assert_same(&s, &m);
}

#[test]
fn short_keys_without_an_upper_fence() {
    // 1-byte keys: 256 possible keys. They overflow a comparison leaf (17 bytes a record), which
    // then becomes one semi-dense leaf with no upper fence that holds them all (10 bytes a
    // record, and no split).
    let s = tree(Layout::Semidense, 4096);
    let mut m = Model::new();
    for i in (0..=255u8).rev() {
        put(&s, &mut m, vec![i], vec![i; 6]);
    }
    let r = assert_same(&s, &m);
    assert_eq!((r.leaves, r.semi_dense_leaves), (1, 1), "{r:?}");
    // 2-byte keys join: the leaf converts back and splits; ranges of 2-byte keys without a
    // 1-byte key among them become semi-dense again.
    for i in 0..=0xFFFFu16 {
        if i % 3 != 0 {
            put(&s, &mut m, i.to_be_bytes().to_vec(), vec![1; 6]);
        }
    }
    let r = assert_same(&s, &m);
    assert!(
        r.semi_dense_leaves > 0 && r.leaves > r.semi_dense_leaves,
        "{r:?}"
    );
    for i in 0..=255u8 {
        del(&s, &mut m, &[i]);
    }
    assert_same(&s, &m);
}

#[test]
fn sequential_inserts_and_range_maps() {
    let s = tree(Layout::Semidense, 4096);
    let mut m = Model::new();
    for i in 0..30_000u32 {
        put(&s, &mut m, i.to_be_bytes().to_vec(), vec![9; 8]);
    }
    let r = assert_same(&s, &m);
    assert!(r.semi_dense_leaves > 0);
    // A range map across many semi-dense leaves sees exactly the keys in range.
    let (lo, hi) = (1234u32.to_be_bytes(), 25_000u32.to_be_bytes());
    let mut seen = 0;
    s.map_range(&lo, &hi, &mut |k, _| {
        assert!(k >= &lo[..] && k < &hi[..]);
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, 25_000 - 1234);
}
