//! `SyncMode::Batch`: the fsync at a batch boundary runs on the log sync thread, so the writer
//! that reaches the boundary returns without waiting for it; the batch is durable once that
//! fsync completes; a writer reaching the next boundary while it still runs waits for it; and a
//! failed background fsync poisons the database.
//!
//! The log's files are `MemIo`s behind a gate that can hold every `sync` until the test opens
//! it, and that counts completed syncs.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sylva::io::{Fault, FaultyIo, Io, MemIo};
use sylva::{Db, DbOptions, Error, Result, SyncMode};

#[derive(Default)]
struct GateState {
    closed: bool,
    /// Syncs waiting at the closed gate.
    waiting: usize,
    /// Syncs that returned.
    done: usize,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    fn close(&self) {
        self.state.lock().closed = true;
    }
    fn open(&self) {
        self.state.lock().closed = false;
        self.cv.notify_all();
    }
    fn done(&self) -> usize {
        self.state.lock().done
    }
    /// Waits until `pred` holds (or panics after 10 s).
    fn wait_until(&self, pred: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut st = self.state.lock();
        while !pred(&st) {
            assert!(Instant::now() < deadline, "timed out waiting at the gate");
            self.cv.wait_for(&mut st, Duration::from_millis(10));
        }
    }
}

/// A log file whose syncs pass through `gate`.
struct Gated<I> {
    inner: I,
    gate: Arc<Gate>,
}

impl<I: Io> Io for Gated<I> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        {
            let mut st = self.gate.state.lock();
            st.waiting += 1;
            self.gate.cv.notify_all();
            while st.closed {
                self.gate.cv.wait(&mut st);
            }
            st.waiting -= 1;
        }
        let r = self.inner.sync();
        self.gate.state.lock().done += 1;
        self.gate.cv.notify_all();
        r
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

fn batch(ops: u64) -> DbOptions {
    DbOptions {
        sync: SyncMode::Batch {
            ops,
            interval: Duration::from_secs(3600),
        },
        ..DbOptions::default()
    }
}

fn open_gated(options: DbOptions) -> (Db, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let log = || -> Box<dyn Io> {
        Box::new(Gated {
            inner: MemIo::new(Vec::new()),
            gate: gate.clone(),
        })
    };
    let db = Db::open_io(Box::new(MemIo::new(Vec::new())), [log(), log()], options).expect("open");
    (db, gate)
}

/// A thread that puts the keys `keys` (big-endian) into `db`.
fn spawn_puts(db: &Arc<Db>, keys: std::ops::Range<u32>) -> std::thread::JoinHandle<()> {
    let db = db.clone();
    std::thread::spawn(move || {
        for i in keys {
            db.put(&i.to_be_bytes(), b"v").expect("put");
        }
    })
}

/// Closes a database shared with threads that have ended.
fn close_shared(db: Arc<Db>) {
    Arc::into_inner(db)
        .expect("one owner")
        .close()
        .expect("close");
}

#[test]
fn the_writer_at_a_batch_boundary_does_not_wait_for_the_fsync() {
    let (db, gate) = open_gated(batch(10));
    gate.close();
    let synced_before = gate.done();
    // The tenth put reaches the boundary and hands the fsync to the log sync thread, which
    // blocks at the gate; the puts after it, within the next batch, go on all the same.
    let db = Arc::new(db);
    let writer = spawn_puts(&db, 0..15);
    gate.wait_until(|st| st.waiting == 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !writer.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let finished = writer.is_finished();
    assert_eq!(
        gate.done(),
        synced_before,
        "nothing synced while the gate is closed"
    );
    gate.open();
    writer.join().expect("writer");
    assert!(finished, "the writer waited for the boundary's fsync");
    gate.wait_until(|st| st.done > synced_before && st.waiting == 0);
    close_shared(db);
}

#[test]
fn a_writer_reaching_the_next_boundary_while_the_sync_runs_waits_for_it() {
    let (db, gate) = open_gated(batch(5));
    gate.close();
    for i in 0..5u32 {
        db.put(&i.to_be_bytes(), b"v").expect("put");
    }
    gate.wait_until(|st| st.waiting == 1);
    // The next boundary finds the first sync still running: this writer syncs itself (after
    // the running fsync, group commit), so it cannot finish until the test opens the gate.
    let synced_before = gate.done();
    let db = Arc::new(db);
    let writer = spawn_puts(&db, 5..10);
    // A writer that did not wait would finish its five puts in microseconds.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !writer.is_finished(),
        "the writer went past a second unsynced batch"
    );
    gate.open();
    writer.join().expect("writer");
    assert!(
        gate.done() >= synced_before + 2,
        "the held sync and the writer's own"
    );
    close_shared(db);
}

#[test]
fn a_failed_background_fsync_poisons_the_database() {
    let (fault, handle) = FaultyIo::new(MemIo::new(Vec::new()));
    let db = Db::open_io(
        Box::new(MemIo::new(Vec::new())),
        [Box::new(fault), Box::new(MemIo::new(Vec::new()))],
        batch(4),
    )
    .expect("open");
    handle.arm(Fault::FailSync);
    // The boundary's fsync fails on the log sync thread; later calls see the poison.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut i = 0u32;
    let err = loop {
        match db.put(&i.to_be_bytes(), b"v") {
            Ok(()) => {
                assert!(Instant::now() < deadline, "the failed fsync never surfaced");
                i += 1;
                if handle.pending() > 0 {
                    continue;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => break e,
        }
    };
    // `Poisoned` when the log sync thread hit the fault; the fault itself when a writer that
    // found that thread busy ran the sync.
    assert!(matches!(err, Error::Poisoned | Error::Io { .. }), "{err:?}");
    assert!(matches!(db.sync(), Err(Error::Poisoned)));
    assert!(db.close().is_err());
}
