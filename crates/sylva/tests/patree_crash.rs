//! `kill -9` of a process writing through the PA-Tree mode (`PaDb`, issue 20) with
//! `persist=strong` (`sync=always`): a child keeps 32 puts in flight in a `PaSession` (its
//! worker loop and io_uring ring on the child's thread, the pool a few pages so most writes
//! miss), or, every other pair of rounds, through the shared worker thread (`submit_put`,
//! waited for in order), printing `ack N` as each put completes. The parent kills
//! it at a random moment, reopens the directory alternately as `Db` and as `PaDb`, and checks
//! that every acknowledged put is there with its value and that `check()` passes. Each round
//! writes keys of its own, so a put is either there or not, and rounds accumulate in one
//! database (recovery runs on a growing one).
//!
//! Rounds: `SYLVA_CRASH_ROUNDS` (default 12).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use sylva::{BackendKind, Db, DbOptions, PaDb, PaOptions, PaResult, SyncMode};

fn key(round: u64, i: u64) -> Vec<u8> {
    let mut k = round.to_be_bytes().to_vec();
    k.extend_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes());
    k
}

fn value(round: u64, i: u64) -> Vec<u8> {
    format!("round {round} put {i} {}", "v".repeat((i % 50) as usize)).into_bytes()
}

fn options() -> PaOptions {
    let mut o = PaOptions {
        db: DbOptions {
            sync: SyncMode::Always,
            cache_bytes: 24 * 4096,
            checkpoint_bytes: 1 << 20,
            ..DbOptions::default()
        },
        backend: BackendKind::Auto,
        ..PaOptions::default()
    };
    o.worker.inflight = 32;
    o
}

/// The child: runs when `SYLVA_PA_CRASH_DIR` is set, writing until killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SYLVA_PA_CRASH_DIR") else {
        return;
    };
    let round: u64 = std::env::var("SYLVA_PA_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let db = PaDb::open(&dir, options()).unwrap();
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    if round % 4 >= 2 {
        // Through the shared worker thread, which makes each put durable itself.
        let mut in_flight = std::collections::VecDeque::new();
        for i in 0.. {
            if in_flight.len() >= 32 {
                let (tag, op): (u64, sylva::PaOp<'_, ()>) = in_flight.pop_front().unwrap();
                op.wait().unwrap();
                writeln!(out, "ack {tag}").unwrap();
                out.flush().unwrap();
            }
            in_flight.push_back((i, db.submit_put(&key(round, i), &value(round, i))));
        }
    }
    let mut session = db.session().unwrap();
    for i in 0.. {
        if session.outstanding() >= 32 {
            let (tag, r) = session.wait_any().unwrap();
            assert_eq!(r.unwrap(), PaResult::Put);
            writeln!(out, "ack {tag}").unwrap();
            out.flush().unwrap();
        }
        session.submit_put(i, &key(round, i), &value(round, i));
    }
}

#[test]
fn acknowledged_puts_survive_kill_9() {
    let rounds: u64 = std::env::var("SYLVA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let exe = std::env::current_exe().unwrap();
    let mut total = 0u64;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("SYLVA_PA_CRASH_DIR", &path)
            .env("SYLVA_PA_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Kill after a number of acks that varies by round (some rounds early, during the
        // first evictions; some after a checkpoint or two).
        let kill_after = 200 + (round * 7919) % 5000;
        let mut acked = Vec::new();
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(n) = line.strip_prefix("ack ") {
                acked.push(n.parse::<u64>().unwrap());
                if acked.len() as u64 == kill_after {
                    break;
                }
            }
        }
        child.kill().unwrap();
        // Acks written before the kill but not read yet are acknowledged too.
        for line in lines.map_while(|l| l.ok()) {
            if let Some(n) = line.strip_prefix("ack ") {
                acked.push(n.parse().unwrap());
            }
        }
        child.wait().unwrap();
        assert!(
            !acked.is_empty(),
            "round {round}: the child acknowledged nothing"
        );
        total += acked.len() as u64;
        let check = |get: &dyn Fn(&[u8]) -> Option<Vec<u8>>| {
            for &i in &acked {
                assert_eq!(
                    get(&key(round, i)),
                    Some(value(round, i)),
                    "round {round}: acknowledged put {i} lost"
                );
            }
        };
        if round % 2 == 0 {
            let db = Db::open(&path, options().db).unwrap();
            check(&|k| db.get(k).unwrap());
            db.check().unwrap();
            db.close().unwrap();
        } else {
            let db = PaDb::open(&path, options()).unwrap();
            check(&|k| db.get(k).unwrap());
            db.db().check().unwrap();
            db.close().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(total > rounds * 200, "{total} acks in {rounds} rounds");
}
