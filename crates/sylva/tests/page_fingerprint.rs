//! Page-level property test of the fingerprinting leaf against a sorted model: appends to the
//! unsorted tail, removals, overwrites, lazy sorting and compaction preserve content; the SIMD
//! and scalar fingerprint scans agree.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use sylva::page::build::{Builder, NodeSpec};
use sylva::page::fingerprint::{self, find, find_scalar};
use sylva::page::slotted::{Slotted, SlottedMut};
use sylva::page::KIND_FP_LEAF;

const PAGE: usize = 2048;

fn sorted_contents(v: &Slotted<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c: Vec<_> = (0..v.count())
        .map(|i| {
            let mut k = Vec::new();
            v.full_key_into(i, &mut k).unwrap();
            (k, v.value(i).unwrap().to_vec())
        })
        .collect();
    c.sort();
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fingerprint_leaf_matches_model(
        truncate in any::<bool>(),
        ops in proptest::collection::vec((0u8..4, 0u16..300, 0usize..40), 1..500),
    ) {
        let spec = NodeSpec {
            kind: KIND_FP_LEAF,
            flags: 0,
            prefix_truncation: truncate,
            lower: b"key",
            upper: Some(b"key\xff"),
            upper_child: 0,
            op_counter: 0,
        };
        let mut page = vec![0u8; PAGE];
        Builder::new(&mut page, &spec).unwrap().finish();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (n, &(op, k, len)) in ops.iter().enumerate() {
            let key = format!("key{k:05}").into_bytes();
            let mut m = SlottedMut::new(1, &mut page).unwrap();
            let p = m.view().prefix_len();
            let stored = key[p..].to_vec();
            let found = find(&m.view(), &stored).unwrap();
            prop_assert_eq!(found, find_scalar(&m.view(), &stored).unwrap());
            prop_assert_eq!(found.is_some(), model.contains_key(&key));
            match op {
                0 | 1 => {
                    let value = vec![n as u8; len];
                    if let Some(i) = found {
                        fingerprint::remove(&mut m, i);
                        model.remove(&key);
                    }
                    if fingerprint::insert(&mut m, &stored, &value).unwrap() {
                        model.insert(key, value);
                    }
                }
                2 => {
                    if let Some(i) = found {
                        fingerprint::remove(&mut m, i);
                        model.remove(&key);
                    }
                }
                _ => fingerprint::sort(&mut m).unwrap(),
            }
            let v = Slotted::new(1, &page).unwrap();
            prop_assert!(v.sorted() <= v.count());
            prop_assert!((1..v.sorted()).all(|i| v.key(i - 1).unwrap() < v.key(i).unwrap()));
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(sorted_contents(&v), want);
        }
        let mut m = SlottedMut::new(1, &mut page).unwrap();
        fingerprint::sort(&mut m).unwrap();
        let v = m.view();
        prop_assert_eq!(v.sorted(), v.count());
        for (i, k) in model.keys().enumerate() {
            prop_assert_eq!(v.lower_bound(k).unwrap(), (i, true));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// The lazy sort orders keys that tie on their first eight bytes once zero-padded (short
    /// keys, keys with zero bytes, long shared prefixes), and keeps each fingerprint with its
    /// key.
    #[test]
    fn sort_orders_keys_that_tie_on_eight_bytes(
        keys in proptest::collection::btree_set(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8)], 0..14),
            1..60,
        ),
        seed in any::<u64>(),
    ) {
        let spec = NodeSpec {
            kind: KIND_FP_LEAF,
            flags: 0,
            prefix_truncation: false,
            lower: b"",
            upper: None,
            upper_child: 0,
            op_counter: 0,
        };
        let mut page = vec![0u8; PAGE];
        Builder::new(&mut page, &spec).unwrap().finish();
        // Insert in a scrambled order so the tail is unsorted.
        let mut order: Vec<&Vec<u8>> = keys.iter().collect();
        let mut s = seed | 1;
        for i in (1..order.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            order.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let mut m = SlottedMut::new(1, &mut page).unwrap();
        for k in &order {
            prop_assert!(fingerprint::insert(&mut m, k, b"v").unwrap());
        }
        fingerprint::sort(&mut m).unwrap();
        let v = m.view();
        prop_assert_eq!(v.sorted(), v.count());
        let got: Vec<Vec<u8>> = (0..v.count()).map(|i| v.key(i).unwrap().to_vec()).collect();
        let want: Vec<Vec<u8>> = keys.iter().cloned().collect();
        prop_assert_eq!(got, want);
        for (i, k) in keys.iter().enumerate() {
            prop_assert_eq!(v.fingerprints()[i], fingerprint::fingerprint(k));
            prop_assert_eq!(find(&v, k).unwrap(), Some(i));
        }
    }
}
