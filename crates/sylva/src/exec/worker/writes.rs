//! The worker's writes (the parent module's "Write-backs"): the dirty victims the pool hands
//! it to write back, and its caller's own requests (a session's log flush) through the same
//! backend. Both are urgent: other threads may be waiting for them, so what is queued goes to
//! the kernel at the next turn ("Submissions"). Their completions are collected with the
//! page reads' (`collect`).

use std::sync::Arc;

use super::{Task, Worker, OTHER_TAG, WRITE_TAG};
use crate::error::{Error, Result};
use crate::exec::sched::IoKind;
use crate::exec::{Completion, FileId, Request};

impl<T: Task> Worker<'_, T> {
    /// Registers another file with the worker's backend, for [`Worker::submit_other`].
    pub fn register(&mut self, io: Arc<dyn crate::io::Io>) -> Result<FileId> {
        self.backend.register(io)
    }

    /// Submits a request of the caller's own (a log write) through the worker's backend under
    /// `tag`, which must have [`OTHER_TAG`] set (page reads use the page's id); its completion
    /// comes back through [`Worker::take_others`], and
    /// [`run_until_finished`](Worker::run_until_finished) returns when it does.
    ///
    /// # Safety
    /// As [`Backend::submit`](crate::exec::Backend::submit): the request's buffer stays valid
    /// and untouched until its completion has been taken.
    pub unsafe fn submit_other(&mut self, tag: u64, request: Request) -> Result<()> {
        if tag & OTHER_TAG == 0 || self.others_in_flight.contains_key(&tag) {
            return Err(Error::InvalidArgument {
                what: format!("tag {tag:#x} of a caller's request (OTHER_TAG unset, or in use)"),
                limit: 0,
            });
        }
        // SAFETY: the caller keeps `Backend::submit`'s contract.
        unsafe { self.backend.submit(tag, request)? };
        let now = self.now();
        self.prober.submitted(now, IoKind::Write);
        self.others_in_flight.insert(tag, now);
        self.urgent = true;
        Ok(())
    }

    /// The caller's requests in flight.
    pub fn others_in_flight(&self) -> usize {
        self.others_in_flight.len()
    }

    /// Write-backs of evicted pages in flight.
    pub fn writes_in_flight(&self) -> usize {
        self.writing.len()
    }

    /// Waits until every write-back in flight completed (a caller stepping the loop itself
    /// calls it before it stops stepping: until then the pages are locked, and anyone wanting
    /// one, a checkpoint included, waits for them).
    pub fn drain_writes(&mut self, sink: &mut impl FnMut(T, Result<T::Output>)) -> Result<()> {
        while !self.writing.is_empty() {
            self.collect(1, None, sink)?;
        }
        Ok(())
    }

    /// Submits the write-backs the pool handed out. One that cannot be submitted is ended
    /// failed (the page back in the pool, dirty) and fails the loop.
    pub(super) fn submit_writes(&mut self) -> Result<()> {
        let mut failed = Ok(());
        for write in std::mem::take(&mut self.handed) {
            let (buf, len) = write.frame();
            let request = Request::Write {
                file: self.file,
                buf,
                len: len as u32,
                offset: write.offset(),
                sync: false,
            };
            let id = write.id();
            // SAFETY: the frame is the write-back's alone (the page is locked) until its
            // completion is collected and the write-back completed, in `collect`; it lives in
            // `self.writing` until then.
            match unsafe { self.backend.submit(WRITE_TAG | id, request) } {
                Ok(()) => {
                    let now = self.now();
                    self.prober.submitted(now, IoKind::Write);
                    self.counters.writebacks += 1;
                    self.urgent = true;
                    self.writing.insert(id, (write, now));
                }
                Err(e) => {
                    let _ = self.pool.complete_write_back(write, Err(e.duplicate()));
                    if failed.is_ok() {
                        failed = Err(e);
                    }
                }
            }
        }
        failed
    }

    /// Completions of the caller's requests collected so far.
    pub fn take_others(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.others)
    }
}
