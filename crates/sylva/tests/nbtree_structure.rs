//! The NB-tree grows as §3–5 say: inserts fill roots, leaves split, the s-tree gains levels,
//! flushes move records down; lookups, scans and `check()` agree with a model throughout, and
//! the structure survives a reopen.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use sylva::{KvStore, NbTree, NbTreeOptions, SyncMode};

fn options() -> NbTreeOptions {
    NbTreeOptions {
        sync: SyncMode::Never,
        sigma: Some(64 << 10),
        fanout: 3,
        deamortize: false,
        ..NbTreeOptions::default()
    }
}

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters().iter().find(|c| c.0 == name).unwrap().1
}

fn key(i: u64) -> [u8; 8] {
    // A fixed permutation of 0..2^32 spreads inserts over the key space.
    (i.wrapping_mul(0x9E37_79B9) & 0xffff_ffff).to_be_bytes()
}

#[test]
fn inserts_grow_the_s_tree_and_reads_agree_with_a_model() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..30_000u64 {
        let v = vec![(i % 251) as u8; 40 + (i % 7) as usize];
        nb.put(&key(i), &v).unwrap();
        model.insert(key(i).to_vec(), v);
        if i % 5 == 0 && i > 100 {
            let d = key(i / 2);
            assert_eq!(nb.delete(&d).unwrap(), model.remove(&d[..]).is_some());
        }
    }
    assert!(counter(&nb, "height") >= 3, "{:?}", nb.counters());
    assert!(counter(&nb, "splits") >= 10, "{:?}", nb.counters());
    assert!(counter(&nb, "flushes") >= 10, "{:?}", nb.counters());
    assert!(counter(&nb, "handle_full_calls") >= counter(&nb, "splits"));
    for (i, (k, v)) in model.iter().enumerate().step_by(7) {
        assert_eq!(nb.get(k).unwrap().as_ref(), Some(v), "record {i}");
    }
    for i in (1..30_000u64).step_by(97) {
        let k = key(i);
        assert_eq!(nb.get(&k).unwrap(), model.get(&k[..]).cloned());
    }
    let report = nb.check().unwrap();
    assert!(report.height >= 3 && report.d_trees >= 4, "{report:?}");
    let mut got = Vec::new();
    nb.scan(&[], usize::MAX, &mut |k, v| {
        got.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    assert!(got.iter().map(|r| &r.0).eq(model.keys()), "scan keys");
    assert!(got.iter().map(|r| &r.1).eq(model.values()), "scan values");
    assert_eq!(nb.stats().records, model.len() as u64);
    // A scan from the middle with a limit, and a range map.
    let mid = model.keys().nth(model.len() / 2).unwrap().clone();
    let mut first = Vec::new();
    nb.scan(&mid, 10, &mut |k, _| {
        first.push(k.to_vec());
        true
    })
    .unwrap();
    let want: Vec<_> = model
        .range(mid.clone()..)
        .take(10)
        .map(|r| r.0.clone())
        .collect();
    assert_eq!(first, want);
    let end = model.keys().nth(model.len() / 2 + 500).unwrap().clone();
    let n = nb.map_range(&mid, &end, &mut |_, _| true).unwrap();
    assert_eq!(n, 500);
    nb.close().unwrap();

    let nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    assert!(counter(&nb, "height") >= 3);
    for (k, v) in model.iter().step_by(11) {
        assert_eq!(nb.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(nb.stats().records, model.len() as u64);
    nb.check().unwrap();
}

#[test]
fn lookups_of_existing_keys_read_about_one_leaf() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    for i in 0..20_000u64 {
        nb.put(&key(i), &[7; 100]).unwrap();
    }
    nb.checkpoint().unwrap();
    let (l0, r0) = (counter(&nb, "lookups"), counter(&nb, "leaf_reads"));
    for i in 0..2_000u64 {
        assert!(nb.get(&key(i * 10)).unwrap().is_some());
    }
    let (l, r) = (
        counter(&nb, "lookups") - l0,
        counter(&nb, "leaf_reads") - r0,
    );
    // Bloom filters at 10 bits per key: about 1% of d-trees above the right one answer maybe.
    assert!(
        (r as f64) / (l as f64) <= 1.1,
        "{r} leaf reads for {l} lookups"
    );
}
