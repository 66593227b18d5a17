//! `kill -9` of a process putting values of 10 KiB to 4 MiB (out-of-line runs, issue 23) under
//! `SyncMode::Always`: after reopening, the database equals its model after a prefix of the
//! script that includes every acknowledged operation, every value reads back whole, and
//! `check()` passes (every run referenced exactly once, none leaked: free ∪ used = file).
//!
//! The test binary is its own child, as in `tests/db_crash.rs`: `large_value_child` does
//! nothing unless `SYLVA_DB_LARGE_CRASH_DIR` is set; then it opens the database there and runs
//! the round's script forever (puts over 24 keys with values from 10 KiB to 4 MiB, the odd
//! small one, overwrites, deletes; values of more than 1 MiB take the path that fsyncs the run
//! before logging it, smaller ones are logged whole), printing `ack N` after operation `N`
//! returns. The parent kills it at a random moment, reopens the same directory (rounds share
//! it, so runs are freed and reused across crashes) and compares. A small `checkpoint_bytes`
//! makes checkpoints (and so the reuse of freed runs) happen inside rounds.
//!
//! Rounds: `SYLVA_CRASH_ROUNDS` (default 12).

mod db_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use db_common::{differences, splitmix, tmp, Rng};
use sylva::{Db, DbOptions, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 24;

enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// The script of one round: a pure function of the round number.
struct Script {
    rng: Rng,
    round: u64,
    next: u64,
}

impl Script {
    fn new(round: u64) -> Self {
        Script {
            rng: Rng::new(0xB16 ^ round),
            round,
            next: 0,
        }
    }

    fn step(&mut self) -> (u64, Op) {
        let i = self.next;
        self.next += 1;
        let key = format!("big{:02}", self.rng.below(KEYS)).into_bytes();
        if self.rng.below(6) == 0 {
            return (i, Op::Delete(key));
        }
        let len = match self.rng.below(10) {
            0 => 100,
            1..=5 => 10_240 + self.rng.below(100_000) as usize,
            6..=8 => 200_000 + self.rng.below(1_000_000) as usize,
            _ => (1 << 20) + self.rng.below(3 << 20) as usize,
        };
        let tag = splitmix((self.round << 32) | i);
        let mut v = vec![(tag % 251) as u8; len];
        let label = format!("{}#{}#{i}|", String::from_utf8_lossy(&key), self.round);
        v[..label.len()].copy_from_slice(label.as_bytes());
        let end = len - 8;
        v[end..].copy_from_slice(&tag.to_le_bytes());
        (i, Op::Put(key, v))
    }
}

fn apply(model: &mut Model, op: &Op) {
    match op {
        Op::Put(k, v) => {
            model.insert(k.clone(), v.clone());
        }
        Op::Delete(k) => {
            model.remove(k);
        }
    }
}

fn options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 * 4096,
        checkpoint_bytes: 1 << 20,
        direct_io: false,
        ..DbOptions::default()
    }
}

#[test]
fn large_value_child() {
    let Ok(dir) = std::env::var("SYLVA_DB_LARGE_CRASH_DIR") else {
        return;
    };
    let round: u64 = std::env::var("SYLVA_DB_LARGE_CRASH_ROUND")
        .expect("round")
        .parse()
        .expect("round number");
    let db = Db::open(Path::new(&dir), options()).expect("child open");
    let mut out = std::io::stdout().lock();
    let mut script = Script::new(round);
    loop {
        let (i, op) = script.step();
        match &op {
            Op::Put(k, v) => db.put(k, v).expect("child put"),
            Op::Delete(k) => drop(db.delete(k).expect("child delete")),
        }
        writeln!(out, "ack {i}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// Runs round `round`'s child, kills it after `delay` (past its first ack) and returns the last
/// acknowledged operation.
fn run_child(dir: &Path, round: u64, delay: Duration) -> Option<u64> {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "large_value_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SYLVA_DB_LARGE_CRASH_DIR", dir)
        .env("SYLVA_DB_LARGE_CRASH_ROUND", round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("ack ") {
                if let Ok(n) = n.parse::<u64>() {
                    let _ = tx.send(n);
                }
            }
        }
    });
    // Wait for the first ack (or give up after a while), then for the delay.
    let first = rx.recv_timeout(Duration::from_secs(60)).ok();
    let start = Instant::now();
    let mut last = first;
    while start.elapsed() < delay {
        if let Ok(n) = rx.recv_timeout(Duration::from_millis(5)) {
            last = Some(n);
        }
    }
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    reader.join().expect("reader");
    while let Ok(n) = rx.try_recv() {
        last = Some(n);
    }
    last
}

#[test]
fn kill_9_loses_no_acknowledged_large_value_and_leaks_no_run() {
    let rounds: u64 = std::env::var("SYLVA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let dir = tmp();
    let mut model = Model::new();
    let mut rng = Rng::new(0x5EED);
    let mut acked_total = 0;
    for round in 0..rounds {
        let delay = Duration::from_millis(50 + rng.below(400));
        let acked = run_child(dir.path(), round, delay);
        let db = Db::open(dir.path(), options()).expect("reopen after kill");
        let got = db_common::contents(&db).expect("scan");
        // The database holds a prefix of the script: every acknowledged op, and maybe the one
        // in flight (and nothing after it).
        let mut script = Script::new(round);
        let mut want = model.clone();
        if let Some(last) = acked {
            acked_total += last + 1;
            for _ in 0..=last {
                apply(&mut want, &script.step().1);
            }
        }
        if got != want {
            let mut with_next = want.clone();
            apply(&mut with_next, &script.step().1);
            assert!(
                got == with_next,
                "round {round} (acked up to {acked:?}): {}",
                differences(&got, &want, 5)
            );
            want = with_next;
        }
        for (k, v) in &want {
            assert_eq!(
                db.get(k).expect("get").as_ref(),
                Some(v),
                "round {round}: get"
            );
        }
        let report = db.check().expect("check after a kill");
        assert_eq!(report.records, want.len() as u64, "round {round}");
        db.close().expect("close");
        model = want;
    }
    assert!(
        acked_total >= rounds,
        "the children acknowledged only {acked_total} operations"
    );
}
