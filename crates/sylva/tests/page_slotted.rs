//! Page-level property tests of the slotted node against a sorted model: insert, remove,
//! overwrite, compaction, split and merge preserve content and order, for every combination of
//! prefix truncation, heads and hints.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use sylva::page::build::{self, Builder, NodeSpec};
use sylva::page::slotted::{Slotted, SlottedMut, FLAG_HEADS, FLAG_HINTS};
use sylva::page::KIND_LEAF;

const PAGE: usize = 2048;
const LOWER: &[u8] = b"ab";
const UPPER: &[u8] = b"ab\xff";

fn spec(flags: u8, truncate: bool) -> NodeSpec<'static> {
    NodeSpec {
        kind: KIND_LEAF,
        flags,
        prefix_truncation: truncate,
        lower: LOWER,
        upper: Some(UPPER),
        upper_child: 0,
        op_counter: 0,
    }
}

fn contents(v: &Slotted<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..v.count())
        .map(|i| {
            let mut k = Vec::new();
            v.full_key_into(i, &mut k).unwrap();
            (k, v.value(i).unwrap().to_vec())
        })
        .collect()
}

fn model_vec(m: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, usize),
    Remove(Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Keys in (LOWER, UPPER]: "ab" + a first byte below 0xff + up to 5 more bytes. Few distinct
    // first bytes so heads collide and hints see runs of equal heads.
    (0u8..8, proptest::collection::vec(any::<u8>(), 0..6)).prop_map(|(b, rest)| {
        let mut k = LOWER.to_vec();
        k.push(b * 3);
        k.extend(rest);
        k
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key(), 0usize..60).prop_map(|(k, l)| Op::Put(k, l)),
        1 => key().prop_map(Op::Remove),
    ]
}

fn flags() -> impl Strategy<Value = (u8, bool)> {
    prop_oneof![
        Just((0, false)),
        Just((0, true)),
        Just((FLAG_HEADS, true)),
        Just((FLAG_HEADS | FLAG_HINTS, true)),
        Just((FLAG_HEADS | FLAG_HINTS, false)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn slotted_page_matches_sorted_model((flags, truncate) in flags(), ops in proptest::collection::vec(op(), 1..400)) {
        let mut page = vec![0u8; PAGE];
        Builder::new(&mut page, &spec(flags, truncate)).unwrap().finish();
        let mut model = BTreeMap::new();
        let mut splits = 0;
        for (n, op) in ops.iter().enumerate() {
            let mut node = SlottedMut::new(1, &mut page).unwrap();
            let view = node.view();
            let p = view.prefix_len();
            match op {
                Op::Put(k, len) => {
                    let value = vec![n as u8; *len];
                    let (idx, found) = view.lower_bound(k).unwrap();
                    prop_assert_eq!(found, model.contains_key(k));
                    if found {
                        node.remove(idx);
                    }
                    if node.insert(idx, &k[p..], &value).unwrap() {
                        model.insert(k.clone(), value);
                    } else {
                        // Full: split must partition the content around the separator, and
                        // merging the halves must give it back.
                        if found {
                            model.remove(k);
                        }
                        let view = node.view();
                        if view.count() >= 2 {
                            splits += 1;
                            let at = build::find_separator(&view).unwrap();
                            let (mut l, mut r) = (vec![0u8; PAGE], vec![0u8; PAGE]);
                            build::split(&view, &at, flags, truncate, &mut l, &mut r).unwrap();
                            let (lv, rv) = (Slotted::new(2, &l).unwrap(), Slotted::new(3, &r).unwrap());
                            let (lc, rc) = (contents(&lv), contents(&rv));
                            prop_assert!(!lc.is_empty() && !rc.is_empty());
                            prop_assert!(lc.iter().all(|(k, _)| k.as_slice() <= at.separator.as_slice()));
                            prop_assert!(rc.iter().all(|(k, _)| k.as_slice() > at.separator.as_slice()));
                            prop_assert_eq!(lv.upper_fence().unwrap(), Some(at.separator.as_slice()));
                            prop_assert_eq!(rv.lower_fence().unwrap(), at.separator.as_slice());
                            let mut both = lc;
                            both.extend(rc);
                            prop_assert_eq!(&both, &model_vec(&model));
                            let mut merged = vec![0u8; PAGE];
                            prop_assert!(build::merge(&lv, &rv, flags, truncate, &mut merged).unwrap());
                            let mv = Slotted::new(4, &merged).unwrap();
                            prop_assert_eq!(contents(&mv), model_vec(&model));
                            prop_assert_eq!(mv.upper_fence().unwrap(), Some(UPPER));
                        }
                        // Keep going on the right half so later operations see a split page's
                        // shape; drop the left half from the model.
                        let view = node.view();
                        if view.count() >= 2 {
                            let at = build::find_separator(&view).unwrap();
                            let (mut l, mut r) = (vec![0u8; PAGE], vec![0u8; PAGE]);
                            build::split(&view, &at, flags, truncate, &mut l, &mut r).unwrap();
                            let mut fresh = vec![0u8; PAGE];
                            let mut b = Builder::new(&mut fresh, &spec(flags, truncate)).unwrap();
                            let rv = Slotted::new(3, &r).unwrap();
                            for (k, v) in contents(&rv) {
                                prop_assert!(b.push(&k, &[], &v));
                            }
                            b.finish();
                            model.retain(|k, _| k.as_slice() > at.separator.as_slice());
                            page = fresh;
                        }
                    }
                }
                Op::Remove(k) => {
                    let (idx, found) = view.lower_bound(k).unwrap();
                    prop_assert_eq!(found, model.remove(k).is_some());
                    if found {
                        node.remove(idx);
                    }
                }
            }
            let view = Slotted::new(1, &page).unwrap();
            prop_assert_eq!(contents(&view), model_vec(&model), "after op {}", n);
        }
        // Compaction keeps content and reclaims every garbage byte.
        let mut node = SlottedMut::new(1, &mut page).unwrap();
        node.compact().unwrap();
        let view = node.view();
        prop_assert_eq!(view.free_space(), view.free_space_after_compaction());
        prop_assert_eq!(contents(&view), model_vec(&model));
        for (i, k) in model.keys().enumerate() {
            prop_assert_eq!(view.lower_bound(k).unwrap(), (i, true));
        }
        let _ = splits;
    }
}

#[test]
fn decoding_rejects_bad_headers() {
    let mut page = vec![0u8; PAGE];
    Builder::new(&mut page, &spec(FLAG_HEADS, true))
        .unwrap()
        .finish();
    assert!(Slotted::new(1, &page).is_ok());
    let mut bad = page.clone();
    bad[0] = 99; // unknown kind
    assert!(Slotted::new(1, &bad).is_err());
    let mut bad = page.clone();
    bad[2..4].copy_from_slice(&u16::MAX.to_le_bytes()); // count past the heap
    assert!(Slotted::new(1, &bad).is_err());
    let mut bad = page.clone();
    bad[1] = FLAG_HINTS; // hints without heads
    assert!(Slotted::new(1, &bad).is_err());
    let mut bad = page.clone();
    bad[14..16].copy_from_slice(&4000u16.to_le_bytes()); // lower fence past the page
    let v = Slotted::new(1, &bad);
    assert!(v.is_err() || v.unwrap().lower_fence().is_err());
    assert!(Slotted::new(1, &page[..20]).is_err());
}
