//! Values of any size (issue 23): a value too long for a leaf is stored out of line in a run of
//! pages; overwrite and delete free the run; reopen, crash and `check` see exactly the runs the
//! leaves refer to.

mod db_common;

use std::collections::BTreeMap;

use db_common::{assert_same_contents, options, tagged_value, tmp, Rng};
use sylva::{Db, DbOptions, Error, KvStore, SyncMode, WriteBatch};

/// The largest value a leaf holds with 4 KiB pages (`sylva::btree::max_value_len`), less the
/// tag byte an escaped value needs.
fn leaf_limit() -> usize {
    sylva::btree::max_value_len(4096)
}

#[test]
fn values_of_every_size_round_trip_through_reopen() {
    let dir = tmp();
    let opts = options(SyncMode::Never, 64);
    let l = leaf_limit();
    let sizes = [
        0,
        1,
        l - 1,
        l,
        l + 1,
        4096 - 48,
        4096 - 47,
        64 << 10,
        (1 << 20) + 1,
        3 << 20,
    ];
    let mut want = BTreeMap::new();
    {
        let db = Db::open(dir.path(), opts).expect("open");
        assert!(db.limits().max_value >= 1 << 30, "values of at least 1 GiB");
        for (i, &len) in sizes.iter().enumerate() {
            let k = format!("key{i:03}").into_bytes();
            let v = tagged_value(&k, i as u64, len);
            db.put(&k, &v).expect("put");
            want.insert(k, v);
        }
        // Values whose first byte is a tag byte stay values.
        for (i, first) in [0xFEu8, 0xFF].into_iter().enumerate() {
            for len in [1, 17, l - 1, l, 5000] {
                let k = format!("tag{first:x}-{len}-{i}").into_bytes();
                let mut v = vec![first; len];
                v[len / 2] = 7;
                db.put(&k, &v).expect("put");
                want.insert(k, v);
            }
        }
        assert_same_contents(&db, &want, "before reopen");
        let s = db.stats();
        assert!(s.overflow_values >= 6, "{s:?}");
        assert!(s.overflow_bytes >= (3 << 20) + (1 << 20), "{s:?}");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "after reopen");
}

#[test]
fn overwrites_and_deletes_free_their_runs_and_the_file_stops_growing() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(SyncMode::Never, 64)).expect("open");
    let mut want = BTreeMap::new();
    let mut rng = Rng::new(5);
    let mut pages_after_round = Vec::new();
    for round in 0..6u64 {
        for n in 0..40u64 {
            let k = format!("k{n:04}").into_bytes();
            match rng.below(4) {
                0 => {
                    db.delete(&k).expect("delete");
                    want.remove(&k);
                }
                _ => {
                    let len = [10, 2000, 9000, 70_000][rng.below(4) as usize];
                    let v = tagged_value(&k, round * 100 + n, len);
                    db.put(&k, &v).expect("put");
                    want.insert(k, v);
                }
            }
        }
        // A checkpoint makes the runs freed so far allocatable again.
        db.checkpoint().expect("checkpoint");
        assert_same_contents(&db, &want, &format!("round {round}"));
        pages_after_round.push(db.stats().file_pages);
    }
    // Six rounds of the same working set: freed runs are reused, so the file does not keep
    // growing by a round's worth of runs (40 × 70 KB ≈ 700 pages) each round.
    let growth = pages_after_round[5] - pages_after_round[2];
    assert!(
        growth < 700,
        "the file grew by {growth} pages over three rounds: {pages_after_round:?}"
    );
}

#[test]
fn crashes_recover_exactly_the_synced_runs_without_leaks() {
    let dir = tmp();
    let opts = DbOptions {
        checkpoint_bytes: 256 << 10,
        ..options(SyncMode::Always, 32)
    };
    let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(11);
    for round in 0..8u64 {
        let db = Db::open(dir.path(), opts).expect("open");
        assert_same_contents(&db, &want, &format!("after crash {round}"));
        for i in 0..30u64 {
            let k = format!("k{:03}", rng.below(50)).into_bytes();
            if rng.below(5) == 0 {
                db.delete(&k).expect("delete");
                want.remove(&k);
            } else {
                let len = [5, 1500, 5000, 40_000, (1 << 20) + 7][rng.below(5) as usize];
                let v = tagged_value(&k, round * 1000 + i, len);
                db.put(&k, &v).expect("put");
                want.insert(k, v);
            }
        }
        db.simulate_crash();
    }
    let db = Db::open(dir.path(), opts).expect("open");
    assert_same_contents(&db, &want, "last");
}

#[test]
fn batches_carry_large_values_all_or_nothing() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(SyncMode::Always, 64)).expect("open");
    let big = vec![9u8; 100_000];
    db.put(b"a", &big).expect("put");
    db.write(
        WriteBatch::new()
            .put(b"b", &big[..50_000])
            .put(b"a", b"small now")
            .delete(b"c"),
    )
    .expect("batch");
    db.simulate_crash();
    let db = Db::open(dir.path(), options(SyncMode::Always, 64)).expect("reopen");
    assert_eq!(
        db.get(b"a").expect("get").as_deref(),
        Some(&b"small now"[..])
    );
    assert_eq!(db.get(b"b").expect("get").as_deref(), Some(&big[..50_000]));
    db.check().expect("check");
}

#[test]
fn scans_and_cursors_return_whole_values() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(SyncMode::Never, 64)).expect("open");
    let v1 = vec![1u8; 10_000];
    let v2 = vec![0xFFu8; 3];
    db.put(b"a", &v1).expect("put");
    db.put(b"b", &v2).expect("put");
    let mut seen = Vec::new();
    KvStore::scan(&db, b"", 10, &mut |k, v| {
        seen.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    assert_eq!(
        seen,
        vec![(b"a".to_vec(), v1.clone()), (b"b".to_vec(), v2.clone())]
    );
    let rev: Vec<_> = db
        .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .rev()
        .map(|r| r.expect("cursor"))
        .collect();
    assert_eq!(rev, vec![(b"b".to_vec(), v2), (b"a".to_vec(), v1)]);
}

#[test]
fn a_damaged_run_is_a_checksum_error_not_wrong_bytes() {
    let dir = tmp();
    let opts = options(SyncMode::Never, 64);
    {
        let db = Db::open(dir.path(), opts).expect("open");
        db.put(b"big", &vec![3u8; 20_000]).expect("put");
        db.close().expect("close");
    }
    // Flip one byte in the middle of the only run (the pages after the tree's).
    let path = dir.path().join("data.sylva");
    let mut bytes = std::fs::read(&path).expect("read");
    let at = bytes
        .windows(64)
        .rposition(|w| w.iter().all(|&b| b == 3))
        .expect("the run's bytes");
    bytes[at + 10] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");
    // The run's first page, whole and damaged, through the fuzz target's driver (no panic).
    for page in bytes.chunks(4096).filter(|p| p.len() == 4096 && p[6] == 5) {
        sylva::fuzz::overflow_run_header(page);
        let mut damaged = page.to_vec();
        for at in 32..48 {
            damaged[at] ^= 0xFF;
            sylva::fuzz::overflow_run_header(&damaged);
        }
    }
    let db = Db::open(dir.path(), opts).expect("reopen");
    match db.get(b"big") {
        Err(Error::ChecksumMismatch { .. }) => {}
        other => panic!("a damaged run read back as {other:?}"),
    }
    assert!(db.check().is_err(), "check must report the damaged run");
}

#[test]
fn keys_at_the_limit_take_large_values() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(SyncMode::Never, 64)).expect("open");
    let max_key = db.limits().max_key;
    let k = vec![b'k'; max_key];
    let v = vec![5u8; 30_000];
    db.put(&k, &v).expect("put");
    assert_eq!(db.get(&k).expect("get"), Some(v));
    assert!(matches!(
        db.put(&vec![b'k'; max_key + 1], b"x"),
        Err(Error::InvalidArgument { .. })
    ));
    db.check().expect("check");
}

#[test]
fn a_batch_longer_than_a_log_record_is_refused_cleanly() {
    let dir = tmp();
    let db = Db::open(dir.path(), options(SyncMode::Always, 64)).expect("open");
    let big = vec![1u8; 65 << 20];
    match db.write(WriteBatch::new().put(b"a", b"x").put(b"b", &big)) {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("a 65 MiB batch gave {other:?}"),
    }
    assert_eq!(db.get(b"a").expect("get"), None, "nothing of it applied");
    // Not poisoned: the same value alone goes in.
    db.put(b"b", &big).expect("put alone");
    assert_eq!(db.get(b"b").expect("get").map(|v| v.len()), Some(big.len()));
    db.check().expect("check");
}
