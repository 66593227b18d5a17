//! [`PaDb`]: a [`Db`] whose point operations run on one worker thread that keeps many of them
//! in flight (the PA-Tree mode of `../shared/seeds/pa-tree.txt`, issue 20; the execution layer
//! is [`crate::exec`]).
//!
//! # How an operation runs
//!
//! `get`, `put` and `delete` are queued to an [`Executor`] as a [`PaTask`] from any thread. The
//! worker runs each as one optimistic attempt of the tree's own code (`BTree::get_attempt`,
//! `put_attempt`, `delete_attempt`: no tree logic is copied) with its thread marked
//! [`nonblocking`](crate::sync::nonblocking), so a read latch on a page not in memory ends the
//! attempt with a miss instead of a read, every latch released. The worker starts the page's
//! read through its backend (io_uring, or [`crate::exec::Inline`]), runs other operations, and
//! runs the missed one again once the page is in. A get's next attempt resumes its descent at
//! the parent of the page it missed (`BTree::get_attempt_from`), if that parent is still at the
//! version its child was read at, rather than from the root: nearly half a get's attempts
//! are such second descents; puts and deletes resume the same way. A write takes the write
//! gate per attempt without waiting ([`crate::btree::NodeStore::try_write_gate`]): while a
//! checkpoint or a write batch holds it, the attempt waits as a held task
//! ([`crate::exec::worker::Step::Held`]) rather than stalling the worker.
//!
//! **Write batches** run on the worker as a [`batch::BatchTask`]: it brings its leaves in with
//! the gate open, then closes the gate without waiting, logs the batch and applies it, as
//! `Db::write` does (the module's docs).
//!
//! **Scans and range maps** run on the worker too, as a [`WalkTask`]: each attempt copies the
//! records of whole leaves, one leaf at a time ([`crate::btree::BTree::walk_leaf`], the tree's
//! own walk), and stops at a leaf not in memory with the records gathered so far kept; once the
//! page is in, the walk goes on from its cursor (the last leaf's parent, while unchanged). A
//! chunk of leaves (about [`WALK_CHUNK_BYTES`](walk::WALK_CHUNK_BYTES)) goes back to the caller, which shows its
//! records, resolving out-of-line values and expanding buckets as `Db`'s walks do
//! ([`Db::walk_by`]), and submits the next chunk if its visitor wants more. So a long range map
//! holds a chunk in memory, not the range, and lets the worker run other operations between
//! its chunks; [`PaDb::submit_scan`] and [`PaSession::submit_scan`] gather every chunk.
//!
//! **Durability** under `sync=always`: a [`PaSession`] holds its finished writes until a flush
//! of the log that it submitted through its ring (the write and an `fdatasync`, linked) covers
//! them, many writes per flush. The shared worker hands a write back once applied and logged,
//! and the caller makes it durable as `Db` does (its group commit, the `fsync` shared with
//! concurrent writers); with `flush=worker` ([`PaOptions::worker_flush`]) the worker does,
//! by a flush of its own ([`shared`]), and so for a sync ([`PaDb::submit_sync`]) in any mode.
//! The caller's group commit was measured faster (`docs/results/patree.md`, session 44).
//!
//! What must not run on the worker runs on the calling thread, as `Db` runs it:
//!
//! - **out-of-line values** (larger than fit a leaf): written, and read back from their runs,
//!   by the caller;
//! - **checks and checkpoints**, and write batches with keys in buckets or values out of
//!   line: through the [`Db`] ([`PaDb::db`]), as single writes of those keys and values.
//!
//! Anything on the worker that could wait for a page would wait for a read only the worker
//! completes; so the parts of an operation that cannot stop half-way do not wait there: a
//! merge after a delete gives up at a miss (merges are best-effort), an adaptive layout update
//! skips while the gate is closed, and `retry`, which is never called there, reports a miss
//! as an error.
//!
//! # Sessions
//!
//! [`PaDb::session`] gives a thread its own worker loop and backend ([`PaSession`]): it submits
//! many operations under tags and takes their results as they finish, the loop running on that
//! thread while it waits (the paper's polled mode, where one thread both issues operations and
//! drives their I/O; no thread is woken per operation). Single calls (`get`, `put`, ...) from any
//! thread go to the shared worker thread instead.
//!
//! A loaded page is pinned until its waiters ran, and making room for a load or a split's
//! allocation hands dirty victims to the worker, which writes them through its ring: see
//! [`crate::exec::worker`]. The paper's synchronous baselines are [`crate::exec::RingVfs`].

use std::path::Path;
use std::sync::Arc;

use super::overflow::{self, Form};
use super::{Db, DbOptions, WriteBatch};
use crate::btree::{take_missed_at, ChildPos, Deleted, NodeStore};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::exec::sched::{LatencyModel, PriorityPolicy, ProbePolicy};
use crate::exec::worker::{Context, Step, Task, WorkerCounters, WorkerOptions};
use crate::exec::{BackendKind, BlockingMode, Executor};
use crate::io::Vfs;
use crate::kv::{KvStore, Limits, Stats, Visitor};
use crate::sync::{Abort, Olc};
use crate::wal::parse_number;

mod batch;
mod op;
mod session;
mod shared;
mod walk;
use batch::BatchTask;
pub use op::PaOp;
use op::{finish_delete, finish_get, finish_put, finish_scan, finish_sync, finish_write, Next};
pub use session::PaSession;
use shared::SharedTask;
pub(super) use walk::walked;
pub(crate) use walk::WalkTask;

impl Context for Db {
    fn pool(&self) -> &BufferPool {
        &self.tree().store.pool
    }

    /// The log's segments, for the workers' log flushes (by the segment's number).
    fn files(&self) -> Vec<Arc<dyn crate::io::Io>> {
        let wal = &self.tree().store.wal;
        (0..2).map_while(|i| wal.segment(i)).collect()
    }
}

/// Options of a [`PaDb`]: the database's, and how its worker runs.
#[derive(Debug, Clone)]
pub struct PaOptions {
    /// The database's options (`sync` is the persistence: `always` strong, `batch` weak,
    /// `never` none).
    pub db: DbOptions,
    /// The worker's backend.
    pub backend: BackendKind,
    /// Operations in flight, probing, priority and yielding.
    pub worker: WorkerOptions,
    /// `None`: the PA-Tree mode itself; otherwise one of the paper's synchronous baselines
    /// (V-A), which is `Db` opened through `exec::RingVfs`, not a `PaDb`.
    pub baseline: Option<BlockingMode>,
    /// Who makes the shared worker's writes under `sync=always`, and its syncs, durable:
    /// `false` (`flush=caller`, the default) the caller's group commit as its operation
    /// finishes; `true` (`flush=worker`) a log flush the worker submits through its ring
    /// (the `db::pa::shared` module), so that waiting for such an operation never waits for an `fsync` on the
    /// caller's thread (measured slower: `docs/results/patree.md`, session 44).
    pub worker_flush: bool,
}

impl Default for PaOptions {
    fn default() -> Self {
        PaOptions {
            db: DbOptions::default(),
            backend: BackendKind::Auto,
            worker: WorkerOptions::default(),
            baseline: None,
            worker_flush: false,
        }
    }
}

/// The option keys [`PaOptions::set`] takes besides `Db`'s ([`crate::DB_OPTION_KEYS`]).
pub const PA_OPTION_KEYS: [&str; 8] = [
    "inflight", "probe", "yield", "priority", "persist", "backend", "mode", "flush",
];

impl PaOptions {
    /// Sets one option from its string form: `inflight=1..4096`, `probe=every|avg|fixed:US|
    /// model:FILE`, `yield=on|off`, `priority=holders|fifo`, `persist=strong|weak|none` (the
    /// same as `sync=always|batch|never`), `backend=auto|uring|inline`,
    /// `mode=async|dedicated|shared` (the PA-Tree mode, or one of the paper's synchronous
    /// baselines), or any of `Db`'s.
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        match key {
            "inflight" => {
                let n = parse_number(key, value)?;
                if n == 0 || n > 4096 {
                    return Err(format!("inflight {n} is not in 1..=4096"));
                }
                self.worker.inflight = n as usize;
            }
            "probe" => self.worker.probe = parse_probe(value)?,
            "yield" => {
                self.worker.yield_for = match value {
                    "on" => Some(std::time::Duration::from_micros(100)),
                    "off" => None,
                    _ => return Err(format!("yield '{value}' is not on or off")),
                }
            }
            "priority" => {
                self.worker.priority = PriorityPolicy::parse(value).map_err(|e| e.to_string())?
            }
            "persist" => {
                let sync = match value {
                    "strong" => "always",
                    "weak" => "batch",
                    "none" => "never",
                    _ => return Err(format!("persist '{value}' is not strong, weak or none")),
                };
                self.db.set("sync", sync)?;
            }
            "backend" => self.backend = BackendKind::parse(value).map_err(|e| e.to_string())?,
            "flush" => {
                self.worker_flush = match value {
                    "caller" => false,
                    "worker" => true,
                    _ => return Err(format!("flush '{value}' is not caller or worker")),
                }
            }
            "mode" => {
                self.baseline = match value {
                    "async" => None,
                    "dedicated" => Some(BlockingMode::Dedicated),
                    "shared" => Some(BlockingMode::Shared),
                    _ => return Err(format!("mode '{value}' is not async, dedicated or shared")),
                }
            }
            _ => self.db.set(key, value).map_err(|e| {
                format!("{e}; the PA-Tree mode's own: {}", PA_OPTION_KEYS.join(", "))
            })?,
        }
        Ok(())
    }
}

/// Parses a probe policy: `every`, `avg`, `fixed:US` or `model:FILE` (a file `sylva
/// calibrate` wrote).
pub fn parse_probe(value: &str) -> std::result::Result<ProbePolicy, String> {
    let (name, arg) = value.split_once(':').unwrap_or((value, ""));
    match (name, arg) {
        ("every", "") => Ok(ProbePolicy::Every),
        ("avg", "") => Ok(ProbePolicy::Avg),
        ("fixed", us) if !us.is_empty() => {
            let us = parse_number("probe=fixed", us)?;
            Ok(ProbePolicy::Fixed(std::time::Duration::from_micros(us)))
        }
        ("model", file) if !file.is_empty() => {
            let path = Path::new(file);
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("probe model {}: {e}", path.display()))?;
            LatencyModel::parse(&text, path)
                .map(ProbePolicy::Model)
                .map_err(|e| e.to_string())
        }
        _ => Err(format!(
            "probe '{value}' is not every, avg, fixed:MICROSECONDS or model:FILE"
        )),
    }
}

/// One point operation as the worker runs it.
pub(crate) enum PaTask {
    /// Look a key up; the stored form of its value lands in `out`. `at`: where its last
    /// attempt's descent stopped at a page not in memory, for the next to resume there.
    Get {
        key: Vec<u8>,
        out: Vec<u8>,
        at: Option<ChildPos>,
    },
    /// Put `stored` (the value in its stored form, [`Form::AsIs`] or [`Form::Escaped`]); `at`
    /// as for a get.
    Put {
        key: Vec<u8>,
        stored: Vec<u8>,
        at: Option<ChildPos>,
    },
    /// Delete a key.
    Delete { key: Vec<u8>, at: Option<ChildPos> },
    /// A chunk of a walk (scan or range map).
    Walk(Box<WalkTask>),
    /// A write batch.
    Write(Box<BatchTask>),
    /// Make every write logged so far durable.
    Sync,
}

/// What a [`PaTask`] came to.
pub(crate) enum PaOutput {
    /// The key, and the stored form of its value if it was there.
    Got(Vec<u8>, Option<Vec<u8>>),
    /// The LSN of the put's last record.
    Put(u64),
    /// Whether the key was there, and the LSN of the delete's last record.
    Deleted(bool, u64),
    /// A walk's chunk, gathered.
    Walked(Box<WalkTask>),
    /// A write batch's operations, and the LSN of its last record.
    Wrote(u64, u64),
    /// A sync: the LSN of the last record logged when it ran.
    Synced(u64),
}

/// One attempt's outcome as the worker's step.
fn step<T, O>(r: Olc<T>, done: impl FnOnce(T) -> Result<O>) -> Result<Step<O>> {
    match r {
        Ok(t) => done(t).map(Step::Done),
        Err(Abort::Restart) => Ok(Step::Restart),
        Err(Abort::Miss(page)) => Ok(Step::Miss(page)),
        Err(Abort::Fail(e)) => Err(e),
    }
}

impl Task for PaTask {
    type Output = PaOutput;
    type Ctx = Db;

    fn attempt(&mut self, db: &Db) -> Result<Step<PaOutput>> {
        let tree = db.tree();
        match self {
            PaTask::Get { key, out, at } => {
                // Only this attempt's own descent may leave the place it missed at (another
                // key's would lead elsewhere): cleared before, taken after.
                take_missed_at();
                let r = tree.get_attempt_from(key, out, at.take());
                *at = take_missed_at();
                step(r, |(found, seen)| {
                    tree.adapt_after_point_read(seen)?;
                    let value = found.then(|| std::mem::take(out));
                    Ok(PaOutput::Got(std::mem::take(key), value))
                })
            }
            PaTask::Put { key, stored, at } => {
                let Some(_gate) = tree.store.try_write_gate() else {
                    return Ok(Step::Held);
                };
                take_missed_at();
                let r = tree.put_attempt_from(key, stored, at.take());
                *at = take_missed_at();
                step(r, |lsn| Ok(PaOutput::Put(lsn)))
            }
            PaTask::Delete { key, at } => {
                let Some(_gate) = tree.store.try_write_gate() else {
                    return Ok(Step::Held);
                };
                take_missed_at();
                let r = tree.delete_attempt_from(key, at.take());
                *at = take_missed_at();
                step(r, |done: Deleted| {
                    let (found, lsn) = tree.delete_finish(key, done)?;
                    Ok(PaOutput::Deleted(found, lsn))
                })
            }
            PaTask::Walk(w) => {
                let step = w.attempt(db)?;
                Ok(step.map(|()| PaOutput::Walked(std::mem::take(w))))
            }
            PaTask::Write(b) => b.attempt(db),
            PaTask::Sync => {
                db.check_open()?;
                let logged = db.tree().store.wal.next_lsn().saturating_sub(1);
                Ok(Step::Done(PaOutput::Synced(logged)))
            }
        }
    }
}

/// A durable database whose point operations one worker thread runs, many at a time (module
/// docs). Share it between threads by reference; every method may be called concurrently.
pub struct PaDb {
    // Declared first: dropped (its thread stopped) before the database.
    exec: Executor<SharedTask>,
    db: Arc<Db>,
    options: PaOptions,
    /// What the sessions' workers did, added as each session ends (for [`KvStore::stats`]).
    sessions: parking_lot::Mutex<SessionTotals>,
}

/// The sessions' workers' counters and log flushes, summed over ended sessions.
#[derive(Default)]
struct SessionTotals {
    worker: WorkerCounters,
    log_flushes: u64,
}

impl PaDb {
    /// Opens (or creates) the database in `dir` as [`Db::open`] does, and starts its worker.
    pub fn open(dir: impl AsRef<Path>, options: PaOptions) -> Result<PaDb> {
        Self::over(Db::open(dir, options.db)?, options)
    }

    /// [`PaDb::open`] on the file system `vfs` (a simulated one in crash tests).
    pub fn open_in(vfs: &dyn Vfs, dir: &Path, options: PaOptions) -> Result<PaDb> {
        Self::over(Db::open_in(vfs, dir, options.db)?, options)
    }

    /// The PA-Tree mode over an open database. Options naming a baseline (`mode=dedicated` or
    /// `shared`) are refused: a baseline is a `Db` opened through
    /// `exec::RingVfs` (as `sylva bench`'s `patree` engine opens it).
    pub fn over(db: Db, options: PaOptions) -> Result<PaDb> {
        if let Some(mode) = options.baseline {
            return Err(Error::InvalidArgument {
                what: format!(
                    "mode {mode:?} for a PaDb (a baseline is a Db opened through exec::RingVfs)"
                ),
                limit: 0,
            });
        }
        let db = Arc::new(db);
        let exec = Executor::start(db.clone(), options.backend, options.worker.clone())?;
        Ok(PaDb {
            exec,
            db,
            options,
            sessions: parking_lot::Mutex::default(),
        })
    }

    /// The database under the worker: for write batches, checkpoints and checks (which run on
    /// the calling thread).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The options in force.
    pub fn options(&self) -> &PaOptions {
        &self.options
    }

    fn ready<T>(
        &self,
        r: Result<T>,
        finish: fn(&PaDb, Result<PaOutput>) -> Next<T>,
    ) -> PaOp<'_, T> {
        PaOp {
            db: self,
            op: None,
            ready: Some(r),
            finish,
        }
    }

    fn queued<T>(
        &self,
        task: PaTask,
        finish: fn(&PaDb, Result<PaOutput>) -> Next<T>,
    ) -> PaOp<'_, T> {
        PaOp {
            db: self,
            op: Some(
                self.exec
                    .submit(SharedTask::new(task, self.options.worker_flush)),
            ),
            ready: None,
            finish,
        }
    }

    /// Submits a lookup of `key`.
    pub fn submit_get(&self, key: &[u8]) -> PaOp<'_, Option<Vec<u8>>> {
        if let Err(e) = self
            .db
            .check_open()
            .and_then(|()| self.db.limits().check_key(key))
        {
            return self.ready(Err(e), finish_get);
        }
        // A key in a bucket is read on the calling thread ([`super::buckets`]).
        if self.db.bucket_of(key).is_some() {
            return self.ready(self.db.get(key), finish_get);
        }
        let task = PaTask::Get {
            key: key.to_vec(),
            out: Vec::new(),
            at: None,
        };
        self.queued(task, finish_get)
    }

    /// Submits a put of `key` with `value`.
    pub fn submit_put(&self, key: &[u8], value: &[u8]) -> PaOp<'_, ()> {
        match self.put_task(key, value) {
            Ok(Some(task)) => self.queued(task, finish_put),
            Ok(None) => self.ready(Ok(()), finish_put),
            Err(e) => self.ready(Err(e), finish_put),
        }
    }

    /// The task of a put, or `None` for a value stored out of line or a key in a bucket, which
    /// this writes on the calling thread ([`Db::put`]: the run's write is not the worker's).
    fn put_task(&self, key: &[u8], value: &[u8]) -> Result<Option<PaTask>> {
        let db = &self.db;
        db.check_open()?;
        let limits = db.limits();
        limits.check_key(key)?;
        limits.check_value(value)?;
        if db.bucket_of(key).is_some() {
            return db.put(key, value).map(|()| None);
        }
        let Some(stored) = stored_in_leaf(db, key, value)? else {
            return db.put(key, value).map(|()| None);
        };
        Ok(Some(PaTask::Put {
            key: key.to_vec(),
            stored,
            at: None,
        }))
    }

    /// A session: many operations of the calling thread in flight, run by a worker loop of
    /// the session's own on that thread ([`PaSession`]); an error if its backend cannot be set
    /// up (an io_uring ring the kernel refuses, with `backend=uring`).
    pub fn session(&self) -> Result<PaSession<'_>> {
        PaSession::new(self)
    }

    /// Submits a delete of `key`.
    pub fn submit_delete(&self, key: &[u8]) -> PaOp<'_, bool> {
        if let Err(e) = self
            .db
            .check_open()
            .and_then(|()| self.db.limits().check_key(key))
        {
            return self.ready(Err(e), finish_delete);
        }
        if self.db.bucket_of(key).is_some() {
            return self.ready(self.db.delete(key), finish_delete);
        }
        let task = PaTask::Delete {
            key: key.to_vec(),
            at: None,
        };
        self.queued(task, finish_delete)
    }

    /// Submits a write batch: its puts and deletes applied all or nothing across a crash, as
    /// [`Db::write`] applies them, by the worker (the module docs); a batch with a key in a
    /// bucket or a value stored out of line runs through [`Db::write`] on this thread.
    pub fn submit_write(&self, batch: &WriteBatch) -> PaOp<'_, ()> {
        match self.batch_task(batch) {
            Ok(Some(task)) => self.queued(task, finish_write),
            Ok(None) => self.ready(Ok(()), finish_write),
            Err(e) => self.ready(Err(e), finish_write),
        }
    }

    /// The task of a write batch, or `None` for one done already: empty, or written on the
    /// calling thread (keys in buckets, values out of line).
    fn batch_task(&self, batch: &WriteBatch) -> Result<Option<PaTask>> {
        self.db.check_batch(batch)?;
        if batch.is_empty() {
            return Ok(None);
        }
        match BatchTask::new(&self.db, batch)? {
            Some(task) => Ok(Some(task.into())),
            None => self.db.write(batch).map(|()| None),
        }
    }

    /// Applies a write batch all or nothing across a crash ([`PaDb::submit_write`]).
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.submit_write(batch).wait()
    }

    /// Submits a scan: up to `limit` records in key order from the first key `>= start`, with
    /// their values as [`PaDb::get`] gives them. The worker gathers whole leaves, a chunk at a
    /// time (about 256 KiB of records); [`PaOp::wait`] submits the chunks after the first.
    pub fn submit_scan(&self, start: &[u8], limit: usize) -> PaOp<'_, Vec<KeyValue>> {
        self.submit_walk(start, None, limit)
    }

    /// Submits a range map: every record with a key in `[start, end)`, as
    /// [`PaDb::submit_scan`] gathers them.
    pub fn submit_range(&self, start: &[u8], end: &[u8]) -> PaOp<'_, Vec<KeyValue>> {
        self.submit_walk(start, Some(end), usize::MAX)
    }

    fn submit_walk(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> PaOp<'_, Vec<KeyValue>> {
        if let Err(e) = self.db.check_open() {
            return self.ready(Err(e), finish_scan);
        }
        match WalkTask::collecting(&self.db, start, end, limit) {
            Some(w) => self.queued(PaTask::Walk(w), finish_scan),
            None => self.ready(Ok(Vec::new()), finish_scan),
        }
    }

    /// A scan or range map whose tree walk runs on the worker, a chunk at a time, each chunk's
    /// records shown on this thread as it arrives.
    fn walk(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> Result<usize> {
        self.db
            .walk_by(start, end, limit, visitor, &mut |s, e, l, each| {
                let (mut w, mut n) = (WalkTask::new(s, e, l), 0);
                loop {
                    w = walked(&self.db, self.exec.submit(PaTask::Walk(w).into()).wait())?;
                    let (shown, more) = w.show(each);
                    n += shown;
                    if !more {
                        return Ok(n);
                    }
                }
            })
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.submit_get(key).wait()
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.submit_put(key, value).wait()
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.submit_delete(key).wait()
    }

    /// Submits a sync: done once every write logged before it ran is durable, by a log
    /// flush the worker submits through its ring (or one in flight that covers them).
    pub fn submit_sync(&self) -> PaOp<'_, ()> {
        self.queued(PaTask::Sync, finish_sync)
    }

    /// Makes every write so far durable ([`PaDb::submit_sync`]).
    pub fn sync(&self) -> Result<()> {
        self.submit_sync().wait()
    }

    /// Stops the worker, then closes the database (a quiet checkpoint); returns what the
    /// worker did.
    pub fn close(self) -> Result<WorkerCounters> {
        let PaDb { exec, db, .. } = self;
        let counters = exec.shutdown();
        match Arc::try_unwrap(db) {
            Ok(db) => db.close()?,
            Err(_) => {
                return Err(Error::InvalidArgument {
                    what: "closing a PaDb whose worker still holds the database".into(),
                    limit: 0,
                })
            }
        }
        counters
    }
}

impl PaDb {
    /// Stops the worker and drops the database as a crash would ([`Db::simulate_crash`]).
    pub fn simulate_crash(self) {
        let PaDb { exec, db, .. } = self;
        let _ = exec.shutdown();
        if let Ok(db) = Arc::try_unwrap(db) {
            db.simulate_crash();
        }
    }
}

/// What a finished operation gives its caller ([`PaSession::wait_any`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaResult {
    /// A lookup: the value, if the key was there.
    Got(Option<Vec<u8>>),
    /// A put, done (and durable as the sync mode says).
    Put,
    /// A delete: whether the key was there.
    Deleted(bool),
    /// A scan or range map: the records in key order.
    Scanned(Vec<KeyValue>),
    /// A write batch, done (and durable as the sync mode says).
    Written,
    /// A sync, done: every write logged before it is durable.
    Synced,
}

/// A record: its key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// The form `value` is stored in within its leaf ([`Form::AsIs`] or [`Form::Escaped`]), or
/// `None` for a value stored out of line, which the worker does not write.
fn stored_in_leaf(db: &Db, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(match overflow::form(db.tree(), key, value)? {
        Form::OutOfLine => None,
        Form::AsIs => Some(value.to_vec()),
        Form::Escaped => {
            let mut b = Vec::with_capacity(value.len() + 1);
            overflow::escape_into(value, &mut b);
            Some(b)
        }
    })
}

/// Finishes an operation on the calling thread: poisons on a failed write, applies the sync
/// mode to a write, reads an out-of-line value.
pub(super) fn finish(db: &Db, r: Result<PaOutput>) -> Result<PaResult> {
    match r {
        Ok(PaOutput::Got(key, value)) => {
            let Some(mut out) = value else {
                return Ok(PaResult::Got(None));
            };
            if !db.tagged() || !overflow::is_tagged(&out, db.tags()) {
                return Ok(PaResult::Got(Some(out)));
            }
            let r = db.resolve(&key, &mut out);
            Ok(PaResult::Got(db.guard_read(r)?.then_some(out)))
        }
        Ok(PaOutput::Put(lsn)) => {
            db.after_write(1, lsn)?;
            Ok(PaResult::Put)
        }
        Ok(PaOutput::Deleted(found, lsn)) => {
            if found {
                db.after_write(1, lsn)?;
            }
            Ok(PaResult::Deleted(found))
        }
        Ok(PaOutput::Wrote(ops, lsn)) => {
            db.after_write(ops, lsn)?;
            Ok(PaResult::Written)
        }
        // Durable already (the worker's flush): `Db::sync` only notes it for the sync mode's
        // cadence.
        Ok(PaOutput::Synced(_)) => db.sync().map(|()| PaResult::Synced),
        Ok(PaOutput::Walked(_)) => Err(wrong_output()),
        Err(e) => failed(db, e),
    }
}

/// A task's error as its caller gets it: a failed read fails its operation only; a failed
/// write poisons the database.
pub(super) fn failed<T>(db: &Db, e: Error) -> Result<T> {
    match e {
        Error::ChecksumMismatch { .. } | Error::Corruption { .. } => db.guard_read(Err(e)),
        e => db.guard(Err(e)),
    }
}

#[cold]
pub(super) fn wrong_output() -> Error {
    Error::InvalidArgument {
        what: "a PA-Tree task returned another operation's result".into(),
        limit: 0,
    }
}

impl KvStore for PaDb {
    fn limits(&self) -> Limits {
        self.db.limits()
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.get(key)? {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        PaDb::put(self, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        PaDb::delete(self, key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        self.walk(start, None, limit, visitor)
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        self.walk(start, Some(end), usize::MAX, visitor)
    }

    fn sync(&self) -> Result<()> {
        PaDb::sync(self)
    }

    fn finish_deferred(&self) -> Result<()> {
        KvStore::finish_deferred(&*self.db)
    }

    fn stats(&self) -> Stats {
        let mut s = KvStore::stats(&*self.db);
        // The shared worker's counters and those of every session that has ended.
        let mut c = self.exec.counters();
        let session_flushes = {
            let totals = self.sessions.lock();
            c.add(&totals.worker);
            totals.log_flushes
        };
        s.counters.extend([
            ("worker_finished", c.finished),
            ("worker_attempts", c.attempts),
            ("worker_restarts", c.restarts),
            ("worker_misses", c.misses),
            ("worker_held", c.held),
            ("worker_reads", c.reads),
            ("worker_probes", c.probes),
            ("worker_waits", c.waits),
            ("worker_enters", c.enters),
            ("worker_turns", c.turns),
            ("worker_writebacks", c.writebacks),
            ("worker_alloc_writebacks", c.alloc_writebacks),
            ("worker_own_writes", c.own_writes),
            // Page reads' time in flight, summed (the mean reads in flight over a phase is
            // its growth divided by the phase's length).
            ("worker_read_ns", c.read_ns),
            // Tasks' time ready (queued behind the worker) and slots' time empty (waiting for
            // the caller's next operation), summed; the worker's time waiting with nothing
            // ready.
            ("worker_ready_ns", c.ready_ns),
            ("worker_free_ns", c.free_ns),
            ("worker_wait_ns", c.wait_ns),
            ("session_log_flushes", session_flushes),
            // Reads in flight, averaged over the worker's loop turns (not over time), times 100.
            (
                "worker_outstanding_x100",
                (c.outstanding_sum * 100).checked_div(c.turns).unwrap_or(0),
            ),
        ]);
        s
    }
}
