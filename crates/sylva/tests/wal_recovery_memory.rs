//! Recovery's memory does not grow with the log: a log of 256 MiB is opened and replayed
//! while the process's peak resident memory stays under 48 MiB (the window reads 1 MiB, or
//! one record, at a time). Before, recovery read the whole log into memory, and then held every
//! record a second time: over 512 MiB here. Its own test binary, so no other test's memory
//! counts.

use std::path::Path;

use sylva::io::FileIo;
use sylva::wal::Wal;

/// The process's peak resident set since the last reset, in bytes (`VmHWM`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// Resets the peak to the current resident set (Linux's `clear_refs` 5).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[test]
fn recovering_a_large_log_takes_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let open = |p: &Path| Box::new(FileIo::open(p, true).expect("open"));
    let record = vec![7u8; 64 << 10];
    let count = 4096u64; // 256 MiB
    {
        let (wal, _) = Wal::open(open(&path), 1).expect("create");
        for _ in 0..count {
            wal.append(&record).expect("append");
        }
        wal.sync().expect("sync");
    }
    if !reset_peak() {
        eprintln!("skipped: this kernel does not reset the peak resident set");
        return;
    }
    let before = peak_rss();
    let (wal, recovered) = Wal::open(open(&path), 1).expect("recover");
    assert_eq!(recovered.records, count);
    let (mut seen, mut bytes) = (0u64, 0u64);
    wal.replay(|lsn, payload| {
        seen += 1;
        assert_eq!(lsn, seen);
        bytes += payload.len() as u64;
        Ok(())
    })
    .expect("replay");
    assert_eq!((seen, bytes), (count, count * record.len() as u64));
    let grew = peak_rss().saturating_sub(before);
    assert!(
        grew < 48 << 20,
        "recovering a 256 MiB log raised the peak resident set by {} MiB",
        grew >> 20
    );
}
