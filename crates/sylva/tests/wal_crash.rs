//! `kill -9` of a process appending to the write-ahead log: every record it acknowledged must be
//! recovered, intact and in order.
//!
//! The test binary is its own child: `crash_child` does nothing unless `SYLVA_WAL_CRASH_DIR` is
//! set, in which case it appends forever and prints each acknowledged LSN. The parent kills it at
//! a random moment, reopens the log and checks. Rounds: `SYLVA_CRASH_ROUNDS` (default 50).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use sylva::io::FileIo;
use sylva::wal::{SyncMode, Wal};

fn payload(lsn: u64) -> Vec<u8> {
    let mut p = format!("lsn {lsn}:").into_bytes();
    p.resize(16 + (lsn % 300) as usize, (lsn % 251) as u8);
    p
}

fn mode(name: &str) -> SyncMode {
    match name {
        "always" => SyncMode::Always,
        _ => SyncMode::Batch {
            ops: 64,
            interval: Duration::from_millis(5),
        },
    }
}

fn open(dir: &Path, mode: SyncMode) -> (Wal, sylva::wal::Recovered) {
    Wal::open(
        Box::new(FileIo::open(&dir.join("wal"), true).expect("open file")),
        mode,
        1,
    )
    .expect("open wal")
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SYLVA_WAL_CRASH_DIR") else {
        return;
    };
    let mode_name = std::env::var("SYLVA_WAL_CRASH_MODE").unwrap_or_default();
    let (wal, _) = open(Path::new(&dir), mode(&mode_name));
    let mut n = wal.next_lsn();
    loop {
        let lsn = wal.append(&payload(n)).expect("append");
        assert_eq!(lsn, n);
        n += 1;
        if mode_name == "always" {
            println!("ack {lsn}");
        } else if lsn % 50 == 0 {
            wal.sync().expect("sync");
            println!("ack {lsn}");
        }
    }
}

fn crash_rounds(mode_name: &str) {
    let rounds: u64 = std::env::var("SYLVA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut acked_total = 0u64;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("SYLVA_WAL_CRASH_DIR", dir.path())
            .env("SYLVA_WAL_CRASH_MODE", mode_name)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let reader = std::thread::spawn(move || {
            let mut last = 0u64;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("ack ").and_then(|s| s.parse().ok()) {
                    last = n;
                }
            }
            last
        });
        // A pseudo-random moment between 20 and 120 ms in, different every round.
        let wait = 20 + (round * 7919 + 13) % 100;
        std::thread::sleep(Duration::from_millis(wait));
        child.kill().expect("kill -9");
        child.wait().expect("reap child");
        let acked = reader.join().expect("reader thread");

        let (_, rec) = open(dir.path(), mode(mode_name));
        let last = rec.records.last().map_or(0, |r| r.0);
        assert!(
            last >= acked,
            "round {round}: acknowledged up to {acked} but recovered only up to {last}"
        );
        for (i, (lsn, p)) in rec.records.iter().enumerate() {
            assert_eq!(
                *lsn,
                i as u64 + 1,
                "round {round}: LSNs must be contiguous from 1"
            );
            assert_eq!(p, &payload(*lsn), "round {round}: record {lsn} damaged");
        }
        acked_total = acked;
    }
    assert!(
        acked_total > 0,
        "the child never acknowledged anything; the test tested nothing"
    );
}

#[test]
fn kill_9_loses_nothing_acknowledged_under_sync_always() {
    crash_rounds("always");
}

#[test]
fn kill_9_loses_nothing_synced_under_sync_batch() {
    crash_rounds("batch");
}
