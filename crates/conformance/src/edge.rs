//! Deterministic edge cases.

use sylva::{Error, KvStore, Limits};

use crate::keys::{num_key, value_for, KeyShape};
use crate::Subject;

type Record = (Vec<u8>, Vec<u8>);

pub(crate) fn scan_vec<S: KvStore + ?Sized>(store: &S, start: &[u8], limit: usize) -> Vec<Record> {
    let mut out = Vec::new();
    let n = store
        .scan(start, limit, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap_or_else(|e| panic!("scan from {start:?} limit {limit} failed: {e}"));
    assert_eq!(
        n,
        out.len(),
        "scan's returned count differs from the records it visited"
    );
    out
}

pub(crate) fn map_vec<S: KvStore + ?Sized>(store: &S, start: &[u8], end: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let n = store
        .map_range(start, end, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap_or_else(|e| panic!("map_range [{start:?}, {end:?}) failed: {e}"));
    assert_eq!(
        n,
        out.len(),
        "map_range's returned count differs from the records it visited"
    );
    out.sort();
    out
}

fn put<S: KvStore + ?Sized>(store: &S, k: &[u8], v: &[u8]) {
    store
        .put(k, v)
        .unwrap_or_else(|e| panic!("put {k:?} ({} byte value) failed: {e}", v.len()));
}

fn get<S: KvStore + ?Sized>(store: &S, k: &[u8]) -> Option<Vec<u8>> {
    store
        .get(k)
        .unwrap_or_else(|e| panic!("get {k:?} failed: {e}"))
}

fn assert_invalid(result: sylva::Result<impl std::fmt::Debug>, what: &str) {
    match result {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// The longest value the edge cases build: an engine that takes longer ones (values of
/// gigabytes) is tested up to this, and no value one byte past its limit is built.
pub const LARGEST_TESTED_VALUE: usize = 4 << 20;

/// Runs every deterministic edge case on fresh stores from `subject`.
pub fn edge_cases<S: Subject>(subject: &mut S) {
    empty_store(subject);
    first_and_last(subject);
    scan_positions(subject);
    overwrite_and_delete(subject);
    binary_keys(subject);
    prefix_keys(subject);
    size_limits(subject);
    value_sizes(subject);
}

/// The value sizes of issue 23 for an engine that stores values up to `inline` bytes one way
/// and longer ones another: 0, 1, inline − 1, inline, inline + 1, 64 KiB and 1 MiB, those
/// within the engine's limits.
pub fn sizes_around(l: &Limits, inline: usize) -> Vec<usize> {
    let mut sizes = vec![
        0,
        1,
        inline.saturating_sub(1),
        inline,
        inline + 1,
        64 << 10,
        1 << 20,
    ];
    sizes.retain(|&n| n >= l.min_value && n <= l.max_value);
    sizes.dedup();
    sizes
}

/// Values of every size of [`sizes_around`] the subject's [`Subject::value_size_limit`]
/// (nothing for an engine that stores every value alike), under keys up to the longest: put,
/// read back by get, scan and map_range, overwritten with the next size, some deleted, and the
/// store reopened (durable engines) and checked.
fn value_sizes<S: Subject>(subject: &mut S) {
    let mut store = subject.open();
    let l = store.limits();
    let Some(inline) = subject.value_size_limit() else {
        return;
    };
    let sizes = sizes_around(&l, inline);
    let key = |i: usize, len: usize| -> Vec<u8> {
        let len = len.clamp(l.min_key.max(2), l.max_key);
        let mut k = vec![b'v'; len];
        k[len - 2..].copy_from_slice(&(i as u16).to_be_bytes());
        k
    };
    let key_lens = [l.min_key.max(2), 8, l.max_key];
    let mut want = std::collections::BTreeMap::new();
    for (i, &len) in sizes.iter().enumerate() {
        for (j, &kl) in key_lens.iter().enumerate() {
            let n = i * key_lens.len() + j;
            let (k, v) = (key(n, kl), value_for(&l, n as u64 + 1, len));
            put(&store, &k, &v);
            want.insert(k, v);
        }
    }
    let verify =
        |store: &S::Store, want: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>, what: &str| {
            for (k, v) in want {
                assert_eq!(
                    get(store, k).map(|g| g.len()),
                    Some(v.len()),
                    "{what}: length of the value of a {}-byte key",
                    k.len()
                );
                assert!(get(store, k).as_ref() == Some(v), "{what}: value of {k:?}");
            }
            let scanned = scan_vec(store, &[0], usize::MAX);
            let listed: Vec<_> = want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert!(scanned == listed, "{what}: a full scan differs");
            let mapped = map_vec(store, &[0], &[0xff; 1]);
            assert!(mapped == listed, "{what}: a full map_range differs");
        };
    verify(&store, &want, "after puts");
    // Each key's value becomes the next size (every change of kind: inline to out of line and
    // back, one run replaced by another); every third key is deleted.
    let keys: Vec<Vec<u8>> = want.keys().cloned().collect();
    for (n, k) in keys.iter().enumerate() {
        if n % 3 == 2 {
            assert!(store.delete(k).expect("delete"), "delete of a present key");
            want.remove(k);
        } else {
            let len = sizes[(n / key_lens.len() + 1) % sizes.len()];
            let v = value_for(&l, 1000 + n as u64, len);
            put(&store, k, &v);
            want.insert(k.clone(), v);
        }
    }
    verify(&store, &want, "after overwrites and deletes");
    subject
        .check(&store)
        .unwrap_or_else(|e| panic!("check after value sizes: {e}"));
    if subject.reopens() {
        store = subject.reopen(store);
        verify(&store, &want, "after reopen");
        subject
            .check(&store)
            .unwrap_or_else(|e| panic!("check after reopen: {e}"));
    }
}

fn empty_store<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    let k = num_key(&l, 7);
    assert_eq!(get(&store, &k), None, "get on an empty store");
    assert!(
        scan_vec(&store, &[], 10).is_empty(),
        "scan of an empty store"
    );
    assert!(
        scan_vec(&store, &k, 10).is_empty(),
        "scan from a key of an empty store"
    );
    assert!(
        map_vec(&store, &[], &[0xFF; 9]).is_empty(),
        "map_range of an empty store"
    );
    assert!(
        !store.delete(&k).expect("delete on empty store"),
        "delete on an empty store said present"
    );
    assert_eq!(store.stats().records, 0, "records of an empty store");
    store.sync().expect("sync of an empty store");
}

fn first_and_last<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    let keys: Vec<Vec<u8>> = (1..=50u64).map(|i| num_key(&l, i * 10)).collect();
    // Insert out of order so first and last are not simply the first and last inserted.
    for i in (0..keys.len())
        .rev()
        .step_by(2)
        .chain((0..keys.len()).step_by(2))
    {
        put(&store, &keys[i], &value_for(&l, i as u64, 8));
    }
    let all = scan_vec(&store, &[], usize::MAX);
    assert_eq!(all.len(), 50, "full scan count");
    assert_eq!(all[0].0, keys[0], "first key of a full scan");
    assert_eq!(all[49].0, keys[49], "last key of a full scan");
    assert_eq!(
        get(&store, &keys[0]),
        Some(value_for(&l, 0, 8)),
        "get first key"
    );
    assert_eq!(
        get(&store, &keys[49]),
        Some(value_for(&l, 49, 8)),
        "get last key"
    );
    assert_eq!(
        scan_vec(&store, &keys[49], 5).len(),
        1,
        "scan from the last key"
    );
    assert_eq!(store.stats().records, 50, "records after 50 inserts");
}

fn scan_positions<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    for i in 1..=20u64 {
        put(&store, &num_key(&l, i * 10), &value_for(&l, i, 8));
    }
    // Before the first key.
    let before = scan_vec(&store, &num_key(&l, 0), 3);
    assert_eq!(
        before.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
        vec![num_key(&l, 10), num_key(&l, 20), num_key(&l, 30)],
        "scan starting before the first key"
    );
    // Between keys.
    let between = scan_vec(&store, &num_key(&l, 55), 2);
    assert_eq!(
        between.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
        vec![num_key(&l, 60), num_key(&l, 70)],
        "scan starting between keys"
    );
    // Exactly at a key.
    assert_eq!(
        scan_vec(&store, &num_key(&l, 60), 1)[0].0,
        num_key(&l, 60),
        "scan starting at a key"
    );
    // After the last key.
    assert!(
        scan_vec(&store, &num_key(&l, 201), 10).is_empty(),
        "scan starting after the last key"
    );
    // Limit 0 visits nothing.
    let mut called = false;
    let n = store
        .scan(&[], 0, &mut |_, _| {
            called = true;
            true
        })
        .expect("scan limit 0");
    assert_eq!((n, called), (0, false), "scan with limit 0");
    // A visitor that stops early.
    let mut seen = 0;
    let n = store
        .scan(&[], 100, &mut |_, _| {
            seen += 1;
            seen < 4
        })
        .expect("scan stopped early");
    assert_eq!((n, seen), (4, 4), "scan whose visitor stops after 4");
    // A limit larger than the store.
    assert_eq!(
        scan_vec(&store, &[], 1000).len(),
        20,
        "scan with a limit past the end"
    );
    // map_range is half-open and order-free.
    let mapped = map_vec(&store, &num_key(&l, 30), &num_key(&l, 70));
    assert_eq!(
        mapped.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
        (3..7).map(|i| num_key(&l, i * 10)).collect::<Vec<_>>(),
        "map_range [30, 70)"
    );
    assert!(
        map_vec(&store, &num_key(&l, 70), &num_key(&l, 30)).is_empty(),
        "map_range with start > end"
    );
    assert!(
        map_vec(&store, &num_key(&l, 70), &num_key(&l, 70)).is_empty(),
        "map_range with start == end"
    );
    assert_eq!(
        map_vec(&store, &num_key(&l, 0), &num_key(&l, 1000)).len(),
        20,
        "map_range over everything"
    );
}

fn overwrite_and_delete<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    let k = num_key(&l, 42);
    put(&store, &k, &value_for(&l, 1, 8));
    put(&store, &k, &value_for(&l, 2, 8));
    assert_eq!(
        get(&store, &k),
        Some(value_for(&l, 2, 8)),
        "get after overwrite"
    );
    assert_eq!(store.stats().records, 1, "records after overwrite");
    if l.min_value < l.max_value {
        put(&store, &k, &value_for(&l, 3, 20));
        assert_eq!(
            get(&store, &k),
            Some(value_for(&l, 3, 20)),
            "get after overwrite with a longer value"
        );
        put(&store, &k, &value_for(&l, 4, 1));
        assert_eq!(
            get(&store, &k),
            Some(value_for(&l, 4, 1)),
            "get after overwrite with a shorter value"
        );
    }
    for i in 40..50 {
        put(&store, &num_key(&l, i), &value_for(&l, i, 8));
    }
    assert!(
        store.delete(&k).expect("delete"),
        "delete of a present key said absent"
    );
    assert!(
        !store.delete(&k).expect("delete again"),
        "second delete said present"
    );
    assert_eq!(get(&store, &k), None, "get after delete");
    let keys: Vec<_> = scan_vec(&store, &[], 100)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert!(!keys.contains(&k), "deleted key still scanned");
    assert_eq!(keys.len(), 9, "scan after delete");
    assert_eq!(store.stats().records, 9, "records after delete");
    // Reinsert after delete.
    put(&store, &k, &value_for(&l, 5, 8));
    assert_eq!(
        get(&store, &k),
        Some(value_for(&l, 5, 8)),
        "get after reinsert"
    );
    // Delete everything, then the store behaves as empty.
    for i in 40..50 {
        store.delete(&num_key(&l, i)).expect("delete all");
    }
    assert!(
        scan_vec(&store, &[], 100).is_empty(),
        "scan after deleting everything"
    );
    assert_eq!(
        store.stats().records,
        0,
        "records after deleting everything"
    );
}

fn binary_keys<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    let keys: Vec<Vec<u8>> = match KeyShape::of(&l) {
        KeyShape::Fixed(n) => vec![
            vec![0x00; n],
            vec![0xFF; n],
            {
                let mut k = vec![0x00; n];
                k[n - 1] = 0xFF;
                k
            },
            {
                let mut k = vec![0xFF; n];
                k[n - 1] = 0x00;
                k
            },
            {
                let mut k = vec![0x00; n];
                k[0] = 0x80;
                k
            },
        ],
        KeyShape::Variable { min, max } => [
            vec![0x00],
            vec![0x00, 0x00],
            vec![0x00, 0xFF],
            vec![0xFF],
            vec![0xFF, 0xFF],
            vec![0xFF, 0x00],
            vec![0x7F, 0x80],
            b"\x00key\xFF".to_vec(),
        ]
        .into_iter()
        .filter(|k| k.len() >= min && k.len() <= max)
        .collect(),
    };
    for (i, k) in keys.iter().enumerate() {
        put(&store, k, &value_for(&l, i as u64, 8));
    }
    let mut sorted = keys.clone();
    sorted.sort();
    let scanned: Vec<_> = scan_vec(&store, &[], 100)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(scanned, sorted, "binary keys must scan in bytewise order");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            get(&store, k),
            Some(value_for(&l, i as u64, 8)),
            "get binary key {k:?}"
        );
    }
    // Binary values too, including every byte value.
    if l.max_value >= 256 && l.min_value <= 256 {
        let v: Vec<u8> = (0..=255u8).collect();
        put(&store, &keys[0], &v);
        assert_eq!(
            get(&store, &keys[0]),
            Some(v),
            "value holding every byte value"
        );
    }
}

fn prefix_keys<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l = store.limits();
    let KeyShape::Variable { min, max } = KeyShape::of(&l) else {
        return; // fixed-size keys cannot be prefixes of each other
    };
    let keys: Vec<Vec<u8>> = ["a", "ab", "abc", "abcd", "abd", "b", "a\u{0}", "ab\u{0}c"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .filter(|k| k.len() >= min && k.len() <= max)
        .collect();
    for (i, k) in keys.iter().enumerate() {
        put(&store, k, &value_for(&l, i as u64, 8));
    }
    let mut sorted = keys.clone();
    sorted.sort();
    let scanned: Vec<_> = scan_vec(&store, &[], 100)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        scanned, sorted,
        "keys that are prefixes of each other must scan in bytewise order"
    );
    if min <= 2 && max >= 3 {
        let from_ab: Vec<_> = scan_vec(&store, b"ab", 3)
            .into_iter()
            .map(|r| r.0)
            .collect();
        let expect: Vec<Vec<u8>> = sorted
            .iter()
            .filter(|k| k.as_slice() >= b"ab".as_slice())
            .take(3)
            .cloned()
            .collect();
        assert_eq!(
            from_ab, expect,
            "scan from a key that is a prefix of others"
        );
        assert!(
            store.delete(b"ab").expect("delete prefix"),
            "delete of a prefix key"
        );
        assert_eq!(
            get(&store, b"abc"),
            Some(value_for(&l, 2, 8)),
            "longer key survives deleting its prefix"
        );
        assert_eq!(get(&store, b"ab"), None, "deleted prefix key");
    }
}

fn size_limits<S: Subject>(subject: &mut S) {
    let store = subject.open();
    let l: Limits = store.limits();
    assert!(
        l.min_key >= 1,
        "an engine must not accept empty keys (min_key is {})",
        l.min_key
    );
    assert_invalid(
        store.put(&[], &value_for(&l, 1, 8)),
        "put with an empty key",
    );
    assert_invalid(store.get(&[]), "get with an empty key");
    assert_invalid(store.delete(&[]), "delete with an empty key");

    // The largest key and value are accepted and read back (an engine that takes values of
    // gigabytes is tested up to `LARGEST_TESTED_VALUE`).
    let big_key: Vec<u8> = (0..l.max_key).map(|i| (i % 251) as u8).collect();
    let big_len = l.max_value.min(LARGEST_TESTED_VALUE);
    let big_value: Vec<u8> = (0..big_len).map(|i| (i % 241) as u8).collect();
    put(&store, &big_key, &big_value);
    assert_eq!(
        get(&store, &big_key).as_deref(),
        Some(big_value.as_slice()),
        "largest key and value read back"
    );
    let scanned = scan_vec(&store, &big_key, 1);
    assert_eq!(scanned.len(), 1, "scan finds the largest key");
    assert_eq!(
        scanned[0].1.len(),
        big_value.len(),
        "scan returns the largest value whole"
    );

    // One byte more is refused, and nothing changes.
    let mut too_long_key = big_key.clone();
    too_long_key.push(0);
    assert_invalid(
        store.put(&too_long_key, &value_for(&l, 1, 8)),
        "put with a key one byte too long",
    );
    assert_invalid(store.get(&too_long_key), "get with a key one byte too long");
    if l.max_value <= LARGEST_TESTED_VALUE {
        let mut too_long_value = big_value.clone();
        too_long_value.push(0);
        assert_invalid(
            store.put(&big_key, &too_long_value),
            "put with a value one byte too long",
        );
    }
    assert_eq!(
        get(&store, &big_key).as_deref(),
        Some(big_value.as_slice()),
        "refused put changed the value"
    );
    if l.min_key > 1 {
        assert_invalid(
            store.put(&big_key[..l.min_key - 1], &big_value),
            "put with a key one byte too short",
        );
    }
    if l.min_value > 0 {
        assert_invalid(
            store.put(&big_key, &big_value[..l.min_value - 1]),
            "put with a value one byte too short",
        );
    } else {
        let k = num_key(&l, 5);
        put(&store, &k, &[]);
        assert_eq!(get(&store, &k), Some(Vec::new()), "empty values are valid");
    }
    assert_eq!(
        store.stats().records,
        if l.min_value > 0 { 1 } else { 2 },
        "records after limit tests"
    );
}
