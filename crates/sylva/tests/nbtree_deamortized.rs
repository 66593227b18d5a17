//! The deamortized cascade keeps its bounds (§5.1), read from the counters: 300K inserts at
//! σ = 256 KiB with the cascade on the merger thread never stall, wait for at most one step per
//! insert, each cascade writes at most W = (h + 1)(2f + 3)σ bytes, and each root overflow calls
//! HandleFullSNode at most h + 1 times.

#![allow(clippy::unwrap_used)]

use sylva::{NbTree, NbTreeOptions, SyncMode};

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters().iter().find(|c| c.0 == name).unwrap().1
}

#[test]
fn three_hundred_thousand_inserts_keep_the_deamortization_bounds() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let sigma = 256u64 << 10;
    let fanout = 3u64;
    let options = NbTreeOptions {
        sync: SyncMode::Never,
        sigma: Some(sigma),
        fanout: fanout as usize,
        deamortize: true,
        step_bytes: 256 << 10,
        ..NbTreeOptions::default()
    };
    let nb = NbTree::open(dir.path().join("nb"), options).unwrap();
    let n = 300_000u64;
    for i in 0..n {
        let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
        nb.put(&k, &[(i % 256) as u8; 128]).unwrap();
    }
    let c = nb.counters();
    eprintln!("{c:?}");
    eprintln!("{:?}", nb.check().unwrap());
    let h = counter(&nb, "height");
    assert!(h >= 3, "the s-tree grew: {c:?}");
    assert!(counter(&nb, "cascades") >= 100, "{c:?}");
    assert_eq!(counter(&nb, "stalls"), 0, "{c:?}");
    assert!(counter(&nb, "inline_steps") <= n, "{c:?}");
    let w = (h + 1) * (2 * fanout + 3) * sigma;
    assert!(counter(&nb, "max_cascade_bytes") <= w, "W = {w}: {c:?}");
    assert!(
        counter(&nb, "max_handle_full_per_cascade") <= h + 1,
        "{c:?}"
    );
    for i in (0..n).step_by(1013) {
        let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
        assert_eq!(nb.get(&k).unwrap(), Some(vec![(i % 256) as u8; 128]));
    }
    nb.check().unwrap();
}
