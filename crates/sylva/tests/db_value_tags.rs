//! How a database of state version 4 tells stored values apart (`docs/format.md`, "Out-of-line
//! values"): only a value of a reference's shape (`0xFE`{j}, `0xFF`, 16 bytes) is escaped, so
//! small values keep their length whatever their first byte, and leaves of fixed-size values
//! stay as dense as those of a database without out-of-line values. Version 3 escaped every
//! value starting with `0xFE` or `0xFF`, which left leaves of 8-byte random values under dense
//! u64 keys at 2.3× the pages (session 17's regression of the small-value path); the first test
//! fails on that rule.

mod db_common;

use std::ops::Bound;

use db_common::{contents, options, splitmix};
use sylva::{Db, KvStore, SyncMode};

const RECORDS: u64 = 60_000;

/// Loads `RECORDS` dense big-endian u64 keys with 8-byte values made by `value` and returns the
/// tree's pages after a checkpoint.
fn tree_pages(value: impl Fn(u64) -> [u8; 8]) -> u64 {
    let dir = db_common::tmp();
    let db = Db::open(dir.path(), options(SyncMode::Never, 4096)).expect("open");
    for n in 0..RECORDS {
        db.put(&n.to_be_bytes(), &value(n)).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    let stats = db.stats();
    assert_eq!(stats.records, RECORDS);
    assert_eq!(stats.overflow_values, 0, "{stats:?}");
    db.check().expect("check");
    stats.tree_pages
}

#[test]
fn random_first_bytes_cost_no_space_in_leaves() {
    // The same load twice: values whose first byte is anything, and the same values with their
    // first byte below 0xFE (never escaped under any rule).
    let any = tree_pages(|n| splitmix(n).to_le_bytes());
    let low = tree_pages(|n| {
        let mut v = splitmix(n).to_le_bytes();
        v[0] &= 0x7F;
        v
    });
    // 1 value in 128 starts with 0xFE or 0xFF: escaping those would cost far more than 2%.
    assert!(
        any * 100 <= low * 102,
        "tree pages with random first bytes {any} against {low} with low first bytes"
    );
}

/// A value of a reference's shape behind `j` bytes 0xFE, its 16 bytes `fill`.
fn ref_shaped(j: usize, fill: u8) -> Vec<u8> {
    let mut v = vec![0xFE; j];
    v.push(0xFF);
    v.extend_from_slice(&[fill; 16]);
    v
}

/// Values near a reference's shape, each with the key it is stored under.
fn awkward_values() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut values: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xFF],
        vec![0xFE],
        vec![0xFF; 16],
        vec![0xFF; 17],
        vec![0xFF; 18],
        vec![0xFE; 17],
        vec![0xFE; 18],
        // The bytes of a plausible reference: run at page 2, 5,000 bytes, some CRC.
        [
            &[0xFF][..],
            &2u64.to_le_bytes(),
            &5000u32.to_le_bytes(),
            &[1, 2, 3, 4],
        ]
        .concat(),
        vec![0xFE, 0xFF, 0xFE],
        // Around the longest value a leaf takes with 4 KiB pages (752 bytes).
        vec![0xFF; 752],
        vec![0xFF; 753],
        vec![0xFF; 5000],
    ];
    for j in 0..4 {
        values.push(ref_shaped(j, 0));
        values.push(ref_shaped(j, 0xFF));
        values.push(ref_shaped(j, 0xFE));
    }
    let mut long = ref_shaped(1, 9);
    long.push(0);
    values.push(long);
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("k{i:03}").into_bytes(), v))
        .collect()
}

fn read_back(db: &Db, want: &[(Vec<u8>, Vec<u8>)]) {
    for (k, v) in want {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "key {k:?}");
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = contents(db).expect("range").into_iter().collect();
    assert_eq!(got, want, "a cursor over the database");
    let mut scanned = Vec::new();
    KvStore::scan(db, b"", usize::MAX, &mut |k, v| {
        scanned.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    assert_eq!(scanned, want, "KvStore::scan");
    let mut mapped = Vec::new();
    KvStore::map_range(db, b"k", b"l", &mut |k, v| {
        mapped.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("map_range");
    mapped.sort();
    assert_eq!(mapped, want, "KvStore::map_range");
    let first = db
        .range(Bound::Included(&want[8].0[..]), Bound::Unbounded)
        .next()
        .expect("a record")
        .expect("read");
    assert_eq!(first, want[8], "a cursor from a reference-like value");
}

#[test]
fn values_shaped_like_references_round_trip() {
    let dir = db_common::tmp();
    let want = awkward_values();
    let db = Db::open(dir.path(), options(SyncMode::Always, 256)).expect("open");
    for (k, v) in &want {
        db.put(k, v).expect("put");
    }
    read_back(&db, &want);
    // Only the two values longer than a leaf takes (753 and 5,000 bytes) went out of line.
    assert_eq!(db.stats().overflow_values, 2, "{:?}", db.stats());
    assert_eq!(db.check().expect("check").records, want.len() as u64);
    db.close().expect("close");

    let db = Db::open(dir.path(), options(SyncMode::Always, 256)).expect("reopen");
    read_back(&db, &want);
    // Overwrite each with the next one's value, then crash: recovery redoes the log.
    let mut rotated = want.clone();
    for i in 0..rotated.len() {
        rotated[i].1 = want[(i + 1) % want.len()].1.clone();
        db.put(&rotated[i].0, &rotated[i].1).expect("overwrite");
    }
    db.simulate_crash();
    let _ = std::fs::remove_file(dir.path().join("LOCK"));
    let db = Db::open(dir.path(), options(SyncMode::Always, 256)).expect("recover");
    read_back(&db, &rotated);
    assert_eq!(db.stats().overflow_values, 2, "{:?}", db.stats());
    db.check().expect("check");
}
