#![allow(clippy::unwrap_used)]

use super::*;
use crate::io::MemIo;
use crate::wal::SyncMode;

fn options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Never,
        cache_bytes: 1 << 20,
        ..DbOptions::default()
    }
}

/// A crash inside `write` leaves the batch's log record and a prefix of its page records;
/// recovery applies the whole batch again.
#[test]
fn a_batch_cut_short_is_applied_again_from_its_log_record() {
    let db = Db::open_io(
        Box::new(MemIo::default()),
        [Box::new(MemIo::default()), Box::new(MemIo::default())],
        options(),
    )
    .unwrap();
    db.put(b"a", b"old").unwrap();
    db.put(b"gone", b"x").unwrap();
    let store = &db.tree().store;
    let mut buf = Vec::new();
    let ops: Vec<log::BatchEntry> = vec![(b"a", Some(b"new")), (b"b", Some(b"1")), (b"gone", None)];
    log::batch(&mut buf, ops.into_iter());
    store.append_record(&buf).unwrap();
    db.tree().put(b"a", b"new").unwrap();
    store.wal.sync().unwrap();
    // The state a crash would leave: the page file as of the last checkpoint, the log as
    // synced.
    let pages = MemIo::new(store.pool.file().io_contents());
    let wal = store
        .wal
        .io_contents()
        .map(|bytes| Box::new(MemIo::new(bytes)) as Box<dyn Io>);
    db.simulate_crash();

    let db = Db::open_io(Box::new(pages), wal, options()).unwrap();
    assert!(db.recovery().batch_reapplied, "{:?}", db.recovery());
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert_eq!(db.check().unwrap().records, 2);
}

/// A value put before a checkpoint began and freed before that checkpoint's flush wrote it:
/// the checkpoint's state may point at its run (the leaf before the change that freed it), and
/// the record that freed it may be lost in a crash, so the flush must still write it
/// (`runcache`, "Freed before written"). Here the checkpoint's begin is reproduced by hand (its
/// LSN recorded, as `begin_checkpoint` does) between the put and the overwrite.
#[test]
fn a_value_freed_after_a_checkpoint_began_is_still_written_by_it() {
    let db = Db::open_io(
        Box::new(MemIo::default()),
        [Box::new(MemIo::default()), Box::new(MemIo::default())],
        options(),
    )
    .unwrap();
    let store = &db.tree().store;
    db.put(b"k", &[1u8; 3000]).unwrap();
    db.put(b"fresh", &[2u8; 3000]).unwrap();
    store
        .checkpoint_lsn
        .store(store.wal.next_lsn(), std::sync::atomic::Ordering::Release);
    // Put after that begin, then freed: not needed in the file (a filler, `runcache`,
    // "Holes": written below only because its run lies between fresh's and k's new one).
    db.put(b"later", &[3u8; 3000]).unwrap();
    db.delete(b"later").unwrap();
    // Put before it, then freed: written by the flush, then dropped.
    db.put(b"k", &[4u8; 3000]).unwrap();
    let s = store.runs.stats();
    assert_eq!(
        s.values, 4,
        "k's old value and later's stay, marked freed: {s:?}"
    );
    // The last one, freed: a filler with no dirty run after it, never written.
    db.put(b"last", &[5u8; 3000]).unwrap();
    db.delete(b"last").unwrap();
    db.checkpoint().unwrap();
    let s = store.runs.stats();
    assert_eq!(
        s.runs_written, 4,
        "k's old and new values, fresh's, and later's between them; not last's: {s:?}"
    );
    assert_eq!(s.writes, 1, "the four runs follow one another: {s:?}");
    assert_eq!(s.values, 2, "the freed values left: {s:?}");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&[4u8; 3000][..]));
    assert_eq!(db.check().unwrap().records, 2);
}
