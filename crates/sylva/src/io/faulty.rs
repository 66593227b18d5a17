//! `FaultyIo`: an [`Io`] that injects faults, for tests of everything above `io`.
//!
//! Faults are armed on a shared handle and fire once, on the next matching call: a failed write,
//! a short write (part of the buffer reaches the file, then an error), a torn write (part reaches
//! the file and the call reports success, as a crash mid-write would leave it), a failed fsync, a
//! failed read, and a bit flipped in the data a read returns.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Io;
use crate::error::{Error, Result};

/// One fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next write fails and writes nothing.
    FailWrite,
    /// The next write writes only its first `n` bytes, then fails.
    ShortWrite(usize),
    /// The next write writes only its first `n` bytes and reports success.
    TornWrite(usize),
    /// The next `sync` fails.
    FailSync,
    /// The next read returns its data with bit `bit` (counted from the buffer's start) flipped.
    FlipBit(usize),
    /// The next read fails (`EIO`) and returns nothing.
    FailRead,
}

/// An `Io` wrapper that injects armed faults.
pub struct FaultyIo<I> {
    inner: I,
    armed: Arc<Mutex<Vec<Fault>>>,
}

impl<I: Io> FaultyIo<I> {
    /// Wraps `inner`; arm faults through the returned handle.
    pub fn new(inner: I) -> (Self, FaultHandle) {
        let armed = Arc::new(Mutex::new(Vec::new()));
        (
            FaultyIo {
                inner,
                armed: armed.clone(),
            },
            FaultHandle { armed },
        )
    }

    fn take(&self, pick: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let mut armed = self.armed.lock();
        let i = armed.iter().position(pick)?;
        Some(armed.remove(i))
    }
}

/// Arms faults on a [`FaultyIo`].
#[derive(Clone)]
pub struct FaultHandle {
    armed: Arc<Mutex<Vec<Fault>>>,
}

impl FaultHandle {
    /// Arms `fault` for the next matching call.
    pub fn arm(&self, fault: Fault) {
        self.armed.lock().push(fault);
    }

    /// Faults armed but not yet fired.
    pub fn pending(&self) -> usize {
        self.armed.lock().len()
    }
}

fn injected(what: &str) -> Error {
    Error::Io {
        path: None,
        source: std::io::Error::other(format!("injected fault: {what}")),
    }
}

impl<I: Io> Io for FaultyIo<I> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if self.take(|f| matches!(f, Fault::FailRead)).is_some() {
            return Err(injected("failed read"));
        }
        self.inner.read_at(buf, offset)?;
        if let Some(Fault::FlipBit(bit)) = self.take(|f| matches!(f, Fault::FlipBit(_))) {
            if let Some(byte) = buf.get_mut(bit / 8) {
                *byte ^= 1 << (bit % 8);
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        match self.take(|f| {
            matches!(
                f,
                Fault::FailWrite | Fault::ShortWrite(_) | Fault::TornWrite(_)
            )
        }) {
            Some(Fault::FailWrite) => Err(injected("failed write")),
            Some(Fault::ShortWrite(n)) => {
                self.inner.write_at(&buf[..n.min(buf.len())], offset)?;
                Err(injected("short write"))
            }
            Some(Fault::TornWrite(n)) => self.inner.write_at(&buf[..n.min(buf.len())], offset),
            _ => self.inner.write_at(buf, offset),
        }
    }

    fn sync(&self) -> Result<()> {
        if self.take(|f| matches!(f, Fault::FailSync)).is_some() {
            return Err(injected("failed fsync"));
        }
        self.inner.sync()
    }

    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }

    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}
