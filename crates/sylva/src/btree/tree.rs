//! The tree: optimistic lock coupling over a [`NodeStore`], point operations and split (paper
//! sections 2 and 7.1); descents are in `super::descent`, merge in `super::merge`. A leaf split
//! first offers a deferred split with a neighbour (`super::redistribute`).
//!
//! The first page allocated is a metadata node: an inner node with no keys whose upper child is
//! the root, so a root split is an ordinary split whose parent is that page (as in LeanStore and
//! vmcache).
//!
//! Every change to a page is reported to the store's logging hooks while the page's write latch
//! is held ([`NodeStore::log_put`] and friends), which is all a durable store needs to log it.
//!
//! Concurrency (optimistic lock coupling): readers take no locks; they read a page's latch
//! version, read the page, and validate the version afterwards, restarting from the root when
//! it changed. A child id read from an inner node is used only after the parent validated. Readers
//! never write shared memory. Writers descend optimistically and upgrade only the leaf's latch;
//! a split or merge re-descends, then write-locks parent and node (and for a merge the
//! neighbour) by upgrading the versions it read, so writers never wait while holding a latch and
//! cannot deadlock. An insert that needs a split releases the leaf, splits (splitting the parent
//! first when it is full) and restarts.
//!
//! The optimistic reads are, in the Rust memory model, racy reads of bytes a writer may be
//! changing; they are never trusted: every decoded offset is bounds-checked (so a torn page
//! cannot cause an out-of-bounds access), and no result is used before validation. This is the
//! seqlock pattern of LeanStore and vmcache.

use std::sync::atomic::{AtomicU64, Ordering};

use super::adapt::Seen;
use super::descent::ChildPos;
use super::limits::{max_key_len, max_record_len, max_value_len};
use super::options::Options;
use super::store::{MemNodeStore, NodeLatch, NodeStore, ParentEdit, REPLACED_MAX};
use crate::error::{Error, Result};
use crate::kv::{Limits, Stats};
use crate::page::build::{Builder, NodeSpec};
use crate::page::dense::{Dense, DenseMut, KIND_DENSE_LEAF};
use crate::page::fingerprint;
use crate::page::semidense::{SemiDense, SemiDenseMut, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::{Slotted, SlottedMut};
use crate::page::{corrupt, PageId, KIND_FP_LEAF, KIND_INNER};
use crate::sync::{backoff, Abort, Olc};

/// A B+tree of slotted pages over a node store.
pub struct BTree<S: NodeStore = MemNodeStore> {
    pub(crate) store: S,
    /// The metadata page.
    pub(crate) meta: PageId,
    pub(crate) options: Options,
    pub(crate) flags: u8,
    pub(crate) truncate: bool,
    pub(crate) leaf_kind: u8,
    pub(crate) dense: bool,
    pub(crate) semidense: bool,
    pub(crate) adaptive: bool,
    pub(crate) records: AtomicU64,
    pub(super) limits: Limits,
    /// The longest `key ++ value` of a record (`super::limits`).
    pub(super) max_record: usize,
    pub(crate) splits: AtomicU64,
    pub(crate) merges: AtomicU64,
    pub(crate) conversions: AtomicU64,
    pub(crate) redistributions: AtomicU64,
    pub(crate) splits_2to3: AtomicU64,
    /// Gets that resumed their descent where their last attempt missed a page
    /// ([`BTree::get_attempt_from`]).
    pub(crate) resumed: AtomicU64,
    /// Tag of this tree's operation-adaption dice (`super::adapt`).
    pub(crate) dice: u64,
}

/// Holds a write latch; releases it when dropped.
pub(crate) struct WriteGuard<L: NodeLatch>(pub(crate) L);

impl<L: NodeLatch> Drop for WriteGuard<L> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// Calls `f` until it does not ask for a restart.
///
/// Only a non-blocking thread ([`crate::sync::nonblocking`]) sees a miss, and it must not call
/// this: it runs one attempt at a time itself (`BTree::get_attempt` and friends) and loads the
/// page it missed asynchronously. Waiting for the page here could wait for a load only that
/// thread completes, so a miss is an error naming the page.
#[inline]
pub(crate) fn retry<T>(mut f: impl FnMut() -> Olc<T>) -> Result<T> {
    let mut spins = 0;
    loop {
        match f() {
            Ok(t) => return Ok(t),
            Err(Abort::Fail(e)) => return Err(e),
            Err(Abort::Restart) => backoff(&mut spins),
            Err(Abort::Miss(page)) => return Err(miss_in_retry(page)),
        }
    }
}

#[cold]
fn miss_in_retry(page: PageId) -> Error {
    Error::InvalidArgument {
        what: format!(
            "page {page} missed on a non-blocking thread inside an operation that cannot stop \
             at a miss (a PA-Tree worker bug)"
        ),
        limit: 0,
    }
}

/// Turns a decode error found in an optimistic read into a restart when the page changed.
#[inline]
pub(crate) fn checked<T>(l: impl NodeLatch, v: u64, r: Result<T>) -> Olc<T> {
    match r {
        Ok(t) => Ok(t),
        Err(e) => {
            l.validate(v)?;
            Err(Abort::Fail(e))
        }
    }
}

/// An old value a put replaced or a delete removed, kept for [`NodeStore::replaced`] when it is
/// at most [`REPLACED_MAX`] bytes (and the store asks for it).
#[derive(Clone, Copy)]
pub(crate) struct OldValue {
    len: usize,
    bytes: [u8; REPLACED_MAX],
}

impl OldValue {
    /// Captures `v` if the store tracks replaced values, wants to hear of this one
    /// ([`NodeStore::tracks_value`]) and `v` is short enough.
    #[inline]
    fn capture(store: &impl NodeStore, track: bool, v: &[u8]) -> Option<Self> {
        if !track || v.len() > REPLACED_MAX || !store.tracks_value(v) {
            return None;
        }
        let mut bytes = [0u8; REPLACED_MAX];
        bytes[..v.len()].copy_from_slice(v);
        Some(OldValue {
            len: v.len(),
            bytes,
        })
    }

    fn value(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

enum Put {
    Done { inserted: bool },
    NeedsSplit,
}

/// What one attempt of a delete did ([`BTree::delete_attempt`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deleted {
    /// Whether the key was there (and is gone now).
    pub(crate) found: bool,
    /// The leaf, if the delete left it underfull.
    pub(crate) underfull: Option<PageId>,
    /// The LSN of the last record logged.
    pub(crate) lsn: u64,
}

impl BTree<MemNodeStore> {
    /// An empty in-memory tree.
    pub fn new(options: Options) -> Result<Self> {
        let store = MemNodeStore::new(options.page_size);
        Self::with_store(store, options)
    }

    /// Gives back the memory of the pages the tree freed ([`MemNodeStore::release_freed`]);
    /// returns the bytes.
    pub(crate) fn release_freed(&self) -> usize {
        self.store.release_freed() * self.options.page_size
    }
}

impl<S: NodeStore> BTree<S> {
    /// An empty tree in `store`, which must be empty too.
    pub fn with_store(store: S, options: Options) -> Result<Self> {
        Self::check_page_size(&store, options)?;
        let meta = store.allocate()?;
        let root = store.allocate()?;
        let tree = Self::from_parts(store, options, meta, 0);
        tree.init_node(meta, KIND_INNER, root)?;
        tree.init_node(root, tree.leaf_kind, 0)?;
        tree.store.log_pages(&[meta, root], &[])?;
        for id in [meta, root] {
            tree.latch(id)
                .map_err(|_| corrupt(id, "fresh page has no latch"))?
                .unlock();
        }
        Ok(tree)
    }

    /// The tree already in `store` whose metadata page is `meta`, holding `records` records.
    pub fn open_store(store: S, options: Options, meta: PageId, records: u64) -> Result<Self> {
        Self::check_page_size(&store, options)?;
        Ok(Self::from_parts(store, options, meta, records))
    }

    fn check_page_size(store: &S, options: Options) -> Result<()> {
        if store.page_size() != options.page_size {
            return Err(Error::InvalidArgument {
                what: format!(
                    "node store page size {} differs from the options' page size",
                    store.page_size()
                ),
                limit: options.page_size,
            });
        }
        Ok(())
    }

    fn from_parts(store: S, options: Options, meta: PageId, records: u64) -> Self {
        let ps = options.page_size;
        BTree {
            store,
            meta,
            options,
            flags: options.layout.flags(),
            truncate: options.layout.prefix_truncation(),
            leaf_kind: options.layout.leaf_kind(),
            dense: options.layout.dense_leaves(),
            semidense: options.layout.semi_dense_leaves(),
            adaptive: options.layout.adaptive(),
            records: AtomicU64::new(records),
            limits: Limits::variable(max_key_len(ps), max_value_len(ps)),
            max_record: max_record_len(ps),
            splits: AtomicU64::new(0),
            merges: AtomicU64::new(0),
            conversions: AtomicU64::new(0),
            redistributions: AtomicU64::new(0),
            splits_2to3: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            dice: super::adapt::dice_tag(),
        }
    }

    fn init_node(&self, id: PageId, kind: u8, upper_child: PageId) -> Result<()> {
        let spec = NodeSpec {
            kind,
            flags: self.flags,
            prefix_truncation: self.truncate,
            lower: &[],
            upper: None,
            upper_child,
            op_counter: 0,
        };
        let page = self
            .page_mut(id)
            .map_err(|_| corrupt(id, "fresh page missing"))?;
        Builder::new(page, &spec)
            .ok_or_else(|| corrupt(id, "page too small"))?
            .finish();
        Ok(())
    }

    /// The options the tree was created with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Key and value size limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    #[inline]
    pub(crate) fn latch(&self, id: PageId) -> Olc<S::Latch<'_>> {
        self.store.latch(id).ok_or(Abort::Restart)
    }

    /// The bytes of page `id` for an optimistic read (validate before trusting anything).
    #[inline]
    pub(crate) fn page(&self, id: PageId) -> Olc<&[u8]> {
        let p = self.store.page_ptr(id).ok_or(Abort::Restart)?;
        // SAFETY: the store keeps `page_size` bytes at `p` alive for its lifetime. A writer may
        // change them concurrently; callers treat what they read as untrusted (every offset is
        // bounds-checked) and validate the latch before using any result.
        Ok(unsafe { std::slice::from_raw_parts(p.as_ptr(), self.options.page_size) })
    }

    /// The latch and the bytes of page `id` for an optimistic read, with one store lookup
    /// (validate before trusting anything).
    #[inline]
    pub(crate) fn node(&self, id: PageId) -> Olc<(S::Latch<'_>, &[u8])> {
        let (l, p) = self.store.node(id).ok_or(Abort::Restart)?;
        // SAFETY: as in `page`.
        let page = unsafe { std::slice::from_raw_parts(p.as_ptr(), self.options.page_size) };
        Ok((l, page))
    }

    /// The bytes of page `id` for writing; the caller holds its write latch.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn page_mut(&self, id: PageId) -> Olc<&mut [u8]> {
        let p = self.store.page_ptr(id).ok_or(Abort::Restart)?;
        // SAFETY: as in `page`; the caller holds the write latch, so no other writer touches
        // these bytes while the returned slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), self.options.page_size) })
    }

    /// Looks `key` up; on a hit copies the value into `out`.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.limits.check_key(key)?;
        let (found, seen) = retry(|| self.get_attempt(key, out))?;
        self.adapt_after_point_read(seen)?;
        Ok(found)
    }

    /// One optimistic attempt of [`BTree::get_into`] (its key checked by the caller): whether
    /// `key` is there (its value then in `out`) and what to tell
    /// [`BTree::adapt_after_point_read`]. It holds nothing when it returns.
    pub(crate) fn get_attempt(&self, key: &[u8], out: &mut Vec<u8>) -> Olc<(bool, Seen)> {
        self.get_attempt_from(key, out, None)
    }

    /// [`Self::get_attempt`], resuming its descent where the last attempt stopped at a missing
    /// page (`at`, [`super::descent::take_missed_at`]) when that still holds.
    pub(crate) fn get_attempt_from(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
        at: Option<ChildPos>,
    ) -> Olc<(bool, Seen)> {
        let (id, v) = self.find_leaf_from(key, at)?;
        let (l, page) = self.node(id)?;
        let seen = Seen::of(id, v, page);
        if page[0] == KIND_SEMI_DENSE_LEAF {
            let s = checked(l, v, SemiDense::new(id, page))?;
            let value = match s.slot_of(key) {
                Some(i) => checked(l, v, s.value(i))?,
                None => None,
            };
            if let Some(value) = value {
                out.clear();
                out.extend_from_slice(value);
            }
            l.validate(v)?;
            return Ok((value.is_some(), seen));
        }
        if page[0] == KIND_DENSE_LEAF {
            let d = checked(l, v, Dense::new(id, page))?;
            let found = match d.slot_of(key) {
                Some(i) if d.present(i) => {
                    out.clear();
                    out.extend_from_slice(d.value(i));
                    true
                }
                _ => false,
            };
            l.validate(v)?;
            return Ok((found, seen));
        }
        let node = checked(l, v, Slotted::new(id, page))?;
        let (idx, found) = checked(l, v, leaf_find(&node, key))?;
        if found {
            let val = checked(l, v, node.value(idx))?;
            out.clear();
            out.extend_from_slice(val);
        }
        l.validate(v)?;
        Ok((found, seen))
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_logged(key, value).map(drop)
    }

    /// [`BTree::put`], returning the LSN of the last record the store's logging hooks appended
    /// for it (0 if they logged nothing): the log up to it holds the put. A thread's records
    /// get rising LSNs, so that is the highest of the put's records.
    pub(crate) fn put_logged(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let _gate = self.store.write_gate();
        self.put_logged_in_gate(key, value)
    }

    /// [`BTree::put_logged`] for a caller that holds the store's write gate already (`Db`'s
    /// out-of-line values allocate and write a run under the same hold as the put that links
    /// it, so a checkpoint never begins between the two). Inlined, with the attempt, into
    /// [`BTree::put_logged`]: the small-value put is then one call below the database's.
    #[inline]
    pub(crate) fn put_logged_in_gate(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        self.limits.check_key(key)?;
        self.limits.check_value(value)?;
        if key.len() + value.len() > self.max_record {
            return Err(super::limits::record_too_long(
                key.len(),
                value.len(),
                self.max_record,
            ));
        }
        retry(|| self.put_attempt(key, value))
    }

    /// One optimistic attempt of [`BTree::put_logged_in_gate`] (key and value checked, the
    /// write gate held by the caller): the LSN of the put's last record. A leaf that needs a
    /// split is split and the attempt ends in `Restart`. It holds nothing when it returns.
    #[inline]
    pub(crate) fn put_attempt(&self, key: &[u8], value: &[u8]) -> Olc<u64> {
        self.put_attempt_from(key, value, None)
    }

    /// [`Self::put_attempt`], resuming its descent where the last attempt stopped at a missing
    /// page (`at`), as [`Self::get_attempt_from`] does.
    #[inline]
    pub(crate) fn put_attempt_from(
        &self,
        key: &[u8],
        value: &[u8],
        at: Option<ChildPos>,
    ) -> Olc<u64> {
        let (id, v) = self.find_leaf_from(key, at)?;
        let l = self.latch(id)?;
        l.upgrade(v)?;
        let (outcome, lsn) = {
            let _g = WriteGuard(l);
            let mut old = None;
            let outcome = self.apply_put(id, key, value, &mut old)?;
            let mut lsn = 0;
            if let Put::Done { inserted } = outcome {
                if let Some(old) = old {
                    self.store.replaced(old.value());
                }
                lsn = self.store.log_put(id, key, value, inserted)?;
                if self.adapt_after_point_write(id, self.page_mut(id)?)? {
                    lsn = self.store.log_pages(&[id], &[])?;
                }
            }
            (outcome, lsn)
        };
        match outcome {
            Put::Done { inserted } => {
                if inserted {
                    self.records.fetch_add(1, Ordering::Relaxed);
                }
                Ok(lsn)
            }
            Put::NeedsSplit => {
                self.split(id, key, value.len())?;
                Err(Abort::Restart)
            }
        }
    }

    /// Puts `key` into leaf `id` (write-latched by the caller) if it fits; returns whether it was
    /// inserted (not overwritten). Redo uses this to replay a logged put: the same page bytes
    /// and the same record give the same result.
    pub(crate) fn redo_put(&self, id: PageId, key: &[u8], value: &[u8]) -> Result<bool> {
        match self.apply_put(id, key, value, &mut None)? {
            Put::Done { inserted } => {
                if inserted {
                    self.records.fetch_add(1, Ordering::Relaxed);
                }
                Ok(inserted)
            }
            Put::NeedsSplit => Err(corrupt(id, "a logged put does not fit its leaf on redo")),
        }
    }

    /// Applies `edit` to inner page `pid` (write-latched by the caller): the live split and
    /// redistribution, and redo of their logged edits, run this same code, so the same page
    /// and edit give the same page.
    pub(crate) fn apply_parent_edit(&self, pid: PageId, edit: &ParentEdit<'_>) -> Result<()> {
        let page = self
            .page_mut(pid)
            .map_err(|_| corrupt(pid, "parent vanished"))?;
        let mut p = SlottedMut::new(pid, page)?;
        if p.view().kind() != KIND_INNER {
            return Err(corrupt(
                pid,
                "a parent edit names a page that is not an inner node",
            ));
        }
        if let Some(r) = edit.remove {
            if r >= p.view().count() {
                return Err(corrupt(
                    pid,
                    "a parent edit removes a separator that is not there",
                ));
            }
            p.remove(r);
        }
        for (i, &(sep, child)) in edit.insert.iter().enumerate() {
            let view = p.view();
            let (at, found) = view.lower_bound(sep)?;
            let k = sep
                .get(view.prefix_len()..)
                .ok_or_else(|| corrupt(pid, "separator shorter than the parent's prefix"))?;
            if found
                || edit.remove.is_some_and(|r| at != r + i)
                || !p.insert(at, k, &child.to_le_bytes())?
            {
                return Err(corrupt(
                    pid,
                    "a separator did not take its place in the parent",
                ));
            }
        }
        Ok(())
    }

    /// Removes `key` from leaf `id` (write-latched by the caller) for redo; returns whether it
    /// was there.
    pub(crate) fn redo_delete(&self, id: PageId, key: &[u8]) -> Result<bool> {
        let found = self.apply_delete(id, key, &mut None)?;
        if found {
            self.records.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// Puts `key` into leaf `id` (write-latched by the caller). When the store tracks replaced
    /// values, `old` receives the value an overwrite replaces (whatever the outcome: the caller
    /// reports it only for `Put::Done`).
    fn apply_put(
        &self,
        id: PageId,
        key: &[u8],
        value: &[u8],
        old: &mut Option<OldValue>,
    ) -> Result<Put> {
        let track = self.store.tracks_replaced();
        let page = self
            .page_mut(id)
            .map_err(|_| corrupt(id, "leaf vanished"))?;
        if page[0] == KIND_SEMI_DENSE_LEAF {
            let s = SemiDense::new(id, page)?;
            let put = match s.slot_of(key) {
                Some(i) => {
                    if track {
                        *old = s
                            .value(i)?
                            .and_then(|v| OldValue::capture(&self.store, track, v));
                    }
                    SemiDenseMut::new(id, page)?.put(i, value)?
                }
                None => None,
            };
            return Ok(put.map_or(Put::NeedsSplit, |inserted| Put::Done { inserted }));
        }
        if page[0] == KIND_DENSE_LEAF {
            let d = Dense::new(id, page)?;
            let slot = d.slot_of(key).filter(|_| d.value_len() == value.len());
            if let Some(i) = slot.filter(|&i| track && d.present(i)) {
                *old = OldValue::capture(&self.store, track, d.value(i));
            }
            return Ok(match slot {
                Some(i) => Put::Done {
                    inserted: DenseMut::new(id, page)?.set(i, value)?,
                },
                None => Put::NeedsSplit,
            });
        }
        let mut node = SlottedMut::new(id, page)?;
        let view = node.view();
        let (idx, found) = leaf_find(&view, key)?;
        let k = key
            .get(view.prefix_len()..)
            .ok_or_else(|| corrupt(id, "key outside the leaf's range"))?;
        if found && track {
            *old = OldValue::capture(&self.store, track, view.value(idx)?);
        }
        if view.kind() == KIND_FP_LEAF {
            return fp_leaf_put(&mut node, idx, found, k, value);
        }
        if found {
            let (kl, vl) = view.lens(idx);
            if vl == value.len() {
                node.overwrite_value(idx, value)?;
                return Ok(Put::Done { inserted: false });
            }
            let available = view.free_space_after_compaction() + view.record_space(kl, vl);
            if available < view.record_space(k.len(), value.len()) {
                return Ok(Put::NeedsSplit);
            }
            node.remove(idx);
            if !node.insert(idx, k, value)? {
                return Err(corrupt(id, "overwrite did not fit after the space check"));
            }
            return Ok(Put::Done { inserted: false });
        }
        if node.insert(idx, k, value)? {
            Ok(Put::Done { inserted: true })
        } else {
            Ok(Put::NeedsSplit)
        }
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.delete_logged(key).map(|(found, _)| found)
    }

    /// [`BTree::delete`], also returning the LSN of the last record logged for it, a merge's
    /// included (as [`BTree::put_logged`]).
    pub(crate) fn delete_logged(&self, key: &[u8]) -> Result<(bool, u64)> {
        self.limits.check_key(key)?;
        let _gate = self.store.write_gate();
        let done = retry(|| self.delete_attempt(key))?;
        self.delete_finish(key, done)
    }

    /// One optimistic attempt of [`BTree::delete_logged`] (key checked, the write gate held by
    /// the caller). It holds nothing when it returns; hand what it returns to
    /// [`BTree::delete_finish`] under the same hold of the gate.
    pub(crate) fn delete_attempt(&self, key: &[u8]) -> Olc<Deleted> {
        self.delete_attempt_from(key, None)
    }

    /// [`Self::delete_attempt`], resuming its descent at `at` as [`Self::put_attempt_from`].
    pub(crate) fn delete_attempt_from(&self, key: &[u8], at: Option<ChildPos>) -> Olc<Deleted> {
        let (id, v) = self.find_leaf_from(key, at)?;
        let l = self.latch(id)?;
        l.upgrade(v)?;
        let _g = WriteGuard(l);
        let mut old = None;
        if !self.apply_delete(id, key, &mut old)? {
            return Ok(Deleted {
                found: false,
                underfull: None,
                lsn: 0,
            });
        }
        if let Some(old) = old {
            self.store.replaced(old.value());
        }
        let mut lsn = self.store.log_delete(id, key)?;
        let underfull = self.underfull(id)?;
        if self.adapt_after_point_write(id, self.page_mut(id)?)? {
            lsn = self.store.log_pages(&[id], &[])?;
        }
        Ok(Deleted {
            found: true,
            underfull: underfull.then_some(id),
            lsn,
        })
    }

    /// Counts a delete's record and merges the leaf it left underfull (best effort); returns
    /// whether the key was there and the LSN of the last record logged for it.
    pub(crate) fn delete_finish(&self, key: &[u8], done: Deleted) -> Result<(bool, u64)> {
        let Deleted {
            found,
            underfull,
            mut lsn,
        } = done;
        if found {
            self.records.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(id) = underfull {
            self.try_merge(id, key, &mut lsn)?;
        }
        Ok((found, lsn))
    }

    /// Removes `key` from leaf `id` (write-latched by the caller); returns whether it was there.
    /// `old` as for [`BTree::apply_put`]: the value removed.
    fn apply_delete(&self, id: PageId, key: &[u8], old: &mut Option<OldValue>) -> Result<bool> {
        let track = self.store.tracks_replaced();
        let page = self
            .page_mut(id)
            .map_err(|_| corrupt(id, "leaf vanished"))?;
        if page[0] == KIND_SEMI_DENSE_LEAF {
            let s = SemiDense::new(id, page)?;
            return match s.slot_of(key) {
                Some(i) => {
                    if track {
                        *old = s
                            .value(i)?
                            .and_then(|v| OldValue::capture(&self.store, track, v));
                    }
                    SemiDenseMut::new(id, page)?.clear(i)
                }
                None => Ok(false),
            };
        }
        if page[0] == KIND_DENSE_LEAF {
            let d = Dense::new(id, page)?;
            return Ok(match d.slot_of(key) {
                Some(i) => {
                    if track && d.present(i) {
                        *old = OldValue::capture(&self.store, track, d.value(i));
                    }
                    DenseMut::new(id, page)?.clear(i)
                }
                None => false,
            });
        }
        let mut node = SlottedMut::new(id, page)?;
        let (idx, found) = leaf_find(&node.view(), key)?;
        if !found {
            return Ok(false);
        }
        if track {
            *old = OldValue::capture(&self.store, track, node.view().value(idx)?);
        }
        if node.view().kind() == KIND_FP_LEAF {
            fingerprint::remove(&mut node, idx);
        } else {
            node.remove(idx);
        }
        Ok(true)
    }

    /// Bytes of memory an in-memory tree's pages take: every page it has made (freed ones wait
    /// for reuse, still written) and each one's latch.
    pub(crate) fn resident_bytes(&self) -> usize {
        self.store.pages_resident() as usize
            * (self.options.page_size + std::mem::size_of::<crate::sync::Latch>())
    }

    /// The part of [`BTree::resident_bytes`] in pages freed and kept for reuse.
    pub(crate) fn freed_bytes(&self) -> usize {
        (self.store.pages_resident() - self.store.pages_in_use()) as usize
            * (self.options.page_size + std::mem::size_of::<crate::sync::Latch>())
    }

    /// Counts and counters.
    pub fn stats(&self) -> Stats {
        let pages = self.store.pages_in_use();
        Stats {
            records: self.records.load(Ordering::Relaxed),
            bytes_used: Some(pages * self.options.page_size as u64),
            counters: vec![
                ("pages", pages),
                ("splits", self.splits.load(Ordering::Relaxed)),
                ("merges", self.merges.load(Ordering::Relaxed)),
                ("conversions", self.conversions.load(Ordering::Relaxed)),
                (
                    "redistributions",
                    self.redistributions.load(Ordering::Relaxed),
                ),
                ("splits_2to3", self.splits_2to3.load(Ordering::Relaxed)),
                ("descents_resumed", self.resumed.load(Ordering::Relaxed)),
            ],
        }
    }
}

/// Finds `key` in a leaf: the slot and whether it holds `key` exactly (for comparison leaves
/// the slot is the insert position when absent).
#[inline]
fn leaf_find(node: &Slotted<'_>, key: &[u8]) -> Result<(usize, bool)> {
    if node.kind() != KIND_FP_LEAF {
        return node.lower_bound(key);
    }
    let Some(k) = key.get(node.prefix_len()..) else {
        return Ok((0, false));
    };
    Ok(match fingerprint::find(node, k)? {
        Some(i) => (i, true),
        None => (0, false),
    })
}

/// Insert or overwrite in a fingerprinting leaf (stored key `k`).
fn fp_leaf_put(
    node: &mut SlottedMut<'_>,
    idx: usize,
    found: bool,
    k: &[u8],
    value: &[u8],
) -> Result<Put> {
    if !found {
        return Ok(if fingerprint::insert(node, k, value)? {
            Put::Done { inserted: true }
        } else {
            Put::NeedsSplit
        });
    }
    let view = node.view();
    if view.lens(idx).1 == value.len() {
        node.overwrite_value(idx, value)?;
        return Ok(Put::Done { inserted: false });
    }
    let (id, old) = (view.id(), view.value(idx)?.to_vec());
    fingerprint::remove(node, idx);
    if fingerprint::insert(node, k, value)? {
        return Ok(Put::Done { inserted: false });
    }
    // Put the old record back (it fitted before) and split.
    if !fingerprint::insert(node, k, &old)? {
        return Err(corrupt(id, "record no longer fits its own leaf"));
    }
    Ok(Put::NeedsSplit)
}
