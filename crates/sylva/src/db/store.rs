//! The tree's node store over the buffer pool, and the logging of every page change.
//!
//! Latches map onto the pool's page-state words: an optimistic read of an evicted page loads it
//! (the pool's miss path), a write unlock marks the page dirty and stamps its header kind
//! (inner or leaf, from the node's own kind byte). The tree's pages are the pool's pages minus
//! their 32-byte common header.
//!
//! Logging: see the module docs of [`crate::db`]. Each hook runs while the tree holds the write
//! latches of the pages it names, appends one record and stores its LSN in those pages'
//! headers, so a page never reaches disk before the record that produced it (the pool's WAL
//! rule) and records of one page are in the log in the order the page saw them. It returns the
//! LSN to the tree, which hands the last one of an operation to `Db` (what `SyncMode::Always` makes
//! durable before the write returns).

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};

use super::log::{self, Image, RunFreed, RunWritten};
use super::overflow::{self, Stored};
use super::runcache::RunCache;
use crate::btree::{NodeLatch, NodeStore, ParentEdit};
use crate::buffer::{BufferPool, Resident};
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::FIRST_DATA_PAGE;
use crate::page::{free_gap, PageId, KIND_INNER};
use crate::sync::{Abort, Olc};
use crate::wal::Wal;

thread_local! {
    /// This thread holds the write gate exclusively (a batch or a checkpoint): its own writes
    /// pass the gate without taking it again.
    static GATE_OWNER: Cell<bool> = const { Cell::new(false) };
    /// Encoding buffer, reused.
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread's put or delete in progress wrote or freed an out-of-line value's
    /// run ([`PENDING`] holds which): its leaf record is then logged inside a RUNS record.
    static RUNS_PENDING: Cell<bool> = const { Cell::new(false) };
    /// The runs this thread's put or delete in progress wrote and freed.
    static PENDING: RefCell<PendingRuns> = const { RefCell::new(PendingRuns {
        written: None,
        value: Vec::new(),
        freed: Vec::new(),
    }) };
    /// A RUNS record being assembled, reused.
    static WRAP: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What a put or delete did to out-of-line values, for its log record.
struct PendingRuns {
    /// The run it wrote: first page, value length, CRC32C, whether the value is logged.
    written: Option<(PageId, u32, u32, bool)>,
    /// The logged value (reused buffer).
    value: Vec<u8>,
    /// The runs it freed (the old value of an overwrite or delete).
    freed: Vec<RunFreed>,
}

/// The runs freed since the last checkpoint began call for the next once they pass this share
/// of the file (`Engine::frees_due` in `db/engine.rs`)...
pub(crate) const FREES_SHARE: u64 = 8;
/// ... or this many bytes, if more.
pub(crate) const FREES_MIN: u64 = 64 << 20;

/// Pages of a buffer pool as tree nodes, with logging.
pub(crate) struct PoolStore {
    pub(crate) pool: BufferPool,
    pub(crate) wal: Arc<Wal>,
    /// Off while recovery replays the log (its changes become durable by the checkpoint that
    /// ends recovery).
    pub(crate) logging: AtomicBool,
    /// The LSN the log started at after the last checkpoint: a page whose LSN is older logs a
    /// full image on its next change.
    pub(crate) checkpoint_lsn: AtomicU64,
    /// Bytes appended since the last checkpoint.
    pub(crate) log_bytes: AtomicU64,
    /// Bytes of runs freed since the last checkpoint began, and how many call for the next
    /// (`Engine::frees_due` in `db/engine.rs`).
    pub(crate) freed_bytes: AtomicU64,
    pub(crate) freed_limit: AtomicU64,
    /// Bytes appended since open (record headers included).
    pub(crate) log_written: AtomicU64,
    /// Of those, the records that carry a page's full image because it was the page's first
    /// change after a checkpoint ("full-page writes").
    pub(crate) log_fpw: AtomicU64,
    /// Whether the database stores values with a tag byte and may hold out-of-line values
    /// ([`super::overflow`]): every database this build creates; not those created before.
    pub(crate) escaped: bool,
    /// How such a database tells an escaped value or a reference from a value
    /// ([`overflow::Tags`]: by state version).
    pub(crate) tags: overflow::Tags,
    /// The LSN of the last record that freed tree pages at once (a merge): a run written over
    /// pages must not reach the disk before it ([`super::overflow`], the WAL rule for reused
    /// pages).
    pub(crate) last_free_lsn: AtomicU64,
    /// While an online backup runs, the runs whose records do not carry their values (values
    /// over `logged_value_max`), as (first page, pages): the backup copies them again
    /// (`crate::durable::backup`).
    pub(crate) unlogged_runs: parking_lot::Mutex<Option<Vec<(u64, u64)>>>,
    /// Out-of-line values in memory ([`super::runcache`]).
    pub(crate) runs: Arc<RunCache>,
    /// Out-of-line values up to this long are carried by their log records
    /// ([`crate::DbOptions::logged_value_max`]).
    pub(crate) logged_value_max: usize,
    /// The write gate (in an `Arc` so that a [`ClosedGate`] can keep it closed).
    gate: Arc<RwLock<()>>,
}

/// A page's latch in the pool.
#[derive(Clone, Copy)]
pub(crate) struct PoolLatch<'a> {
    pool: &'a BufferPool,
    id: u64,
}

impl PoolLatch<'_> {
    /// [`NodeLatch::read_lock`] on a non-blocking thread (the PA-Tree mode's worker). Out of
    /// line and cold: a descent asks for the mark once and has a copy of its loop for each
    /// answer ([`NodeLatch::read_lock_as`]), and the other callers of `read_lock` then carry
    /// only the mark's test (measured: `docs/results/db.md`, session 20).
    #[cold]
    #[inline(never)]
    fn read_lock_nonblocking(self) -> Olc<u64> {
        match self.pool.read_lock_resident(self.id) {
            Ok(Resident::Version(v)) => Ok(v),
            // Not in memory, or held: the worker waits for its load, or for its own
            // write-back of it, or for another thread to let go (`exec::worker`'s docs).
            Ok(Resident::Evicted | Resident::Busy) => Err(Abort::Miss(self.id)),
            Ok(Resident::Freed) => Err(Abort::Restart),
            Err(e) => Err(Abort::Fail(e)),
        }
    }
}

impl NodeLatch for PoolLatch<'_> {
    #[inline]
    fn read_lock(self) -> Olc<u64> {
        self.read_lock_as(crate::sync::nonblocking())
    }

    #[inline]
    fn read_lock_as(self, nonblocking: bool) -> Olc<u64> {
        if nonblocking {
            return self.read_lock_nonblocking();
        }
        match self.pool.read_lock(self.id) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(Abort::Restart),
            Err(e) => Err(Abort::Fail(e)),
        }
    }

    #[inline]
    fn validate(self, v: u64) -> Olc<()> {
        if self.pool.validate(self.id, v) {
            Ok(())
        } else {
            Err(Abort::Restart)
        }
    }

    #[inline]
    fn upgrade(self, v: u64) -> Olc<()> {
        if self.pool.try_upgrade(self.id, v) {
            Ok(())
        } else {
            Err(Abort::Restart)
        }
    }

    #[inline]
    fn unlock(self) {
        stamp_kind(self.pool, self.id);
        self.pool.unlock(self.id, true);
    }

    #[inline]
    fn unlock_hint(self) {
        self.pool.unlock(self.id, false);
    }
}

/// Sets the page header's kind from the node's kind byte (the caller holds the lock).
pub(crate) fn stamp_kind(pool: &BufferPool, id: u64) {
    // SAFETY: `data(id)` points at the page's engine bytes inside the pool's mapping; the
    // caller holds the page's lock.
    let node_kind = unsafe { *pool.data(id).as_ptr() };
    let kind = if node_kind == KIND_INNER {
        PageKind::BTreeInner
    } else {
        PageKind::BTreeLeaf
    };
    pool.set_kind(id, kind);
}

/// A shared hold on the write gate (or nothing, for the thread that holds it exclusively).
pub(crate) struct Gate<'a>(#[allow(dead_code)] Option<RwLockReadGuard<'a, ()>>);

/// The exclusive hold on the write gate.
pub(crate) struct ExclusiveGate<'a>(#[allow(dead_code)] parking_lot::RwLockWriteGuard<'a, ()>);

impl Drop for ExclusiveGate<'_> {
    fn drop(&mut self) {
        GATE_OWNER.with(|g| g.set(false));
    }
}

/// The write gate closed by a task on a worker thread ([`PoolStore::try_close_gate`]): kept
/// closed across the task's attempts while other tasks run on the same thread in between, so,
/// unlike [`ExclusiveGate`], it does not make its thread the gate's owner (only
/// [`PoolStore::owning_gate`] does, for the length of one attempt), and it may be dropped on
/// another thread. Dropping it opens the gate.
pub(crate) struct ClosedGate {
    gate: Arc<RwLock<()>>,
    /// The raw lock's state for this hold (taken when it is released).
    hold: Option<GateHold>,
}

type GateHold = <parking_lot::RawRwLock as parking_lot::lock_api::RawRwLock>::ExclusiveGuard;

// SAFETY: parking_lot's raw lock keeps no state of a hold outside the lock word (the hold's
// marker is empty; it is not `Send` only for the deadlock detection of parking_lot's feature of
// that name, not enabled here), so a hold may be released on another thread than took it.
unsafe impl Send for ClosedGate {}

impl Drop for ClosedGate {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            // SAFETY: `hold` is the state of `try_close_gate`'s exclusive acquisition, which no
            // guard releases: this is its one release.
            unsafe { self.gate.force_unlock_write(hold) }
        }
    }
}

/// Gives the gate's ownership back to whoever had it when [`PoolStore::owning_gate`] began.
struct OwnerRestored(bool);

impl Drop for OwnerRestored {
    fn drop(&mut self) {
        GATE_OWNER.with(|g| g.set(self.0));
    }
}

impl PoolStore {
    /// A store over `pool` and `wal`; `tags` is `None` for a database whose values are stored
    /// untagged (created before out-of-line values).
    pub(crate) fn new(
        pool: BufferPool,
        wal: Arc<Wal>,
        checkpoint_lsn: u64,
        tags: Option<overflow::Tags>,
        runs: Arc<RunCache>,
    ) -> Self {
        let store = PoolStore {
            runs,
            logged_value_max: crate::DbOptions::default().logged_value_max,
            escaped: tags.is_some(),
            tags: tags.unwrap_or(overflow::Tags::RefShape),
            last_free_lsn: AtomicU64::new(0),
            unlogged_runs: parking_lot::Mutex::new(None),
            pool,
            wal,
            logging: AtomicBool::new(false),
            checkpoint_lsn: AtomicU64::new(checkpoint_lsn),
            log_bytes: AtomicU64::new(0),
            freed_bytes: AtomicU64::new(0),
            freed_limit: AtomicU64::new(u64::MAX),
            log_written: AtomicU64::new(0),
            log_fpw: AtomicU64::new(0),
            gate: Arc::new(RwLock::new(())),
        };
        store.restart_freed_count();
        store
    }

    /// Starts counting the runs freed again, as a checkpoint begins, against an eighth of the
    /// file now (at least [`FREES_MIN`]).
    pub(crate) fn restart_freed_count(&self) {
        let file = self.pool.file();
        let limit = (file.page_count() * file.page_size() as u64 / FREES_SHARE).max(FREES_MIN);
        self.freed_limit.store(limit, Ordering::Relaxed);
        self.freed_bytes.store(0, Ordering::Relaxed);
    }

    /// Closes the write gate: waits for writes in progress, holds new ones back.
    pub(crate) fn exclusive(&self) -> ExclusiveGate<'_> {
        let g = self.gate.write();
        GATE_OWNER.with(|o| o.set(true));
        ExclusiveGate(g)
    }

    /// Closes the write gate if nobody holds it (a write, a batch or a checkpoint): `None`
    /// otherwise. For a task on a worker thread that must not wait ([`ClosedGate`]).
    pub(crate) fn try_close_gate(&self) -> Option<ClosedGate> {
        use parking_lot::lock_api::RawRwLock as _;
        // SAFETY: an exclusive acquisition through the raw lock, released by `ClosedGate`'s
        // drop: no guard or reference to the (empty) data is affected.
        let hold = unsafe { self.gate.raw() }.try_lock_exclusive()?;
        Some(ClosedGate {
            gate: self.gate.clone(),
            hold: Some(hold),
        })
    }

    /// Runs `f` with this thread as the owner of the gate `closed` holds: its writes pass the
    /// gate as a batch's do under [`PoolStore::exclusive`].
    pub(crate) fn owning_gate<R>(&self, closed: &ClosedGate, f: impl FnOnce() -> R) -> R {
        debug_assert!(
            Arc::ptr_eq(&closed.gate, &self.gate),
            "another store's gate"
        );
        let _restored = OwnerRestored(GATE_OWNER.with(|g| g.replace(true)));
        f()
    }

    /// Bytes of a page available to the tree (the page size minus the common header).
    pub(crate) fn page_size_bytes(&self) -> usize {
        self.pool.usable_size()
    }

    /// Appends a record that names no page (a write batch's start or end); returns its LSN.
    pub(crate) fn append_record(&self, payload: &[u8]) -> Result<u64> {
        self.append(payload, &[]).map(|(lsn, _)| lsn)
    }

    /// The image of page `id` (the caller holds its lock): its engine bytes, without the free
    /// gap of a slotted node or a semi-dense leaf.
    pub(crate) fn image(&self, id: PageId) -> Image<'_> {
        // SAFETY: the engine bytes of a page are `usable_size` bytes of the pool's mapping; the
        // caller holds the page's lock, so nobody writes them while this borrow lives.
        let page = unsafe {
            std::slice::from_raw_parts(self.pool.data(id).as_ptr(), self.pool.usable_size())
        };
        let (head, tail) = free_gap(id, page).unwrap_or((page.len(), page.len()));
        Image {
            head: &page[..head],
            tail: &page[tail..],
        }
    }

    /// Appends `payload` as a record changing `pages`; returns its LSN and the bytes it added to
    /// the log.
    fn append(&self, payload: &[u8], pages: &[PageId]) -> Result<(u64, u64)> {
        let lsn = self.wal.append(payload)?;
        for &id in pages {
            self.pool.set_lsn(id, lsn);
        }
        let bytes = payload.len() as u64 + 16;
        self.log_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.log_written.fetch_add(bytes, Ordering::Relaxed);
        Ok((lsn, bytes))
    }

    /// Whether page `id` needs a full image (its last logged change is older than the last
    /// checkpoint).
    fn needs_image(&self, id: PageId) -> bool {
        self.pool.page_lsn(id) < self.checkpoint_lsn.load(Ordering::Relaxed)
    }

    /// Logs the full images of `changed`; returns the record's LSN and bytes. A put's or
    /// delete's record (`leaf_change`) goes inside a RUNS record if it wrote or freed a run.
    fn log_images(
        &self,
        changed: &[PageId],
        freed: &[PageId],
        delta: i64,
        leaf_change: bool,
    ) -> Result<(u64, u64)> {
        let (lsn, bytes) = BUF.with(|b| {
            let mut b = b.borrow_mut();
            log::pages(&mut b, changed, freed, delta, |id| self.image(id));
            if leaf_change {
                self.append_leaf_change(&b, changed)
            } else {
                self.append(&b, changed)
            }
        })?;
        if !freed.is_empty() {
            self.last_free_lsn.fetch_max(lsn, Ordering::AcqRel);
        }
        Ok((lsn, bytes))
    }

    /// A put or delete logged as the leaf's full image (its first change since a checkpoint);
    /// returns the record's LSN.
    fn log_first_change(&self, leaf: PageId, delta: i64) -> Result<u64> {
        let (lsn, bytes) = self.log_images(&[leaf], &[], delta, true)?;
        self.log_fpw.fetch_add(bytes, Ordering::Relaxed);
        Ok(lsn)
    }

    /// Appends `record`, the record of a put's or delete's leaf change: as it is, or inside a
    /// RUNS record naming the runs the operation wrote and freed, which are freed (deferred)
    /// once it is appended.
    #[inline]
    fn append_leaf_change(&self, record: &[u8], pages: &[PageId]) -> Result<(u64, u64)> {
        if !RUNS_PENDING.with(Cell::get) {
            return self.append(record, pages);
        }
        self.append_runs_change(record, pages)
    }

    /// [`Self::append_leaf_change`] of a change that wrote or freed a run: the record inside
    /// a RUNS record. Out of line, so that the small-value path (every put and delete of a
    /// value that is not out of line) is the flag's test and the append alone.
    #[cold]
    #[inline(never)]
    fn append_runs_change(&self, record: &[u8], pages: &[PageId]) -> Result<(u64, u64)> {
        RUNS_PENDING.with(|p| p.set(false));
        let freed = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let written = p.written.take();
            let freed = std::mem::take(&mut p.freed);
            let w = written.map(|(first, len, crc, logged)| RunWritten {
                first,
                len,
                crc,
                value: logged.then_some(&p.value[..]),
            });
            WRAP.with(|b| {
                let mut b = b.borrow_mut();
                log::runs_prefix(&mut b, w, &freed);
                b.extend_from_slice(record);
            });
            p.value.clear();
            freed
        });
        let r = WRAP.with(|b| self.append(&b.borrow(), pages))?;
        let file = self.pool.file();
        for f in freed {
            file.free_run_deferred(f.first, f.pages as usize)?;
            self.freed_bytes.fetch_add(
                u64::from(f.pages) * file.page_size() as u64,
                Ordering::Relaxed,
            );
            self.runs
                .freed(f.first, self.checkpoint_lsn.load(Ordering::Acquire));
        }
        Ok(r)
    }

    /// Notes the run a put is about to link (module docs of [`super::overflow`]): its record
    /// will name it, and carry `logged` (the value) when given.
    pub(crate) fn note_run_written(&self, r: overflow::ValueRef, logged: Option<&[u8]>) {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            p.written = Some((r.first, r.len, r.crc, logged.is_some()));
            p.value.clear();
            if let Some(v) = logged {
                p.value.extend_from_slice(v);
            }
        });
        RUNS_PENDING.with(|p| p.set(true));
    }

    /// Notes a run written without logging its bytes, if an online backup is running.
    pub(crate) fn note_unlogged_run(&self, first: u64, pages: u64) {
        if let Some(runs) = self.unlogged_runs.lock().as_mut() {
            runs.push((first, pages));
        }
    }

    /// Forgets what a put or delete noted if it failed before logging.
    pub(crate) fn clear_pending_runs(&self) {
        if RUNS_PENDING.with(Cell::get) {
            RUNS_PENDING.with(|p| p.set(false));
            PENDING.with(|p| {
                let mut p = p.borrow_mut();
                p.written = None;
                p.value.clear();
                p.freed.clear();
            });
        }
    }
}

impl NodeStore for PoolStore {
    type Latch<'a> = PoolLatch<'a>;
    type Gate<'a> = Gate<'a>;

    fn write_gate(&self) -> Gate<'_> {
        if GATE_OWNER.with(|g| g.get()) {
            Gate(None)
        } else {
            Gate(Some(self.gate.read()))
        }
    }

    fn try_write_gate(&self) -> Option<Gate<'_>> {
        if GATE_OWNER.with(|g| g.get()) {
            Some(Gate(None))
        } else {
            self.gate.try_read().map(|g| Gate(Some(g)))
        }
    }

    fn page_size(&self) -> usize {
        self.pool.usable_size()
    }

    fn allocate(&self) -> Result<PageId> {
        self.pool.allocate(PageKind::BTreeLeaf)
    }

    fn free(&self, id: PageId) -> Result<()> {
        self.pool.free(id)
    }

    #[inline]
    fn latch(&self, id: PageId) -> Option<PoolLatch<'_>> {
        (id < self.pool.capacity()).then_some(PoolLatch {
            pool: &self.pool,
            id,
        })
    }

    #[inline]
    fn page_ptr(&self, id: PageId) -> Option<NonNull<u8>> {
        (id < self.pool.capacity()).then(|| self.pool.data(id))
    }

    fn pages_in_use(&self) -> u64 {
        let f = self.pool.file();
        f.page_count()
            .saturating_sub(FIRST_DATA_PAGE + f.free_pages() + f.free_list_pages())
    }

    fn log_put(&self, leaf: PageId, key: &[u8], value: &[u8], inserted: bool) -> Result<u64> {
        if !self.logging.load(Ordering::Relaxed) {
            return Ok(0);
        }
        if self.needs_image(leaf) {
            return self.log_first_change(leaf, i64::from(inserted));
        }
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            log::put(&mut b, leaf, key, value);
            self.append_leaf_change(&b, &[leaf]).map(|(lsn, _)| lsn)
        })
    }

    fn log_delete(&self, leaf: PageId, key: &[u8]) -> Result<u64> {
        if !self.logging.load(Ordering::Relaxed) {
            return Ok(0);
        }
        if self.needs_image(leaf) {
            return self.log_first_change(leaf, -1);
        }
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            log::delete(&mut b, leaf, key);
            self.append_leaf_change(&b, &[leaf]).map(|(lsn, _)| lsn)
        })
    }

    fn log_pages(&self, changed: &[PageId], freed: &[PageId]) -> Result<u64> {
        if !self.logging.load(Ordering::Relaxed) {
            return Ok(0);
        }
        self.log_images(changed, freed, 0, false)
            .map(|(lsn, _)| lsn)
    }

    #[inline]
    fn tracks_replaced(&self) -> bool {
        self.escaped
    }

    /// Only a reference frees anything when it is replaced ([`NodeStore::replaced`] passes
    /// over every other stored value), so only a value that [`overflow::is_ref`] is copied and
    /// reported: a small value costs a comparison or two, not a copy.
    #[inline]
    fn tracks_value(&self, old: &[u8]) -> bool {
        overflow::is_ref(old, self.tags)
    }

    fn replaced(&self, old: &[u8]) {
        if !self.logging.load(Ordering::Relaxed) {
            return;
        }
        // A reference that does not decode is left in place: the put or delete goes on, and
        // `check` reports the leaf.
        if let Ok(Stored::Ref(r)) = overflow::classify(old, 0, self.tags) {
            let pages = r.pages(self.pool.file().page_size()) as u32;
            PENDING.with(|p| {
                p.borrow_mut().freed.push(RunFreed {
                    first: r.first,
                    pages,
                })
            });
            RUNS_PENDING.with(|p| p.set(true));
        }
    }

    fn log_pages_edit(
        &self,
        changed: &[PageId],
        parent: PageId,
        edit: &ParentEdit<'_>,
    ) -> Result<u64> {
        if !self.logging.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let mut all = Vec::with_capacity(changed.len() + 1);
        all.extend_from_slice(changed);
        all.push(parent);
        if self.needs_image(parent) {
            // The parent's first change since the checkpoint: its image, as for any page.
            return self.log_images(&all, &[], 0, false).map(|(lsn, _)| lsn);
        }
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            log::pages_edit(&mut b, changed, |id| self.image(id), parent, edit);
            self.append(&b, &all).map(|(lsn, _)| lsn)
        })
    }
}
