//! [`Inline`]: a [`Backend`] that serves each request at once through [`Io`], for files that
//! are not OS files (the simulated disk, fault-injecting wrappers, memory) and for kernels that
//! refuse io_uring. Requests complete in the order they were submitted; a wait with nothing
//! left to complete sleeps until a [`Waker`] rings or the timeout passes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{
    registered, tag_too_large, Backend, Completion, FileId, Request, Waker, WakerKind, MAX_TAG,
};
use crate::error::Result;
use crate::io::Io;

/// Serves requests at once through [`Io`].
pub struct Inline {
    files: Vec<Arc<dyn Io>>,
    done: VecDeque<Completion>,
    bell: Arc<Bell>,
}

/// A wake flag with a condition variable.
#[derive(Debug, Default)]
pub(super) struct Bell {
    rung: Mutex<bool>,
    cond: Condvar,
}

impl Bell {
    pub(super) fn ring(&self) {
        *self.rung.lock() = true;
        self.cond.notify_one();
    }

    /// Waits until rung (clearing it) or `timeout` passes.
    fn wait(&self, timeout: Option<Duration>) {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut rung = self.rung.lock();
        while !*rung {
            match deadline {
                Some(d) => {
                    if self.cond.wait_until(&mut rung, d).timed_out() {
                        break;
                    }
                }
                None => self.cond.wait(&mut rung),
            }
        }
        *rung = false;
    }

    /// Clears a pending ring; whether there was one.
    fn take(&self) -> bool {
        std::mem::take(&mut *self.rung.lock())
    }
}

impl Inline {
    /// A backend with no files.
    pub fn new() -> Self {
        Inline {
            files: Vec::new(),
            done: VecDeque::new(),
            bell: Arc::new(Bell::default()),
        }
    }

    fn file(&self, id: FileId) -> Result<&Arc<dyn Io>> {
        registered(&self.files, id)
    }

    /// Does `request` now.
    ///
    /// # Safety
    /// As [`Backend::submit`]: the buffer is valid for its length and not used by anyone else.
    unsafe fn serve(&self, request: Request) -> Result<u32> {
        match request {
            Request::Read {
                file,
                buf,
                len,
                offset,
            } => {
                let io = self.file(file)?;
                // Reads past the end complete short, as io_uring's do.
                let end = io.file_len()?;
                let n = end.saturating_sub(offset).min(u64::from(len)) as usize;
                // SAFETY: the caller guarantees `buf` is valid for `len` >= `n` bytes and
                // nobody else uses it until the completion is returned.
                let buf = unsafe { std::slice::from_raw_parts_mut(buf, n) };
                io.read_at(buf, offset)?;
                Ok(n as u32)
            }
            Request::Write {
                file,
                buf,
                len,
                offset,
                sync,
            } => {
                let io = self.file(file)?;
                // SAFETY: as above, for `len` bytes the caller does not change meanwhile.
                let buf = unsafe { std::slice::from_raw_parts(buf, len as usize) };
                io.write_at(buf, offset)?;
                if sync {
                    io.sync()?;
                }
                Ok(len)
            }
            Request::Sync { file } => {
                self.file(file)?.sync()?;
                Ok(0)
            }
        }
    }
}

impl Default for Inline {
    fn default() -> Self {
        Inline::new()
    }
}

impl Backend for Inline {
    fn register(&mut self, io: Arc<dyn Io>) -> Result<FileId> {
        self.files.push(io);
        Ok(FileId(self.files.len() as u32 - 1))
    }

    unsafe fn submit(&mut self, tag: u64, request: Request) -> Result<()> {
        if tag > MAX_TAG {
            return Err(tag_too_large(tag));
        }
        // SAFETY: the caller keeps the buffer valid and to itself (this method's contract).
        let result = unsafe { self.serve(request) };
        self.done.push_back(Completion { tag, result });
        Ok(())
    }

    fn complete(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        out: &mut Vec<Completion>,
    ) -> Result<usize> {
        let n = self.done.len();
        out.extend(self.done.drain(..));
        // Nothing else can complete: every request completed when submitted. Wait only for a
        // wake (or the timeout), as the ring would with nothing in flight.
        if n < min && !self.bell.take() {
            self.bell.wait(timeout);
        }
        Ok(n)
    }

    fn outstanding(&self) -> usize {
        self.done.len()
    }

    fn waker(&self) -> Waker {
        Waker(WakerKind::Flag(self.bell.clone()))
    }

    fn enters(&self) -> u64 {
        0
    }
}
