//! What a worker runs ([`Task`]: restartable attempts, the parent module's docs), what one
//! attempt comes to ([`Step`]), what it runs against ([`Context`]) and what its source has for
//! it ([`Admit`]).

use std::sync::Arc;

use super::OwnWrite;
use crate::buffer::BufferPool;
use crate::error::Result;

/// What one attempt of a task came to.
#[derive(Debug)]
pub enum Step<T> {
    /// Finished with this output.
    Done(T),
    /// Stopped at this page, not resident; run again once it is loaded.
    Miss(u64),
    /// A page changed underneath (or another thread held it): run again.
    Restart,
    /// Something the attempt needs is held, by another thread or another task of this worker
    /// (the write gate, closed by a checkpoint or a write batch): run again after the worker's
    /// next collection of completions, or [`HELD_RETRY`](super::HELD_RETRY) at most, as a task that met a page
    /// another thread holds (module docs). Made ready at once, it would run again before the
    /// holder whenever its priority is higher, and a holder on this worker would never run.
    Held,
    /// Write this through the worker's backend for the task (a log flush): the task waits for
    /// the write's completion, which is handed to it ([`Task::io_done`]), then runs again.
    Write(OwnWrite),
    /// Run again once the next of this worker's tasks' own writes completes (a write waiting
    /// for the log flush another task submitted); with none in flight, as [`Step::Held`].
    AfterWrite,
}

impl<T> Step<T> {
    /// The same step, its output (if done) mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Done(t) => Step::Done(f(t)),
            Step::Miss(page) => Step::Miss(page),
            Step::Restart => Step::Restart,
            Step::Held => Step::Held,
            Step::Write(write) => Step::Write(write),
            Step::AfterWrite => Step::AfterWrite,
        }
    }
}

/// What a worker's source has for it.
#[derive(Debug)]
pub enum Admit<T> {
    /// A task to run.
    Task(T),
    /// Nothing now; more may come (the feeder wakes the worker).
    Empty,
    /// Nothing more will come.
    Closed,
}

/// What tasks run against: the buffer pool the worker loads pages into, and whatever else the
/// tasks need (a database's tree).
pub trait Context {
    /// The pool whose misses the worker serves.
    fn pool(&self) -> &BufferPool;

    /// Other files the tasks write through the worker ([`Step::Write`], which names one by its
    /// place here): registered with the backend when the worker is made.
    fn files(&self) -> Vec<Arc<dyn crate::io::Io>> {
        Vec::new()
    }
}

impl Context for BufferPool {
    fn pool(&self) -> &BufferPool {
        self
    }
}

/// A restartable operation the worker runs (see the module docs).
pub trait Task {
    /// What it produces.
    type Output;
    /// What it runs against.
    type Ctx: Context + ?Sized;
    /// Runs one attempt from the start; it holds nothing when it returns. The worker's thread
    /// is marked non-blocking meanwhile: a tree read latch stops at a page
    /// not in memory, which the attempt reports as [`Step::Miss`].
    fn attempt(&mut self, ctx: &Self::Ctx) -> Result<Step<Self::Output>>;

    /// The outcome (bytes written) of the write its last attempt asked for ([`Step::Write`]),
    /// handed over as the worker collects it, before anything else runs.
    fn io_done(&mut self, _ctx: &Self::Ctx, _result: Result<usize>) {}

    /// The worker gives up on the task while its write is in flight ([`Worker::abandon`](super::Worker::abandon)): the
    /// kernel may still read the write's buffer, which the task must therefore never free.
    fn io_abandoned(&mut self) {}
}
