//! [`PaOp`]: an operation submitted to a [`PaDb`], finished on the calling thread when its
//! task's output comes back.

use super::{finish, walked, wrong_output, KeyValue, PaDb, PaOutput, PaResult, PaTask};
use crate::error::{Error, Result};
use crate::exec::Op;

/// An operation submitted to a [`PaDb`]: wait for its result with [`PaOp::wait`], or await
/// it (it is a `Future`, and `Send`).
///
/// Polling never waits for the worker: a scan's next chunk is submitted and polled in turn.
/// What finishing does on the polling thread is what `Db` does on its caller's: reading a
/// value stored out of line from its run, and a write's durability duties (under
/// `sync=always`, the group commit's `fsync`, unless `flush=worker` made the write durable on
/// the worker; under `sync=batch` without background threads, the batch boundary's).
#[must_use = "a PaOp is the only way to the operation's result"]
pub struct PaOp<'a, T> {
    pub(super) db: &'a PaDb,
    pub(super) op: Option<Op<PaOutput>>,
    pub(super) ready: Option<Result<T>>,
    pub(super) finish: fn(&PaDb, Result<PaOutput>) -> Next<T>,
}

/// What finishing a task's output on the calling thread came to.
pub(super) enum Next<T> {
    /// The operation's result.
    Done(Result<T>),
    /// More of it was submitted (a walk's next chunk).
    Again(Op<PaOutput>),
}

impl<T> PaOp<'_, T> {
    /// Blocks until the operation is done (for a write: durable as the sync mode says).
    pub fn wait(mut self) -> Result<T> {
        if let Some(r) = self.ready.take() {
            return r;
        }
        let Some(mut op) = self.op.take() else {
            return Err(taken());
        };
        loop {
            match (self.finish)(self.db, op.wait()) {
                Next::Done(r) => return r,
                Next::Again(next) => op = next,
            }
        }
    }
}

impl<T: Unpin> std::future::Future for PaOp<'_, T> {
    type Output = Result<T>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T>> {
        use std::task::Poll;
        let this = self.get_mut();
        if let Some(r) = this.ready.take() {
            return Poll::Ready(r);
        }
        loop {
            let Some(op) = this.op.as_mut() else {
                return Poll::Ready(Err(taken()));
            };
            let r = match std::pin::Pin::new(op).poll(cx) {
                Poll::Ready(r) => r,
                Poll::Pending => return Poll::Pending,
            };
            this.op = None;
            match (this.finish)(this.db, r) {
                Next::Done(r) => return Poll::Ready(r),
                Next::Again(next) => this.op = Some(next),
            }
        }
    }
}

#[cold]
fn taken() -> Error {
    Error::InvalidArgument {
        what: "an operation's result, taken already".into(),
        limit: 0,
    }
}

pub(super) fn finish_scan(pa: &PaDb, r: Result<PaOutput>) -> Next<Vec<KeyValue>> {
    let mut w = match walked(&pa.db, r) {
        Ok(w) => w,
        Err(e) => return Next::Done(Err(e)),
    };
    if w.gather() {
        return Next::Again(pa.exec.submit(PaTask::Walk(w).into()));
    }
    Next::Done(w.result(&pa.db))
}

pub(super) fn finish_get(pa: &PaDb, r: Result<PaOutput>) -> Next<Option<Vec<u8>>> {
    Next::Done(match finish(&pa.db, r) {
        Ok(PaResult::Got(v)) => Ok(v),
        Ok(_) => Err(wrong_output()),
        Err(e) => Err(e),
    })
}

pub(super) fn finish_put(pa: &PaDb, r: Result<PaOutput>) -> Next<()> {
    Next::Done(match finish(&pa.db, r) {
        Ok(PaResult::Put) => Ok(()),
        Ok(_) => Err(wrong_output()),
        Err(e) => Err(e),
    })
}

pub(super) fn finish_write(pa: &PaDb, r: Result<PaOutput>) -> Next<()> {
    Next::Done(match finish(&pa.db, r) {
        Ok(PaResult::Written) => Ok(()),
        Ok(_) => Err(wrong_output()),
        Err(e) => Err(e),
    })
}

pub(super) fn finish_sync(pa: &PaDb, r: Result<PaOutput>) -> Next<()> {
    Next::Done(match finish(&pa.db, r) {
        Ok(PaResult::Synced) => Ok(()),
        Ok(_) => Err(wrong_output()),
        Err(e) => Err(e),
    })
}

pub(super) fn finish_delete(pa: &PaDb, r: Result<PaOutput>) -> Next<bool> {
    Next::Done(match finish(&pa.db, r) {
        Ok(PaResult::Deleted(found)) => Ok(found),
        Ok(_) => Err(wrong_output()),
        Err(e) => Err(e),
    })
}
