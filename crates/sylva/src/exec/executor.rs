//! [`Executor`]: a [`Worker`] on its own thread, fed by any number of threads. Each
//! [`Executor::submit`] queues a task and returns an [`Op`], a handle that is both a `Future`
//! (for callers with an async runtime) and blocking ([`Op::wait`]). The worker thread makes its
//! backend itself (an io_uring ring serves only the thread that made it), takes queued tasks as
//! it has room, and sleeps in the backend when it has nothing to do; a submission wakes it.
//! Dropping an `Op` neither cancels its task nor disturbs others: the result is dropped when it
//! comes.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::worker::{Admit, Step, Task, Worker, WorkerCounters, WorkerOptions};
use super::{open_backend, BackendKind, Waker};
use crate::error::{Error, Result};

/// Where a task's result lands.
struct OpState<O> {
    result: Mutex<Slot<O>>,
    done: Condvar,
}

enum Slot<O> {
    Pending(Option<std::task::Waker>),
    Ready(Result<O>),
    Taken,
}

impl<O> OpState<O> {
    fn fulfil(&self, result: Result<O>) {
        let mut slot = self.result.lock();
        if let Slot::Pending(Some(waker)) = std::mem::replace(&mut *slot, Slot::Ready(result)) {
            waker.wake();
        }
        self.done.notify_all();
    }
}

/// A submitted task's result, to await or [`Op::wait`] for.
#[must_use = "an Op is the only way to the task's result"]
pub struct Op<O> {
    state: Arc<OpState<O>>,
}

impl<O> Op<O> {
    /// Blocks until the task finished; its result.
    pub fn wait(self) -> Result<O> {
        let mut slot = self.state.result.lock();
        loop {
            match std::mem::replace(&mut *slot, Slot::Taken) {
                Slot::Ready(r) => return r,
                pending @ Slot::Pending(_) => {
                    *slot = pending;
                    self.state.done.wait(&mut slot);
                }
                Slot::Taken => return Err(taken()),
            }
        }
    }
}

fn taken() -> Error {
    Error::InvalidArgument {
        what: "an operation's result, taken already".into(),
        limit: 0,
    }
}

impl<O> Future for Op<O> {
    type Output = Result<O>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<O>> {
        let mut slot = self.state.result.lock();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Ready(r) => Poll::Ready(r),
            Slot::Pending(_) => {
                *slot = Slot::Pending(Some(cx.waker().clone()));
                Poll::Pending
            }
            Slot::Taken => Poll::Ready(Err(taken())),
        }
    }
}

/// A task with the place its result goes.
struct Job<T: Task> {
    task: T,
    to: Arc<OpState<T::Output>>,
}

impl<T: Task> Task for Job<T> {
    type Output = T::Output;
    type Ctx = T::Ctx;

    fn attempt(&mut self, ctx: &T::Ctx) -> Result<Step<T::Output>> {
        self.task.attempt(ctx)
    }

    fn io_done(&mut self, ctx: &T::Ctx, result: Result<usize>) {
        self.task.io_done(ctx, result)
    }

    fn io_abandoned(&mut self) {
        self.task.io_abandoned()
    }
}

/// What submitters and the worker thread share.
struct Shared<T: Task> {
    queue: Mutex<Queue<T>>,
    waker: Waker,
    /// Raised by the worker while it waits with room for a task: a submission wakes it only
    /// then ([`Worker::set_asleep_flag`]).
    asleep: Arc<AtomicBool>,
    /// The worker's counters as of its last wait.
    counters: Arc<Mutex<WorkerCounters>>,
}

/// Queued tasks, and whether the executor is shutting down (both under one lock, so no task is
/// queued after the worker saw the queue closed and empty).
struct Queue<T: Task> {
    jobs: VecDeque<Job<T>>,
    closed: bool,
}

/// A worker thread running tasks of type `T` over a buffer pool.
pub struct Executor<T: Task> {
    shared: Arc<Shared<T>>,
    thread: Option<JoinHandle<Result<WorkerCounters>>>,
}

impl<T> Executor<T>
where
    T: Task + Send + 'static,
    T::Output: Send + 'static,
    T::Ctx: Sized + Send + Sync + 'static,
{
    /// Starts the worker thread running tasks against `ctx` with a backend of `backend` kind
    /// (an error if it cannot be made there, e.g. `Uring` where the kernel refuses io_uring).
    pub fn start(ctx: Arc<T::Ctx>, backend: BackendKind, options: WorkerOptions) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Arc<Shared<T>>>>(1);
        let entries = options.inflight.next_power_of_two() as u32;
        let thread = std::thread::Builder::new()
            .name("sylva-exec".into())
            .spawn(move || -> Result<WorkerCounters> {
                let backend = match open_backend(backend, entries) {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(e.duplicate()));
                        return Err(e);
                    }
                };
                let shared = Arc::new(Shared {
                    queue: Mutex::new(Queue {
                        jobs: VecDeque::new(),
                        closed: false,
                    }),
                    waker: backend.waker(),
                    asleep: Arc::new(AtomicBool::new(false)),
                    counters: Arc::default(),
                });
                let mut worker = match Worker::new(&*ctx, backend, options) {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = tx.send(Err(e.duplicate()));
                        return Err(e);
                    }
                };
                worker.set_asleep_flag(shared.asleep.clone());
                worker.publish_counters(shared.counters.clone());
                if tx.send(Ok(shared.clone())).is_err() {
                    return Ok(WorkerCounters::default());
                }
                let source = || {
                    let mut queue = shared.queue.lock();
                    match queue.jobs.pop_front() {
                        Some(job) => Admit::Task(job),
                        None if queue.closed => Admit::Closed,
                        None => Admit::Empty,
                    }
                };
                worker.run(source, |job: Job<T>, result| job.to.fulfil(result))?;
                Ok(worker.counters())
            })
            .map_err(|e| Error::Io {
                path: None,
                source: e,
            })?;
        match rx.recv() {
            Ok(Ok(shared)) => Ok(Executor {
                shared,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => Error::Io {
                    path: None,
                    source: std::io::Error::other("the executor's thread died while starting"),
                },
            }),
        }
    }

    /// Queues `task`; its result comes through the returned [`Op`].
    pub fn submit(&self, task: T) -> Op<T::Output> {
        let op = Arc::new(OpState {
            result: Mutex::new(Slot::Pending(None)),
            done: Condvar::new(),
        });
        self.queue(Job {
            task,
            to: op.clone(),
        });
        Op { state: op }
    }

    fn queue(&self, job: Job<T>) {
        let mut queue = self.shared.queue.lock();
        if queue.closed {
            drop(queue);
            job.to.fulfil(Err(Error::InvalidArgument {
                what: "a task submitted to an executor that was shut down".into(),
                limit: 0,
            }));
        } else {
            queue.jobs.push_back(job);
            drop(queue);
            if self.shared.asleep.swap(false, Ordering::SeqCst) {
                self.shared.waker.wake();
            }
        }
    }

    /// What the worker did, as of its last wait (it refreshes them before each).
    pub fn counters(&self) -> WorkerCounters {
        self.shared.counters.lock().clone()
    }

    /// Finishes every queued task, stops the thread and returns what the worker did.
    pub fn shutdown(mut self) -> Result<WorkerCounters> {
        self.stop()
    }
}

impl<T: Task> Executor<T> {
    fn stop(&mut self) -> Result<WorkerCounters> {
        self.shared.queue.lock().closed = true;
        self.shared.waker.wake();
        let result = self.thread.take().map(JoinHandle::join);
        // A worker that failed left tasks queued: they fail too, rather than wait forever.
        for job in self.shared.queue.lock().jobs.drain(..) {
            job.to.fulfil(Err(Error::InvalidArgument {
                what: "a task its executor stopped before running".into(),
                limit: 0,
            }));
        }
        match result {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Io {
                path: None,
                source: std::io::Error::other("the executor's thread panicked"),
            }),
            None => Ok(WorkerCounters::default()),
        }
    }
}

impl<T: Task> Drop for Executor<T> {
    /// As [`Executor::shutdown`], its result dropped.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
