//! The per-page state word: residency, exclusive lock, clock mark, dirty bit and a version for
//! optimistic readers (vmcache's page state, with the bits sylva needs).
//!
//! ```text
//! bit 0  LOCKED     one thread holds the page exclusively (writing it, loading it or evicting it)
//! bit 1  EVICTED    the frame holds no valid bytes; a reader must fix the page first
//! bit 2  MARKED     the clock hand passed and found it unused; an access clears it (second chance)
//! bit 3  DIRTY      the frame differs from the page on disk (and from any copy being written)
//! bit 4  FREED      the page was freed; readers restart
//! bit 5  WRITING    a write-back is copying the frame: its bytes do not change, so optimistic
//!                   readers go on and validate as usual; writers, the clock and other
//!                   flushers wait as for LOCKED (for one page copy, not for an I/O)
//! bit 6  IN_FLIGHT  a copy of the page is being written to the file: readers and writers
//!                   ignore it; the clock does not evict the page until the write ends
//! bit 7  WAITING    a thread sleeps until the holder of LOCKED or WRITING lets go
//! 8..    version    advanced by every exclusive unlock
//! ```
//!
//! **Waiting.** A thread that finds the page held spins briefly (a writer holds a page for an
//! in-memory change), then sleeps ([`PageState::wait`]): it sets `WAITING` and parks on the
//! word's address (`parking_lot_core`'s queues, a futex underneath); whoever clears `LOCKED` or
//! `WRITING` clears `WAITING` in the same step and, if it was set, wakes every sleeper. A page
//! being loaded (`LOCKED | EVICTED`: its holder waits for a read from the file) is slept on at
//! once. Spinning or yielding for the length of an I/O is what this avoids: with 32 threads on
//! 2 CPUs and the pool a ninth of the data, threads yielding in a loop while they waited for
//! pages being loaded or written took 40% of the CPU time of a load and read-only run, time the
//! loaders themselves needed.
//!
//! Writing a page back is not a change of its content, so it neither takes the exclusive lock
//! nor advances the version: a checkpoint writing a run of pages would otherwise restart every
//! reader that had started on one. A reader's version is the state without the bits a
//! write-back or the clock changes ([`stable`]).
//!
//! `IN_FLIGHT` is the one bit that changes while another thread holds `LOCKED` (the flusher
//! clears it when its write ends, whoever holds the page), so every change of a locked page's
//! word is a read-modify-write that keeps it, never a plain store.
//!
//! A page nobody has touched has state 0 … except that 0 would read as resident; pages become
//! known to the pool only through `allocate` or `fix`, which set EVICTED before first use, and
//! the state array is initialised to EVICTED lazily by treating "never seen" (0) as evicted.

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) const LOCKED: u64 = 1;
pub(crate) const EVICTED: u64 = 2;
pub(crate) const MARKED: u64 = 4;
pub(crate) const DIRTY: u64 = 8;
pub(crate) const FREED: u64 = 16;
pub(crate) const WRITING: u64 = 32;
pub(crate) const IN_FLIGHT: u64 = 64;
pub(crate) const WAITING: u64 = 128;
pub(crate) const VERSION: u64 = 256;

/// Spins of a waiter before it sleeps on a page a writer holds.
const SPINS: u32 = 64;

/// Held by a writer or a write-back: another writer or write-back must wait.
pub(crate) const BUSY: u64 = LOCKED | WRITING;

/// The part of a state an optimistic reader validates: everything but the clock mark and the
/// bits a write-back sets and clears (it does not change the bytes), and the waiters' bit.
#[inline]
pub(crate) fn stable(s: u64) -> u64 {
    s & !(MARKED | WRITING | DIRTY | IN_FLIGHT | WAITING)
}

/// Zero means "never seen", which is the same as evicted.
#[inline]
pub(crate) fn is_evicted(s: u64) -> bool {
    s == 0 || s & EVICTED != 0
}

/// One page's state.
pub(crate) struct PageState(pub(crate) AtomicU64);

impl PageState {
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Takes the exclusive lock if the state is still `s` (and neither locked nor being
    /// written back).
    #[inline]
    pub(crate) fn try_lock(&self, s: u64) -> bool {
        s & BUSY == 0
            && self
                .0
                .compare_exchange(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Takes the page for copying it out (a write-back) if the state is still `s` (and neither
    /// locked nor being copied): writers wait, readers do not.
    #[inline]
    pub(crate) fn try_lock_writing(&self, s: u64) -> bool {
        s & BUSY == 0
            && self
                .0
                .compare_exchange(s, s | WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Ends a copy taken with [`PageState::try_lock_writing`] without writing it: the page
    /// stays as it was (dirty).
    #[inline]
    pub(crate) fn unlock_writing(&self) {
        let was = self.0.fetch_and(!(WRITING | WAITING), Ordering::Release);
        self.wake(was);
    }

    /// Ends a copy taken with [`PageState::try_lock_writing`] whose bytes are going to the file:
    /// in one step the page becomes clean (the copy holds every change so far; a writer that
    /// changes it from now on sets `DIRTY` again) and in flight (see [`PageState::end_io`]).
    /// The version stays: the bytes did not change.
    #[inline]
    pub(crate) fn unlock_copied(&self) {
        let was = self.update(|s| (s & !(WRITING | DIRTY | WAITING)) | IN_FLIGHT);
        self.wake(was);
    }

    /// Ends the write of a copy: the page may be evicted again. A failed write marks it dirty
    /// again, so its bytes stay in memory and a later flush writes them.
    #[inline]
    pub(crate) fn end_io(&self, written: bool) {
        if written {
            self.0.fetch_and(!IN_FLIGHT, Ordering::Release);
        } else {
            self.update(|s| (s & !IN_FLIGHT) | DIRTY);
        }
    }

    /// Applies `f` atomically (a compare-and-swap loop: other bits may change meanwhile);
    /// returns the state before. A change that clears `LOCKED` or `WRITING` clears `WAITING`
    /// too and passes the state before to [`PageState::wake`].
    #[inline]
    pub(crate) fn update(&self, f: impl Fn(u64) -> u64) -> u64 {
        match self
            .0
            .fetch_update(Ordering::Release, Ordering::Relaxed, |s| Some(f(s)))
        {
            Ok(s) | Err(s) => s,
        }
    }

    /// Releases the exclusive lock: advances the version and sets the given flag bits
    /// (`EVICTED`, `DIRTY`, `FREED`), clearing `LOCKED` and `MARKED`; `keep_dirty` keeps an
    /// existing dirty bit. `IN_FLIGHT` is kept as it is at the moment of the release: a flusher
    /// may clear it while we hold the lock, so this is a read-modify-write.
    #[inline]
    pub(crate) fn unlock(&self, set: u64, keep_dirty: bool) {
        let keep = IN_FLIGHT | if keep_dirty { DIRTY } else { 0 };
        let was = self.update(|s| {
            let version = (s & !(VERSION - 1)) + VERSION;
            version | set | (s & keep)
        });
        self.wake(was);
    }

    /// Wakes the threads sleeping on the page if `was`, the state before a release that
    /// cleared `WAITING`, had it.
    #[inline]
    fn wake(&self, was: u64) {
        if was & WAITING != 0 {
            // SAFETY: the key is this word's address, which only page-state waits park on
            // (nothing else in the process uses it as a parking_lot key).
            unsafe {
                parking_lot_core::unpark_all(self.key(), parking_lot_core::DEFAULT_UNPARK_TOKEN)
            };
        }
    }

    fn key(&self) -> usize {
        self as *const PageState as usize
    }

    /// Waits for the holder of the page: `s` is the state last seen, with a bit of `held`
    /// (`LOCKED`, or `LOCKED | WRITING`) set. Spins a little first unless the page is being
    /// loaded, then sleeps until a release; returns early (the caller loads the state again
    /// and decides) whenever the state is not `s` any more. `spins` counts this wait's spins.
    pub(crate) fn wait(&self, s: u64, held: u64, spins: &mut u32) {
        if *spins < SPINS && s & EVICTED == 0 {
            *spins += 1;
            std::hint::spin_loop();
            return;
        }
        if s & WAITING == 0
            && self
                .0
                .compare_exchange(s, s | WAITING, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // SAFETY: the key is this word's address, used only by page-state waits (see `wake`);
        // the closures neither panic nor call into parking_lot.
        unsafe {
            parking_lot_core::park(
                self.key(),
                || {
                    let now = self.0.load(Ordering::Acquire);
                    now & held != 0 && now & WAITING != 0
                },
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            )
        };
    }

    /// Clears the clock mark if set (the rare write a reader does: only after the clock hand
    /// passed over a page that is still in use).
    #[inline]
    pub(crate) fn touch(&self, s: u64) {
        if s & MARKED != 0 {
            let _ = self
                .0
                .compare_exchange(s, s & !MARKED, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}
