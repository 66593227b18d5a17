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
