//! [`PaSession`]: many operations of one thread in flight on a [`PaDb`], run by a worker loop
//! of the session's own on that thread (the parent module's docs, "Sessions").

use std::collections::VecDeque;

use super::{finish, walked, PaDb, PaOutput, PaResult, PaTask, WalkTask};
use crate::db::{Db, WriteBatch};
use crate::error::{Error, Result};
use crate::exec::open_backend;
use crate::exec::worker::{Step, Task, Worker, WorkerCounters, OTHER_TAG};
use crate::exec::{FileId, Request};
use crate::wal::{Flush, SyncMode};

/// A task of a [`PaSession`]: a point operation under its caller's tag.
struct Tagged {
    tag: u64,
    task: PaTask,
}

impl Task for Tagged {
    type Output = PaOutput;
    type Ctx = Db;

    fn attempt(&mut self, db: &Db) -> Result<Step<PaOutput>> {
        self.task.attempt(db)
    }

    fn io_done(&mut self, db: &Db, result: Result<usize>) {
        self.task.io_done(db, result)
    }

    fn io_abandoned(&mut self) {
        self.task.io_abandoned()
    }
}

/// Many operations of one thread in flight on a [`PaDb`] ([`PaDb::session`]), run by a worker
/// loop of its own on that thread: submit under tags of your choosing, then take results in
/// the order they finish with [`PaSession::wait_any`], which runs the loop (the paper's
/// polled mode: operations, page reads and completions all on the calling thread, no other
/// thread woken per operation). It has its own backend (an io_uring ring, enabled by the
/// thread that first submits through it: a session may be made on one thread and handed to
/// another before it is used, not after). Dropping it finishes what is in flight.
pub struct PaSession<'a> {
    pa: &'a PaDb,
    worker: Worker<'a, Tagged>,
    /// Finished operations not taken yet.
    results: VecDeque<(u64, Result<PaResult>)>,
    outstanding: usize,
    /// Under `sync=always`: writes applied and logged whose records are not durable yet, with
    /// their LSNs; they finish when a flush covers them.
    awaiting: Vec<(u64, PaOutput, u64)>,
    /// The log flush this session submitted through its backend, if one is in flight.
    flush: Option<Flush>,
    /// The log's two segments as registered with the backend.
    log_files: [FileId; 2],
    flushes: u64,
    /// Walks whose next chunk is to be admitted.
    continuing: Vec<Tagged>,
}

impl<'a> PaSession<'a> {
    /// A session over `pa` ([`PaDb::session`]).
    pub(super) fn new(pa: &'a PaDb) -> Result<PaSession<'a>> {
        let backend = open_backend(
            pa.options.backend,
            pa.options.worker.inflight.next_power_of_two() as u32,
        )?;
        let worker = Worker::new(&*pa.db, backend, pa.options.worker.clone())?;
        // The log's segments, registered by the worker (`Context::files` of `Db`).
        let mut log_files = [FileId(0); 2];
        for (i, id) in log_files.iter_mut().enumerate() {
            *id = worker.ctx_file(i).ok_or_else(|| Error::InvalidArgument {
                what: format!("log segment {i}"),
                limit: 2,
            })?;
        }
        Ok(PaSession {
            pa,
            worker,
            results: VecDeque::new(),
            outstanding: 0,
            awaiting: Vec::new(),
            flush: None,
            log_files,
            flushes: 0,
            continuing: Vec::new(),
        })
    }

    /// Submits a lookup of `key` under `tag`.
    pub fn submit_get(&mut self, tag: u64, key: &[u8]) {
        let db = &self.pa.db;
        if let Err(e) = db.check_open().and_then(|()| db.limits().check_key(key)) {
            return self.finished(tag, Err(e));
        }
        // A key in a bucket is read on the calling thread (`db::buckets`).
        if db.bucket_of(key).is_some() {
            let r = db.get(key).map(PaResult::Got);
            return self.finished(tag, r);
        }
        self.queue(
            tag,
            PaTask::Get {
                key: key.to_vec(),
                out: Vec::new(),
                at: None,
            },
        );
    }

    /// Submits a put of `key` with `value` under `tag`.
    pub fn submit_put(&mut self, tag: u64, key: &[u8], value: &[u8]) {
        match self.pa.put_task(key, value) {
            Ok(Some(task)) => self.queue(tag, task),
            Ok(None) => self.finished(tag, Ok(PaResult::Put)),
            Err(e) => self.finished(tag, Err(e)),
        }
    }

    /// Submits a delete of `key` under `tag`.
    pub fn submit_delete(&mut self, tag: u64, key: &[u8]) {
        let db = &self.pa.db;
        if let Err(e) = db.check_open().and_then(|()| db.limits().check_key(key)) {
            return self.finished(tag, Err(e));
        }
        if db.bucket_of(key).is_some() {
            let r = db.delete(key).map(PaResult::Deleted);
            return self.finished(tag, r);
        }
        self.queue(
            tag,
            PaTask::Delete {
                key: key.to_vec(),
                at: None,
            },
        );
    }

    /// Submits a write batch under `tag` ([`PaResult::Written`]; [`PaDb::submit_write`]).
    pub fn submit_write(&mut self, tag: u64, batch: &WriteBatch) {
        match self.pa.batch_task(batch) {
            Ok(Some(task)) => self.queue(tag, task),
            Ok(None) => self.finished(tag, Ok(PaResult::Written)),
            Err(e) => self.finished(tag, Err(e)),
        }
    }

    /// Submits a sync under `tag` ([`PaResult::Synced`]): done once every write logged before
    /// it is durable, by a log flush the session submits.
    pub fn submit_sync(&mut self, tag: u64) {
        self.queue(tag, PaTask::Sync);
    }

    /// Submits a scan under `tag`: up to `limit` records from the first key `>= start`
    /// ([`PaResult::Scanned`]; [`PaDb::submit_scan`]).
    pub fn submit_scan(&mut self, tag: u64, start: &[u8], limit: usize) {
        self.submit_walk(tag, start, None, limit);
    }

    /// Submits a range map under `tag`: every record with a key in `[start, end)`.
    pub fn submit_range(&mut self, tag: u64, start: &[u8], end: &[u8]) {
        self.submit_walk(tag, start, Some(end), usize::MAX);
    }

    fn submit_walk(&mut self, tag: u64, start: &[u8], end: Option<&[u8]>, limit: usize) {
        let db = &self.pa.db;
        if let Err(e) = db.check_open() {
            return self.finished(tag, Err(e));
        }
        match WalkTask::collecting(db, start, end, limit) {
            Some(w) => self.queue(tag, PaTask::Walk(w)),
            None => self.finished(tag, Ok(PaResult::Scanned(Vec::new()))),
        }
    }

    /// Operations submitted whose result has not been taken.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// What this session's worker did so far.
    pub fn counters(&self) -> WorkerCounters {
        self.worker.counters()
    }

    /// Log flushes this session submitted through its backend (`sync=always`).
    pub fn log_flushes(&self) -> u64 {
        self.flushes
    }

    /// The next operation to finish: its tag and result, running the session's worker until
    /// one does; `None` with nothing outstanding.
    pub fn wait_any(&mut self) -> Option<(u64, Result<PaResult>)> {
        loop {
            if let Some(r) = self.results.pop_front() {
                self.outstanding -= 1;
                return Some(r);
            }
            if self.outstanding == 0 {
                return None;
            }
            self.progress();
        }
    }

    /// Moves things on: starts a log flush for writes waiting on one, then runs the worker
    /// until an operation or the flush finishes. With nothing in flight and writes still
    /// waiting (another thread's flush was in flight, so none could start here), waits for the
    /// log on this thread.
    fn progress(&mut self) {
        while let Some(job) = self.continuing.pop() {
            if let Err(back) = self.worker.try_admit(job) {
                self.continuing.push(back);
                break;
            }
        }
        self.start_flush();
        if self.worker.in_flight() > 0
            || self.worker.others_in_flight() > 0
            || self.worker.writes_in_flight() > 0
        {
            self.drive();
        } else if !self.awaiting.is_empty() {
            let lsn = self.awaiting.iter().map(|a| a.2).max().unwrap_or(0);
            let wal = &self.pa.db.tree().store.wal;
            let r = if lsn == 0 {
                Ok(wal.durable_below())
            } else {
                wal.sync_to(lsn).map(|()| wal.durable_below())
            };
            self.release(r);
        }
    }

    /// Runs the worker until at least one operation or the log flush finished, finishing each
    /// operation on this thread. A failing backend poisons the database and fails every
    /// operation in flight.
    fn drive(&mut self) {
        let mut finished = Vec::new();
        let mut done = |t: Tagged, r: Result<PaOutput>| finished.push((t.tag, r));
        let mut r = self.worker.run_until_finished(&mut done);
        // With no operation left in flight, the loop may not be stepped again for a while:
        // its write-backs (pages held locked) finish now.
        if r.is_ok() && self.worker.in_flight() == 0 {
            r = self.worker.drain_writes(&mut done);
        }
        if let Err(e) = r {
            self.pa.db.durable.poison().set();
            self.worker.abandon(e, &mut done);
        }
        for c in self.worker.take_others() {
            let Some(flush) = self.flush.take() else {
                continue;
            };
            crate::sync::set_own_log_flush(false);
            // A failed write or sync poisons the log (and is returned by `end_flush`).
            let _ = self
                .pa
                .db
                .tree()
                .store
                .wal
                .end_flush(flush, c.result.map(drop));
        }
        let strong = self.pa.db.options.sync == SyncMode::Always;
        for (tag, r) in finished {
            match r {
                // A write waits until the log is durable past its record (`sync=always`), and
                // in any mode is finished (its durability duties: a checkpoint may run) only
                // while this session has no log flush in flight, which they might wait for.
                // A sync waits for the log's durability in any mode.
                Ok(
                    out @ (PaOutput::Put(_)
                    | PaOutput::Deleted(..)
                    | PaOutput::Wrote(..)
                    | PaOutput::Synced(_)),
                ) => {
                    let lsn = match out {
                        PaOutput::Put(lsn)
                        | PaOutput::Deleted(true, lsn)
                        | PaOutput::Wrote(_, lsn)
                            if strong =>
                        {
                            lsn
                        }
                        PaOutput::Synced(lsn) => lsn,
                        _ => 0,
                    };
                    self.awaiting.push((tag, out, lsn));
                }
                // A walk's chunk: its records gathered here, its next chunk admitted later.
                r @ Ok(PaOutput::Walked(_)) => {
                    let db = &self.pa.db;
                    match walked(db, r) {
                        Ok(mut w) => {
                            if w.gather() {
                                let task = PaTask::Walk(w);
                                self.continuing.push(Tagged { tag, task });
                            } else {
                                let r = w.result(db).map(PaResult::Scanned);
                                self.results.push_back((tag, r));
                            }
                        }
                        Err(e) => self.results.push_back((tag, Err(e))),
                    }
                }
                r => self.results.push_back((tag, finish(&self.pa.db, r))),
            }
        }
        if self.flush.is_none() {
            let wal = &self.pa.db.tree().store.wal;
            let r = wal.check_poisoned().map(|()| wal.durable_below());
            self.release(r);
        }
    }

    /// Submits a durable flush of the log through the backend if writes wait on one and none
    /// of this session's is in flight (`None` from the log: another thread's is, or there is
    /// nothing to write; the waiting writes are released as far as the log is durable).
    fn start_flush(&mut self) {
        if self.flush.is_some() || self.awaiting.iter().all(|a| a.2 == 0) {
            return;
        }
        let wal = &self.pa.db.tree().store.wal;
        let flush = match wal.begin_flush(true) {
            Ok(Some(flush)) => flush,
            Ok(None) => return self.release(Ok(wal.durable_below())),
            Err(e) => return self.release(Err(e)),
        };
        let request = Request::Write {
            file: self.log_files[flush.segment()],
            buf: flush.bytes().as_ptr(),
            len: flush.bytes().len() as u32,
            offset: flush.offset(),
            sync: true,
        };
        self.flushes += 1;
        let tag = OTHER_TAG | self.flushes;
        // SAFETY: the bytes are the flush's buffer, which `self.flush` keeps (unmoved on the
        // heap, unread and unwritten by anyone else) until the request's completion is taken
        // in `drive` and the flush handed back to the log.
        match unsafe { self.worker.submit_other(tag, request) } {
            Ok(()) => {
                self.flush = Some(flush);
                crate::sync::set_own_log_flush(true);
            }
            Err(e) => {
                let r = wal.end_flush(flush, Err(e));
                self.release(r);
            }
        }
    }

    /// Finishes the waiting writes that the log's durable point `r` covers (all of them, with
    /// the error, if the flush failed).
    fn release(&mut self, r: Result<u64>) {
        let db = &self.pa.db;
        match r {
            Ok(durable_below) => {
                let mut i = 0;
                while i < self.awaiting.len() {
                    let lsn = self.awaiting[i].2;
                    if lsn == 0 || lsn < durable_below {
                        let (tag, out, _) = self.awaiting.swap_remove(i);
                        self.results.push_back((tag, finish(db, Ok(out))));
                    } else {
                        i += 1;
                    }
                }
            }
            Err(e) => {
                db.durable.poison().set();
                for (tag, _, _) in self.awaiting.drain(..) {
                    self.results.push_back((tag, Err(e.duplicate())));
                }
            }
        }
    }

    fn queue(&mut self, tag: u64, task: PaTask) {
        self.outstanding += 1;
        let mut job = Tagged { tag, task };
        loop {
            match self.worker.try_admit(job) {
                Ok(()) => return,
                Err(back) => {
                    job = back;
                    self.progress();
                }
            }
        }
    }

    fn finished(&mut self, tag: u64, r: Result<PaResult>) {
        self.outstanding += 1;
        self.results.push_back((tag, r));
    }
}

impl Drop for PaSession<'_> {
    /// Finishes what is in flight (its pages are held in loading state until their reads are
    /// collected, the log's flush until its write is); the results are dropped.
    fn drop(&mut self) {
        while self.worker.in_flight() > 0
            || self.worker.others_in_flight() > 0
            || self.worker.writes_in_flight() > 0
            || !self.awaiting.is_empty()
            || !self.continuing.is_empty()
        {
            self.progress();
        }
        let mut totals = self.pa.sessions.lock();
        totals.worker.add(&self.worker.counters());
        totals.log_flushes += self.flushes;
    }
}
