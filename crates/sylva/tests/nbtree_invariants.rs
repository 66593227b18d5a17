//! Proptest of the NB-tree's invariants: after random puts, deletes, batches, commits and
//! reopens at tiny σ (every few writes cascade), `check()` holds — linkage, fanout, d-tree
//! sizes and sibling sums, equal leaf depth, contiguous sorted runs with intact checksums, no
//! Bloom false negatives, no page shared by two runs, live ∪ free = the file — and the store
//! equals a `BTreeMap` model.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use sylva::{NbTree, NbTreeOptions, SyncMode};

#[derive(Debug, Clone)]
enum Op {
    Put(u16, u8, u16),
    Delete(u16),
    Batch(Vec<(u16, Option<u8>)>),
    Commit,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u16..600, any::<u8>(), 0u16..300).prop_map(|(k, b, n)| Op::Put(k, b, n)),
        4 => (0u16..600).prop_map(Op::Delete),
        2 => proptest::collection::vec((0u16..600, proptest::option::of(any::<u8>())), 1..8)
            .prop_map(Op::Batch),
        1 => Just(Op::Commit),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:04}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_random_operations(
        ops in proptest::collection::vec(op(), 50..600),
        fanout in 3usize..6,
        bloom_bits in prop_oneof![Just(0u32), Just(10u32)],
    ) {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let path = dir.path().join("nb");
        let options = NbTreeOptions {
            sync: SyncMode::Never,
            sigma: Some(8 << 10),
            unchecked_sigma: true,
            fanout,
            bloom_bits,
            deamortize: false,
            ..NbTreeOptions::default()
        };
        let mut nb = Some(NbTree::open(&path, options).unwrap());
        let mut model = BTreeMap::new();
        for op in &ops {
            let s = nb.as_ref().unwrap();
            match op {
                Op::Put(k, b, n) => {
                    let v = vec![*b; *n as usize];
                    s.put(&key(*k), &v).unwrap();
                    model.insert(key(*k), v);
                }
                Op::Delete(k) => {
                    prop_assert_eq!(s.delete(&key(*k)).unwrap(), model.remove(&key(*k)).is_some());
                }
                Op::Batch(members) => {
                    let mut seen = std::collections::BTreeSet::new();
                    let members: Vec<(Vec<u8>, Option<Vec<u8>>)> = members
                        .iter()
                        .filter(|(k, _)| seen.insert(*k))
                        .map(|(k, b)| (key(*k), b.map(|b| vec![b; 20])))
                        .collect();
                    let ops: Vec<(&[u8], Option<&[u8]>)> =
                        members.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
                    s.write_batch(&ops).unwrap();
                    for (k, v) in members {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
                Op::Commit => s.checkpoint().unwrap(),
                Op::Reopen => {
                    nb.take().unwrap().close().unwrap();
                    nb = Some(NbTree::open(&path, options).unwrap());
                }
            }
        }
        let s = nb.as_ref().unwrap();
        let report = s.check();
        prop_assert!(report.is_ok(), "{:?}", report);
        let mut got = BTreeMap::new();
        s.scan(&[], usize::MAX, &mut |k, v| {
            got.insert(k.to_vec(), v.to_vec());
            true
        }).unwrap();
        prop_assert_eq!(&got, &model);
        for (k, v) in model.iter().step_by(7) {
            prop_assert_eq!(s.get(k).unwrap(), Some(v.clone()));
        }
    }
}
