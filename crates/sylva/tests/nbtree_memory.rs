//! Data 8× the memory budget (issue 22, "Space"): an NB-tree given `cache_bytes` of 16 MiB takes
//! 128 MiB of records (1M inserts of 128 record bytes, then overwrites and deletes), holds
//! exactly what a model of those writes says, passes `check()`, and its resident set grows by at
//! most the budget plus what the module docs place outside it: a cascade's records in memory
//! while it runs (up to 2σ, as vectors of about 1.7× their bytes) and the inner pages and
//! filters of d-trees not yet published (about 2% of a cascade's bytes), bounded here by 4σ,
//! plus 8 MiB for the log's buffers, the merger's I/O buffers and the allocator.
//!
//! The model is a function of the key's index (`expected`), so that it takes no memory of the
//! process's own while the resident set is measured.
//!
//! Larger by hand: `SYLVA_NB_MEM_BUDGET_MIB=64 cargo test --release --test nbtree_memory --
//! --nocapture` (the data is always 8× the budget).

#![allow(clippy::unwrap_used)]

mod memory_common;

use memory_common::rss_bytes;
use sylva::{NbTree, NbTreeOptions, SyncMode};

/// Key bytes and value bytes of a record; with the tag byte, 128 bytes a record.
const KEY: usize = 8;
const VALUE: usize = 119;

fn key(i: u64) -> [u8; KEY] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn value(i: u64, round: u8) -> Vec<u8> {
    let mut v = vec![round; VALUE];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// What the model holds for record `i` after the writes below: every seventh record
/// overwritten, every eleventh deleted after that.
fn expected(i: u64) -> Option<Vec<u8>> {
    if i.is_multiple_of(11) {
        None
    } else if i.is_multiple_of(7) {
        Some(value(i, 2))
    } else {
        Some(value(i, 1))
    }
}

#[test]
fn eight_times_the_budget_matches_the_model_within_bounded_memory() {
    let budget: u64 = std::env::var("SYLVA_NB_MEM_BUDGET_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
        << 20;
    let sigma = budget / 8;
    let n = 8 * budget / (KEY + 1 + VALUE) as u64;
    let dir = tempfile::tempdir().unwrap();
    let before = rss_bytes();
    let nb = NbTree::open(
        dir.path().join("nb"),
        NbTreeOptions {
            sync: SyncMode::Never,
            cache_bytes: budget,
            ..NbTreeOptions::default()
        },
    )
    .unwrap();
    let mut peak = 0;
    for i in 0..n {
        nb.put(&key(i), &value(i, 1)).unwrap();
        if i % 50_000 == 0 {
            peak = peak.max(rss_bytes());
        }
    }
    for i in (0..n).step_by(7) {
        nb.put(&key(i), &value(i, 2)).unwrap();
    }
    for i in (0..n).step_by(11) {
        assert!(
            nb.delete(&key(i)).unwrap(),
            "record {i} was there to delete"
        );
    }
    nb.sync().unwrap();
    peak = peak.max(rss_bytes());
    let counters = nb.counters();
    eprintln!("{counters:?}");
    let growth = peak.saturating_sub(before);
    eprintln!(
        "RSS grew by {:.1} MiB for {} MiB of records (budget {} MiB, σ {} MiB)",
        growth as f64 / 1048576.0,
        8 * (budget >> 20),
        budget >> 20,
        sigma >> 20
    );
    assert!(
        growth <= budget + 4 * sigma + (8 << 20),
        "the resident set grew by {growth} bytes with a budget of {budget} and σ of {sigma}"
    );
    let height = counters.iter().find(|c| c.0 == "height").map_or(0, |c| c.1);
    assert!(
        height >= 3,
        "the data did not reach below the root's children: {counters:?}"
    );

    // Every record the model holds, by a lookup of a sample and by one scan of everything.
    for i in (0..n).step_by(97) {
        assert_eq!(nb.get(&key(i)).unwrap(), expected(i), "record {i}");
    }
    let mut want: Vec<[u8; KEY]> = (0..n).filter(|i| !i.is_multiple_of(11)).map(key).collect();
    want.sort_unstable();
    let mut at = 0usize;
    let mut wrong = None;
    nb.scan(&[], usize::MAX, &mut |k, v| {
        let i = u64::from_le_bytes(v[..8].try_into().unwrap());
        let ok =
            at < want.len() && k == want[at] && k == key(i) && expected(i).as_deref() == Some(v);
        if !ok && wrong.is_none() {
            wrong = Some((at, k.to_vec()));
        }
        at += 1;
        true
    })
    .unwrap();
    assert_eq!(wrong, None, "the first record out of place (position, key)");
    assert_eq!(at, want.len(), "records scanned");
    nb.check().unwrap();
    nb.close().unwrap();
}
