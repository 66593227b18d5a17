//! Fully-dense leaf edge cases (issue 4): mixed key lengths, numeric parts that overflow past the
//! last slot or the key width, interleaved partitions, values of another length, deletes that
//! empty dense leaves; each compared with a model and checked structurally.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use sylva::btree::{BTree, Layout, Options};
use sylva::KvStore;

fn tree(layout: Layout, page_size: usize) -> BTree {
    BTree::new(Options {
        layout,
        page_size,
        ..Options::default()
    })
    .unwrap()
}

fn counter(t: &BTree, name: &str) -> u64 {
    t.stats()
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

fn assert_same(t: &BTree, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    t.check().unwrap();
    let mut got = Vec::new();
    t.scan(b"", usize::MAX, &mut |k, v| {
        got.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "tree content differs from the model");
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(t.get(k).unwrap().as_ref(), Some(v), "get {k:?}");
        // A scan starting at every 7th key sees that key first.
        let mut first = None;
        t.scan(k, 1, &mut |k, _| {
            first = Some(k.to_vec());
            false
        })
        .unwrap();
        assert_eq!(first.as_ref(), Some(k));
    }
}

fn put(t: &BTree, m: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>, v: Vec<u8>) {
    t.put(&k, &v).unwrap();
    m.insert(k, v);
}

#[test]
fn sequential_dense_keys_become_dense_leaves() {
    let (d, h) = (tree(Layout::Dense, 4096), tree(Layout::Hints, 4096));
    let mut m = BTreeMap::new();
    for i in 0..60_000u32 {
        put(
            &d,
            &mut m,
            i.to_be_bytes().to_vec(),
            u64::from(i).to_le_bytes().to_vec(),
        );
        h.put(&i.to_be_bytes(), &u64::from(i).to_le_bytes())
            .unwrap();
    }
    assert_same(&d, &m);
    assert!(counter(&d, "conversions") > 0);
    let (db, hb) = (d.stats().bytes_used.unwrap(), h.stats().bytes_used.unwrap());
    assert!(db * 10 < hb * 6, "dense leaves use {db} bytes, hints {hb}");
    // Delete most records: dense leaves empty out and merge or convert back.
    for i in (0..60_000u32).filter(|i| i % 10 != 0) {
        assert!(d.delete(&i.to_be_bytes()).unwrap());
        m.remove(i.to_be_bytes().as_slice());
    }
    assert_same(&d, &m);
}

#[test]
fn random_order_dense_keys() {
    // In random order, dense leaves mostly appear as halves of splits rather than conversions.
    let (d, h) = (tree(Layout::Dense, 4096), tree(Layout::Hints, 4096));
    let mut m = BTreeMap::new();
    for i in 0..40_000u64 {
        let k = ((i * 7919) % 40_000) as u32;
        put(
            &d,
            &mut m,
            k.to_be_bytes().to_vec(),
            i.to_le_bytes().to_vec(),
        );
        h.put(&k.to_be_bytes(), &i.to_le_bytes()).unwrap();
    }
    assert_same(&d, &m);
    let (db, hb) = (d.stats().bytes_used.unwrap(), h.stats().bytes_used.unwrap());
    assert!(db * 10 < hb * 7, "dense leaves use {db} bytes, hints {hb}");
}

#[test]
fn mixed_key_lengths() {
    let d = tree(Layout::Dense, 2048);
    let mut m = BTreeMap::new();
    for i in 0..20_000u32 {
        put(&d, &mut m, i.to_be_bytes().to_vec(), vec![1; 8]);
        if i % 7 == 0 {
            // A 5-byte key sorting right after the 4-byte one: breaks "equal length".
            let mut k = i.to_be_bytes().to_vec();
            k.push(1);
            put(&d, &mut m, k, vec![2; 8]);
        }
        if i % 1000 == 0 {
            // Short keys: numeric part zero-extended at the front.
            put(&d, &mut m, (i as u16).to_be_bytes().to_vec(), vec![3; 8]);
            put(&d, &mut m, vec![(i / 1000) as u8], vec![4; 8]);
        }
    }
    assert_same(&d, &m);
}

#[test]
fn numeric_part_overflow() {
    let d = tree(Layout::Dense, 2048);
    let mut m = BTreeMap::new();
    // 4-byte keys up to u32::MAX: the last dense leaf's capacity stops at the key width.
    for i in (u32::MAX - 3000)..=u32::MAX {
        put(&d, &mut m, i.to_be_bytes().to_vec(), vec![5; 8]);
    }
    // 2-byte keys up to 0xFFFF.
    for i in 0xF000u16..=0xFFFF {
        put(&d, &mut m, i.to_be_bytes().to_vec(), vec![6; 8]);
    }
    // 6-byte keys whose numeric part wraps into the non-numeric prefix: "a\xff" ++ u32 near max
    // followed by "b\x00" ++ small numbers.
    for i in (u32::MAX - 2000)..=u32::MAX {
        let mut k = b"a\xff".to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        put(&d, &mut m, k, vec![7; 8]);
    }
    for i in 0..2000u32 {
        let mut k = b"b\x00".to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        put(&d, &mut m, k, vec![8; 8]);
    }
    // Sequential keys past the last slot of a full dense leaf (the dense split).
    for i in 100_000u32..110_000 {
        put(&d, &mut m, i.to_be_bytes().to_vec(), vec![9; 8]);
    }
    assert_same(&d, &m);
}

#[test]
fn interleaved_partitions() {
    let (d, h) = (tree(Layout::Dense, 4096), tree(Layout::Hints, 4096));
    let mut m = BTreeMap::new();
    let mut counters = [0u32; 8];
    for i in 0..80_000u64 {
        let p = ((i * 2654435761) >> 7) % 8;
        let mut k = (p as u32 * 1000).to_be_bytes().to_vec();
        k.extend_from_slice(&counters[p as usize].to_be_bytes());
        counters[p as usize] += 1;
        h.put(&k, &i.to_le_bytes()).unwrap();
        put(&d, &mut m, k, i.to_le_bytes().to_vec());
    }
    assert_same(&d, &m);
    let (db, hb) = (d.stats().bytes_used.unwrap(), h.stats().bytes_used.unwrap());
    assert!(
        db * 10 < hb * 7,
        "partitioned dense leaves use {db} bytes, hints {hb}"
    );
}

#[test]
fn values_of_another_length_leave_dense_layout() {
    let d = tree(Layout::Dense, 2048);
    let mut m = BTreeMap::new();
    for i in 0..5000u32 {
        put(&d, &mut m, i.to_be_bytes().to_vec(), vec![1; 8]);
    }
    for i in (0..5000u32).step_by(3) {
        put(
            &d,
            &mut m,
            i.to_be_bytes().to_vec(),
            vec![2; 1 + (i as usize % 30)],
        );
    }
    assert_same(&d, &m);
    for i in (0..5000u32).step_by(2) {
        assert!(d.delete(&i.to_be_bytes()).unwrap());
        m.remove(i.to_be_bytes().as_slice());
    }
    assert_same(&d, &m);
}
