//! The `Poisoned` state: after a failed write or fsync a durable store refuses every later call
//! with [`Error::Poisoned`] until it is reopened, and recovery decides what really reached disk
//! (a failed fsync may have dropped dirty pages of the OS's cache, so a retry that succeeds
//! proves nothing; fjall's `Error::Poisoned`, PostgreSQL's PANIC on fsync failure).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// Whether a store is poisoned. Set by a failed write (other than bad input), a failed read's
/// I/O (a read may write a dirty page back to make room), or a background thread's failure.
#[derive(Debug, Default)]
pub(crate) struct Poison(AtomicBool);

impl Poison {
    /// [`Error::Poisoned`] once poisoned.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        if self.0.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Poisons the store.
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Passes on the result of a write, poisoning the store on any failure but bad input.
    #[inline]
    pub(crate) fn guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !matches!(e, Error::InvalidArgument { .. }) {
                self.set();
            }
        }
        r
    }

    /// Passes on the result of a read, poisoning the store when it failed with an I/O error:
    /// the read may have written back a dirty page to make room, and a failed write must not be
    /// retried silently.
    #[inline]
    pub(crate) fn guard_read<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Io { .. } | Error::Poisoned) = &r {
            self.set();
        }
        r
    }
}
