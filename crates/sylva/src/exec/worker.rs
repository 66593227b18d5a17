//! The worker loop (`pa-tree.txt`, Algorithm 2) over restartable tasks: one thread keeps up to
//! `inflight` tasks, runs the ready one of highest priority, and when a task's attempt meets a
//! page that is not in memory, starts the page's load, parks the task on it and runs others.
//!
//! A [`Task`] is an optimistic attempt that can be run again from the start: it either finishes,
//! asks to be restarted (a page changed underneath), or stops at a page that is not resident
//! ([`Step::Miss`]), having released everything it held. The worker then starts the load
//! ([`BufferPool::begin_load`]) and submits its read to the backend, unless the page is loading
//! already, in which case the task joins that page's wait list: two tasks missing on one page
//! cost one read. When the read completes ([`BufferPool::complete_load_pinned`]), the page's
//! waiters become ready in their admission order, ahead of tasks that hold nothing (their
//! priority key says they hold a pinned frame); a failed read fails those tasks only.
//!
//! **Pages another thread holds.** Workers share the pool (the database's worker thread and each
//! session's loop), and a page one of them loads or writes back stays locked until that worker
//! collects the I/O's completion from its own backend, which no other worker can do. A task that
//! misses on a page another thread holds (loading it, writing it back, latched:
//! [`BufferPool::begin_load_deferring`] has nothing to begin and the page is locked) is not ready
//! again at once: it waits on the worker's `held` list until the worker's next collection of
//! completions, or [`HELD_RETRY`] at most (checked at each turn against the clock the loop reads
//! anyway). A worker with nothing else ready collects then: yielding, it waits in the backend for
//! its own first completion or a new task, at most until the held tasks' time is up; spinning, it
//! probes. The attempt that met the page also pushes what this worker has queued to the kernel (as
//! a restart does, "Submissions"): the page's holder may be waiting for it. So whichever worker
//! holds what the other needs collects it, and neither burns its core meanwhile. Made ready at once
//! instead, such a task would miss again at once, so its worker would always have a ready task: it
//! would never wait, and a read it had queued itself would never go to the kernel (no batch, and a
//! probe is skipped when nothing was submitted); the other worker's tasks would spin the same way
//! on that read's page, and the two would livelock, each at full CPU
//! (`tests/patree_two_workers.rs`). A worker alone meets a held page only when a thread outside its
//! loop holds one; otherwise the list stays empty and its path is as before. A task whose attempt
//! finds the write gate closed ([`Step::Held`]: a checkpoint, or a write batch of this worker or
//! another) waits on the same list: made ready at once, a task of higher priority than the batch
//! holding the gate would always run before it, and the batch would never finish
//! (`tests/patree_batches.rs`). Room for a load is
//! always found (the clock gives up over pages all held or pinned, and the pool overshoots its
//! budget: `buffer`'s eviction docs), so a miss never waits for a frame.
//!
//! **Pinned until the waiters ran.** The page is pinned once per waiter as it becomes resident,
//! and each waiter's pin is taken off after its next attempt, whatever that attempt came to:
//! between the read's completion and a waiter's attempt, other tasks run and their misses make
//! room, and the clock would otherwise be free to evict the page first, so the waiter missed
//! again and the page was read twice (`pinned_until_waiters_ran`, the regression test). A
//! task that finishes or is abandoned without another attempt lets its pin go too.
//!
//! **Submissions.** A read is queued in the backend when its task misses, and the queue goes to the
//! kernel at the next enter: when nothing is ready (the wait, or the probe loop), when a probe
//! enters, when [`SUBMIT_BATCH`] reads are queued, after an attempt that asked to be restarted (it
//! may wait, through another thread, for what is queued), at the next turn after a caller's own
//! request or a write-back was queued (other threads wait for those: a checkpoint holding the write
//! gate waits for a session's log flush, while the session's puts restart), or before
//! [`Worker::run_until_finished`] returns. So the misses of a burst of ready tasks (the waiters of
//! several completions) go out in one system call, and the virtual disk is notified once for them:
//! on this VM an enter is a system call and a notification a VM exit, each a share of a read's CPU
//! that the batch divides (`docs/results/patree.md`, session 32). The paper submits each read at
//! once, through SPDK, where a submission is a write to the device's doorbell.
//!
//! Probing and yielding: after each attempt, completions are collected when the [`Prober`]'s
//! policy says some may be due and the backend may have some (a probe that would find none is
//! skipped). With nothing ready, a yielding worker (`yield_for`) waits in
//! the kernel for the first completion or a new task, at most the yield interval; with
//! yielding off it probes in a loop. Algorithm 2 (lines 11–14) spins while the model expects a
//! completion within `t` and sleeps a fixed `t` otherwise, because an SPDK poller cannot be
//! woken by its device; a wait on the ring returns when a completion comes, so the worker
//! yields as soon as nothing is ready, at the cost of a wake-up when the completion arrives.
//!
//! **Write-backs.** Making room for a load never writes a dirty victim back on this thread:
//! the pool hands the worker victims whose records the log holds durably
//! ([`BufferPool::begin_load_deferring`]), and the worker writes each through its backend,
//! ending it ([`BufferPool::complete_write_back`]) when the write completes. A failed write
//! fails the loop: the tasks in flight get its error (a failed write poisons the database).
//! Before the loop returns for good ([`Worker::run`]) or gives up ([`Worker::abandon`]), it
//! waits for its write-backs. They and the caller's own requests are submitted in `writes`.
//!
//! A split's allocation on the worker makes room the same way ([`BufferPool::allocate`] on a
//! non-blocking thread): the victims it hands out are taken after the attempt
//! ([`BufferPool::take_handed`]) and written as a miss's are.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rapidhash::fast::RandomState;

pub use super::counters::WorkerCounters;
pub use writes::OwnWrite;

use super::sched::{IoKind, PriorityPolicy, ProbePolicy, Prober, ReadyQueue};
use super::{Backend, Completion, FileId, Request};
use crate::buffer::{BufferPool, Load, WriteBack};
use crate::error::{Error, Result};

mod task;
mod writes;

pub use task::{Admit, Context, Step, Task};

/// The bit that marks a tag as the caller's own request ([`Worker::submit_other`]), not a
/// page read (whose tag is the page's id).
pub const OTHER_TAG: u64 = 1 << 61;

/// The bit that marks a tag as a write-back of a page (the rest is the page's id).
const WRITE_TAG: u64 = 1 << 60;

/// The bit that marks a tag as a task's own write ([`Step::Write`]; the rest is its slot).
const OWN_TAG: u64 = 1 << 59;

/// Requests queued in the backend that make the worker hand them to the kernel while tasks are
/// still ready (module docs, "Submissions").
pub const SUBMIT_BATCH: usize = 8;

/// How long a task that met a page another thread holds waits at most before its next attempt,
/// unless its worker collects completions first (module docs, "Pages another thread holds"):
/// shorter than a page read, long next to a latch held for an in-memory change.
pub const HELD_RETRY: Duration = Duration::from_micros(50);

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Tasks in flight at most.
    pub inflight: usize,
    /// When to probe for completions.
    pub probe: ProbePolicy,
    /// The ready queue's order.
    pub priority: PriorityPolicy,
    /// With nothing ready, wait up to this long at a time instead of probing in a loop (`None`:
    /// never wait, spin).
    pub yield_for: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            inflight: 64,
            probe: ProbePolicy::Avg,
            priority: PriorityPolicy::Holders,
            yield_for: Some(Duration::from_micros(100)),
        }
    }
}

/// A page being loaded: the load and the tasks waiting for it.
struct Loading {
    load: Load,
    waiters: Vec<u32>,
    submitted: u64,
}

struct Slot<T> {
    task: T,
    seq: u64,
    /// When the task last became ready (ns since the worker's start).
    ready_since: u64,
    /// The page this task holds a pin on (it waited for the page's load and has not run since).
    pinned: Option<u64>,
    /// When the write it asked for was submitted, while it is in flight ([`Step::Write`]).
    own_write: Option<u64>,
}

/// One worker over a buffer pool and a backend.
pub struct Worker<'a, T: Task> {
    ctx: &'a T::Ctx,
    pool: &'a BufferPool,
    backend: Box<dyn Backend + 'a>,
    file: FileId,
    /// The context's other files ([`Context::files`]) as registered with the backend.
    ctx_files: Vec<FileId>,
    /// Tasks' own writes in flight ([`Step::Write`]), and the tasks waiting for the next of
    /// them to complete ([`Step::AfterWrite`]).
    own_in_flight: usize,
    own_waiters: Vec<u32>,
    options: WorkerOptions,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<u32>,
    /// When each slot was last emptied by a finish (0: never filled yet).
    freed_at: Vec<u64>,
    /// The clock's last reading (ns since `start`), taken after each attempt, at each
    /// collection and admission from the caller: the time counters use it rather than reading
    /// the clock at every event (about 25 ns a reading here; the readings per operation had
    /// doubled with the counters). The prober reads the clock itself, as before them.
    clock: u64,
    /// A request queued that must reach the kernel at the next turn rather than wait for a
    /// batch of reads: a caller's own (a log flush) or a write-back, which other threads may be
    /// waiting for while this worker's tasks restart (a checkpoint holding the write gate
    /// waits for the session's flush; until session 34 the flush could stay queued while the
    /// puts restarted, for good).
    urgent: bool,
    /// The last attempt asked to be restarted, or met a page another thread holds: it may wait,
    /// through another thread, for a request queued here.
    waits_on_other: bool,
    ready: ReadyQueue,
    next_seq: u64,
    loading: HashMap<u64, Loading, RandomState>,
    prober: Prober,
    start: Instant,
    completions: Vec<Completion>,
    counters: WorkerCounters,
    asleep: Option<Arc<AtomicBool>>,
    published: Option<Arc<parking_lot::Mutex<WorkerCounters>>>,
    /// The caller's own requests in flight ([`Worker::submit_other`]): when each was submitted.
    others_in_flight: HashMap<u64, u64, RandomState>,
    /// Their completions, until the caller takes them.
    others: Vec<Completion>,
    /// Write-backs of evicted pages in flight, by page, with when each was submitted.
    writing: HashMap<u64, (WriteBack, u64), RandomState>,
    /// Write-backs the pool just handed out, to submit.
    handed: Vec<WriteBack>,
    /// Tasks that met a page this worker is writing back, by page.
    write_waiters: HashMap<u64, Vec<u32>, RandomState>,
    /// Tasks that met a page another thread holds, until the next collection or [`HELD_RETRY`]
    /// after `held_since` (module docs, "Pages another thread holds").
    held: Vec<u32>,
    /// When the first task now on `held` was put there (the clock's reading).
    held_since: u64,
    /// Write-backs completed in one collection (reused).
    written: Vec<(WriteBack, Result<usize>)>,
}

impl<'a, T: Task> Worker<'a, T> {
    /// A worker running tasks against `ctx`, reading its pool's pages through `backend` (the
    /// pool's file is registered with it).
    pub fn new(
        ctx: &'a T::Ctx,
        mut backend: Box<dyn Backend + 'a>,
        options: WorkerOptions,
    ) -> Result<Self> {
        let pool = ctx.pool();
        if options.inflight == 0 || options.inflight > 4096 {
            return Err(Error::InvalidArgument {
                what: format!("inflight {}", options.inflight),
                limit: 4096,
            });
        }
        let file = backend.register(pool.file().io().clone())?;
        let ctx_files = ctx
            .files()
            .into_iter()
            .map(|io| backend.register(io))
            .collect::<Result<Vec<_>>>()?;
        Ok(Worker {
            ctx,
            pool,
            backend,
            file,
            ctx_files,
            own_in_flight: 0,
            own_waiters: Vec::new(),
            slots: (0..options.inflight).map(|_| None).collect(),
            free: (0..options.inflight as u32).rev().collect(),
            freed_at: vec![0; options.inflight],
            clock: 0,
            urgent: false,
            waits_on_other: false,
            prober: Prober::new(options.probe.clone()),
            options,
            ready: ReadyQueue::default(),
            next_seq: 0,
            loading: HashMap::default(),
            start: Instant::now(),
            completions: Vec::new(),
            counters: WorkerCounters::default(),
            asleep: None,
            published: None,
            others_in_flight: HashMap::default(),
            others: Vec::new(),
            writing: HashMap::default(),
            handed: Vec::new(),
            write_waiters: HashMap::default(),
            held: Vec::new(),
            held_since: 0,
            written: Vec::new(),
        })
    }

    /// What it did so far.
    pub fn counters(&self) -> WorkerCounters {
        WorkerCounters {
            enters: self.backend.enters(),
            ..self.counters.clone()
        }
    }

    /// Shares a copy of the counters that the worker refreshes before each wait in the backend
    /// and when it returns (so other threads can report them while it runs).
    pub fn publish_counters(&mut self, to: Arc<parking_lot::Mutex<WorkerCounters>>) {
        self.published = Some(to);
    }

    fn publish(&self) {
        if let Some(p) = &self.published {
            *p.lock() = self.counters();
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Reads the clock into [`Worker::clock`].
    fn tick(&mut self) -> u64 {
        self.clock = self.now();
        self.clock
    }

    /// Runs tasks from `source` until it says [`Admit::Closed`] and every task finished,
    /// handing each task and its result to `sink` as it finishes (in any order). When the
    /// source has nothing now ([`Admit::Empty`]) and no task is in flight, the worker waits in
    /// the backend until woken ([`super::Waker`]: whoever feeds the source wakes it).
    pub fn run(
        &mut self,
        mut source: impl FnMut() -> Admit<T>,
        mut sink: impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        let was = crate::sync::set_nonblocking(true);
        let r = self.run_nonblocking(&mut source, &mut sink);
        let r = r.and_then(|()| self.drain_writes(&mut sink));
        if let Err(e) = &r {
            // The loop ends here (a failed backend or write-back): what is in flight gets the
            // error rather than never finishing.
            self.abandon(e.duplicate(), &mut sink);
        }
        crate::sync::set_nonblocking(was);
        self.publish();
        r
    }

    fn run_nonblocking(
        &mut self,
        source: &mut impl FnMut() -> Admit<T>,
        mut sink: impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        let mut closed = false;
        self.tick();
        while !self.turn(source, &mut sink, &mut closed)? {}
        Ok(())
    }

    /// Gives up on every task in flight after `error` (a backend that failed): each is handed
    /// to `sink` with the error. Their pages' loads are left unfinished, the pages held in
    /// loading state for good (the kernel may still write into their frames, which therefore
    /// are never reused); the caller poisons the database.
    pub fn abandon(&mut self, error: Error, sink: &mut impl FnMut(T, Result<T::Output>)) {
        // Dropping a load without completing it leaves its page locked (`Load`'s docs). So
        // does a write-back: those stay locked, dirty, out of the pool's count, for good.
        self.loading.clear();
        self.writing.clear();
        self.write_waiters.clear();
        self.held.clear();
        self.own_waiters.clear();
        self.ready = ReadyQueue::default();
        for s in self.slots.iter_mut().flatten() {
            if s.own_write.take().is_some() {
                s.task.io_abandoned();
            }
        }
        for slot in 0..self.slots.len() as u32 {
            self.finish(slot, Err(error.duplicate()), sink);
        }
    }

    /// Tasks admitted and not finished.
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Admits `task` if there is room for it; gives it back if not.
    pub fn try_admit(&mut self, task: T) -> std::result::Result<(), T> {
        if self.free.is_empty() {
            return Err(task);
        }
        self.tick();
        self.admit(task);
        Ok(())
    }

    /// Runs the loop on the calling thread (marked non-blocking meanwhile) until at least one
    /// task finished (handing the finished ones to `sink`) or one of the caller's own requests
    /// completed, or nothing is in flight; after a finish it goes on while tasks are ready (at
    /// most one turn per task slot), and it hands the reads queued to the kernel before it
    /// returns. The worker of a caller that submits and collects its own tasks (a
    /// `PaSession`), without a thread of its own.
    pub fn run_until_finished(&mut self, mut sink: impl FnMut(T, Result<T::Output>)) -> Result<()> {
        let was = crate::sync::set_nonblocking(true);
        self.tick();
        let before = self.counters.finished;
        let mut closed = true;
        let mut none = || Admit::Closed;
        let mut r = Ok(());
        // Once a task finished, runs on while tasks are ready, so that the reads of a burst go
        // out together; but for at most as many turns as tasks fit (a task that restarts, as
        // one whose write gate a checkpoint holds, may need the caller to act first).
        let mut more = self.slots.len();
        loop {
            let finished = self.counters.finished != before || !self.others.is_empty();
            if finished {
                if self.ready.is_empty() || more == 0 {
                    break;
                }
                more -= 1;
            }
            r = if self.in_flight() > 0 {
                self.turn(&mut none, &mut sink, &mut closed).map(drop)
            } else if !self.others_in_flight.is_empty() || !self.writing.is_empty() {
                self.counters.waits += 1;
                self.collect(1, None, &mut sink)
            } else {
                break;
            };
            if r.is_err() {
                break;
            }
        }
        // The caller may not step the loop again for a while: what is queued goes out now.
        if r.is_ok() && self.backend.unsubmitted() > 0 {
            r = self.collect(0, None, &mut sink);
        }
        crate::sync::set_nonblocking(was);
        r
    }

    /// One turn of the loop: admit what the source has while there is room, then run the
    /// ready task of highest priority and probe if due, or, with none ready, probe or wait.
    /// Returns whether the worker is done (the source closed, nothing in flight).
    fn turn(
        &mut self,
        source: &mut impl FnMut() -> Admit<T>,
        sink: &mut impl FnMut(T, Result<T::Output>),
        closed: &mut bool,
    ) -> Result<bool> {
        // Admit new tasks while there is room.
        let mut empty = false;
        while !*closed && !empty && !self.free.is_empty() {
            match source() {
                Admit::Task(task) => self.admit(task),
                Admit::Empty => empty = true,
                Admit::Closed => *closed = true,
            }
        }
        let idle = self.free.len() == self.slots.len();
        if *closed && idle {
            return Ok(true);
        }
        if idle {
            // Nothing in flight and nothing to admit: sleep until woken.
            self.sleep(None, source, closed, sink)?;
            return Ok(false);
        }
        self.counters.turns += 1;
        self.counters.outstanding_sum += self.loading.len() as u64;
        if !self.held.is_empty() && self.held_for() >= HELD_RETRY {
            self.release_held();
        }
        if let Some(slot) = self.ready.pop() {
            self.run_slot(slot, sink)?;
            // A probe due enters the kernel only if completions may be waiting; reads queued
            // meanwhile go out together (below, or when nothing is ready).
            let due = self.prober.should_probe(self.now()) && self.backend.may_have_completions();
            let queued = self.backend.unsubmitted();
            // A task that restarts, or met a page another thread holds, may be waiting, through
            // another thread, for a request still queued here: what is queued goes out then
            // too, as after an urgent request.
            let push = (self.urgent || self.waits_on_other) && queued > 0;
            if due || queued >= SUBMIT_BATCH || push {
                self.counters.probes += u64::from(due);
                self.collect(0, None, sink)?;
            }
            return Ok(false);
        }
        // Nothing ready: every task waits on an I/O. Yielding, wait in the kernel for the first
        // completion (or a new task), at most `t`: a wait returns as soon as one has come, so it
        // costs what a probe does when one has, and spares the probes in a loop that an
        // overdue read cost otherwise (one system call each; `docs/results/patree.md`,
        // session 19). Not yielding, probe in a loop. Tasks held by another thread's page are
        // tried again after the collection, so the wait ends when their time is up.
        match self.options.yield_for {
            Some(t) => {
                let t = if self.held.is_empty() {
                    t
                } else {
                    t.min(HELD_RETRY.saturating_sub(self.held_for()))
                };
                self.sleep(Some(t), source, closed, sink)?
            }
            None => {
                self.counters.probes += 1;
                self.collect(0, None, sink)?;
            }
        }
        Ok(false)
    }

    /// Waits in the backend for a completion, up to `timeout` (`None`: until woken). With an
    /// [`asleep`](Worker::set_asleep_flag) flag and room for a task, it first raises the flag
    /// and looks at the source once more: a task that came meanwhile is admitted instead of
    /// waiting, and a feeder that queues one after that look sees the flag and wakes it.
    fn sleep(
        &mut self,
        timeout: Option<Duration>,
        source: &mut impl FnMut() -> Admit<T>,
        closed: &mut bool,
        sink: &mut impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        if let Some(flag) = self.asleep.clone() {
            if !*closed && !self.free.is_empty() {
                flag.store(true, Ordering::SeqCst);
                match source() {
                    Admit::Task(task) => {
                        flag.store(false, Ordering::Relaxed);
                        self.admit(task);
                        return Ok(());
                    }
                    Admit::Closed => {
                        flag.store(false, Ordering::Relaxed);
                        *closed = true;
                        return Ok(());
                    }
                    Admit::Empty => {}
                }
            }
            self.counters.waits += 1;
            self.publish();
            let r = self.collect(1, timeout, sink);
            flag.store(false, Ordering::Relaxed);
            return r;
        }
        self.counters.waits += 1;
        self.collect(1, timeout, sink)
    }

    /// Shares a flag the worker raises while it waits in the backend with room for a task:
    /// a feeder that queued a task wakes the worker only when it finds the flag up (taking it
    /// down), instead of on every task.
    pub fn set_asleep_flag(&mut self, flag: Arc<AtomicBool>) {
        self.asleep = Some(flag);
    }

    /// Runs the tasks of `tasks`, then returns (a [`Worker::run`] whose source is a list).
    pub fn run_all(
        &mut self,
        tasks: impl IntoIterator<Item = T>,
        sink: impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        let mut tasks = tasks.into_iter();
        self.run(|| tasks.next().map_or(Admit::Closed, Admit::Task), sink)
    }

    fn admit(&mut self, task: T) {
        let Some(slot) = self.free.pop() else { return };
        let seq = self.next_seq;
        self.next_seq += 1;
        let now = self.clock;
        let freed = std::mem::take(&mut self.freed_at[slot as usize]);
        if freed != 0 {
            self.counters.free_ns += now.saturating_sub(freed);
        }
        self.slots[slot as usize] = Some(Slot {
            task,
            seq,
            ready_since: now,
            pinned: None,
            own_write: None,
        });
        self.ready.push(self.options.priority.key(false, seq), slot);
    }

    fn make_ready(&mut self, slot: u32) {
        let now = self.clock;
        if let Some(s) = self.slots[slot as usize].as_mut() {
            s.ready_since = now;
            let holds = s.pinned.is_some();
            self.ready
                .push(self.options.priority.key(holds, s.seq), slot);
        }
    }

    /// Makes `slot` ready holding one of the pins on `page` (its load's waiter).
    fn make_ready_pinned(&mut self, slot: u32, page: u64) {
        match self.slots[slot as usize].as_mut() {
            Some(s) => {
                if let Some(old) = s.pinned.replace(page) {
                    self.pool.unpin(old);
                }
                self.make_ready(slot);
            }
            // No task to hold it (cannot happen: waiters are in flight): let the pin go.
            None => self.pool.unpin(page),
        }
    }

    /// Puts `slot`, whose attempt met a page another thread holds, on the held list (module
    /// docs, "Pages another thread holds").
    fn hold(&mut self, slot: u32) {
        if self.held.is_empty() {
            self.held_since = self.clock;
        }
        self.held.push(slot);
        self.counters.held += 1;
        self.waits_on_other = true;
    }

    /// How long the first task now on the held list has waited, by the clock's last reading.
    fn held_for(&self) -> Duration {
        Duration::from_nanos(self.clock.saturating_sub(self.held_since))
    }

    /// Makes the held tasks ready again.
    fn release_held(&mut self) {
        while let Some(slot) = self.held.pop() {
            self.make_ready(slot);
        }
    }

    fn finish(
        &mut self,
        slot: u32,
        result: Result<T::Output>,
        sink: &mut impl FnMut(T, Result<T::Output>),
    ) {
        if let Some(s) = self.slots[slot as usize].take() {
            if let Some(page) = s.pinned {
                self.pool.unpin(page);
            }
            self.free.push(slot);
            // Never 0 (the admission's test of a slot filled before): a finish at the worker's
            // first nanosecond counts from the next.
            self.freed_at[slot as usize] = self.clock.max(1);
            self.counters.finished += 1;
            sink(s.task, result);
        }
    }

    fn run_slot(&mut self, slot: u32, sink: &mut impl FnMut(T, Result<T::Output>)) -> Result<()> {
        let Some(s) = self.slots[slot as usize].as_mut() else {
            return Ok(());
        };
        self.counters.attempts += 1;
        self.waits_on_other = false;
        // The clock was read at the last attempt's end or collection, just before this.
        self.counters.ready_ns += self.clock.saturating_sub(s.ready_since);
        let attempt = s.task.attempt(self.ctx);
        self.clock = self.start.elapsed().as_nanos() as u64;
        // The attempt read what it waited for (or found it changed): its pin goes.
        if let Some(page) = s.pinned.take() {
            self.pool.unpin(page);
        }
        // A split's allocation made room as a miss does: its dirty victims go out the same way.
        if self.pool.take_handed(&mut self.handed) {
            self.counters.alloc_writebacks += self.handed.len() as u64;
            self.submit_writes()?;
        }
        match attempt {
            Ok(Step::Done(out)) => self.finish(slot, Ok(out), sink),
            Ok(Step::Restart) => {
                self.counters.restarts += 1;
                self.waits_on_other = true;
                self.make_ready(slot);
            }
            Ok(Step::Miss(page)) => {
                self.counters.misses += 1;
                self.miss(slot, page, sink)?;
            }
            Ok(Step::Held) => {
                self.counters.restarts += 1;
                self.hold(slot);
            }
            Ok(Step::Write(write)) => self.submit_own(slot, write),
            Ok(Step::AfterWrite) => {
                self.counters.restarts += 1;
                if self.own_in_flight > 0 {
                    self.own_waiters.push(slot);
                } else {
                    self.hold(slot);
                }
            }
            Err(e) => self.finish(slot, Err(e), sink),
        }
        Ok(())
    }

    /// Parks `slot` on `page`, starting its load if no one has.
    fn miss(
        &mut self,
        slot: u32,
        page: u64,
        sink: &mut impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        if let Some(l) = self.loading.get_mut(&page) {
            l.waiters.push(slot);
            return Ok(());
        }
        if self.writing.contains_key(&page) {
            // Held by our own write-back of it: runs again once that completes (the page is
            // evicted by then and missed again, which loads it).
            self.write_waiters.entry(page).or_default().push(slot);
            return Ok(());
        }
        let begun = self.pool.begin_load_deferring(page, &mut self.handed);
        // The write-backs go out first; a failure to submit one fails the loop, after the
        // load begun (if any) has been seen to.
        let wrote = if self.handed.is_empty() {
            Ok(())
        } else {
            self.submit_writes()
        };
        let loaded = self.start_load(slot, page, begun, sink);
        wrote.and(loaded)
    }

    /// Submits the read of a load [`BufferPool::begin_load_deferring`] began for `slot`'s
    /// miss on `page` (or fails or requeues the task if none began).
    fn start_load(
        &mut self,
        slot: u32,
        page: u64,
        begun: Result<Option<Load>>,
        sink: &mut impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        let load = match begun {
            Ok(Some(load)) => load,
            // Resident or freed by now: the next attempt goes on. Held by another thread
            // (loading it, writing it back, latched): wait for it (module docs).
            Ok(None) => {
                if self.pool.is_locked(page) {
                    self.hold(slot);
                } else {
                    self.make_ready(slot);
                }
                return Ok(());
            }
            Err(e) => {
                self.finish(slot, Err(e), sink);
                return Ok(());
            }
        };
        let (buf, len) = load.frame();
        let request = Request::Read {
            file: self.file,
            buf,
            len: len as u32,
            offset: load.offset(),
        };
        // SAFETY: the frame is the load's alone (the page is in loading state) until the read's
        // completion is collected and the load completed, in `collect`; the load lives in
        // `self.loading` until then.
        if let Err(e) = unsafe { self.backend.submit(page, request) } {
            // Nothing was submitted: give the page back, fail the task.
            let _ = self.pool.complete_load(load, Err(e.duplicate()));
            self.finish(slot, Err(e), sink);
            return Ok(());
        }
        let now = self.now();
        self.prober.submitted(now, IoKind::Read);
        self.counters.reads += 1;
        self.loading.insert(
            page,
            Loading {
                load,
                waiters: vec![slot],
                submitted: now,
            },
        );
        Ok(())
    }

    /// Collects completions (waiting for `min` up to `timeout`) and completes their loads.
    fn collect(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        sink: &mut impl FnMut(T, Result<T::Output>),
    ) -> Result<()> {
        let mut done = std::mem::take(&mut self.completions);
        // Whatever is queued goes to the kernel with this call.
        self.urgent = false;
        // A wait begins as soon as the loop found nothing ready: at the clock's last reading.
        let before = self.clock;
        self.backend.complete(min, timeout, &mut done)?;
        let now = self.tick();
        if min > 0 {
            self.counters.wait_ns += now.saturating_sub(before);
        }
        self.prober.probed(now);
        let mut written = std::mem::take(&mut self.written);
        for c in done.drain(..) {
            if c.tag & OWN_TAG != 0 && c.tag & (WRITE_TAG | OTHER_TAG) == 0 {
                self.own_written(c, now);
                continue;
            }
            if c.tag & WRITE_TAG != 0 && c.tag & OTHER_TAG == 0 {
                let page = c.tag & !WRITE_TAG;
                if let Some((write, submitted)) = self.writing.remove(&page) {
                    self.prober.completed(submitted, now, IoKind::Write);
                    written.push((write, c.result.map(|n| n as usize)));
                }
                continue;
            }
            if let Some(submitted) = self.others_in_flight.remove(&c.tag) {
                self.prober.completed(submitted, now, IoKind::Write);
                self.others.push(c);
                continue;
            }
            let Some(l) = self.loading.remove(&c.tag) else {
                continue;
            };
            self.prober.completed(l.submitted, now, IoKind::Read);
            self.counters.read_ns += now.saturating_sub(l.submitted);
            let result = c.result.map(|n| n as usize);
            let pins = l.waiters.len() as u32;
            match self.pool.complete_load_pinned(l.load, result, pins) {
                Ok(()) => {
                    for slot in l.waiters {
                        self.make_ready_pinned(slot, c.tag);
                    }
                }
                Err(e) => {
                    for slot in l.waiters {
                        self.finish(slot, Err(e.duplicate()), sink);
                    }
                }
            }
        }
        self.completions = done;
        // The write-backs that completed, their frames discarded together; then the tasks
        // that met those pages run again (they find them evicted, and load them).
        let pages: Vec<u64> = written.iter().map(|(w, _)| w.id()).collect();
        let r = self.pool.complete_write_backs(&mut written);
        self.written = written;
        for page in pages {
            for slot in self.write_waiters.remove(&page).unwrap_or_default() {
                self.make_ready(slot);
            }
        }
        // The tasks held by other threads' pages try again: those threads may have let go
        // meanwhile (or been waiting for what this collection completed).
        self.release_held();
        r
    }
}

impl<T: Task> Drop for Worker<'_, T> {
    /// Lets go of the pins of tasks that never ran again (a worker dropped with tasks in
    /// flight), so their pages become evictable.
    fn drop(&mut self) {
        for s in self.slots.iter_mut().flatten() {
            if let Some(page) = s.pinned.take() {
                self.pool.unpin(page);
            }
        }
    }
}
