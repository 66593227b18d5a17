//! Concurrency primitives shared by the in-memory trees ([`crate::btree`], [`crate::mem::bptree`])
//! and the buffer pool ([`crate::buffer`]): the versioned [`Latch`] of optimistic lock coupling
//! (Leis et al.; B-Trees Are Back section 7.1), the outcome of an optimistic step ([`Olc`],
//! [`Abort`]), and the [`backoff`] of a thread that waits for another's lock.
//!
//! Optimistic lock coupling: a reader takes no lock; it reads a latch's version, reads the node,
//! then validates that the version is unchanged, restarting when it changed. A writer takes the
//! latch exclusively by upgrading the version it read, and its unlock advances the version. The
//! buffer pool's page-state words follow the same protocol with more bits (`crate::buffer`'s
//! `state`); a thread waiting for a page's holder there sleeps instead of backing off, since the
//! holder may be waiting for an I/O.
//!
//! A thread that must never block on a page read (the PA-Tree mode's worker, [`crate::exec`])
//! marks itself [`nonblocking`]: a paged store's read latch then stops at a page that is not in
//! memory with [`Abort::Miss`] instead of loading it, and the caller loads the page
//! asynchronously and runs the operation again.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;

/// A versioned latch: bit 0 obsolete, bit 1 write-locked, bits 2.. a version counter that
/// every write unlock advances.
#[derive(Debug, Default)]
pub struct Latch(AtomicU64);

const OBSOLETE: u64 = 1;
const LOCKED: u64 = 2;
const STEP: u64 = 4;

/// Why an optimistic operation could not complete.
pub enum Abort {
    /// A page changed underneath; start the operation again.
    Restart,
    /// Page `.0` is not in memory and this thread must not wait for it (`nonblocking`):
    /// everything the attempt held is released; load the page, then start again.
    Miss(u64),
    /// A real error.
    Fail(Error),
}

impl From<Error> for Abort {
    fn from(e: Error) -> Self {
        Abort::Fail(e)
    }
}

/// The result of an optimistic step.
pub type Olc<T> = std::result::Result<T, Abort>;

impl Latch {
    /// Waits until the latch is not write-locked and returns its version. `Restart` if the page
    /// was freed.
    #[inline]
    pub(crate) fn read_lock(&self) -> Olc<u64> {
        let mut spins = 0u32;
        loop {
            let v = self.0.load(Ordering::Acquire);
            if v & OBSOLETE != 0 {
                return Err(Abort::Restart);
            }
            if v & LOCKED == 0 {
                return Ok(v);
            }
            backoff(&mut spins);
        }
    }

    /// Whether the version is still `v` (nothing was written since `read_lock` returned it).
    #[inline]
    pub(crate) fn validate(&self, v: u64) -> Olc<()> {
        // Orders the optimistic reads before this check.
        std::sync::atomic::fence(Ordering::Acquire);
        if self.0.load(Ordering::Relaxed) == v {
            Ok(())
        } else {
            Err(Abort::Restart)
        }
    }

    /// Takes the write lock if the version is still `v`.
    #[inline]
    pub(crate) fn upgrade(&self, v: u64) -> Olc<()> {
        self.0
            .compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| Abort::Restart)
    }

    /// Releases the write lock and advances the version.
    #[inline]
    pub(crate) fn unlock(&self) {
        let v = self.0.load(Ordering::Relaxed);
        self.0
            .store((v & !(LOCKED | OBSOLETE)) + STEP, Ordering::Release);
    }

    /// Releases the write lock marking the page freed.
    pub(crate) fn unlock_obsolete(&self) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(
            ((v & !(LOCKED | OBSOLETE)) + STEP) | OBSOLETE,
            Ordering::Release,
        );
    }

    /// Takes a freed page's latch for reuse, write-locked.
    pub(crate) fn lock_for_reuse(&self) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(
            ((v & !(LOCKED | OBSOLETE)) + STEP) | LOCKED,
            Ordering::Release,
        );
    }
}

/// Spin briefly, then yield: on a machine with fewer cores than threads a spinning waiter would
/// otherwise burn the holder's time slice.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

thread_local! {
    /// Whether this thread stops at pages not in memory instead of loading them.
    static NONBLOCKING: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread has a log flush of its own in flight (a `PaSession`'s).
    static OWN_LOG_FLUSH: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread has started a log flush that only it completes (a PA-Tree session's,
/// submitted through its ring): it must not wait for the log, which would wait for that flush.
#[inline]
pub fn own_log_flush() -> bool {
    OWN_LOG_FLUSH.with(Cell::get)
}

/// Marks (or clears) this thread's own log flush in flight ([`own_log_flush`]).
pub fn set_own_log_flush(on: bool) {
    OWN_LOG_FLUSH.with(|c| c.set(on));
}

/// Whether this thread is marked non-blocking: a paged store's read latch answers a page that
/// is not in memory with [`Abort::Miss`] rather than reading it.
#[inline]
pub fn nonblocking() -> bool {
    NONBLOCKING.with(Cell::get)
}

/// Marks this thread non-blocking (or not); returns the previous mark.
pub fn set_nonblocking(on: bool) -> bool {
    NONBLOCKING.with(|c| c.replace(on))
}
