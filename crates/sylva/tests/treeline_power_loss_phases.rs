//! The power fails at each change (every one: a sample of every third missed Check II's
//! "done" path once the record cache held more entries) of a workload that overflows
//! pages and reorganizes segments, on the simulated file system (`SimFs`), so the loss lands
//! in every phase of a reorganization (REORG_START, the post segments' writes, their sync, the
//! invalidation of the pre segments, REORG_END), in overflow allocations (the overflow page
//! written, its base page not) and in flushes; each crash loses, keeps or tears the unsynced
//! writes as its seed decides. After each: the store opens, holds exactly the acknowledged
//! writes (plus perhaps the one in flight), and `check()` passes. Over the sample, recovery
//! must have taken every path: Check I (an overflow page linked again), Check II's "done"
//! (a pre segment invalidated, REORG_END lost) and "void" (post segments dropped), and the
//! re-invalidation after a REORG_END.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use sylva::io::{SimFs, SimOptions};
use sylva::{KvStore, SyncMode, TreeLine, TreeLineOptions};

const BASE: u64 = 150;
const WORKLOAD: u64 = 1000;

fn options() -> TreeLineOptions {
    let mut o = TreeLineOptions {
        sync: SyncMode::Always,
        goal: 4,
        epsilon: 2,
        background: false,
        forecast: false,
        radius: 0,
        checkpoint_bytes: 1 << 30,
        ..TreeLineOptions::default()
    };
    o.set("cache_records", "40").unwrap();
    // The fixed part of the budget (buffers, index) and the record cache's arena slack on top;
    // no histograms without forecasts.
    o.cache_bytes += (8 << 20) + 8192 + (4 << 20) + 1024 + (256 << 10);
    o
}

fn key(i: u64) -> [u8; 8] {
    (i % 1500).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; 180 + (i % 7) as usize * 20]
}

fn counter(db: &TreeLine, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |c| c.1)
}

/// The base: `BASE` puts and a checkpoint, then the workload's puts, with the power failing
/// after `crash` changes of the workload (`None`: never). Returns the writes acknowledged.
fn run(fs: &SimFs, crash: Option<u64>) -> (u64, u64) {
    let dir = Path::new("/sim/tl");
    let db = TreeLine::open_in(fs, dir, options()).unwrap();
    for i in 0..BASE {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.checkpoint().unwrap();
    let start = fs.changes();
    if let Some(n) = crash {
        fs.crash_after(n);
    }
    let mut acked = BASE;
    for i in BASE..BASE + WORKLOAD {
        if db.put(&key(i), &value(i)).is_err() {
            break;
        }
        acked = i + 1;
    }
    let changes = fs.changes() - start;
    if crash.is_none() {
        let s = KvStore::stats(&db);
        assert!(
            counter(&db, "reorganizations") >= 3,
            "the workload reorganizes: {s:?}"
        );
    }
    db.simulate_crash();
    (acked, changes)
}

fn model(n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..n).map(|i| (key(i).to_vec(), value(i))).collect()
}

#[test]
fn power_loss_in_every_phase_of_reorganizations_and_overflows() {
    let (_, changes) = run(&SimFs::new(SimOptions::default()), None);
    let mut paths: BTreeMap<&str, u64> = BTreeMap::new();
    for n in 0..changes {
        let fs = SimFs::new(SimOptions::default());
        let (acked, _) = run(&fs, Some(n));
        fs.reboot(n);
        let db = TreeLine::open_in(&fs, Path::new("/sim/tl"), options())
            .unwrap_or_else(|e| panic!("crash at change {n}: open: {e}"));
        let mut got = BTreeMap::new();
        KvStore::scan(&db, &[], usize::MAX, &mut |k, v| {
            got.insert(k.to_vec(), v.to_vec());
            true
        })
        .unwrap();
        assert!(
            got == model(acked) || got == model(acked + 1),
            "crash at change {n}: {} records after {acked} acknowledged puts",
            got.len()
        );
        assert_eq!(
            db.check().unwrap().records,
            got.len() as u64,
            "crash at change {n}"
        );
        for name in [
            "check1_relinked",
            "check2_done",
            "check2_voided",
            "check2_reinvalidated",
        ] {
            *paths.entry(name).or_default() += counter(&db, name);
        }
    }
    eprintln!("{changes} changes, recovery paths taken: {paths:?}");
    for (name, n) in &paths {
        assert!(*n > 0, "recovery never took {name}: {paths:?}");
    }
}
