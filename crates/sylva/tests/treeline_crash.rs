//! `kill -9` of a process writing to a [`TreeLine`] under `SyncMode::Always`: after reopening,
//! the store equals the model after every acknowledged operation (the one in flight at the
//! kill may or may not be there: a prefix either way; a write batch whole or not at all), and
//! `check()` passes.
//!
//! The test binary is its own child: `crash_child` does nothing unless `SYLVA_TL_CRASH_DIR` is
//! set; then it opens the store there with a cache of a few hundred records, goal 4 and
//! epsilon 2 (evictions, overflow pages and reorganizations all the time) and a 1 MiB checkpoint
//! threshold, and runs the round's script — puts, deletes, write batches and, now and then,
//! `checkpoint()` — printing `ack N` after operation `N` returns. The script is a pure function
//! of the round, so the parent regenerates it. Rounds share the directory, so recovery runs on
//! an accumulating store, and the kills land in flushes, overflow allocations, reorganizations
//! (the parent checks the children reorganized) and checkpoints.
//!
//! Rounds: `SYLVA_CRASH_ROUNDS` (default 24).

#![allow(clippy::unwrap_used)]

mod db_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use db_common::{scattered_key, splitmix, tagged_value, Rng};
use sylva::{KvStore, SyncMode, TreeLine, TreeLineOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Op = Vec<(Vec<u8>, Option<Vec<u8>>)>;

const KEYS: u64 = 20_000;

fn options() -> TreeLineOptions {
    let mut o = TreeLineOptions {
        sync: SyncMode::Always,
        goal: 4,
        epsilon: 2,
        checkpoint_bytes: 1 << 20,
        bins: 32,
        epoch_inserts: 200,
        forecast_epochs: 2,
        ..TreeLineOptions::default()
    };
    o.set("cache_records", "300").unwrap();
    // The fixed part of the budget on top, and the record cache's arena slack (256 KiB).
    o.cache_bytes +=
        (8 << 20) + 8192 + (4 << 20) + 2 * 32 * 16 + 2 * 10 * 32 * 8 + 1024 + (256 << 10);
    o
}

/// Operation `i` of round `round` (`None`: a checkpoint).
fn op(round: u64, i: u64) -> Option<Op> {
    let mut rng = Rng::new(splitmix(round << 32 | i));
    let value = |k: &[u8], m: u64| {
        let tag = (round << 40) | (i << 4) | m;
        tagged_value(k, tag, 16 + (splitmix(tag) % 300) as usize)
    };
    let key = |rng: &mut Rng| scattered_key(rng.below(KEYS));
    Some(match rng.below(100) {
        0..60 => {
            let k = key(&mut rng);
            let v = value(&k, 0);
            vec![(k, Some(v))]
        }
        60..80 => vec![(key(&mut rng), None)],
        80..99 => {
            let mut ops: Op = Vec::new();
            for m in 0..2 + rng.below(6) {
                let k = key(&mut rng);
                if ops.iter().any(|(o, _)| *o == k) {
                    continue;
                }
                let v = (rng.below(4) != 0).then(|| value(&k, m + 1));
                ops.push((k, v));
            }
            ops
        }
        _ => return None,
    })
}

fn apply(model: &mut Model, op: &Op) {
    for (k, v) in op {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SYLVA_TL_CRASH_DIR") else {
        return;
    };
    let round: u64 = std::env::var("SYLVA_TL_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let db = TreeLine::open(Path::new(&dir), options()).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        match op(round, i) {
            Some(ops) => match ops.as_slice() {
                [(k, Some(v))] => db.put(k, v).unwrap(),
                [(k, None)] => drop(db.delete(k).unwrap()),
                ops => {
                    let ops: Vec<(&[u8], Option<&[u8]>)> =
                        ops.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
                    db.write(&ops).unwrap();
                }
            },
            None => db.checkpoint().unwrap(),
        }
        let reorgs = KvStore::stats(&db)
            .counters
            .iter()
            .find(|c| c.0 == "reorganizations")
            .map_or(0, |c| c.1);
        writeln!(out, "ack {i} {reorgs}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn kill_9_rounds_keep_every_acknowledged_write() {
    let rounds: u64 = std::env::var("SYLVA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tl");
    let mut model = Model::new();
    let mut delays = Rng::new(7);
    let mut reorganized = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("SYLVA_TL_CRASH_DIR", &dir)
            .env("SYLVA_TL_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            let mut reorgs = 0;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut w = line.split_whitespace();
                if w.next() == Some("ack") {
                    last = w.next().and_then(|n| n.parse::<u64>().ok());
                    reorgs = w.next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
                }
            }
            (last, reorgs)
        });
        std::thread::sleep(Duration::from_millis(300 + delays.below(1500)));
        child.kill().unwrap();
        child.wait().unwrap();
        let (last, reorgs) = reader.join().unwrap();
        reorganized += reorgs;
        // The store after the acknowledged prefix, or with the operation in flight too.
        let acked = last.map_or(0, |n| n + 1);
        let mut after = model.clone();
        for i in 0..acked {
            if let Some(o) = op(round, i) {
                apply(&mut after, &o);
            }
        }
        let mut with_next = after.clone();
        if let Some(o) = op(round, acked) {
            apply(&mut with_next, &o);
        }
        let db = TreeLine::open(&dir, options()).unwrap();
        let mut got = Model::new();
        KvStore::scan(&db, &[], usize::MAX, &mut |k, v| {
            got.insert(k.to_vec(), v.to_vec());
            true
        })
        .unwrap();
        model = if got == after {
            after
        } else if got == with_next {
            with_next
        } else {
            let missing = after
                .keys()
                .filter(|k| got.get(*k) != after.get(*k))
                .count();
            panic!("round {round}: after {acked} acks the store differs from the model at {missing} keys");
        };
        for (k, v) in model.iter().step_by(97) {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "round {round}: get");
        }
        assert_eq!(
            db.check().unwrap().records,
            model.len() as u64,
            "round {round}"
        );
        db.close().unwrap();
    }
    assert!(reorganized > 0, "no child reorganized before it was killed");
}
