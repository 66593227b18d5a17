//! Page-level tests of the semi-dense leaf (`sylva::page::semidense`, paper section 3.5): its
//! shape at the boundaries of its preconditions, key/slot round trips, a property test of put,
//! clear and compaction against a model, the builder's refusals, and decoding of damaged pages
//! (an error, never a panic).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use sylva::page::free_gap;
use sylva::page::semidense::{self, SemiDense, SemiDenseMut, Shape, HEADER_LEN};

const PAGE: usize = 2048;

fn be(n: u32) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

/// The keys of every slot, in slot order.
fn slot_keys(s: &SemiDense<'_>) -> Vec<Vec<u8>> {
    (0..s.slots())
        .map(|i| {
            let mut k = Vec::new();
            s.key_into(i, &mut k);
            k
        })
        .collect()
}

#[test]
fn shape_covers_exactly_the_keys_between_the_fences() {
    // 4-byte keys in (1000, 1300]: reference 1001, 300 slots.
    let s = Shape::new(PAGE, &be(1000), Some(&be(1300)), 4).unwrap();
    assert_eq!((s.reference.clone(), s.slots), (be(1001), 300));
    assert_eq!(s.slot_of(&be(1001)), Some(0));
    assert_eq!(s.slot_of(&be(1300)), Some(299));
    assert_eq!(s.slot_of(&be(1000)), None);
    assert_eq!(s.slot_of(&be(1301)), None);
    assert_eq!(s.slot_of(&[0, 0, 3]), None, "another key length");

    // An upper fence shorter than the keys: the last slot is the largest 8-byte key below it.
    let lower = cat(b"wiki", &be(5));
    let s = Shape::new(PAGE, &lower, Some(b"wiki\0\0\x01"), 8).unwrap();
    assert_eq!((s.reference.clone(), s.slots), (cat(b"wiki", &be(6)), 250));
    // A lower fence longer than the keys: the reference carries into the non-numeric part.
    let s = Shape::new(
        PAGE,
        &[0, 0xff, 0xff, 0xff, 0xff, 7],
        Some(&[1, 0, 0, 1, 0]),
        5,
    )
    .unwrap();
    assert_eq!((s.reference.clone(), s.slots), (vec![1, 0, 0, 0, 0], 257));
    // Shorter lower fence: zero-padded.
    let s = Shape::new(PAGE, b"ab", Some(b"ab\0\0\x01\x00"), 6).unwrap();
    assert_eq!(
        (s.reference.clone(), s.slots),
        (b"ab\0\0\0\0".to_vec(), 257)
    );
}

#[test]
fn shape_refuses_what_the_paper_excludes() {
    // The upper fence must share the non-numeric part.
    assert_eq!(Shape::new(PAGE, b"wiki\0\0\0\x01", Some(b"wikj"), 8), None);
    assert_eq!(Shape::new(PAGE, b"wiki\0\0\0\x01", None, 8), None);
    // No key of this length above the lower fence, or none up to the upper fence.
    assert_eq!(Shape::new(PAGE, &[0xff; 4], None, 4), None);
    assert_eq!(Shape::new(PAGE, &be(10), Some(&[0, 0, 0, 10, 0]), 4), None);
    assert_eq!(Shape::new(PAGE, &be(1), Some(&be(2)), 0), None);
    // Too many slots for the page (or for a u16 count).
    assert_eq!(Shape::new(PAGE, &be(0), Some(&be(1200)), 4), None);
    assert_eq!(Shape::new(65536, b"", None, 2), None);
    // The largest that fits a page: header, slots, fences, reference and one empty value.
    let n = (PAGE - HEADER_LEN - 4 - 4 - 4 - 2) / 2;
    assert!(Shape::new(PAGE, &be(0), Some(&be(n as u32)), 4).is_some());
    assert!(Shape::new(PAGE, &be(0), Some(&be(n as u32 + 1)), 4).is_none());
}

#[test]
fn shape_without_an_upper_fence_runs_to_the_key_width() {
    // 1-byte keys: all 256 of them.
    let s = Shape::new(4096, b"", None, 1).unwrap();
    assert_eq!((s.reference.clone(), s.slots), (vec![0], 256));
    assert_eq!(s.slot_of(&[255]), Some(255));
    // 4-byte keys near the top: slots stop at u32::MAX.
    let s = Shape::new(PAGE, &be(u32::MAX - 10), None, 4).unwrap();
    assert_eq!(s.slots, 10);
    assert_eq!(s.slot_of(&be(u32::MAX)), Some(9));
}

#[test]
fn slots_round_trip_keys_and_lower_bound_orders_them() {
    let lower = cat(b"wiki", &be(u32::MAX - 100));
    let upper = cat(b"wiki", &[0xff, 0xff, 0xff, 0xff, 0]);
    let shape = Shape::new(PAGE, &lower, Some(&upper), 8).unwrap();
    assert_eq!(shape.slots, 100);
    let mut page = vec![0u8; PAGE];
    assert!(semidense::build(
        &mut page,
        &shape,
        (&lower, Some(&upper)),
        0,
        std::iter::empty(),
        0
    ));
    let s = SemiDense::new(1, &page).unwrap();
    let keys = slot_keys(&s);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert!(keys[0].as_slice() > lower.as_slice() && keys[99].as_slice() <= upper.as_slice());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(s.slot_of(k), Some(i));
        assert_eq!(s.lower_bound(k), i);
        assert!(s.lower_bound(&k[..7]) <= i, "a prefix sorts before the key");
        let mut after = k.clone();
        after.push(0); // a key extended by a byte sorts right after it
        assert_eq!(s.lower_bound(&after), i + 1);
    }
    assert_eq!(s.lower_bound(b""), 0);
    assert_eq!(
        s.lower_bound(b"wik"),
        0,
        "shorter than the non-numeric part"
    );
    assert_eq!(s.lower_bound(b"wiki\xff\xff\xff"), 0);
    assert_eq!(s.lower_bound(b"wikj"), 100);
    assert_eq!(s.lower_fence(), lower.as_slice());
    assert_eq!(s.upper_fence(), Some(upper.as_slice()));
}

#[test]
fn build_refuses_records_without_a_slot_duplicates_and_no_room() {
    let shape = Shape::new(PAGE, &be(0), Some(&be(100)), 4).unwrap();
    let fences = (&be(0)[..], Some(&be(100)[..]));
    let mut page = vec![0u8; PAGE];
    let (k1, k2, k3) = (be(1), be(100), be(101));
    let v = [7u8; 8];
    assert!(semidense::build(
        &mut page,
        &shape,
        fences,
        0,
        [(&k1[..], &v[..]), (&k2[..], &v[..])].into_iter(),
        0
    ));
    let s = SemiDense::new(1, &page).unwrap();
    assert_eq!(
        (s.count(), s.value(0).unwrap(), s.value(99).unwrap()),
        (2, Some(&v[..]), Some(&v[..]))
    );
    assert_eq!(free_gap(1, &page), Some((s.slots_end(), s.heap_start())));
    assert!(!semidense::build(
        &mut page,
        &shape,
        fences,
        0,
        [(&k3[..], &v[..])].into_iter(),
        0
    ));
    assert!(!semidense::build(
        &mut page,
        &shape,
        fences,
        0,
        [(&k1[..], &v[..]), (&k1[..], &v[..])].into_iter(),
        0
    ));
    // `reserve`: the room left must hold that many more bytes.
    let big = vec![1u8; 700];
    let recs = [(&k1[..], &big[..]), (&k2[..], &big[..])];
    assert!(semidense::build(
        &mut page,
        &shape,
        fences,
        0,
        recs.into_iter(),
        100
    ));
    assert!(!semidense::build(
        &mut page,
        &shape,
        fences,
        0,
        recs.into_iter(),
        1000
    ));
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, usize),
    Clear(usize),
    Compact,
}

fn op(slots: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..slots, 0usize..90).prop_map(|(i, l)| Op::Put(i, l)),
        2 => (0..slots).prop_map(Op::Clear),
        1 => Just(Op::Compact),
    ]
}

/// The page's records against the model, and the heap accounting `check()` also verifies.
fn assert_matches(page: &[u8], model: &BTreeMap<usize, Vec<u8>>) {
    let s = SemiDense::new(1, page).unwrap();
    let mut used = page.len() - s.fixed_start();
    let mut got = BTreeMap::new();
    for i in 0..s.slots() {
        if let Some(v) = s.value(i).unwrap() {
            let at = s.record_offset(i);
            assert!(at >= s.heap_start() && at + 2 + v.len() <= s.fixed_start());
            used += 2 + v.len();
            got.insert(i, v.to_vec());
        }
    }
    assert_eq!(&got, model);
    assert_eq!(s.count(), model.len());
    assert_eq!(s.heap_used(), used);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn semi_dense_page_matches_model(ops in proptest::collection::vec(op(300), 1..400)) {
        let (lower, upper) = (be(1000), be(1300));
        let shape = Shape::new(PAGE, &lower, Some(&upper), 4).unwrap();
        let mut page = vec![0u8; PAGE];
        prop_assert!(semidense::build(&mut page, &shape, (&lower, Some(&upper)), 0, std::iter::empty(), 0));
        let mut model: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        for (n, op) in ops.into_iter().enumerate() {
            let mut m = SemiDenseMut::new(1, &mut page).unwrap();
            match op {
                Op::Put(i, len) => {
                    let value = vec![n as u8; len];
                    let before = m.view().unwrap().free_space_after_compaction()
                        + model.get(&i).map_or(0, |v| 2 + v.len());
                    match m.put(i, &value).unwrap() {
                        Some(inserted) => {
                            prop_assert_eq!(inserted, !model.contains_key(&i));
                            model.insert(i, value);
                        }
                        None => prop_assert!(before < 2 + len, "refused with room"),
                    }
                }
                Op::Clear(i) => prop_assert_eq!(m.clear(i).unwrap(), model.remove(&i).is_some()),
                Op::Compact => {
                    m.compact().unwrap();
                    let s = m.view().unwrap();
                    prop_assert_eq!(s.free_space(), s.free_space_after_compaction());
                }
            }
            assert_matches(&page, &model);
        }
    }

    #[test]
    fn damaged_pages_decode_to_errors_not_panics(flips in proptest::collection::vec((0usize..PAGE, any::<u8>()), 1..12)) {
        let (lower, upper) = (be(1000), be(1300));
        let shape = Shape::new(PAGE, &lower, Some(&upper), 4).unwrap();
        let mut page = vec![0u8; PAGE];
        let keys: Vec<Vec<u8>> = (1001..1300u32).step_by(3).map(be).collect();
        let value = [5u8; 9];
        prop_assert!(semidense::build(&mut page, &shape, (&lower, Some(&upper)), 0, keys.iter().map(|k| (&k[..], &value[..])), 0));
        for (at, byte) in flips {
            page[at] = byte;
        }
        if let Ok(s) = SemiDense::new(1, &page) {
            let mut key = Vec::new();
            for i in 0..s.slots() {
                let _ = s.value(i);
                key.clear();
                s.key_into(i, &mut key);
            }
            let _ = (s.lower_bound(&be(1100)), s.upper_fence(), s.lower_fence(), free_gap(1, &page));
            let mut copy = page.clone();
            if let Ok(mut m) = SemiDenseMut::new(1, &mut copy) {
                let _ = m.put(0, b"x");
                let _ = m.clear(1);
                let _ = m.compact();
            }
        }
    }
}

#[test]
fn decoding_rejects_bad_headers() {
    let (lower, upper) = (be(1000), be(1300));
    let shape = Shape::new(PAGE, &lower, Some(&upper), 4).unwrap();
    let mut good = vec![0u8; PAGE];
    assert!(semidense::build(
        &mut good,
        &shape,
        (&lower, Some(&upper)),
        0,
        std::iter::empty(),
        0
    ));
    assert!(SemiDense::new(1, &good).is_ok());
    let bad = |at: usize, bytes: &[u8]| {
        let mut p = good.clone();
        p[at..at + bytes.len()].copy_from_slice(bytes);
        SemiDense::new(1, &p).is_err()
    };
    assert!(bad(0, &[2]), "another kind");
    assert!(bad(1, &[0x01]), "unknown flag");
    assert!(bad(2, &[0xff, 0xff]), "count above slots");
    assert!(bad(4, &[8, 0, 0, 0]), "heap start inside the slots");
    assert!(bad(4, &[0, 0, 1, 0]), "heap start past the page");
    assert!(bad(12, &[0xff, 0x7f]), "slots past the page");
    assert!(bad(14, &[0, 0]), "key length 0");
    assert!(bad(16, &[0xff, 0xff]), "lower fence longer than the page");
    assert!(SemiDense::new(1, &good[..20]).is_err(), "short page");
    // A slot pointing outside the page is an error on access.
    let mut p = good.clone();
    p[HEADER_LEN..HEADER_LEN + 2].copy_from_slice(&(PAGE as u16 - 1).to_le_bytes());
    assert!(SemiDense::new(1, &p).unwrap().value(0).is_err());
}
