//! Regression: a cursor that moves on to the next leaf after that leaf was merged with the one
//! the cursor just finished must continue after the last key it returned — not from the merged
//! leaf's first record, which would return keys again, out of order.
//!
//! Found by `db_cursors` (two writer threads, two cursor threads); this file reproduces it on
//! one thread: a cursor copies the first (or last) leaf, then almost every key of that leaf and
//! the following ones is deleted so the leaves merge, and the cursor is walked on.

mod db_common;

use std::ops::Bound;

use db_common::{options, ordered_key, ordered_number, tagged_value};
use sylva::{Db, SyncMode};

const KEYS: u64 = 2000;

fn filled() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options(SyncMode::Never, 1024)).expect("open");
    for n in 0..KEYS {
        db.put(&ordered_key(n), &tagged_value(&ordered_key(n), n, 100))
            .expect("put");
    }
    (dir, db)
}

/// Walks `cursor` to its end, asserting strict order in its direction; returns the numbers.
fn walk_rest(
    first: u64,
    cursor: impl Iterator<Item = sylva::Result<(Vec<u8>, Vec<u8>)>>,
    reverse: bool,
) -> Vec<u64> {
    let mut got = vec![first];
    for item in cursor {
        let (k, _) = item.expect("cursor");
        let n = ordered_number(&k).expect("number");
        let prev = *got.last().expect("one");
        assert!(
            if reverse { n < prev } else { n > prev },
            "the cursor returned {n} after {prev} (reverse: {reverse}); so far {:?}",
            &got[got.len().saturating_sub(8)..]
        );
        got.push(n);
    }
    got
}

/// Deletes every key in `range` except multiples of 50: the leaves there, the cursor's own
/// included, become nearly empty and merge with their neighbours.
fn thin_out(db: &Db, range: std::ops::Range<u64>) {
    for n in range.filter(|n| n % 50 != 0) {
        db.delete(&ordered_key(n)).expect("delete");
    }
}

/// Every key the test never deleted is in `got` (deleted ones may or may not be: the cursor
/// had copied some of them).
fn assert_complete(got: &[u64], thinned: std::ops::Range<u64>) {
    for n in (0..KEYS).filter(|n| !thinned.contains(n) || n % 50 == 0) {
        assert!(
            got.contains(&n),
            "the cursor skipped {n}, which was never deleted"
        );
    }
}

#[test]
fn a_forward_cursor_continues_after_its_last_key_when_its_leaf_merged_with_the_next() {
    let (_dir, db) = filled();
    let mut cursor = db.range(Bound::Unbounded, Bound::Unbounded);
    let (k, _) = cursor.next().expect("a first record").expect("cursor");
    let first = ordered_number(&k).expect("number");
    // The cursor holds a copy of the first leaf; now that leaf and the next ones merge.
    thin_out(&db, 1..1500);
    let got = walk_rest(first, cursor, false);
    assert_complete(&got, 1..1500);
}

#[test]
fn a_reverse_cursor_continues_below_its_last_key_when_its_leaf_merged_with_the_previous() {
    let (_dir, db) = filled();
    let mut cursor = db.range(Bound::Unbounded, Bound::Unbounded).rev();
    let (k, _) = cursor.next().expect("a first record").expect("cursor");
    let first = ordered_number(&k).expect("number");
    thin_out(&db, 500..KEYS - 1);
    let got = walk_rest(first, cursor, true);
    assert_complete(&got, 500..KEYS - 1);
}
