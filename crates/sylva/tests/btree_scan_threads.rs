//! Scans across leaf boundaries while other threads split the leaves they cross.
//!
//! A walk reaches the next leaf through the current leaf's parent when that parent is
//! unchanged (`BTree::next_child`), else by a descent. Stable string keys are loaded first;
//! writers then insert keys between them (every leaf of the key space splits, redistributes when
//! deferred splits are on, or, in the adaptive layout, changes layout), while readers scan
//! hundreds of records from stable
//! keys. Every scan must be strictly ascending and hold every stable key of the range it
//! covered, exactly once, with its value. The test ends with `check()` and a full comparison.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use sylva::btree::{BTree, Options};
use sylva::KvStore;

mod btree_common;
use btree_common::{counter, scan_check};

const STABLE: usize = 6_000;
const PER_WRITER: usize = 12_000;
const WRITERS: usize = 2;

fn stable_key(i: usize) -> Vec<u8> {
    format!("https://h{}.example.org/{:06}", i % 5, i).into_bytes()
}

fn writer_key(w: usize, n: usize) -> Vec<u8> {
    // Between stable keys, spread over the whole key space.
    let i = n.wrapping_mul(7919) % STABLE;
    format!("https://h{}.example.org/{:06}/w{w}/{n}", i % 5, i).into_bytes()
}

fn run(layout: &str, redistribute: bool) {
    let mut o = Options {
        redistribute,
        ..Options::default()
    };
    o.set("layout", layout).unwrap();
    let t = BTree::new(o).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..STABLE {
        let v = (i as u64).to_le_bytes().to_vec();
        t.put(&stable_key(i), &v).unwrap();
        model.insert(stable_key(i), v);
    }
    let stable: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let splits_before = counter(&t, "splits");
    let writing = AtomicUsize::new(WRITERS);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (t, writing) = (&t, &writing);
            s.spawn(move || {
                for n in 0..PER_WRITER {
                    t.put(&writer_key(w, n), &[w as u8; 8]).unwrap();
                }
                writing.fetch_sub(1, Ordering::Release);
            });
        }
        let (t, writing, stable) = (&t, &writing, &stable);
        s.spawn(move || {
            let mut i = 1usize;
            let mut scans = 0;
            // Scan while the writers run, and at least 300 times.
            while writing.load(Ordering::Acquire) > 0 || scans < 300 {
                scans += 1;
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                scan_check(t, stable, (i >> 33) % STABLE, 50 + (i >> 20) % 400);
            }
        });
    });
    assert!(
        counter(&t, "splits") > splits_before + 50,
        "{layout}: too few splits while the scans ran"
    );
    for w in 0..WRITERS {
        for n in 0..PER_WRITER {
            model.insert(writer_key(w, n), vec![w as u8; 8]);
        }
    }
    t.check().unwrap();
    let mut all = Vec::new();
    t.scan(b"", usize::MAX, &mut |k, v| {
        all.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    assert_eq!(all.len(), model.len(), "{layout}");
    assert!(all.into_iter().zip(model).all(|(a, b)| a == b), "{layout}");
}

#[test]
fn adaptive_scans_cross_leaves_during_splits() {
    run("adaptive", false);
}

#[test]
fn adaptive_scans_cross_leaves_during_deferred_splits() {
    run("adaptive", true);
}

#[test]
fn baseline_scans_cross_leaves_during_splits() {
    run("baseline", false);
}
