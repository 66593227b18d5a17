//! The worker's writes (the parent module's "Write-backs"): the dirty victims the pool hands
//! it to write back, its caller's own requests (a session's log flush), and its tasks' own
//! writes ([`Step::Write`](super::Step::Write): the shared worker's log flushes), all through the same backend.
//! All are urgent: other threads or tasks may be waiting for them, so what is queued goes to
//! the kernel at the next turn ("Submissions"). Their completions are collected with the
//! page reads' (`collect`).

use std::sync::Arc;

use super::{Task, Worker, OTHER_TAG, OWN_TAG, WRITE_TAG};
use crate::error::{Error, Result};
use crate::exec::sched::IoKind;
use crate::exec::{Completion, FileId, Request};

/// A write a task asks its worker to make ([`Step::Write`](super::Step::Write)): `len` bytes from `buf` at
/// `offset` of the context's file `file` ([`super::Context::files`]), then, with `sync`, an
/// `fdatasync` of it.
#[derive(Debug)]
pub struct OwnWrite {
    file: usize,
    buf: *const u8,
    len: u32,
    offset: u64,
    sync: bool,
}

impl OwnWrite {
    /// The write of `bytes` at `offset` of the context's file `file`, synced after with `sync`.
    ///
    /// # Safety
    /// The bytes stay valid and untouched until the write's outcome is handed to the task
    /// ([`Task::io_done`]), or for good if the worker gives up on the task first
    /// ([`Task::io_abandoned`]).
    pub unsafe fn new(file: usize, bytes: &[u8], offset: u64, sync: bool) -> OwnWrite {
        OwnWrite {
            file,
            buf: bytes.as_ptr(),
            len: bytes.len() as u32,
            offset,
            sync,
        }
    }
}

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

    /// The context's file `i` ([`super::Context::files`]) as registered with the backend.
    pub fn ctx_file(&self, i: usize) -> Option<FileId> {
        self.ctx_files.get(i).copied()
    }

    /// Submits the write task `slot` asked for; the task waits for it. A write that cannot be
    /// submitted is handed to the task as failed, and the task made ready.
    pub(super) fn submit_own(&mut self, slot: u32, write: OwnWrite) {
        let submitted = match self.ctx_files.get(write.file) {
            Some(&file) => {
                let request = Request::Write {
                    file,
                    buf: write.buf,
                    len: write.len,
                    offset: write.offset,
                    sync: write.sync,
                };
                // SAFETY: `OwnWrite::new`'s contract: the bytes stay valid until the outcome
                // is handed to the task (in `own_written`) or the task is abandoned.
                unsafe { self.backend.submit(OWN_TAG | u64::from(slot), request) }
            }
            None => Err(Error::InvalidArgument {
                what: format!("a task's write to the context's file {}", write.file),
                limit: self.ctx_files.len(),
            }),
        };
        let now = self.now();
        let Some(s) = self.slots[slot as usize].as_mut() else {
            return;
        };
        match submitted {
            Ok(()) => {
                self.prober.submitted(now, IoKind::Write);
                self.counters.own_writes += 1;
                self.urgent = true;
                self.own_in_flight += 1;
                s.own_write = Some(now);
            }
            Err(e) => {
                s.task.io_done(self.ctx, Err(e));
                self.make_ready(slot);
            }
        }
    }

    /// Hands a task's own write's completion to it and makes it ready, with the tasks that
    /// waited for it ([`Step::AfterWrite`](super::Step::AfterWrite)).
    pub(super) fn own_written(&mut self, c: Completion, now: u64) {
        let slot = (c.tag & !OWN_TAG) as u32;
        let Some(s) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        if let Some(submitted) = s.own_write.take() {
            self.own_in_flight -= 1;
            self.prober.completed(submitted, now, IoKind::Write);
        }
        s.task.io_done(self.ctx, c.result.map(|n| n as usize));
        self.make_ready(slot);
        for waiter in std::mem::take(&mut self.own_waiters) {
            self.make_ready(waiter);
        }
    }

    /// Completions of the caller's requests collected so far.
    pub fn take_others(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.others)
    }
}
