//! Helpers shared by the dense- and semi-dense-leaf scenario tests: a tree, a model, and a
//! comparison of the two that also runs the structural check.
//!
//! Each test binary includes this module with `mod btree_common;` and may use only part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use sylva::btree::{BTree, CheckReport, Layout, Options};
use sylva::KvStore;

/// What the tree should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// An empty in-memory tree.
pub fn tree(layout: Layout, page_size: usize) -> BTree {
    BTree::new(Options {
        layout,
        page_size,
        ..Options::default()
    })
    .unwrap()
}

/// The value of the tree's counter `name` (`splits`, `merges`, `conversions`, ...).
pub fn counter(t: &BTree, name: &str) -> u64 {
    t.stats()
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

/// Puts `k` into the tree and the model.
pub fn put(t: &BTree, m: &mut Model, k: Vec<u8>, v: Vec<u8>) {
    t.put(&k, &v).unwrap();
    m.insert(k, v);
}

/// Checks the tree, compares it with the model (a full scan; every 7th key by get and by a scan
/// starting there; absent keys next to present ones), and returns the check's report.
pub fn assert_same(t: &BTree, model: &Model) -> CheckReport {
    let report = t.check().unwrap();
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
    for k in model.keys().step_by(13) {
        let mut next = k.clone();
        next.push(0);
        if !model.contains_key(&next) {
            assert_eq!(t.get(&next).unwrap(), None);
        }
    }
    report
}

/// Scans `len` records from stable key `stable[from]` (stable keys are sorted and never change
/// while the scan runs): the scan starts at that key, is strictly ascending, and holds every
/// stable key between its first and last record with its value (a record moving between
/// leaves while the scan passes must be seen exactly once).
pub fn scan_check(store: &dyn KvStore, stable: &[(Vec<u8>, Vec<u8>)], from: usize, len: usize) {
    let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    store
        .scan(&stable[from].0, len, &mut |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "a scan is not strictly ascending"
    );
    assert_eq!(
        seen.first().map(|r| &r.0),
        Some(&stable[from].0),
        "a scan from a stable key did not start there"
    );
    let last = &seen.last().unwrap().0;
    let got: BTreeMap<_, _> = seen.iter().cloned().collect();
    for (k, v) in stable[from..].iter().take_while(|(k, _)| k <= last) {
        assert_eq!(got.get(k), Some(v), "a scan missed a stable key");
    }
}
