//! `cache_bytes` bounds TreeLine's memory: after loading 1M records of 64 bytes with a 32 MiB
//! budget, the process's resident set grew by at most the budget plus 8 MiB (the issue's
//! bound), with the histograms at their default size counted inside the budget.
//!
//! Other sizes by hand (e.g. the 1,024-byte records of the second set):
//! `SYLVA_TL_MEM_RECORDS=1000000 SYLVA_TL_MEM_VALUE=1016 SYLVA_TL_MEM_BUDGET_MIB=128
//! cargo test --test treeline_memory -- --nocapture`.

#![allow(clippy::unwrap_used)]

mod memory_common;

use memory_common::rss_bytes;
use sylva::{KvStore, SyncMode, TreeLine, TreeLineOptions};

#[test]
fn a_million_records_stay_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget: u64 = std::env::var("SYLVA_TL_MEM_BUDGET_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32)
        << 20;
    let value_len: usize = std::env::var("SYLVA_TL_MEM_VALUE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(56);
    let o = TreeLineOptions {
        sync: SyncMode::Never,
        cache_bytes: budget,
        // Where the file system allows (the OS's page cache is not the process's memory either
        // way).
        direct_io: true,
        checkpoint_bytes: 16 << 20,
        // The settings for records of a kilobyte: two to a page.
        goal: if value_len > 512 { 2 } else { 45 },
        epsilon: if value_len > 512 { 1 } else { 5 },
        ..TreeLineOptions::default()
    };
    let before = rss_bytes();
    let db = TreeLine::open(dir.path(), o).unwrap();
    let mut peak = 0;
    let n: u64 = std::env::var("SYLVA_TL_MEM_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    for i in 0..n {
        let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
        db.put(&k, &vec![i as u8; value_len]).unwrap();
        if i % 100_000 == 0 {
            peak = peak.max(rss_bytes());
        }
    }
    db.sync().unwrap();
    peak = peak.max(rss_bytes());
    let stats = KvStore::stats(&db);
    assert_eq!(stats.records, n);
    eprintln!("{:?}", stats.counters);
    let growth = peak.saturating_sub(before);
    eprintln!(
        "RSS grew by {} MiB (budget {} MiB)",
        growth >> 20,
        budget >> 20
    );
    assert!(
        growth <= budget + (8 << 20),
        "RSS grew by {growth} bytes with a budget of {budget}"
    );
}
