//! The PA-Tree mode's execution layer (`../shared/seeds/pa-tree.txt`, III–IV): one worker
//! thread keeps many tree operations in flight, each waiting on its own page reads, instead of
//! one blocked thread per operation.
//!
//! # The design
//!
//! The paper's worker holds a set of operations, some ready and some waiting (on an I/O or on
//! a latch), and loops: run the ready operation of highest priority until it finishes or must
//! wait; probe the device for completed I/Os when a model says one may have completed; yield the
//! CPU when nothing is ready and nothing will complete soon (Algorithm 2). Here:
//!
//! - **I/O** goes through a [`Backend`]: requests (read, write, write then `fdatasync` linked,
//!   `fdatasync`) tagged by the caller, submitted without waiting, their [`Completion`]s
//!   collected later. [`Uring`] is Linux's io_uring (`SINGLE_ISSUER | DEFER_TASKRUN |
//!   TASKRUN_FLAG`: completions are posted by the worker's own task work when it enters the
//!   kernel to collect them, so a probe is one `io_uring_enter(GETEVENTS)`; spinning on the
//!   completion ring without entering finds nothing). [`Inline`] serves each request at once
//!   through [`Io`], for files that are not OS files (the simulated disk of the
//!   power-loss tests, fault-injecting wrappers) and for kernels that refuse io_uring. Either
//!   can be woken from another thread ([`Waker`]) while it waits, when a new operation arrives.
//! - **Scheduling** ([`sched`]) is the paper's: the ready queue is a heap on a 64-bit key whose
//!   top bit is clear for an operation holding a latch or a pinned frame (finish it first, so it
//!   lets go) and whose other bits are the admission sequence (older first); a probe policy says
//!   when to collect completions (every loop, a fixed interval, the mean latency of the last
//!   second, or the paper's linear model over the outstanding I/Os of the last 1000 µs in 20
//!   slices, `(w0, r0) = Tβ`). With nothing ready, the worker yields by waiting on the ring
//!   for the first completion (the paper spins while its model expects one within `t`).
//!   [`fit`] finds β by least squares from a calibration run.
//!
//! Departures from the paper, each for a reason measured or forced here: the device is reached
//! through the kernel (io_uring), not a user-space NVMe driver, so a probe is a system call, not
//! a load from a completion queue; strong persistence is a durable log record per operation
//! (group commit), not a write-through of every changed node, because only the log makes a
//! split atomic.
//!
//! # What is built
//!
//! This module holds the backends, the scheduling policies, the worker loop ([`worker`]) that
//! runs restartable tasks over the buffer pool's split miss path (as a thread of its own, or
//! stepped by its caller: [`worker::Worker::run_until_finished`]), the [`Executor`] that feeds
//! a worker thread from any thread, and the calibration ([`calibrate`], `sylva calibrate`),
//! with their tests. The tree's operations are its tasks in `PaDb` (`crate::db`'s `pa`
//! module): a read latch on a non-blocking thread stops at a page not in memory
//! ([`crate::sync::Abort::Miss`]), releasing everything, and the attempt runs again once the
//! page is in.
//!
//! Eviction does not wait on the worker, for a miss or a split's allocation: making room hands
//! dirty victims the log covers to the worker, which writes them through its backend
//! ([`BufferPool::begin_load_deferring`](crate::buffer::BufferPool::begin_load_deferring)); a
//! task writes through it too ([`worker::Step::Write`]: the shared worker's log flushes).
//!
//! A loaded page is pinned until its waiters ran ([`worker`]'s docs); the benchmark is
//! `sylva bench --suite patree` (`docs/benchmarking.md`).
//!
//! The paper's two synchronous baselines are here too ([`RingVfs`], `patree:mode=dedicated`
//! and `mode=shared`): `Db` with its page reads through a ring per thread, or through one
//! shared I/O thread.

#[cfg(target_os = "linux")]
mod baseline;
#[cfg(target_os = "linux")]
pub mod calibrate;
mod counters;
mod executor;
pub mod fit;
mod inline;
pub mod sched;
#[cfg(target_os = "linux")]
mod uring;
pub mod worker;

#[cfg(all(test, target_os = "linux"))]
mod pinned_until_waiters_ran;
#[cfg(test)]
mod tests;
#[cfg(all(test, target_os = "linux"))]
mod worker_tests;

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::io::Io;

#[cfg(target_os = "linux")]
pub use baseline::RingVfs;
pub use executor::{Executor, Op};
pub use inline::Inline;
#[cfg(target_os = "linux")]
pub use uring::Uring;

/// Which of the paper's synchronous baselines (V-A) a [`RingVfs`] serves: `Db`, one blocking
/// operation per thread, its page reads through io_uring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockingMode {
    /// A ring per thread; each read waits in its own `io_uring_enter`.
    Dedicated,
    /// One I/O thread and ring for every thread's reads, waking each reader when its read
    /// completes.
    Shared,
}

/// A file registered with a backend, by its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(pub u32);

/// One I/O request. Its buffer is the caller's: it must stay valid, and untouched by anyone
/// else, until the request's [`Completion`] has been returned (hence [`Backend::submit`] is
/// `unsafe`).
#[derive(Debug, Clone, Copy)]
pub enum Request {
    /// Read `len` bytes at `offset` into `buf`. A read that reaches the end of the file first
    /// completes with the bytes it read (the caller checks the length).
    Read {
        /// The file.
        file: FileId,
        /// Where the bytes go.
        buf: *mut u8,
        /// How many bytes.
        len: u32,
        /// From where in the file.
        offset: u64,
    },
    /// Write `len` bytes from `buf` at `offset`; with `sync`, then `fdatasync` the file, the
    /// two linked (the sync runs only if the write wrote everything) and completed as one.
    Write {
        /// The file.
        file: FileId,
        /// The bytes.
        buf: *const u8,
        /// How many bytes.
        len: u32,
        /// Where in the file.
        offset: u64,
        /// Whether to `fdatasync` after the write.
        sync: bool,
    },
    /// `fdatasync` the file.
    Sync {
        /// The file.
        file: FileId,
    },
}

/// A request done: its tag and its result (bytes transferred; 0 for a sync).
#[derive(Debug)]
pub struct Completion {
    /// The tag given to [`Backend::submit`].
    pub tag: u64,
    /// Bytes read or written, or the error, naming the file.
    pub result: Result<u32>,
}

/// The largest tag a caller may use: the backends keep the tags above it for themselves.
pub const MAX_TAG: u64 = (1 << 62) - 1;

/// Where asynchronous I/O goes: submit tagged requests, collect their completions later. A
/// backend is used by one thread at a time; it may move between threads (an io_uring ring only
/// before its first use, [`Uring`]).
pub trait Backend: Send {
    /// Registers `io` and returns the id requests name it by. A backend may refuse a file it
    /// cannot serve ([`Uring`] one without an OS descriptor).
    fn register(&mut self, io: Arc<dyn Io>) -> Result<FileId>;

    /// Queues `request` under `tag` (at most [`MAX_TAG`]); the next [`Backend::complete`]
    /// submits it if it was not submitted already.
    ///
    /// # Safety
    /// The request's buffer must stay valid for its length, and must not be read (for a read)
    /// or written (either) by anything else, until this backend has returned the request's
    /// completion from [`Backend::complete`]. Dropping the backend first is allowed: it waits
    /// for the kernel to finish with every buffer.
    unsafe fn submit(&mut self, tag: u64, request: Request) -> Result<()>;

    /// Submits what is queued, then appends completed requests to `out`: waiting, if fewer
    /// than `min` completed, until `min` have, `timeout` passes (`None`: no limit) or a
    /// [`Waker`] wakes it. `min` 0 never waits (a probe). Returns how many it appended.
    fn complete(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        out: &mut Vec<Completion>,
    ) -> Result<usize>;

    /// Requests submitted whose completion has not been returned yet.
    fn outstanding(&self) -> usize;

    /// A handle other threads wake a waiting [`Backend::complete`] with.
    fn waker(&self) -> Waker;

    /// Enters into the kernel so far (submissions and waits), for the worker's counters.
    fn enters(&self) -> u64;

    /// Requests queued that the kernel has not been handed yet (the next
    /// [`Backend::complete`] submits them). 0 for a backend that serves requests as they come.
    fn unsubmitted(&self) -> usize {
        0
    }

    /// Whether a probe ([`Backend::complete`] with `min` 0) might find completions: false only
    /// when the backend knows none are waiting. True unless a backend can tell cheaply.
    fn may_have_completions(&mut self) -> bool {
        true
    }
}

impl<B: Backend + ?Sized> Backend for &mut B {
    fn register(&mut self, io: Arc<dyn Io>) -> Result<FileId> {
        (**self).register(io)
    }

    unsafe fn submit(&mut self, tag: u64, request: Request) -> Result<()> {
        // SAFETY: the caller keeps the contract of `Backend::submit`, passed on as it is.
        unsafe { (**self).submit(tag, request) }
    }

    fn complete(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        out: &mut Vec<Completion>,
    ) -> Result<usize> {
        (**self).complete(min, timeout, out)
    }

    fn outstanding(&self) -> usize {
        (**self).outstanding()
    }

    fn waker(&self) -> Waker {
        (**self).waker()
    }

    fn enters(&self) -> u64 {
        (**self).enters()
    }

    fn unsubmitted(&self) -> usize {
        (**self).unsubmitted()
    }

    fn may_have_completions(&mut self) -> bool {
        (**self).may_have_completions()
    }
}

/// Wakes a backend waiting in [`Backend::complete`] (from any thread; a wake with nobody
/// waiting makes the next wait return at once).
#[derive(Clone, Debug)]
pub struct Waker(WakerKind);

#[derive(Clone, Debug)]
enum WakerKind {
    /// An eventfd the ring keeps a read armed on.
    #[cfg(target_os = "linux")]
    EventFd(Arc<std::os::fd::OwnedFd>),
    /// A flag and a condition variable ([`Inline`]).
    Flag(Arc<inline::Bell>),
}

impl Waker {
    /// Wakes the backend.
    pub fn wake(&self) {
        match &self.0 {
            #[cfg(target_os = "linux")]
            WakerKind::EventFd(fd) => {
                use std::os::fd::AsRawFd;
                let one = 1u64.to_ne_bytes();
                // SAFETY: writes 8 bytes from a live local buffer to our own eventfd. The
                // result is ignored on purpose: the only failure, a counter at its maximum,
                // means a wake is pending already.
                unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
            }
            WakerKind::Flag(bell) => bell.ring(),
        }
    }
}

/// Which backend `open_backend` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// io_uring where the kernel sets one up, else `Inline`.
    #[default]
    Auto,
    /// io_uring, or an error saying why the kernel refused it.
    Uring,
    /// `Inline`.
    Inline,
}

impl BackendKind {
    /// Parses `auto`, `uring` or `inline`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendKind::Auto),
            "uring" => Ok(BackendKind::Uring),
            "inline" => Ok(BackendKind::Inline),
            _ => Err(Error::InvalidArgument {
                what: format!("backend {s:?} (valid: auto, uring, inline)"),
                limit: 0,
            }),
        }
    }
}

/// A backend of `kind` with room for `entries` requests in flight, on the calling thread (an
/// io_uring ring accepts submissions only from the thread that made it).
pub fn open_backend(kind: BackendKind, entries: u32) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Inline => Ok(Box::new(Inline::new())),
        #[cfg(target_os = "linux")]
        BackendKind::Uring => Ok(Box::new(Uring::new(entries)?)),
        #[cfg(target_os = "linux")]
        BackendKind::Auto => match Uring::new(entries) {
            Ok(ring) => Ok(Box::new(ring)),
            Err(_) => Ok(Box::new(Inline::new())),
        },
        #[cfg(not(target_os = "linux"))]
        BackendKind::Uring => Err(Error::InvalidArgument {
            what: "backend=uring: io_uring is Linux's".into(),
            limit: 0,
        }),
        #[cfg(not(target_os = "linux"))]
        BackendKind::Auto => {
            let _ = entries;
            Ok(Box::new(Inline::new()))
        }
    }
}

/// The error for a tag above [`MAX_TAG`].
fn tag_too_large(tag: u64) -> Error {
    Error::InvalidArgument {
        what: format!("request tag {tag}"),
        limit: MAX_TAG as usize,
    }
}

/// File `id` of a backend's `files`.
fn registered(files: &[Arc<dyn Io>], id: FileId) -> Result<&Arc<dyn Io>> {
    files
        .get(id.0 as usize)
        .ok_or_else(|| Error::InvalidArgument {
            what: format!("file {} (not registered)", id.0),
            limit: files.len(),
        })
}
