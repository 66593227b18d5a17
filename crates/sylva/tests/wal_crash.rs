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
use sylva::wal::Wal;

fn payload(lsn: u64) -> Vec<u8> {
    let mut p = format!("lsn {lsn}:").into_bytes();
    p.resize(16 + (lsn % 300) as usize, (lsn % 251) as u8);
    p
}

/// Opens the log and reads back what recovery found.
fn open(dir: &Path) -> (Wal, Vec<(u64, Vec<u8>)>) {
    let (wal, _) = Wal::open(
        Box::new(FileIo::open(&dir.join("wal"), true).expect("open file")),
        1,
    )
    .expect("open wal");
    let records = wal.recovered_records().expect("replay");
    (wal, records)
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SYLVA_WAL_CRASH_DIR") else {
        return;
    };
    let mode_name = std::env::var("SYLVA_WAL_CRASH_MODE").unwrap_or_default();
    let (wal, _) = open(Path::new(&dir));
    let mut n = wal.next_lsn();
    loop {
        let lsn = wal.append(&payload(n)).expect("append");
        assert_eq!(lsn, n);
        n += 1;
        if mode_name == "always" {
            // As the database does under `SyncMode::Always`: durable before acknowledged.
            wal.sync_to(lsn).expect("sync");
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
        let (first_ack, started) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut last = 0u64;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("ack ").and_then(|s| s.parse().ok()) {
                    if last == 0 {
                        let _ = first_ack.send(());
                    }
                    last = n;
                }
            }
            last
        });
        // Kill mid-stream: once the child is acknowledging, at a pseudo-random moment 0–50 ms
        // later, different every round. (Waiting for the first ack keeps a slow start on a
        // loaded machine from turning a round into a kill before any write.)
        started
            .recv_timeout(Duration::from_secs(60))
            .expect("the child acknowledged nothing within 60 s");
        std::thread::sleep(Duration::from_millis((round * 7919 + 13) % 50));
        child.kill().expect("kill -9");
        child.wait().expect("reap child");
        let acked = reader.join().expect("reader thread");

        let (_, records) = open(dir.path());
        let last = records.last().map_or(0, |r| r.0);
        assert!(
            last >= acked,
            "round {round}: acknowledged up to {acked} but recovered only up to {last}"
        );
        for (i, (lsn, p)) in records.iter().enumerate() {
            assert_eq!(
                *lsn,
                i as u64 + 1,
                "round {round}: LSNs must be contiguous from 1"
            );
            assert_eq!(p, &payload(*lsn), "round {round}: record {lsn} damaged");
        }
        assert!(
            acked > 0,
            "round {round}: nothing acknowledged before the kill"
        );
    }
}

#[test]
fn kill_9_loses_nothing_acknowledged_under_sync_always() {
    crash_rounds("always");
}

#[test]
fn kill_9_loses_nothing_synced_under_sync_batch() {
    crash_rounds("batch");
}
