//! Write batches as tasks of the worker ([`BatchTask`]; [`super::PaDb::submit_write`]).
//!
//! `Db::write` closes the write gate, logs the whole batch as one BATCH record, applies its
//! puts and deletes, logs BATCH_END and opens the gate; recovery applies a batch again from its
//! BATCH record when the crash came before its BATCH_END, which is sound because nothing else
//! is logged in between ([`Db`]'s module docs, "Write batches"). The task keeps that order and
//! that rule, in two phases:
//!
//! 1. **Fetch**, with the gate open: for each op in turn, a lookup attempt of its key
//!    ([`crate::btree::BTree::get_attempt_from`]) brings its leaf into memory, the task waiting
//!    for each page it misses as a get does. Nothing is changed or logged.
//! 2. **Apply**: the task closes the gate without waiting ([`crate::db::store::ClosedGate`]; a
//!    write, batch or checkpoint holding it makes the attempt restart later), logs BATCH, and
//!    applies the ops one attempt each, in the batch's order (a later op on a key wins), with the
//!    worker's thread the gate's owner for the length of each attempt only. An op that misses
//!    (its leaf evicted since the fetch, or a split's new parent) waits for the page with the
//!    gate still closed, as `Db::write` holds it across a blocking read; it is not applied by
//!    half (an attempt changes nothing before it has every latch), so the next attempt runs
//!    the same op. Meanwhile other tasks run: their writes find the gate closed and restart
//!    later, their reads go on. After the last op, BATCH_END is logged and the gate opened.
//!
//! So the gate is closed for the length of the batch's in-memory changes, not its reads,
//! unless the pool evicts a fetched leaf before the apply. An error after BATCH was logged
//! poisons the database before the gate opens (as `Db::write`'s does), and so does dropping
//! the task then (a worker that gave up): a later write's records after an unfinished batch
//! would break recovery's rule. Batches with keys in buckets or values stored out of line run
//! through `Db::write` on the calling thread, as single puts of those do.

use std::sync::Arc;

use super::{stored_in_leaf, PaOutput, PaTask};
use crate::btree::{take_missed_at, ChildPos, Deleted};
use crate::db::batch::{BatchOp, WriteBatch};
use crate::db::log;
use crate::db::store::ClosedGate;
use crate::db::Db;
use crate::error::Result;
use crate::exec::worker::Step;
use crate::sync::{Abort, Olc};

/// A write batch as the worker runs it (module docs).
pub(crate) struct BatchTask {
    /// The database, held for [`Drop`]: a task dropped half-applied poisons it.
    db: Arc<Db>,
    /// The ops: a key, and for a put its value's stored form ([`Form::AsIs`] or
    /// [`Form::Escaped`]).
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// The batch's BATCH record, encoded by the caller.
    record: Vec<u8>,
    /// The op the current phase is at.
    next: usize,
    /// Where the last attempt's descent stopped at a page not in memory (for the next to
    /// resume there).
    at: Option<ChildPos>,
    /// The apply phase's hold of the write gate.
    gate: Option<ClosedGate>,
    /// BATCH is logged and BATCH_END is not.
    open: bool,
    /// A lookup's value (scratch).
    scratch: Vec<u8>,
}

impl BatchTask {
    /// The task of `batch` (checked against the limits), or `None` if it must run through
    /// `Db::write` on the calling thread (a key in a bucket, a value stored out of line).
    pub(super) fn new(db: &Arc<Db>, batch: &WriteBatch) -> Result<Option<Box<BatchTask>>> {
        let mut ops = Vec::with_capacity(batch.ops.len());
        for op in &batch.ops {
            let (key, value) = match op {
                BatchOp::Put(k, v) => (k, Some(v)),
                BatchOp::Delete(k) => (k, None),
            };
            if db.bucket_of(key).is_some() {
                return Ok(None);
            }
            let stored = match value {
                None => None,
                Some(v) => match stored_in_leaf(db, key, v)? {
                    Some(stored) => Some(stored),
                    None => return Ok(None),
                },
            };
            ops.push((key.clone(), stored));
        }
        let mut record = Vec::new();
        batch.log_record(&mut record);
        Ok(Some(Box::new(BatchTask {
            db: db.clone(),
            ops,
            record,
            next: 0,
            at: None,
            gate: None,
            open: false,
            scratch: Vec::new(),
        })))
    }

    /// One attempt: the fetch phase's, or the apply phase's (module docs).
    pub(super) fn attempt(&mut self, db: &Db) -> Result<Step<PaOutput>> {
        if self.gate.is_none() {
            if let Some(step) = self.fetch(db)? {
                return Ok(step);
            }
            let Some(gate) = db.tree().store.try_close_gate() else {
                return Ok(Step::Held);
            };
            self.gate = Some(gate);
            self.next = 0;
        }
        let gate = self.gate.take().expect("the apply phase holds the gate");
        let r = db.tree().store.owning_gate(&gate, || self.apply(db));
        match r {
            Ok(Ok(lsn)) => {
                drop(gate);
                Ok(Step::Done(PaOutput::Wrote(self.ops.len() as u64, lsn)))
            }
            Ok(Err(step)) => {
                self.gate = Some(gate);
                Ok(step)
            }
            Err(e) => {
                if self.open {
                    db.durable.poison().set();
                    self.open = false;
                }
                Err(e)
            }
        }
    }

    /// Brings the leaf of every op not fetched yet into memory; the step to return if it
    /// stopped first.
    fn fetch(&mut self, db: &Db) -> Result<Option<Step<PaOutput>>> {
        let tree = db.tree();
        while let Some((key, _)) = self.ops.get(self.next) {
            take_missed_at();
            let r = tree.get_attempt_from(key, &mut self.scratch, self.at.take());
            self.at = take_missed_at();
            match r {
                Ok(_) => self.next += 1,
                Err(Abort::Restart) => return Ok(Some(Step::Restart)),
                Err(Abort::Miss(page)) => return Ok(Some(Step::Miss(page))),
                Err(Abort::Fail(e)) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Logs BATCH (once), applies the ops not applied yet, logs BATCH_END: its LSN when done,
    /// or the step to return if an op stopped first.
    fn apply(&mut self, db: &Db) -> Result<std::result::Result<u64, Step<PaOutput>>> {
        let tree = db.tree();
        if !self.open && self.next == 0 {
            tree.store.append_record(&self.record)?;
            self.open = true;
        }
        while let Some((key, stored)) = self.ops.get(self.next) {
            take_missed_at();
            let r: Olc<Option<Deleted>> = match stored {
                Some(value) => tree
                    .put_attempt_from(key, value, self.at.take())
                    .map(|_| None),
                None => tree.delete_attempt_from(key, self.at.take()).map(Some),
            };
            self.at = take_missed_at();
            match r {
                Ok(deleted) => {
                    if let Some(done) = deleted {
                        tree.delete_finish(key, done)?;
                    }
                    self.next += 1;
                }
                Err(Abort::Restart) => return Ok(Err(Step::Restart)),
                Err(Abort::Miss(page)) => return Ok(Err(Step::Miss(page))),
                Err(Abort::Fail(e)) => return Err(e),
            }
        }
        let mut end = Vec::new();
        log::batch_end(&mut end);
        let lsn = tree.store.append_record(&end)?;
        self.open = false;
        Ok(Ok(lsn))
    }
}

impl Drop for BatchTask {
    /// A batch dropped between its BATCH and BATCH_END records poisons the database before its
    /// gate opens (module docs).
    fn drop(&mut self) {
        if self.open {
            self.db.durable.poison().set();
        }
    }
}

impl From<Box<BatchTask>> for PaTask {
    fn from(task: Box<BatchTask>) -> PaTask {
        PaTask::Write(task)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::io::MemIo;
    use crate::wal::SyncMode;
    use crate::{DbOptions, Error};

    fn db() -> Arc<Db> {
        let options = DbOptions {
            sync: SyncMode::Never,
            ..DbOptions::default()
        };
        let logs = [Box::new(MemIo::default()), Box::new(MemIo::default())];
        Arc::new(Db::open_io(Box::new(MemIo::default()), logs.map(|l| l as _), options).unwrap())
    }

    fn one_put() -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        b
    }

    /// A batch dropped between its BATCH and BATCH_END records (a worker that gave up on it)
    /// poisons the database, and its gate opens.
    #[test]
    fn a_batch_dropped_half_applied_poisons_the_database() {
        let db = db();
        let mut task = BatchTask::new(&db, &one_put()).unwrap().unwrap();
        task.gate = db.tree().store.try_close_gate();
        assert!(task.gate.is_some());
        task.open = true;
        drop(task);
        assert!(matches!(db.put(b"x", b"y"), Err(Error::Poisoned)));
        assert!(
            db.tree().store.try_close_gate().is_some(),
            "the gate opened"
        );
    }

    /// A batch dropped before it logged anything (in its fetch phase, or waiting for the
    /// gate) leaves the database as it was; one run to the end opens the gate.
    #[test]
    fn a_batch_dropped_before_logging_changes_nothing() {
        let db = db();
        drop(BatchTask::new(&db, &one_put()).unwrap().unwrap());
        db.put(b"x", b"y").unwrap();
        let mut task = BatchTask::new(&db, &one_put()).unwrap().unwrap();
        assert!(matches!(
            task.attempt(&db).unwrap(),
            Step::Done(PaOutput::Wrote(1, _))
        ));
        assert!(task.gate.is_none());
        drop(task);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert!(
            db.tree().store.try_close_gate().is_some(),
            "the gate opened"
        );
    }
}
