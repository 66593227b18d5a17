//! The shared worker's tasks ([`SharedTask`]): a [`PaTask`] and, with `flush=worker`, under
//! `sync=always`, the durability of the write it did, which the worker makes itself (and, in
//! any mode, that of the writes before a sync). With `flush=caller`, the default, the task is
//! its [`PaTask`] alone, and the caller makes the write durable as `Db` does.
//!
//! A session holds its finished writes until a log flush it submits covers them
//! ([`super::PaSession`]). The shared worker thread has no caller stepping it, so with
//! `flush=worker` each write carries its own wait: once applied and logged, a write under
//! `sync=always` stays in flight
//! until the log is durable past its last record. If no flush is in flight it starts one
//! ([`crate::wal::Wal::begin_flush`]) and asks the worker to submit its write and `fdatasync`
//! ([`Step::Write`]); the flush ends as its completion is collected ([`Task::io_done`]), so
//! the writes it covers find their records durable at their next attempt. While this worker's
//! flush is in flight, another write waits for its completion ([`Step::AfterWrite`]); while
//! another thread's is (a session's, or `Db`'s group commit for a value stored out of line),
//! as a held task ([`Step::Held`]): after the worker's next collection, or a bounded time, it
//! looks again. So one flush covers every write logged before it began, a group commit on
//! the worker's ring, and the caller's wait ends with its write durable, without an `fsync`
//! of its own. While its flush is in flight
//! the worker's thread is marked as owning one ([`crate::sync::set_own_log_flush`]), as a
//! session's is: an eviction there passes over dirty pages whose records are not durable yet,
//! whose write-back would wait for the log, that is for this flush.

use super::{PaOutput, PaTask};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::exec::worker::{OwnWrite, Step, Task};
use crate::wal::{Flush, SyncMode};

/// A task of the shared worker thread (module docs).
pub(crate) struct SharedTask {
    task: PaTask,
    /// The worker makes writes durable (`flush=worker`); otherwise the caller does.
    worker_flush: bool,
    /// Set once a write under `sync=always` is done: its output, until its record is durable.
    durable: Option<Durability>,
}

/// A done write waiting for its log record to be durable.
struct Durability {
    /// The LSN of its last record.
    lsn: u64,
    out: Option<PaOutput>,
    /// The flush this task submitted, while in flight.
    flush: Option<Flush>,
}

impl SharedTask {
    pub(super) fn new(task: PaTask, worker_flush: bool) -> SharedTask {
        SharedTask {
            task,
            worker_flush,
            durable: None,
        }
    }
}

impl From<PaTask> for SharedTask {
    fn from(task: PaTask) -> SharedTask {
        SharedTask::new(task, false)
    }
}

/// The LSN a done write must see durable under `sync=always`, a sync in any mode (`None` for
/// a read, or a write that logged nothing).
fn durable_lsn(out: &PaOutput, strong: bool) -> Option<u64> {
    match *out {
        PaOutput::Put(lsn) | PaOutput::Deleted(true, lsn) | PaOutput::Wrote(_, lsn) if strong => {
            (lsn > 0).then_some(lsn)
        }
        PaOutput::Synced(lsn) => (lsn > 0).then_some(lsn),
        _ => None,
    }
}

impl Task for SharedTask {
    type Output = PaOutput;
    type Ctx = Db;

    fn attempt(&mut self, db: &Db) -> Result<Step<PaOutput>> {
        if self.durable.is_none() {
            let out = match self.task.attempt(db)? {
                Step::Done(out) => out,
                step => return Ok(step),
            };
            let strong = db.options.sync == SyncMode::Always;
            let lsn = durable_lsn(&out, strong).filter(|_| self.worker_flush);
            let Some(lsn) = lsn else {
                return Ok(Step::Done(out));
            };
            self.durable = Some(Durability {
                lsn,
                out: Some(out),
                flush: None,
            });
        }
        let d = self.durable.as_mut().ok_or_else(taken)?;
        let wal = &db.tree().store.wal;
        wal.check_poisoned()?;
        if d.lsn < wal.durable_below() {
            return d.out.take().map(Step::Done).ok_or_else(taken);
        }
        match wal.begin_flush(true)? {
            Some(flush) => {
                // SAFETY: the bytes are the flush's buffer, which `d.flush` keeps (unmoved on
                // the heap, untouched) until `io_done` hands the flush back to the log, or for
                // good if the worker abandons the task (`io_abandoned`).
                let write =
                    unsafe { OwnWrite::new(flush.segment(), flush.bytes(), flush.offset(), true) };
                d.flush = Some(flush);
                crate::sync::set_own_log_flush(true);
                Ok(Step::Write(write))
            }
            // Another flush in flight (or, having just ended, nothing left to do): this
            // worker's (wait for its completion) or another thread's (look again later).
            None if d.lsn < wal.durable_below() => d.out.take().map(Step::Done).ok_or_else(taken),
            None if crate::sync::own_log_flush() => Ok(Step::AfterWrite),
            None => Ok(Step::Held),
        }
    }

    /// Ends the flush with its write's outcome (a failure poisons the log, and the task's next
    /// attempt returns it).
    fn io_done(&mut self, db: &Db, result: Result<usize>) {
        let Some(flush) = self.durable.as_mut().and_then(|d| d.flush.take()) else {
            return;
        };
        crate::sync::set_own_log_flush(false);
        let _ = db.tree().store.wal.end_flush(flush, result.map(drop));
    }

    fn io_abandoned(&mut self) {
        if let Some(flush) = self.durable.as_mut().and_then(|d| d.flush.take()) {
            // The kernel may still read its bytes.
            std::mem::forget(flush);
        }
    }
}

#[cold]
fn taken() -> Error {
    Error::InvalidArgument {
        what: "a write's output, handed back already".into(),
        limit: 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::db::pa::{PaDb, PaOptions};
    use crate::exec::BackendKind;
    use crate::io::MemIo;
    use crate::DbOptions;

    fn pa(sync: SyncMode) -> PaDb {
        let options = DbOptions {
            sync,
            ..DbOptions::default()
        };
        let logs = [Box::new(MemIo::default()), Box::new(MemIo::default())];
        let db = Db::open_io(Box::new(MemIo::default()), logs.map(|l| l as _), options).unwrap();
        let options = PaOptions {
            backend: BackendKind::Inline,
            worker_flush: true,
            ..PaOptions::default()
        };
        PaDb::over(db, options).unwrap()
    }

    fn put(key: &[u8]) -> SharedTask {
        let task = PaTask::Put {
            key: key.to_vec(),
            stored: b"value".to_vec(),
            at: None,
        };
        SharedTask::new(task, true)
    }

    /// With `flush=worker`, under `sync=always` the shared worker hands a write back only once
    /// the log is durable past its record, having flushed it itself (before the caller's
    /// finish, which would otherwise sync it); under `sync=never` at once, and a sync then
    /// flushes the log.
    #[test]
    fn the_worker_makes_a_strong_write_durable() {
        for (sync, strong) in [(SyncMode::Always, true), (SyncMode::Never, false)] {
            let pa = pa(sync);
            let ops: Vec<_> = (0..64u32)
                .map(|i| pa.exec.submit(put(&i.to_be_bytes())))
                .collect();
            let wal = &pa.db.tree().store.wal;
            for op in ops {
                let PaOutput::Put(lsn) = op.wait().unwrap() else {
                    panic!("a put's output");
                };
                assert!(lsn > 0);
                assert_eq!(lsn < wal.durable_below(), strong, "{sync:?}");
            }
            // A sync, in either mode, leaves everything logged durable, by the worker's flush.
            pa.sync().unwrap();
            assert!(wal.durable_below() >= wal.next_lsn());
            let own = pa.close().unwrap().own_writes;
            if strong {
                assert!(
                    (1..=65).contains(&own),
                    "{own} flushes for 64 puts and a sync"
                );
            } else {
                assert_eq!(own, 1, "the sync's flush");
            }
        }
    }
}
