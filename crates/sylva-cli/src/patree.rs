//! The `patree` engine in `sylva bench`: a [`PaDb`] whose benchmark sessions have a
//! [`Pipeline`]. With `--inflight N` each benchmark thread keeps N operations in flight in a
//! [`PaSession`], whose worker loop runs on that thread (the paper's polled mode: one thread,
//! many operations, its own io_uring ring); with `--inflight 1` (the default) each operation
//! goes to the `PaDb`'s shared worker thread and the benchmark thread waits for it, one at a
//! time, like a caller of every other engine.

use sylva::{KvStore, PaDb, PaResult, PaSession, Stats};
use ycsb::runner::{PipeDone, PipeOp, Pipeline, Session, Target};

/// A `PaDb` as a benchmark target.
pub(crate) struct PaTarget(pub(crate) PaDb);

impl Target for PaTarget {
    fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String> {
        let db = &self.0;
        (0..n)
            .map(|_| {
                db.session()
                    .map(|session| {
                        Box::new(PaBenchSession { db, session }) as Box<dyn Session + '_>
                    })
                    .map_err(|e| format!("a PA-Tree session: {e}"))
            })
            .collect()
    }

    fn sync(&self) -> sylva::Result<()> {
        self.0.sync()
    }

    fn finish_deferred(&self) -> sylva::Result<()> {
        KvStore::finish_deferred(&self.0)
    }

    fn stats(&self) -> Stats {
        KvStore::stats(&self.0)
    }

    fn pipelined(&self) -> bool {
        true
    }
}

/// One benchmark thread's view: blocking operations, and a [`PaSession`] for its window.
struct PaBenchSession<'a> {
    db: &'a PaDb,
    session: PaSession<'a>,
}

impl Session for PaBenchSession<'_> {
    fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        KvStore::get_into(self.db, key, out)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        self.db.put(key, value)
    }

    fn delete(&mut self, key: &[u8]) -> sylva::Result<bool> {
        self.db.delete(key)
    }

    fn scan(
        &mut self,
        start: &[u8],
        limit: usize,
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        KvStore::scan(self.db, start, limit, visitor)
    }

    fn map_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        KvStore::map_range(self.db, start, end, visitor)
    }

    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
}

impl Pipeline for PaBenchSession<'_> {
    fn submit(&mut self, tag: u64, op: PipeOp<'_>) {
        match op {
            PipeOp::Get(k) => self.session.submit_get(tag, k),
            PipeOp::Put(k, v) => self.session.submit_put(tag, k, v),
            PipeOp::Delete(k) => self.session.submit_delete(tag, k),
            PipeOp::Scan(k, limit) => self.session.submit_scan(tag, k, limit),
            PipeOp::Map(start, end) => self.session.submit_range(tag, start, end),
        }
    }

    fn complete(
        &mut self,
        out: &mut Vec<u8>,
        records: &mut dyn FnMut(&[u8], &[u8]),
    ) -> (u64, sylva::Result<PipeDone>) {
        let Some((tag, result)) = self.session.wait_any() else {
            let e = sylva::Error::InvalidArgument {
                what: "a completion with nothing submitted".into(),
                limit: 0,
            };
            return (u64::MAX, Err(e));
        };
        let done = result.map(|r| match r {
            PaResult::Got(Some(v)) => {
                *out = v;
                true
            }
            PaResult::Got(None) => false,
            PaResult::Put | PaResult::Written | PaResult::Synced => true,
            PaResult::Deleted(found) => found,
            PaResult::Scanned(found) => {
                for (k, v) in &found {
                    records(k, v);
                }
                true
            }
        });
        (tag, done)
    }
}
