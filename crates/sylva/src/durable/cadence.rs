//! The [`SyncMode`] cadence: when a write must be made durable, and who waits for the fsync.
//! One implementation, used by [`crate::Db`] (through [`super::Durable`]) and by the peer
//! adapters of `sylva bench` (RocksDB, LMDB, redb, fjall, sled), so every store the benchmark
//! compares syncs on the same schedule.
//!
//! - `Always`: every write is due ([`Due::Write`]); the store makes that write durable before
//!   it returns. Concurrent writers share one fsync where the store can (group commit: the log's
//!   `sync_to`, RocksDB's synced writes, a transaction per group of writers).
//! - `Batch { ops, interval }`: a *boundary* after `ops` writes, or once `interval` has passed
//!   since the last one, checked as writes complete. Exactly one writer is told of each
//!   boundary, and the count and clock restart when it is told, so writes that complete while
//!   its fsync runs count towards the next batch. That writer hands the fsync to the boundary
//!   sync thread if the cadence has one and it is idle, and goes on; the batch is durable once
//!   the thread's fsync returns. If the thread is still busy with the previous boundary, the
//!   writer makes the store durable itself ([`Due::Boundary`]), so at most the batch being
//!   synced and the current one are ever not durable, and a slow disk holds writers back
//!   instead of letting unsynced writes pile up.
//! - `Never`: nothing is due; the store is durable at `sync()` (and whatever else it does).
//!
//! An explicit `sync()` of the store calls [`SyncCadence::synced`], which restarts the count and
//! the clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;

use super::background::Trigger;
use crate::error::Result;
use crate::wal::SyncMode;

/// What a writer that [`SyncCadence::written`] calls back must make durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// `SyncMode::Always`: the write just made (and everything before it). A store whose write
    /// was already synced by the write itself (RocksDB's `sync = true`, LMDB's synced commit)
    /// has nothing more to do.
    Write,
    /// `SyncMode::Batch`: a boundary the boundary sync thread could not take (there is none, or
    /// it is still syncing the previous boundary): everything written so far.
    Boundary,
}

/// The one implementation of the [`SyncMode`] cadence (module docs): counts acknowledged writes
/// and time towards the next durable point, and runs `Batch`'s boundary fsyncs on a thread of
/// its own when it has one. Shared by every writer thread of a store (`Sync`).
pub struct SyncCadence {
    mode: SyncMode,
    /// Writes since the last boundary (or `synced`).
    pending: AtomicU64,
    /// When the last boundary (or `synced`) was, in nanoseconds after `epoch`.
    last_sync_ns: AtomicU64,
    epoch: Instant,
    /// Boundaries and `Always` writes that were due: the durable points the cadence asked for.
    due: AtomicU64,
    /// `Batch`'s boundary sync thread.
    thread: Option<BoundarySync>,
}

impl SyncCadence {
    /// A cadence without a thread: the writer at a boundary makes the store durable itself.
    pub fn new(mode: SyncMode) -> Self {
        SyncCadence {
            mode,
            pending: AtomicU64::new(0),
            last_sync_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            due: AtomicU64::new(0),
            thread: None,
        }
    }

    /// A cadence that, under `SyncMode::Batch`, runs each boundary's `sync` on a thread called
    /// `name` (under the other modes there is no thread and `sync` is dropped). A failed `sync`
    /// is kept and returned by the next [`SyncCadence::written`] that reaches a boundary.
    pub fn with_thread(
        mode: SyncMode,
        name: &str,
        sync: impl Fn() -> Result<()> + Send + 'static,
    ) -> std::io::Result<Self> {
        let mut cadence = Self::new(mode);
        if matches!(mode, SyncMode::Batch { .. }) {
            cadence.thread = Some(BoundarySync::start(name, sync)?);
        }
        Ok(cadence)
    }

    /// The mode this cadence follows.
    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// How many durable points the cadence has asked for: `Always` writes and `Batch`
    /// boundaries (whoever ran their fsync), not counting explicit `sync()` calls.
    pub fn due_count(&self) -> u64 {
        self.due.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records `n` acknowledged writes; `true` if the caller must now make the store durable
    /// (module docs): under `Always` every time, under `Never` never, under `Batch` for exactly
    /// one writer per boundary. For a store that decides a write's durability before making it
    /// (redb's commit); others call [`SyncCadence::written`].
    #[inline]
    pub fn note(&self, n: u64) -> bool {
        let due = match self.mode {
            SyncMode::Never => false,
            SyncMode::Always => true,
            SyncMode::Batch { ops, interval } => self.batch_boundary(n, ops, interval),
        };
        if due {
            self.due.fetch_add(1, Ordering::Relaxed);
        }
        due
    }

    /// `Batch`: whether these `n` writes reach a boundary; the writer told so has claimed it
    /// (the count and clock restart).
    #[inline]
    fn batch_boundary(&self, n: u64, ops: u64, interval: std::time::Duration) -> bool {
        let mut pending = self.pending.load(Ordering::Relaxed);
        loop {
            let total = pending.saturating_add(n);
            if total >= ops {
                // Claimed by the one writer whose exchange succeeds; the others count on.
                match self.pending.compare_exchange_weak(
                    pending,
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.last_sync_ns.store(self.now_ns(), Ordering::Relaxed);
                        return true;
                    }
                    Err(now) => pending = now,
                }
            } else {
                match self.pending.compare_exchange_weak(
                    pending,
                    total,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => pending = now,
                }
            }
        }
        let last = self.last_sync_ns.load(Ordering::Relaxed);
        let now = self.now_ns();
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) < interval_ns
            || self
                .last_sync_ns
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        self.pending.store(0, Ordering::Relaxed);
        true
    }

    /// The cadence's duty after `n` acknowledged writes (module docs): nothing, or a boundary
    /// handed to the thread, or `make_durable` called in this writer with what is due. Returns
    /// `make_durable`'s error, or the error of an earlier boundary fsync of the thread's.
    #[inline]
    pub fn written(&self, n: u64, make_durable: impl FnOnce(Due) -> Result<()>) -> Result<()> {
        if !self.note(n) {
            return Ok(());
        }
        if self.mode == SyncMode::Always {
            return make_durable(Due::Write);
        }
        match &self.thread {
            Some(thread) if thread.hand_over()? => Ok(()),
            _ => make_durable(Due::Boundary),
        }
    }

    /// Records that everything written so far is durable (an explicit `sync()`): the count and
    /// the clock restart.
    pub fn synced(&self) {
        self.pending.store(0, Ordering::Relaxed);
        self.last_sync_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    /// Stops the boundary sync thread after the sync it may be running (dropping the cadence
    /// does the same). Boundaries after this are synced by their writers.
    pub fn stop(&self) {
        if let Some(thread) = &self.thread {
            thread.stop();
        }
    }
}

/// `Batch`'s boundary sync thread: runs the store's sync once per boundary handed over, one at
/// a time, and keeps a failure for the next hand-over.
struct BoundarySync {
    shared: Arc<BoundaryShared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct BoundaryShared {
    trigger: Trigger,
    /// The error of a failed sync, until a hand-over returns it.
    failed: Mutex<Option<crate::Error>>,
}

impl BoundarySync {
    fn start(name: &str, sync: impl Fn() -> Result<()> + Send + 'static) -> std::io::Result<Self> {
        let shared = Arc::new(BoundaryShared {
            trigger: Trigger::default(),
            failed: Mutex::new(None),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                while theirs.trigger.wait() {
                    if let Err(e) = sync() {
                        theirs.failed.lock().get_or_insert(e);
                    }
                    theirs.trigger.done();
                }
            })?;
        Ok(BoundarySync {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Hands a boundary's sync to the thread: `Ok(true)` if it took it, `Ok(false)` if it is
    /// still busy with the previous one, or the error of an earlier sync.
    fn hand_over(&self) -> Result<bool> {
        if let Some(e) = self.shared.failed.lock().take() {
            return Err(e);
        }
        Ok(self.shared.trigger.request())
    }

    fn stop(&self) {
        self.shared.trigger.stop();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for BoundarySync {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn batch(ops: u64) -> SyncMode {
        SyncMode::Batch {
            ops,
            interval: Duration::from_secs(3600),
        }
    }

    #[test]
    fn one_writer_per_boundary_and_writes_during_its_sync_count_towards_the_next() {
        let c = SyncCadence::new(batch(3));
        assert!(!c.note(1));
        assert!(!c.note(1));
        assert!(c.note(1), "the third write reaches the boundary");
        assert!(!c.note(1), "the next write starts the next batch");
        assert!(!c.note(1));
        assert!(c.note(1), "three writes after the boundary: the next one");
        assert!(c.note(7), "a group reaching the boundary is due once");
        assert!(!c.note(2));
        c.synced();
        assert!(!c.note(2), "sync() restarts the count");
        assert_eq!(c.due_count(), 3);
    }

    #[test]
    fn concurrent_writers_reach_each_boundary_once() {
        let c = SyncCadence::new(batch(10));
        let told = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..2500 {
                        if c.note(1) {
                            told.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(told.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn the_interval_is_a_boundary_and_always_and_never_are_what_they_say() {
        let c = SyncCadence::new(SyncMode::Batch {
            ops: u64::MAX,
            interval: Duration::ZERO,
        });
        assert!(c.note(1));
        assert!(!SyncCadence::new(SyncMode::Never).note(1_000_000));
        let always = SyncCadence::new(SyncMode::Always);
        let mut seen = None;
        always
            .written(1, |due| {
                seen = Some(due);
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, Some(Due::Write));
    }

    /// The thread takes a boundary when idle; a writer reaching the next boundary while it runs
    /// syncs itself; the thread takes the next once the first returned; a failed sync surfaces
    /// at the next hand-over.
    #[test]
    fn the_boundary_sync_thread_takes_one_sync_at_a_time_and_reports_a_failure() {
        let (release, held) = mpsc::channel::<Result<()>>();
        let (started_tx, started) = mpsc::channel::<()>();
        let held = Mutex::new(held);
        let c = SyncCadence::with_thread(batch(1), "test-boundary-sync", move || {
            started_tx.send(()).unwrap();
            held.lock().recv().unwrap()
        })
        .unwrap();
        let inline = AtomicU64::new(0);
        let write = |c: &SyncCadence| {
            c.written(1, |due| {
                assert_eq!(due, Due::Boundary);
                inline.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        };
        let inline = || inline.load(Ordering::Relaxed);
        write(&c).unwrap();
        started.recv().unwrap();
        assert_eq!(inline(), 0, "an idle thread takes the sync");
        write(&c).unwrap();
        assert_eq!(
            inline(),
            1,
            "while it runs, the next boundary's writer syncs itself"
        );
        release.send(Ok(())).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let before = inline();
            write(&c).unwrap();
            if inline() == before {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the thread never took a sync again"
            );
            std::thread::yield_now();
        }
        started.recv().unwrap();
        release
            .send(Err(crate::Error::io_at(
                std::path::Path::new("<test>"),
                std::io::Error::other("injected"),
            )))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match write(&c) {
                Err(e) => break e,
                Ok(()) => {
                    assert!(Instant::now() < deadline, "the failure never surfaced");
                    std::thread::yield_now();
                }
            }
        };
        assert!(err.to_string().contains("injected"), "{err}");
        c.stop();
    }
}
