//! BPA property tests: random operations on one leaf against a `BTreeMap`, on shapes small
//! enough that flushes, case 2a, case 2b (redistribute), splits and tombstones happen every few
//! operations. The structural check runs after every operation, and the test asserts that each
//! flush path was actually taken.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::paths::HITS;
use super::{Bpa, BpaShape};
use crate::mem::bptree::leaf::{Leaf, Removed, Scan};
use crate::mem::bptree::Standalone;

/// One BPA with its own storage.
type Owned = Standalone<u64, u64, Bpa<u64, u64>>;

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u64),
    Remove(u64),
    Find(u64),
    Iterate(Bound<u64>, usize),
    Map(u64, Option<u64>),
}

/// Keys from a small set (so duplicates and tombstones collide) plus both extremes.
fn key() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..48,
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let bound = prop_oneof![
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
        Just(Bound::Unbounded),
    ];
    prop_oneof![
        6 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key().prop_map(Op::Remove),
        2 => key().prop_map(Op::Find),
        1 => (bound, 0usize..20).prop_map(|(b, n)| Op::Iterate(b, n)),
        1 => (key(), proptest::option::of(key())).prop_map(|(s, e)| Op::Map(s, e)),
    ]
}

fn shape() -> impl Strategy<Value = BpaShape> {
    (1usize..7, 1usize..6, 2usize..7).prop_map(|(log_size, num_blocks, block_size)| BpaShape {
        log_size,
        num_blocks,
        block_size,
    })
}

/// Iterates like the tree does: resume after the last visited key when a sort is needed.
fn iterate(bpa: &mut Bpa<u64, u64>, from: Bound<u64>, want: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut cursor = from;
    if want == 0 {
        return out;
    }
    let mut prepared = false;
    loop {
        let from = cursor;
        let mut visit = |k, v| {
            out.push((k, v));
            cursor = Bound::Excluded(k);
            out.len() < want
        };
        match bpa.iterate(from, &mut visit) {
            Scan::Stopped | Scan::Exhausted => return out,
            Scan::NeedsSort => {
                // The contract the tree's scan loop relies on to end: after prepare_iterate the
                // next iterate delivers what was asked for without another sort.
                assert!(
                    !prepared,
                    "NeedsSort again after prepare_iterate from {from:?}"
                );
                bpa.prepare_iterate(cursor, want - out.len());
                prepared = true;
            }
        }
    }
}

/// Keeps the model to the keys a leaf kept after a split.
fn split(bpa: &mut Bpa<u64, u64>, model: &mut BTreeMap<u64, u64>) {
    if let Some(upper_half) = bpa.make_room() {
        let pivot = upper_half[0].0;
        let right = Owned::from_sorted(bpa.shape, &upper_half).unwrap();
        right.check().unwrap();
        let upper = model.split_off(&pivot);
        let got: Vec<_> = {
            let mut r = right;
            iterate(&mut r, Bound::Unbounded, usize::MAX)
        };
        assert_eq!(
            got,
            upper.into_iter().collect::<Vec<_>>(),
            "right half after split"
        );
        assert!(model.keys().all(|k| *k < pivot));
    }
    bpa.check().unwrap();
}

fn run(shape: BpaShape, ops: &[Op]) {
    let mut bpa: Option<Owned> = None;
    let mut model = BTreeMap::new();
    for op in ops {
        let Some(b) = bpa.as_mut() else {
            if let Op::Insert(k, v) = *op {
                bpa = Some(Owned::with_first(shape, k, v));
                model.insert(k, v);
            }
            continue;
        };
        match *op {
            Op::Insert(k, v) => {
                if b.is_full() {
                    split(b, &mut model);
                }
                b.insert(k, v);
                model.insert(k, v);
            }
            Op::Remove(k) => {
                let mut r = b.remove(&k);
                if r == Removed::NeedsRoom {
                    assert!(b.is_full());
                    split(b, &mut model);
                    r = b.remove(&k);
                }
                let want = model.remove(&k);
                match r {
                    Removed::Was(v) => assert_eq!(Some(v), want, "remove {k}"),
                    Removed::Absent => assert_eq!(None, want, "remove {k}"),
                    Removed::NeedsRoom => panic!("still no room after make_room"),
                }
            }
            Op::Find(k) => assert_eq!(b.find(&k), model.get(&k).copied(), "find {k}"),
            Op::Iterate(from, n) => {
                let got = iterate(b, from, n);
                let want: Vec<_> = model
                    .range((from, Bound::Unbounded))
                    .take(n)
                    .map(|(k, v)| (*k, *v))
                    .collect();
                assert_eq!(got, want, "iterate from {from:?}, {n}");
            }
            Op::Map(start, end) => {
                let mut got = Vec::new();
                b.map(start, end, &mut |k, v| {
                    got.push((k, v));
                    true
                });
                got.sort();
                let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
                let want: Vec<_> = if end.is_some_and(|e| e <= start) {
                    Vec::new()
                } else {
                    model
                        .range((Bound::Included(start), hi))
                        .map(|(k, v)| (*k, *v))
                        .collect()
                };
                assert_eq!(got, want, "map [{start}, {end:?})");
            }
        }
        b.check().unwrap();
        assert_eq!(b.live(), model.len(), "live count");
        assert!(
            b.num_elts() >= model.len(),
            "num_elts counts at least the live records"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn bpa_matches_a_sorted_model(shape in shape(), ops in proptest::collection::vec(op(), 1..300)) {
        run(shape, &ops);
    }
}

#[test]
fn every_flush_path_is_hit() {
    HITS.with(|h| h.set([0; 5]));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (shape(), proptest::collection::vec(op(), 1..300));
    for _ in 0..200 {
        let (s, ops) = strategy.new_tree(&mut runner).unwrap().current();
        run(s, &ops);
    }
    let hits = HITS.with(|h| h.get());
    let names = [
        "first flush",
        "case 2a",
        "case 2b",
        "split",
        "tombstone to 2b",
    ];
    for (n, name) in hits.iter().zip(names) {
        assert!(*n > 0, "{name} never ran: {hits:?}");
    }
}

#[test]
fn monotonic_and_reverse_inserts_keep_the_invariants() {
    for keys in [
        (0..5000u64).collect::<Vec<_>>(),
        (0..5000u64).rev().collect(),
        (0..5000u64).map(|i| u64::MAX - i).collect(),
    ] {
        let shape = BpaShape {
            log_size: 8,
            num_blocks: 8,
            block_size: 8,
        };
        let mut b = Owned::with_first(shape, keys[0], 0);
        let mut model = BTreeMap::from([(keys[0], 0)]);
        for &k in &keys[1..] {
            if b.is_full() {
                split(&mut b, &mut model);
            }
            b.insert(k, k);
            model.insert(k, k);
            b.check().unwrap();
        }
        let got = iterate(&mut b, Bound::Unbounded, usize::MAX);
        assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    }
}
