//! Conversions between comparison and semi-dense leaves, page by page: what `plan_leaf_split`
//! and `plan_leaf_merge` decide, and that every record survives each conversion.

use super::*;
use crate::btree::{Layout, Options};
use crate::page::semidense::SemiDense;

const PAGE: usize = 4096;

fn tree() -> BTree {
    BTree::new(Options {
        layout: Layout::Semidense,
        page_size: PAGE,
        ..Options::default()
    })
    .unwrap()
}

fn be(n: u32) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// Records with keys `keys` and 8-byte values derived from them.
fn records(keys: impl Iterator<Item = u32>) -> Records {
    let mut r = Records::default();
    for k in keys {
        r.push_with(|b| b.extend_from_slice(&be(k)), &u64::from(k).to_le_bytes());
    }
    r
}

/// What a leaf split does: `plan_leaf_split`, then the median split it may defer to.
fn plan(t: &BTree, page: &[u8], key: &[u8], value_len: usize) -> LeafPlan {
    match t.plan_leaf_split(9, page, key, value_len).unwrap() {
        LeafPlan::Median => t.plan_median_split(9, page, key, value_len).unwrap(),
        p => p,
    }
}

fn contents(page: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut r = Records::default();
    collect(9, page, &mut r).unwrap();
    r.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
}

/// A comparison leaf over `(lower, upper]` holding `recs`.
fn comparison_leaf(t: &BTree, (lower, upper): (&[u8], Option<&[u8]>), recs: &Records) -> Vec<u8> {
    let mut page = vec![0u8; PAGE];
    assert!(t.build_default_leaf(&mut page, lower, upper, recs, 0..recs.len(), 0));
    assert_eq!(page[0], KIND_LEAF);
    page
}

#[test]
fn a_full_comparison_leaf_of_dense_keys_becomes_semi_dense_in_place() {
    let t = tree();
    // 4-byte keys 1..=180 in (0, 400]: a full comparison leaf (180 × 22 bytes with hints).
    let recs = records(1..=180);
    let (lower, upper) = (be(0), be(400));
    let page = comparison_leaf(&t, (&lower, Some(&upper)), &recs);
    let before = contents(&page);
    match plan(&t, &page, &be(200), 8) {
        LeafPlan::InPlace(image) => {
            assert_eq!(image[0], KIND_SEMI_DENSE_LEAF);
            let s = SemiDense::new(9, &image).unwrap();
            assert_eq!((s.slots(), s.count()), (400, 180));
            assert!(
                s.free_space() >= semidense::record_len(8),
                "room for the pending record"
            );
            assert_eq!(contents(&image), before);
        }
        _ => panic!("expected a conversion"),
    }
}

#[test]
fn a_comparison_leaf_of_sparse_keys_splits_into_comparison_leaves() {
    let t = tree();
    // 180 keys spread over (0, 1800]: an SDL would need 1800 slots; its halves would not pay.
    let recs = records((1..=180).map(|k| k * 10));
    let (lower, upper) = (be(0), be(1800));
    let page = comparison_leaf(&t, (&lower, Some(&upper)), &recs);
    let LeafPlan::Split {
        left,
        right,
        separator,
    } = plan(&t, &page, &be(5), 8)
    else {
        panic!("expected a split");
    };
    assert_eq!((left[0], right[0]), (KIND_LEAF, KIND_LEAF));
    let mut both = contents(&left);
    assert!(both
        .iter()
        .all(|(k, _)| k.as_slice() <= separator.as_slice()));
    both.extend(contents(&right));
    assert_eq!(both, contents(&page));
}

#[test]
fn a_semi_dense_leaf_takes_a_key_of_another_length_by_converting_back() {
    let t = tree();
    let recs = records(1..=150);
    let (lower, upper) = (be(0), be(200));
    let mut page = vec![0u8; PAGE];
    assert!(t.build_leaf(&mut page, (&lower, Some(&upper)), &recs, 0..150, None, 0));
    assert_eq!(page[0], KIND_SEMI_DENSE_LEAF);
    // A 5-byte key inside the range has no slot.
    let key = [0, 0, 0, 7, 1];
    match plan(&t, &page, &key, 8) {
        LeafPlan::InPlace(image) => {
            assert_eq!(image[0], KIND_LEAF);
            assert_eq!(contents(&image), contents(&page));
        }
        _ => panic!("expected a conversion back"),
    }
}

#[test]
fn a_full_semi_dense_leaf_splits_into_semi_dense_halves() {
    let t = tree();
    // 300 dense keys with 8-byte values: 32 + 600 + 300 × 10 bytes of a 4 KiB page.
    let recs = records(1..=300);
    let (lower, upper) = (be(0), be(340));
    let mut page = vec![0u8; PAGE];
    assert!(t.build_leaf(&mut page, (&lower, Some(&upper)), &recs, 0..300, None, 0));
    let s = SemiDense::new(9, &page).unwrap();
    assert_eq!(s.count(), 300);
    // A large value for a free slot does not fit: split, both halves semi-dense.
    let LeafPlan::Split {
        left,
        right,
        separator,
    } = plan(&t, &page, &be(320), 700)
    else {
        panic!("expected a split");
    };
    assert_eq!(
        (left[0], right[0]),
        (KIND_SEMI_DENSE_LEAF, KIND_SEMI_DENSE_LEAF)
    );
    let (l, r) = (
        SemiDense::new(1, &left).unwrap(),
        SemiDense::new(2, &right).unwrap(),
    );
    assert_eq!(l.upper_fence(), Some(separator.as_slice()));
    assert_eq!(r.lower_fence(), separator.as_slice());
    assert_eq!(l.slots() + r.slots(), 340);
    let mut both = contents(&left);
    both.extend(contents(&right));
    assert_eq!(both, contents(&page));
    // The pending record fits the half it lands in.
    assert!(r.free_space_after_compaction() >= semidense::record_len(700));
    // And merging the halves gives back one semi-dense leaf with every record.
    let merged = t.plan_leaf_merge((1, &left), (2, &right)).unwrap().unwrap();
    assert_eq!(merged[0], KIND_SEMI_DENSE_LEAF);
    assert_eq!(contents(&merged), contents(&page));
}

#[test]
fn merging_sparse_semi_dense_leaves_gives_a_comparison_leaf() {
    let t = tree();
    let (a, b, c) = (be(0), be(600), be(1200));
    // Each leaf at 1/8 density (75 of 600 keys): merged, 1200 slots would not pay.
    let (rl, rr) = (
        records((1..=75).map(|k| k * 8)),
        records((76..=150).map(|k| k * 8)),
    );
    let mut left = vec![0u8; PAGE];
    let mut right = vec![0u8; PAGE];
    let shape_l = semidense::Shape::new(PAGE, &a, Some(&b), 4).unwrap();
    let shape_r = semidense::Shape::new(PAGE, &b, Some(&c), 4).unwrap();
    assert!(semidense::build(
        &mut left,
        &shape_l,
        (&a, Some(&b)),
        0,
        rl.iter(),
        0
    ));
    assert!(semidense::build(
        &mut right,
        &shape_r,
        (&b, Some(&c)),
        0,
        rr.iter(),
        0
    ));
    assert!(
        !semi_dense_underfull(1, &left).unwrap(),
        "exactly one slot in eight"
    );
    let merged = t.plan_leaf_merge((1, &left), (2, &right)).unwrap().unwrap();
    assert_eq!(merged[0], KIND_LEAF);
    let mut both = contents(&left);
    both.extend(contents(&right));
    assert_eq!(contents(&merged), both);
    // One record fewer and the leaf is a merge candidate.
    let mut m = crate::page::semidense::SemiDenseMut::new(1, &mut left).unwrap();
    assert!(m.clear(7).unwrap(), "slot 7 holds key 8");
    assert!(semi_dense_underfull(1, &left).unwrap());
}

#[test]
fn semi_dense_pays_from_about_one_key_in_five() {
    use crate::page::slotted::{FLAG_HEADS, FLAG_HINTS};
    let hints = FLAG_HEADS | FLAG_HINTS;
    // 4-byte keys with a 2-byte truncated prefix (the paper's "truncated key size of 2 bytes"):
    // a comparison slot costs 10 + 2 bytes, a semi-dense record 2 bytes plus 2 per slot.
    assert!(semi_dense_pays(200, 1000, 4, hints, 2));
    assert!(!semi_dense_pays(200, 1300, 4, hints, 2));
    assert!(
        semi_dense_pays(100, 100, 4, 0, 0),
        "dense keys pay without heads too"
    );
    assert!(!semi_dense_pays(10, 300, 4, hints, 0), "3% density");
}
