//! Scans and range maps on the worker ([`WalkTask`]; the parent module's docs, "Scans and
//! range maps").

use super::{failed, wrong_output, Db, KeyValue, PaOutput};
use crate::btree::{Records, WalkCursor};
use crate::error::Result;
use crate::exec::worker::Step;
use crate::kv::Visitor;
use crate::sync::Abort;

/// A walk of the tree gathered on the worker a chunk at a time: whole leaves from its cursor,
/// until the walk ends, has its records or has gathered [`WALK_CHUNK_BYTES`] (the caller shows
/// them and, if it wants more, submits the task again to go on from the cursor). Its records
/// are the tree's (tree keys, stored forms of values): values are resolved and buckets
/// expanded on the calling thread, as `Db`'s walks do ([`Db::walk_by`]).
#[derive(Default)]
pub(crate) struct WalkTask {
    cursor: WalkCursor,
    /// Tree keys from this one on are not wanted.
    end: Option<Vec<u8>>,
    /// The records the tree walk still wants, this chunk's included.
    max: usize,
    /// The last leaf's records (scratch).
    leaf: Records,
    /// This chunk's records.
    out: Records,
    /// For a caller that collects the records ([`PaDb::submit_scan`],
    /// [`PaSession::submit_scan`]): the walk asked for, and the chunks' records so far.
    asked: Asked,
    gathered: Vec<KeyValue>,
}

/// A scan (`end` `None`) or range map as its caller asked for it.
#[derive(Default)]
struct Asked {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    limit: usize,
}

/// A walk's chunk ends after the leaf that takes its records past this many bytes: it bounds
/// what a walk holds in memory, and a long walk goes back to its caller now and then.
pub(super) const WALK_CHUNK_BYTES: usize = 256 << 10;

impl WalkTask {
    /// The tree walk from `start` to before `end`, up to `limit` records.
    pub(super) fn new(start: &[u8], end: Option<&[u8]>, limit: usize) -> Box<WalkTask> {
        Box::new(WalkTask {
            cursor: WalkCursor::new(start),
            end: end.map(<[u8]>::to_vec),
            max: limit,
            ..WalkTask::default()
        })
    }

    /// The tree walk behind a scan or range map whose records are collected; `None` if it
    /// shows nothing.
    pub(super) fn collecting(
        db: &Db,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Option<Box<WalkTask>> {
        let (s, e, l) = db.tree_walk_bounds(start, end, limit)?;
        let mut w = WalkTask::new(&s, e.as_deref(), l);
        w.asked = Asked {
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            limit,
        };
        Some(w)
    }

    /// Gathers leaves until the chunk is complete (module docs of [`WalkTask`]).
    pub(super) fn attempt(&mut self, db: &Db) -> Result<Step<()>> {
        let tree = db.tree();
        while !self.chunk_complete() {
            let want = self.max - self.out.len();
            let r = tree.walk_leaf(&mut self.cursor, self.end.as_deref(), want, &mut self.leaf);
            match r {
                Ok(()) => self.out.extend_from(&self.leaf),
                Err(Abort::Restart) => return Ok(Step::Restart),
                Err(Abort::Miss(page)) => return Ok(Step::Miss(page)),
                Err(Abort::Fail(e)) => return Err(e),
            }
        }
        Ok(Step::Done(()))
    }

    fn chunk_complete(&self) -> bool {
        self.cursor.done() || self.out.len() >= self.max || self.out.bytes() >= WALK_CHUNK_BYTES
    }

    /// Shows this chunk's records to `visitor`, then readies the task for the next chunk.
    /// Returns the records shown and whether the walk goes on: it has more, and the visitor
    /// wants them.
    pub(super) fn show(&mut self, visitor: &mut Visitor<'_>) -> (usize, bool) {
        let (mut n, mut stopped) = (0, false);
        for (key, value) in self.out.iter() {
            n += 1;
            if !visitor(key, value) {
                stopped = true;
                break;
            }
        }
        let more = !stopped && !self.cursor.done() && self.out.len() < self.max;
        self.max -= self.out.len();
        self.out.clear();
        (n, more)
    }

    /// Adds this chunk's records to those gathered; returns whether the walk goes on.
    pub(super) fn gather(&mut self) -> bool {
        let mut gathered = std::mem::take(&mut self.gathered);
        let (_, more) = self.show(&mut |k, v| {
            gathered.push((k.to_vec(), v.to_vec()));
            true
        });
        self.gathered = gathered;
        more
    }

    /// The records gathered, as the caller asked for them: values resolved, buckets expanded.
    pub(super) fn result(&mut self, db: &Db) -> Result<Vec<KeyValue>> {
        let gathered = std::mem::take(&mut self.gathered);
        let Asked { start, end, limit } = &self.asked;
        collect(|visitor| {
            db.walk_by(
                start,
                end.as_deref(),
                *limit,
                visitor,
                &mut |_, _, _, each| {
                    let mut n = 0;
                    for (k, v) in &gathered {
                        n += 1;
                        if !each(k, v) {
                            break;
                        }
                    }
                    Ok(n)
                },
            )
        })
    }
}

/// The walk a finished chunk gave back.
pub(crate) fn walked(db: &Db, r: Result<PaOutput>) -> Result<Box<WalkTask>> {
    match r {
        Ok(PaOutput::Walked(w)) => Ok(w),
        Ok(_) => Err(wrong_output()),
        Err(e) => failed(db, e),
    }
}

/// The records a walk shows, collected.
pub(super) fn collect(
    walk: impl FnOnce(&mut Visitor<'_>) -> Result<usize>,
) -> Result<Vec<KeyValue>> {
    let mut all = Vec::new();
    walk(&mut |k, v| {
        all.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok(all)
}
