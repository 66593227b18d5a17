//! `Db`'s engine over [`crate::durable`]: the B+tree paged through the buffer pool, with its
//! logging ([`super::store`]), redo ([`super::recovery`]) and meta-page state ([`super::state`]).

use std::path::Path;
use std::sync::atomic::Ordering;

use super::buckets::Buckets;
use super::recovery::{LeafRedo, OwnedOp};
use super::state::State;
use super::store::{ExclusiveGate, PoolStore};
use crate::btree::{self, BTree};
use crate::durable::Engine;
use crate::error::Result;
use crate::io::PageFile;

/// The B+tree over the buffer pool, as an engine of the durability layer.
pub(crate) struct PagedTree {
    pub(crate) tree: BTree<PoolStore>,
    /// The node layout (recorded at each checkpoint: an existing database keeps its own).
    pub(crate) layout: btree::Layout,
    /// The tree has the long-key limits (state version 5, [`super::state`]).
    pub(crate) long_keys: bool,
    /// Keys longer than the tree takes live in buckets (state version 6, [`super::buckets`]).
    pub(crate) buckets: Option<Buckets>,
    /// During redo: the last write batch whose end the log has not shown yet.
    pub(super) pending_batch: Option<Vec<OwnedOp>>,
    /// During redo: leaf records held back to be applied grouped by page.
    pub(super) leaf_redo: LeafRedo,
}

impl Engine for PagedTree {
    type State = State;
    type Writers<'a> = ExclusiveGate<'a>;

    fn decode_state(path: &Path, user: &[u8]) -> Result<Option<(State, u64)>> {
        Ok(State::decode(path, user)?.map(|s| (s, s.checkpoint_lsn)))
    }

    fn redo(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        self.redo_record(lsn, payload)
    }

    fn log_ends_before(&mut self, lsn: u64, payload: &[u8]) -> Result<bool> {
        self.run_missing(lsn, payload)
    }

    fn redo_end(&mut self) -> Result<bool> {
        self.finish_redo()
    }

    fn hold_writers(&self) -> ExclusiveGate<'_> {
        self.tree.store.exclusive()
    }

    fn begin_checkpoint(&self, lsn: u64) -> Vec<u8> {
        let store = &self.tree.store;
        store.checkpoint_lsn.store(lsn, Ordering::Release);
        store.log_bytes.store(0, Ordering::Relaxed);
        store.restart_freed_count();
        State {
            layout: self.layout,
            meta_page: self.tree.meta,
            records: self.tree.records.load(Ordering::Relaxed),
            checkpoint_lsn: lsn,
            tags: self.tree.store.escaped.then_some(self.tree.store.tags),
            long_keys: self.long_keys,
            buckets: self.buckets.is_some(),
        }
        .encode()
        .to_vec()
    }

    /// Every dirty page of the pool (`flush_all` writes them all, whatever their LSN).
    fn flush(&self, _lsn: u64) -> Result<()> {
        let store = &self.tree.store;
        store.runs.flush(&store.pool, &store.wal)?;
        store.pool.flush_all()
    }

    fn page_file(&self) -> &PageFile {
        self.tree.store.pool.file()
    }

    #[inline]
    fn logged_bytes(&self) -> u64 {
        self.tree.store.log_bytes.load(Ordering::Relaxed)
    }

    /// Once the runs freed since the last checkpoint began pass an eighth of the file (at least
    /// [`FREES_MIN`](super::store::FREES_MIN)): freed runs are reusable only after the next
    /// checkpoint, so without one each overwrite of an out-of-line value takes new pages at the
    /// file's end. Values the log does not carry add little to the log, which alone would let
    /// the file grow by the whole `checkpoint_bytes` and more; and a write over pages the file
    /// system has already allocated and written is cheaper than one that extends the file
    /// (`docs/results/db.md`, session 28).
    #[inline]
    fn frees_due(&self) -> bool {
        let store = &self.tree.store;
        store.freed_bytes.load(Ordering::Relaxed) > store.freed_limit.load(Ordering::Relaxed)
    }

    /// The pool's misses and the run cache's: each is a read of the page file.
    fn reads_made(&self) -> u64 {
        let store = &self.tree.store;
        store.pool.misses() + store.runs.misses()
    }

    /// The runs of values their records do not carry (noted by [`super::overflow`] at their
    /// put), and those the run cache holds unwritten when noting starts: such a run is written
    /// at the latest by the log's sync that makes its record durable, which may come after the
    /// backup copied its pages.
    fn note_unlogged_runs(&self, on: bool) -> Result<Vec<(u64, u64)>> {
        let store = &self.tree.store;
        if on {
            *store.unlogged_runs.lock() = Some(Vec::new());
            let dirty = store.runs.dirty_unlogged(store.pool.file().page_size());
            if let Some(runs) = store.unlogged_runs.lock().as_mut() {
                runs.extend(dirty);
            }
            Ok(Vec::new())
        } else {
            Ok(store.unlogged_runs.lock().take().unwrap_or_default())
        }
    }
}
