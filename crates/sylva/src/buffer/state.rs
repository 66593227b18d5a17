//! The per-page state word: residency, exclusive lock, clock mark, dirty bit and a version for
//! optimistic readers (vmcache's page state, with the bits sylva needs).
//!
//! ```text
//! bit 0  LOCKED   one thread holds the page exclusively (writing it, loading it or evicting it)
//! bit 1  EVICTED  the frame holds no valid bytes; a reader must fix the page first
//! bit 2  MARKED   the clock hand passed and found it unused; an access clears it (second chance)
//! bit 3  DIRTY    the frame differs from the page on disk
//! bit 4  FREED    the page was freed; readers restart
//! 5..    version  advanced by every exclusive unlock
//! ```
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
pub(crate) const VERSION: u64 = 32;

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

    /// Takes the exclusive lock if the state is still `s` (and not locked).
    #[inline]
    pub(crate) fn try_lock(&self, s: u64) -> bool {
        s & LOCKED == 0
            && self
                .0
                .compare_exchange(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Releases the exclusive lock: advances the version and sets the given flag bits
    /// (`EVICTED`, `DIRTY`, `FREED`), clearing `LOCKED` and `MARKED`; `keep_dirty` keeps an
    /// existing dirty bit.
    #[inline]
    pub(crate) fn unlock(&self, set: u64, keep_dirty: bool) {
        let s = self.0.load(Ordering::Relaxed);
        let keep = if keep_dirty { s & DIRTY } else { 0 };
        let version = (s & !(VERSION - 1)) + VERSION;
        self.0.store(version | set | keep, Ordering::Release);
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
