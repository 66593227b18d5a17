use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::io::{Fault, FaultyIo, FileIo};

/// What recovery found, with its records read into memory by [`Wal::replay`].
struct Rec {
    records: Vec<(u64, Vec<u8>)>,
    cut_bytes: u64,
    intact_after_cut: Option<u64>,
    hole_was_synced: bool,
}

/// An opened log and what recovery found, its records read back.
fn read_back(opened: Result<(Wal, Recovered)>) -> Result<(Wal, Rec)> {
    let (wal, r) = opened?;
    let records = wal.recovered_records()?;
    assert_eq!(
        records.len() as u64,
        r.records,
        "replay returns what the scan counted"
    );
    let rec = Rec {
        records,
        cut_bytes: r.cut_bytes,
        intact_after_cut: r.intact_after_cut,
        hole_was_synced: r.hole_was_synced,
    };
    Ok((wal, rec))
}

fn open(path: &Path) -> (Wal, Rec) {
    read_back(Wal::open(
        Box::new(FileIo::open(path, true).expect("open file")),
        1,
    ))
    .expect("open wal")
}

/// Appends a record and makes it durable, as the database does under `SyncMode::Always`.
fn append_durable(wal: &Wal, payload: &[u8]) -> Result<u64> {
    let lsn = wal.append(payload)?;
    wal.sync_to(lsn)?;
    Ok(lsn)
}

fn payload(i: u64) -> Vec<u8> {
    format!("record {i} ")
        .repeat(1 + (i % 7) as usize)
        .into_bytes()
}

fn lsns(r: &Rec) -> Vec<u64> {
    r.records.iter().map(|(l, _)| *l).collect()
}

/// What a [`Watched`] file saw: fsyncs, how long the file was at the last one, and every
/// page-cache drop the log asked for (offset, length, synced length then).
#[derive(Default, Clone)]
struct Watch {
    syncs: Arc<AtomicU64>,
    synced_len: Arc<AtomicU64>,
    drops: Arc<parking_lot::Mutex<Vec<(u64, u64, u64)>>>,
    /// Every length the file was cut to, with the fsyncs done before the cut.
    cuts: Arc<parking_lot::Mutex<Vec<(u64, u64)>>>,
}

/// A file that reports to a [`Watch`] and makes each fsync take `sync_delay`, so that
/// concurrent committers pile up behind it.
struct Watched {
    inner: FileIo,
    sync_delay: Duration,
    watch: Watch,
}

impl Watched {
    fn new(path: &Path, sync_delay: Duration, watch: &Watch) -> Self {
        Watched {
            inner: FileIo::open(path, true).expect("open"),
            sync_delay,
            watch: watch.clone(),
        }
    }
}

impl Io for Watched {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        self.watch.syncs.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(self.sync_delay);
        self.inner.sync()?;
        let len = self.inner.file_len()?;
        self.watch.synced_len.store(len, Ordering::SeqCst);
        Ok(())
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        let syncs = self.watch.syncs.load(Ordering::Relaxed);
        self.watch.cuts.lock().push((len, syncs));
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn drop_cache(&self, offset: u64, len: u64) {
        let synced = self.watch.synced_len.load(Ordering::SeqCst);
        self.watch.drops.lock().push((offset, len, synced));
    }
}

#[test]
fn records_survive_reopen_in_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The modes as the database applies them: a sync after every record (`Always`), after
    // every 10 (`Batch`), none until the end (`Never`).
    for (i, mode) in [1, 10, u64::MAX].into_iter().enumerate() {
        let path = dir.path().join(format!("wal{i}"));
        let (wal, rec) = open(&path);
        assert!(rec.records.is_empty());
        for n in 0..100 {
            let lsn = wal.append(&payload(n)).expect("append");
            assert_eq!(lsn, n + 1, "LSNs count from min_next_lsn");
            if lsn % mode == 0 {
                wal.sync_to(lsn).expect("sync");
            }
        }
        wal.sync().expect("sync");
        drop(wal);
        let (wal, rec) = open(&path);
        assert_eq!(
            rec.cut_bytes, 0,
            "sync every {mode}: a clean log has no torn tail"
        );
        assert_eq!(rec.records.len(), 100, "sync every {mode}");
        for (n, (lsn, p)) in rec.records.iter().enumerate() {
            assert_eq!(
                (*lsn, p.as_slice()),
                (n as u64 + 1, payload(n as u64).as_slice())
            );
        }
        assert_eq!(
            wal.append(b"more").expect("append after reopen"),
            101,
            "LSNs continue after reopen"
        );
    }
}

#[test]
fn a_torn_tail_is_cut_at_every_possible_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let (wal, _) = open(&path);
    for n in 0..5 {
        append_durable(&wal, &payload(n)).expect("append");
    }
    let full = wal.bytes();
    let last_start = full - (FRAME_LEN_FOR_TEST + payload(4).len()) as u64;
    drop(wal);
    let pristine = std::fs::read(&path).expect("read");
    for cut in last_start..full {
        std::fs::write(&path, &pristine[..cut as usize]).expect("write");
        let (wal, rec) = open(&path);
        assert_eq!(lsns(&rec), vec![1, 2, 3, 4], "cut at {cut}");
        assert_eq!(rec.cut_bytes, cut - last_start, "cut at {cut}");
        assert_eq!(rec.intact_after_cut, None);
        // The log goes on from the cut, and a second recovery sees the new record.
        assert_eq!(append_durable(&wal, b"after").expect("append"), 5);
        drop(wal);
        let (_, rec) = open(&path);
        assert_eq!(lsns(&rec), vec![1, 2, 3, 4, 5]);
        assert_eq!(rec.records[4].1, b"after");
    }
}

const FRAME_LEN_FOR_TEST: usize = record::FRAME_LEN;

#[test]
fn damage_in_the_middle_keeps_the_prefix_and_reports_intact_records_beyond() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let (wal, _) = open(&path);
    let mut offsets = vec![wal.bytes()];
    for n in 0..10 {
        append_durable(&wal, &payload(n)).expect("append");
        offsets.push(wal.bytes());
    }
    drop(wal);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[offsets[4] as usize + 20] ^= 0x40; // inside record 5's payload
    std::fs::write(&path, &bytes).expect("write");
    let (_, rec) = open(&path);
    assert_eq!(lsns(&rec), vec![1, 2, 3, 4]);
    assert_eq!(
        rec.intact_after_cut,
        Some(offsets[5]),
        "record 6 is intact and must be reported"
    );
}

/// Writes records 1..=10 as the database does under `mode` (`Always`: each durable before the
/// next; otherwise no sync), with an explicit sync after record `sync_after` (0: none); returns
/// the file offset of each record and one past the last.
fn ten_records(path: &Path, mode: SyncMode, sync_after: u64) -> Vec<u64> {
    let (wal, _) = open(path);
    let mut offsets = vec![wal.bytes()];
    for n in 1..=10 {
        if mode == SyncMode::Always {
            append_durable(&wal, &payload(n)).expect("append");
        } else {
            wal.append(&payload(n)).expect("append");
        }
        if n == sync_after {
            wal.sync().expect("sync");
        }
        offsets.push(wal.bytes());
    }
    // Dropped without a final sync: under `Never` records after `sync_after` were never synced
    // (they reach the file only because the buffer is written on drop or when it fills).
    wal.sync().ok();
    offsets
}

fn damage_record(path: &Path, offsets: &[u64], lsn: u64) -> Vec<u8> {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offsets[lsn as usize - 1] as usize + record::FRAME_LEN] ^= 0x40;
    std::fs::write(path, &bytes).expect("write");
    bytes
}

fn open_strict(path: &Path) -> Result<(Wal, Rec)> {
    read_back(Wal::open_strict(
        Box::new(FileIo::open(path, true).expect("open file")),
        1,
    ))
}

#[test]
fn a_hole_in_synced_records_is_refused_and_one_in_an_unsynced_tail_is_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `Always`: record 6 was appended after record 5 was synced, and says so.
    let path = dir.path().join("always");
    let offsets = ten_records(&path, SyncMode::Always, 0);
    let damaged = damage_record(&path, &offsets, 5);
    let err = open_strict(&path)
        .err()
        .expect("a synced hole must be refused");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        damaged,
        "left as it is"
    );

    // `Never`, synced after record 3: a hole at 5 lies in records never synced, so it is cut
    // like a torn tail (the OS may write a flush's pages out of order before a power failure).
    let path = dir.path().join("never-tail");
    let offsets = ten_records(&path, SyncMode::Never, 3);
    damage_record(&path, &offsets, 5);
    let (_, rec) = open_strict(&path).expect("an unsynced hole is cut");
    assert_eq!(lsns(&rec), vec![1, 2, 3, 4]);
    assert_eq!(rec.intact_after_cut, Some(offsets[5]));
    assert!(!rec.hole_was_synced);
    assert_eq!(
        std::fs::metadata(&path).expect("stat").len(),
        offsets[4],
        "cut at the hole"
    );

    // The same log with the hole at 2, inside the synced part: records 4 on say 1..=3 were durable.
    let path = dir.path().join("never-synced");
    let offsets = ten_records(&path, SyncMode::Never, 3);
    damage_record(&path, &offsets, 2);
    let err = open_strict(&path)
        .err()
        .expect("a synced hole must be refused");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
}

/// A header of log format `version` starting at LSN 1.
fn header_of_version(version: u32) -> [u8; HEADER_LEN as usize] {
    let mut header = record::encode_header(1);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[0..12]), &header[16..32]);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A log of an older `version` (records 1..=3, each claiming every record before it synced
/// where the version carries claims) is read, appended to in its own format, and gets a header
/// of the current version at truncation; damage to its first record is refused, since the
/// records after it either claim it was synced (version 2) or make no claims (version 1).
fn an_older_log_is_read_appended_to_and_rewritten_at_truncation(version: u32, frame_len: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let mut bytes = header_of_version(version).to_vec();
    for lsn in 1..=3 {
        record::encode_record(&mut bytes, version, lsn, lsn, &payload(lsn));
    }
    std::fs::write(&path, &bytes).expect("write");
    let (wal, rec) = open(&path);
    assert_eq!(lsns(&rec), vec![1, 2, 3]);
    append_durable(&wal, &payload(4)).expect("append");
    drop(wal);
    assert_eq!(
        u32::from(std::fs::read(&path).expect("read")[8]),
        version,
        "appended without a new header"
    );
    let (wal, rec) = open(&path);
    assert_eq!(
        lsns(&rec),
        vec![1, 2, 3, 4],
        "appended in the file's own format"
    );
    assert_eq!(rec.records[3].1, payload(4));
    wal.truncate().expect("truncate");
    append_durable(&wal, &payload(5)).expect("append");
    drop(wal);
    let on_disk = std::fs::read(&path).expect("read");
    assert_eq!(
        u32::from(on_disk[8]),
        record::VERSION,
        "the rewritten header is the current version"
    );
    let (_, rec) = open(&path);
    assert_eq!(lsns(&rec), vec![5]);

    let mut bytes = bytes.clone();
    bytes[HEADER_LEN as usize + frame_len] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    let err = open_strict(&path).err().expect("refused");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
}

#[test]
fn a_version_1_log_is_read_appended_to_and_becomes_the_current_version_at_truncation() {
    an_older_log_is_read_appended_to_and_rewritten_at_truncation(1, record::FRAME_LEN_V1);
}

#[test]
fn a_version_2_log_is_read_with_its_claims_appended_to_and_becomes_the_current_version_at_truncation(
) {
    assert_eq!(record::VERSION, 5);
    an_older_log_is_read_appended_to_and_rewritten_at_truncation(2, record::FRAME_LEN);
}

#[test]
fn a_version_3_log_is_read_appended_to_and_becomes_version_5_at_truncation() {
    assert_eq!(record::VERSION, 5);
    an_older_log_is_read_appended_to_and_rewritten_at_truncation(3, record::FRAME_LEN);
}

#[test]
fn a_version_4_log_is_read_appended_to_and_becomes_version_5_at_truncation() {
    assert_eq!(record::VERSION, 5);
    an_older_log_is_read_appended_to_and_rewritten_at_truncation(4, record::FRAME_LEN);
}

#[test]
fn concurrent_committers_share_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let watch = Watch::default();
    let syncs = watch.syncs.clone();
    let io = Watched::new(&path, Duration::from_millis(2), &watch);
    let (wal, _) = Wal::open(Box::new(io), 1).expect("open wal");
    let before = syncs.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let wal = &wal;
            s.spawn(move || {
                for n in 0..100 {
                    append_durable(wal, &payload(t * 1000 + n)).expect("append");
                }
            });
        }
    });
    let used = syncs.load(Ordering::Relaxed) - before;
    assert!(
        used <= 250,
        "400 commits from 4 threads took {used} fsyncs; group commit should share them"
    );
    drop(wal);
    let (_, rec) = open(&path);
    assert_eq!(lsns(&rec), (1..=400).collect::<Vec<_>>());
}

#[test]
fn a_write_behind_does_not_wait_for_a_sync_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let watch = Watch::default();
    let io = Watched::new(&path, Duration::from_millis(800), &watch);
    let (wal, _) = Wal::open(Box::new(io), 1).expect("open wal");
    let big = vec![7u8; 60 << 10];
    wal.append(&big).expect("append");
    let syncs_before = watch.syncs.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        // A sync (a checkpoint's, or an eviction's WAL rule) holds the flush for 800 ms.
        let syncer = s.spawn(|| wal.sync().expect("sync"));
        while watch.syncs.load(Ordering::Relaxed) == syncs_before {
            std::thread::yield_now();
        }
        // Appends that pass the write-behind threshold meanwhile do not wait for it.
        let started = std::time::Instant::now();
        for _ in 0..(2 * WRITE_BEHIND / big.len()) {
            wal.append(&big).expect("append");
        }
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(400),
            "appends waited {took:?} for a sync in flight"
        );
        syncer.join().expect("syncer");
    });
    wal.sync().expect("sync");
    let appended = 1 + 2 * WRITE_BEHIND / big.len();
    drop(wal);
    let (_, rec) = open(&path);
    assert_eq!(rec.records.len(), appended, "every record reaches the file");
}

/// The sync policy is the caller's (the database's `after_write`): the log fsyncs only when
/// asked to.
#[test]
fn appends_never_fsync_and_one_sync_covers_them_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let watch = Watch::default();
    let syncs = watch.syncs.clone();
    let io = Watched::new(&dir.path().join("wal"), Duration::from_millis(2), &watch);
    let (wal, _) = Wal::open(Box::new(io), 1).expect("wal");
    let before = syncs.load(Ordering::Relaxed);
    for n in 0..95 {
        wal.append(&payload(n)).expect("append");
    }
    assert_eq!(syncs.load(Ordering::Relaxed) - before, 0, "appends only");
    assert_eq!(wal.durable_below(), 1, "nothing durable yet");
    wal.sync_to(40).expect("sync");
    assert_eq!(syncs.load(Ordering::Relaxed) - before, 1);
    assert_eq!(
        wal.durable_below(),
        96,
        "one fsync covers every record buffered"
    );
    wal.sync_to(95).expect("sync");
    wal.sync().expect("sync");
    assert_eq!(
        syncs.load(Ordering::Relaxed) - before,
        1,
        "nothing left to sync"
    );
}

#[test]
fn a_failed_fsync_poisons_and_acknowledged_records_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    for fault in [Fault::FailSync, Fault::FailWrite, Fault::ShortWrite(10)] {
        let _ = std::fs::remove_file(&path);
        let (io, faults) = FaultyIo::new(FileIo::open(&path, true).expect("open"));
        let (wal, _) = Wal::open(Box::new(io), 1).expect("wal");
        for n in 0..20 {
            append_durable(&wal, &payload(n)).expect("append");
        }
        faults.arm(fault);
        assert!(
            append_durable(&wal, b"doomed").is_err(),
            "{fault:?}: the failing commit reports an error"
        );
        assert!(
            matches!(wal.append(b"after"), Err(Error::Poisoned)),
            "{fault:?}: then the log is poisoned"
        );
        assert!(
            matches!(wal.sync(), Err(Error::Poisoned)),
            "{fault:?}: sync is refused too"
        );
        drop(wal);
        let (_, rec) = open(&path);
        assert!(
            rec.records.len() >= 20,
            "{fault:?}: acknowledged records lost"
        );
        assert_eq!(lsns(&rec)[..20], (1..=20).collect::<Vec<_>>()[..]);
    }
}

#[test]
fn a_torn_write_reported_as_success_is_cut_on_recovery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let (io, faults) = FaultyIo::new(FileIo::open(&path, true).expect("open"));
    let (wal, _) = Wal::open(Box::new(io), 1).expect("wal");
    for n in 0..10 {
        append_durable(&wal, &payload(n)).expect("append");
    }
    faults.arm(Fault::TornWrite(7));
    let _ = append_durable(&wal, b"torn record, the crash happened mid-write");
    drop(wal);
    let (_, rec) = open(&path);
    assert_eq!(lsns(&rec), (1..=10).collect::<Vec<_>>());
    assert_eq!(rec.cut_bytes, 7);
}

#[test]
fn truncate_empties_the_log_and_lsns_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let (wal, _) = open(&path);
    for n in 0..50 {
        wal.append(&payload(n)).expect("append");
    }
    wal.truncate().expect("truncate");
    assert_eq!(wal.bytes(), record::HEADER_LEN);
    assert_eq!(wal.append(b"x").expect("append"), 51);
    wal.sync().expect("sync");
    drop(wal);
    let (wal, rec) = open(&path);
    assert_eq!(lsns(&rec), vec![51]);
    assert_eq!(wal.next_lsn(), 52);
}

#[test]
fn foreign_and_future_files_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    std::fs::write(&path, b"this is somebody's shopping list, not a log at all").expect("write");
    let err = Wal::open(Box::new(FileIo::open(&path, false).expect("open")), 1)
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::NotSylva { .. }), "{err}");
    std::fs::write(&path, b"tiny").expect("write");
    let err = Wal::open(Box::new(FileIo::open(&path, false).expect("open")), 1)
        .err()
        .expect("must fail");
    assert!(matches!(err, Error::NotSylva { .. }), "{err}");
    let mut future = record::encode_header(1);
    future[8] = 9;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&future[0..12]), &future[16..32]);
    future[12..16].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, future).expect("write");
    let err = Wal::open(Box::new(FileIo::open(&path, false).expect("open")), 1)
        .err()
        .expect("must fail");
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found: 9,
                supported: record::VERSION,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_torn_header_over_an_empty_log_recovers_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let mut h = record::encode_header(40);
    h[17] ^= 0xFF;
    std::fs::write(&path, h).expect("write");
    let (io, _) = FaultyIo::new(FileIo::open(&path, false).expect("open"));
    let (wal, rec) = read_back(Wal::open(Box::new(io), 40)).expect("recovers");
    assert!(rec.records.is_empty());
    assert_eq!(wal.append(b"x").expect("append"), 40);
}

/// A two-segment log over `dir/a` and `dir/b`, as the database opens its log.
fn open_pair(dir: &Path, min_next_lsn: u64) -> Result<(Wal, Rec)> {
    let io = |name: &str| -> Box<dyn Io> {
        Box::new(FileIo::open(&dir.join(name), true).expect("open file"))
    };
    read_back(Wal::open_segments([io("a"), io("b")], min_next_lsn))
}

fn append_n(wal: &Wal, lsns: std::ops::Range<u64>) {
    for i in lsns {
        assert_eq!(wal.append(&payload(i)).expect("append"), i);
    }
}

#[test]
fn rotation_keeps_both_segments_until_a_checkpoint_covers_the_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open_pair(dir.path(), 1).expect("open");
    append_n(&wal, 1..11);
    // A checkpoint at LSN 1 begins: rotate.
    assert!(wal.rotate(1).expect("rotate"));
    assert_eq!(wal.durable_below(), 11, "rotation syncs the old segment");
    append_n(&wal, 11..16);
    wal.sync().expect("sync");
    // The checkpoint never finished (recovery from LSN 1): both segments, in order.
    drop(wal);
    let (wal, rec) = open_pair(dir.path(), 1).expect("reopen");
    assert_eq!(lsns(&rec), (1..16).collect::<Vec<_>>());
    assert_eq!(rec.records[12].1, payload(13));
    // The next rotation would drop the segment LSN 1 is in: refused until a checkpoint at
    // LSN 11 (where the active segment starts) is durable.
    assert!(!wal.rotate(1).expect("refused"));
    assert!(wal.rotate(11).expect("rotate"));
    append_n(&wal, 16..18);
    wal.sync().expect("sync");
    drop(wal);
    // The checkpoint at 16 finished: records before it may be gone, those after must be there.
    let (wal, rec) = open_pair(dir.path(), 16).expect("reopen");
    assert_eq!(lsns(&rec), vec![11, 12, 13, 14, 15, 16, 17]);
    // Once it is durable the old segment may be emptied ahead of the next rotation.
    assert!(!wal.drop_other(11).expect("refused"));
    assert!(wal.drop_other(16).expect("dropped"));
    assert_eq!(
        std::fs::metadata(dir.path().join("b")).expect("b").len(),
        HEADER_LEN
    );
    drop(wal);
    let (_, rec) = open_pair(dir.path(), 16).expect("reopen");
    assert_eq!(lsns(&rec), vec![16, 17]);
    let err = open_pair(dir.path(), 11)
        .err()
        .expect("records 11..16 are gone");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
}

#[test]
fn a_crash_right_after_rotation_appends_to_the_new_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open_pair(dir.path(), 1).expect("open");
    append_n(&wal, 1..6);
    assert!(wal.rotate(1).expect("rotate"));
    drop(wal);
    let (wal, rec) = open_pair(dir.path(), 1).expect("reopen");
    assert_eq!(lsns(&rec), (1..6).collect::<Vec<_>>());
    append_n(&wal, 6..8);
    wal.sync().expect("sync");
    drop(wal);
    let b = std::fs::metadata(dir.path().join("b")).expect("b").len();
    assert!(
        b > HEADER_LEN,
        "the records went to the new segment ({b} bytes)"
    );
    let (_, rec) = open_pair(dir.path(), 1).expect("reopen");
    assert_eq!(lsns(&rec), (1..8).collect::<Vec<_>>());
}

/// A closed two-segment log in `dir`: records `1..rotate_at` in `a`, a rotation, records
/// `rotate_at..end` in `b`, synced.
fn rotated_pair(dir: &Path, rotate_at: u64, end: u64) {
    let (wal, _) = open_pair(dir, 1).expect("open");
    append_n(&wal, 1..rotate_at);
    assert!(wal.rotate(1).expect("rotate"));
    append_n(&wal, rotate_at..end);
    wal.sync().expect("sync");
}

#[test]
fn a_gap_between_segments_that_recovery_needs_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    rotated_pair(dir.path(), 6, 9);
    // Damage the old segment's last record: LSN 5 is gone, but recovery from LSN 3 needs it.
    let a = dir.path().join("a");
    let mut bytes = std::fs::read(&a).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    std::fs::write(&a, &bytes).expect("write");
    let err = open_pair(dir.path(), 3).err().expect("refused");
    assert!(matches!(err, Error::LogCorruption { .. }), "{err}");
    // Recovery from LSN 6 does not need the old segment.
    let (_, rec) = open_pair(dir.path(), 6).expect("opens");
    assert_eq!(lsns(&rec), vec![6, 7, 8]);
}

#[test]
fn an_empty_segment_with_an_old_header_starts_over_at_the_next_lsn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    {
        let (wal, _) = open(&path);
        append_n(&wal, 1..4);
        wal.sync().expect("sync");
    }
    // A truncation cut short after the cut, before the new header: the old header (start 1)
    // over an empty log, and a checkpoint that says the next LSN is 4.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_len(HEADER_LEN))
        .expect("cut");
    {
        let (wal, rec) = read_back(Wal::open(
            Box::new(FileIo::open(&path, true).expect("file")),
            4,
        ))
        .expect("open");
        assert!(rec.records.is_empty());
        append_n(&wal, 4..6);
        wal.sync().expect("sync");
    }
    let (_, rec) = read_back(Wal::open(
        Box::new(FileIo::open(&path, true).expect("file")),
        4,
    ))
    .expect("open");
    assert_eq!(
        lsns(&rec),
        vec![4, 5],
        "records appended after the restart survive"
    );
}

#[test]
fn synced_log_pages_leave_the_page_cache_and_the_page_being_appended_to_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let watch = Watch::default();
    let io = Watched::new(&dir.path().join("wal"), Duration::ZERO, &watch);
    let (wal, _) = Wal::open(Box::new(io), 1).expect("open wal");
    for n in 0..2_000 {
        append_durable(&wal, &payload(n)).expect("append");
    }
    let drops = watch.drops.lock();
    let mut next = 0;
    for &(offset, len, synced) in drops.iter() {
        assert_eq!(offset % OS_PAGE, 0, "whole pages only");
        assert_eq!((offset + len) % OS_PAGE, 0, "whole pages only");
        assert!(offset + len <= synced, "only durable bytes are dropped");
        assert_eq!(offset, next, "each range continues the last one");
        next = offset + len;
    }
    let written = wal.bytes();
    assert!(written > 16 * OS_PAGE, "the test spans many pages");
    assert_eq!(
        next,
        written & !(OS_PAGE - 1),
        "every whole page is dropped, the one still being appended to is not"
    );
}

#[test]
fn a_dropped_segment_is_cut_in_steps_each_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (watch_a, watch_b) = (Watch::default(), Watch::default());
    let (wal, _) = Wal::open_segments(
        [
            Box::new(Watched::new(
                &dir.path().join("a"),
                Duration::ZERO,
                &watch_a,
            )),
            Box::new(Watched::new(
                &dir.path().join("b"),
                Duration::ZERO,
                &watch_b,
            )),
        ],
        1,
    )
    .expect("open");
    let mut lsn = 1;
    while wal.bytes() < 3 * DROP_STEP + 12_345 {
        wal.append(&payload(lsn).repeat(200)).expect("append");
        lsn += 1;
    }
    assert!(wal.rotate(1).expect("rotate"));
    let a_len = std::fs::metadata(dir.path().join("a")).expect("a").len();
    watch_a.cuts.lock().clear();
    assert!(wal.drop_other(lsn).expect("dropped"));
    let cuts = watch_a.cuts.lock().clone();
    let mut expect_len = a_len;
    let mut last_syncs = None;
    for &(len, syncs) in &cuts[..cuts.len() - 1] {
        expect_len -= DROP_STEP;
        assert_eq!(len, expect_len, "one step at a time: {cuts:?}");
        assert!(
            last_syncs.is_none_or(|s| syncs > s),
            "an fsync between steps: {cuts:?}"
        );
        last_syncs = Some(syncs);
    }
    assert_eq!(
        cuts.len(),
        4,
        "three steps, then the cut to the header: {cuts:?}"
    );
    assert_eq!(cuts.last().map(|c| c.0), Some(HEADER_LEN));
    assert_eq!(
        std::fs::metadata(dir.path().join("a")).expect("a").len(),
        HEADER_LEN
    );
}

/// Cuts a file to a little over half its length, as a drop stopped between two steps leaves it
/// (most likely in the middle of a record).
fn cut_mid_record(path: &Path) {
    let len = std::fs::metadata(path).expect("file").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len / 2 + 3))
        .expect("cut");
}

#[test]
fn a_crash_part_way_through_a_drop_recovers_from_the_newer_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    rotated_pair(dir.path(), 41, 45);
    // The checkpoint at 41 finished and its drop of `a` stopped between two steps, mid-record.
    cut_mid_record(&dir.path().join("a"));
    let (wal, rec) = open_pair(dir.path(), 41).expect("reopen");
    assert_eq!(lsns(&rec), (41..45).collect::<Vec<_>>());
    append_n(&wal, 45..47);
    wal.sync().expect("sync");
    drop(wal);
    let (_, rec) = open_pair(dir.path(), 41).expect("reopen");
    assert_eq!(lsns(&rec), (41..47).collect::<Vec<_>>());

    // The same with nothing appended after the rotation: the newer segment is empty, and the
    // cut older one is started over at the checkpoint's LSN.
    let dir = tempfile::tempdir().expect("tempdir");
    rotated_pair(dir.path(), 41, 41);
    cut_mid_record(&dir.path().join("a"));
    let (wal, rec) = open_pair(dir.path(), 41).expect("reopen");
    assert!(
        rec.records.iter().all(|(l, _)| *l < 41),
        "only records the checkpoint covers"
    );
    append_n(&wal, 41..43);
    wal.sync().expect("sync");
    drop(wal);
    let (_, rec) = open_pair(dir.path(), 41).expect("reopen");
    assert_eq!(
        lsns(&rec)
            .into_iter()
            .filter(|l| *l >= 41)
            .collect::<Vec<_>>(),
        vec![41, 42]
    );
}
