//! [`Wal::begin_flush`] and [`Wal::end_flush`]: a flush the caller writes itself.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::io::FileIo;

fn open(path: &std::path::Path) -> (Wal, Vec<(u64, Vec<u8>)>) {
    let io = Box::new(FileIo::open(path, true).expect("open file"));
    let (wal, _) = Wal::open(io, 1).expect("open wal");
    let records = wal.recovered_records().expect("records");
    (wal, records)
}

/// Writes a flush as an asynchronous writer would, through the segment's file.
fn write(wal: &Wal, flush: &Flush) -> Result<()> {
    let io = wal.segment(flush.segment()).expect("segment");
    io.write_at(flush.bytes(), flush.offset())?;
    if flush.durable() {
        io.sync()?;
    }
    Ok(())
}

#[test]
fn a_flush_written_by_the_caller_makes_its_records_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wal");
    let (wal, _) = open(&path);
    assert!(
        wal.begin_flush(true).expect("begin").is_none(),
        "nothing to flush"
    );
    let lsns: Vec<u64> = (0..10u8)
        .map(|i| wal.append(&[i; 40]).expect("append"))
        .collect();
    let flush = wal.begin_flush(true).expect("begin").expect("a flush");
    assert_eq!(flush.covers_below(), lsns[9] + 1);
    // While it is out, no other flush starts, and a thread needing one waits for it.
    assert!(wal.begin_flush(true).expect("begin").is_none());
    let wal = Arc::new(wal);
    let waiter = {
        let (wal, last) = (wal.clone(), lsns[9]);
        std::thread::spawn(move || wal.sync_to(last))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !waiter.is_finished(),
        "sync_to returned before the flush ended"
    );
    assert!(wal.durable_below() <= lsns[0]);
    write(&wal, &flush).expect("write");
    assert_eq!(wal.end_flush(flush, Ok(())).expect("end"), lsns[9] + 1);
    waiter.join().expect("waiter").expect("sync_to");
    // A write-behind flush: written, not durable.
    let more = wal.append(b"more").expect("append");
    let behind = wal.begin_flush(false).expect("begin").expect("a flush");
    assert!(!behind.durable());
    write(&wal, &behind).expect("write");
    assert_eq!(wal.end_flush(behind, Ok(())).expect("end"), lsns[9] + 1);
    wal.sync().expect("sync");
    drop(wal);
    let (_, records) = open(&path);
    let got: Vec<u64> = records.iter().map(|r| r.0).collect();
    let mut want = lsns.clone();
    want.push(more);
    assert_eq!(got, want);
    assert_eq!(records[3].1, vec![3u8; 40]);
}

#[test]
fn a_failed_flush_poisons_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(&dir.path().join("wal"));
    wal.append(b"lost").expect("append");
    let flush = wal.begin_flush(true).expect("begin").expect("a flush");
    let failed = Err(Error::Io {
        path: None,
        source: std::io::Error::other("injected"),
    });
    assert!(wal.end_flush(flush, failed).is_err());
    assert!(matches!(wal.append(b"after"), Err(Error::Poisoned)));
    assert!(matches!(wal.begin_flush(true), Err(Error::Poisoned)));
    assert!(matches!(wal.sync(), Err(Error::Poisoned)));
}
