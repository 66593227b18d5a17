//! The run cache: out-of-line values ([`super::overflow`]) kept in memory, written back later.
//!
//! **Why.** A run bypasses the buffer pool (whose frames hold tree nodes, one checked page
//! each; a run's later pages carry no header), and under direct I/O, the default on a real
//! disk, it bypasses the OS page cache too. Without this cache every get of an out-of-line
//! value read the device and every put wrote its run synchronously, a few thousand operations
//! a second whatever the value's size (`docs/results/db.md`, issue 23).
//!
//! **What it holds.** Values, keyed by their run's first page, each with its length and
//! CRC32C (the reference's), the LSN its run is stamped with, and whether it is *dirty* (not
//! yet in the file). A get whose reference matches an entry's first page, length and CRC copies
//! the value out; it needs no CRC of its own, the entry's was computed from the same bytes when
//! they entered. An entry whose length or CRC differ is another value at the same pages (the
//! run was freed and its pages reused): the get treats it as a miss, reads the file, and the
//! CRC check there sends it back to the tree as before.
//!
//! **Write-back** (values their log record carries whole: at most
//! [`crate::DbOptions::logged_value_max`] bytes). A put allocates the run and enters the value dirty before the
//! leaf links it (so a reader that finds the reference finds the value), and writes nothing.
//! The file gets the run later, from whichever comes first:
//! - *eviction*: the cache is over its budget; the thread that made it so (after its put, out
//!   of the write gate, or after a get's miss entered a value) takes victims by a clock (second
//!   chance), writes the dirty ones sorted by page, contiguous runs together in writes of up to
//!   1 MiB (a load's runs are allocated one after another at the file's end, so they leave as
//!   sequential writes), then drops them;
//! - *a checkpoint*: [`RunCache::flush`] writes every dirty value before the page file's fsync
//!   and the meta page, so a run whose record the new checkpoint no longer redoes is in the file.
//!
//! Until then the log record is what makes the value durable: recovery rewrites the run from
//! it. Nothing needs the run in the file earlier. Two rules carry over from the synchronous
//! write:
//! - *the WAL rule for reused pages*: a run may be allocated over tree pages a merge freed at
//!   once, which the durable state may still point at until the freeing record is durable. The
//!   put notes that record's LSN if it was not durable yet, and the write-back syncs the log up
//!   to it first;
//! - *stale writes*: a write-back in progress may be of a value freed meanwhile. Its pages are
//!   not reused before a checkpoint ends (the free is deferred) and a compaction only cuts
//!   pages a checkpoint freed, so [`RunCache::flush`] ends by waiting for the write-back lock
//!   (a barrier): a write that began before the checkpoint lands before it ends.
//!
//! **Writing in parallel.** Runs that follow one another on disk leave with one write, but the
//! runs a checkpoint finds dirty are often scattered: overwrites take freed pages wherever the
//! allocator finds them (and a value overwritten twice before a write-back leaves a hole
//! between its neighbours, below). One write at a time then runs at the device's latency, so a
//! database with background threads (`DbOptions::background`) writes a batch's groups from
//! [`WRITERS`] scoped threads, that many writes in flight. Not when every write lies past the
//! file's end (a load's, or overwrites' before a checkpoint lets them reuse freed pages) and
//! every value is kept as its run's image: a direct write that grows the file holds the file's
//! lock until it completes (ext4's, at least), so such writes run one at a time whatever the
//! threads, and with nothing to copy into a buffer meanwhile the threads only cost their start
//! (`docs/results/db.md`, session 28). Short values' write-backs keep their threads: one copies
//! runs into its buffer while another writes. Without background threads writes keep one order,
//! which the power-loss simulation's replay by seed relies on.
//!
//! **Holes.** A value overwritten again before a write-back leaves a hole between its
//! neighbours: its run was allocated between theirs, and a freed value put since the last
//! checkpoint began is never written. Overwrites of short values at random keys leave many,
//! and a checkpoint then writes a few pages a write (`docs/results/db.md`, session 27). So a
//! dirty value of up to [`FILLER_MAX`] bytes freed without needing to be written stays as a
//! *filler*: clean, marked freed, first in line for the clock. (A clean value freed leaves at
//! once, as before: its run is older than the dirty ones, so rarely between them, and its
//! memory goes to the next value put.) A checkpoint's flush ([`flush`]) writes a filler whose
//! run lies between dirty runs with only fillers between, so they leave as one write, and
//! drops every filler it saw. Writing a filler is writing its run's own bytes to its own pages,
//! as a write-back before the free would have; its pages are not reused before the checkpoint
//! that takes the free ends (deferred), and that checkpoint's flush has dropped it by then (a
//! free after the flush took its list is taken by the next checkpoint). Fillers count towards
//! the budget like any entry.
//!
//! One write-back runs at a time (a lock held across choosing victims and writing them, which
//! the flush takes batch by batch): an entry the flush finds clean was written by a write-back
//! that finished.
//!
//! **Freed before written.** A value freed while dirty (its key overwritten or deleted) is
//! usually never written: if it was put after the last checkpoint began, no checkpoint's state
//! points at its run, and after a crash recovery rewrites the run from its record if that
//! survives. One put before a checkpoint began is different: that checkpoint's state may
//! point at it (the leaf it wrote before the change that freed it), its record is older than
//! the checkpoint, so redo does not bring it back, and the record that freed it may be lost in
//! a crash. The checkpoint must write it, as it writes every value dirty when it began: such an
//! entry stays, marked freed, until a write-back (that checkpoint's flush, or an eviction
//! first) writes it, and then leaves. Its pages are not reused meanwhile: the free is deferred
//! to the end of a checkpoint, whose flush has written and dropped it by then.
//!
//! **Reads.** A miss reads the run from the file as before and enters it clean, unless it is
//! longer than a sixteenth of the budget (a scan of huge values must not empty the cache).
//!
//! **Memory.** The budget is the database's `cache_bytes`, shared with the buffer pool: the cache
//! may grow to three quarters of it, and the pool's budget is moved down by what the cache holds
//! (in steps of a sixty-fourth), so frames and values together stay within it. A database without
//! out-of-line values keeps the whole budget for the pool. Each entry is charged its value's length
//! plus [`ENTRY_OVERHEAD`]. Values of 8 KiB or more live in pages of their own ([`Bytes`], `mmap`),
//! given back when they leave: on glibc's heap, values evicted and read again left the freed memory
//! with the process, which grew well past its budget (`docs/results/db.md`, session 21). Those
//! pages come from [`Mappings`], which keeps a few freed ones for the next value of the same page
//! count and, in a database with background threads, faults new ones in ahead on a thread of its
//! own, so a put copies into memory that is already there ([`super::mappings`]). Shorter values
//! stay on the heap, where chunks of like sizes are reused and a mapping per value would cost more
//! than the value. A dirty value of [`RUN_IMAGE_MIN`](bytes::RUN_IMAGE_MIN) bytes or more is laid
//! out in its mapping as its run will be in the file (header page, value, zeros to the last page's
//! end, the first page sealed with the LSN it is put at) and charged for the whole run: a
//! write-back writes the mappings of a group's runs with one vectored write, where other values are
//! first copied into a write buffer (for long values that copy was the write-back's largest cost:
//! `docs/results/db.md`, session 28). Outside the budget: the write buffers, 1 MiB for the
//! write-backs, 1 MiB for [`RunCache::write_unlogged`] and up to [`WRITERS`] MiB for the parallel
//! writers, kept from one write-back to the next once used, and the spare mappings, at most
//! [`SPARE_BYTES`] or an eighth of the cache.
//!
//! One reader-writer lock guards the map and the clock. A lookup holds it shared for a hash probe
//! (rapidhash: std's SipHash cost measurably more per get), sets the entry's clock bit (an atomic)
//! and copies a value of up to 16 KiB out under it; a longer one is copied after it is released,
//! through a clone of its `Arc`. Gets on several threads so copy at once (a mutex serialised them:
//! `docs/results/db.md`, session 27); puts, frees, evictions and write-backs hold it exclusively.
//! The lock is sharded (crossbeam's `ShardedLock`): a reader locks the shard of its thread, a
//! writer every shard, so readers on two cores do not pass one lock word back and forth on every
//! get, and a put pays a few more atomic operations; the hit and miss counts are striped for the
//! same reason. An entry keeps its value's address and length beside the `Arc` that owns the value:
//! in a cache larger than the CPU's, each memory a lookup reads in turn is a miss, and the entry,
//! the `Arc`'s allocation and the value were three of them.
//!
//! **Values the log does not carry** (longer than `logged_value_max`) are written before the
//! log's sync that makes their records durable, and with background threads written behind:
//! [`unlogged`].
//!
//! Longer values (over a sixteenth of the cache), and every unlogged value without the cache,
//! are written and fsynced at their put as before and enter the cache clean.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};
use parking_lot::Mutex;

use super::mappings::Mappings;
use super::overflow::{lay_out, run_pages, write_run, ValueRef};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, PageFile};
use crate::util::striped::Striped;
use crate::wal::Wal;

mod bytes;
mod flush;
mod unlogged;
pub(crate) use bytes::Bytes;
use bytes::Span;
use unlogged::Behind;
pub(crate) use unlogged::UnloggedRuns;

/// Bytes an entry is charged beyond its value: its slot in the map (the key and the [`Entry`],
/// 56 bytes, and a control byte, in a table between 7/16 and 7/8 full as it grows: about 86
/// bytes an entry at its mean fill), the `Arc`'s allocation (its counts and the [`Bytes`],
/// 64 bytes, 80 with the allocator's header and rounding), and the clock's slot (8, up to 16
/// in a deque of twice the length). `the_entry_overhead_covers_what_an_entry_holds` checks the
/// least of it against the types' sizes.
pub(crate) const ENTRY_OVERHEAD: u64 = 176;
/// The largest write of contiguous runs at once.
const WRITE_BYTES: usize = 1 << 20;
/// Values up to this long are copied out under the cache's lock; longer ones after it, through
/// a clone of their `Arc`.
const COPY_UNDER_LOCK: usize = 16 << 10;
/// Writes in flight at once when writing back in parallel.
const WRITERS: usize = 8;
/// Unlogged values put since the last pass that wake the write-behind thread.
const WRITE_BEHIND_BYTES: u64 = WRITE_BYTES as u64;
/// The most bytes of values one write-behind pass takes ([`unlogged`], "Written behind").
const BEHIND_PASS_BYTES: u64 = 4 * WRITE_BYTES as u64;
/// The most bytes of spare mappings kept for long values (module docs, "Memory").
const SPARE_BYTES: u64 = 16 << 20;
/// The longest freed value kept as a filler (module docs, "Holes").
const FILLER_MAX: usize = 64 << 10;

/// One cached value.
struct Entry {
    value: Arc<Bytes>,
    /// Where `value`'s bytes are, copied out of it: a get finds them through the entry alone,
    /// without reading the `Arc`'s allocation first (module docs, "Memory").
    bytes: Span,
    crc: u32,
    /// The LSN the run's first page is stamped with.
    lsn: u64,
    /// Not 0: the log must be durable past this LSN before the run is written (the WAL rule
    /// for reused pages, module docs).
    log_before: u64,
    dirty: bool,
    /// Its run was freed. Dirty: a checkpoint begun before the free still needs it written
    /// (module docs, "Freed before written"); it leaves once written. Clean: a *filler*, kept
    /// only to fill the hole its run leaves between dirty neighbours (module docs, "Holes");
    /// the next checkpoint's flush writes or drops it.
    freed: bool,
    /// Its record does not carry the value: the run must be in the file, synced, before the
    /// log's sync that makes the record durable (module docs, "Values the log does not carry").
    unlogged: bool,
    /// The clock's second chance (set by gets, which hold the lock shared).
    referenced: AtomicBool,
}

impl Entry {
    /// An entry holding `value`, clean (`lsn` 0) or dirty, its clock bit clear.
    fn new(value: Bytes, crc: u32, lsn: u64, log_before: u64, dirty: bool, unlogged: bool) -> Self {
        let value = Arc::new(value);
        Entry {
            bytes: Span::of(value.as_slice()),
            value,
            crc,
            lsn,
            log_before,
            dirty,
            freed: false,
            unlogged,
            referenced: AtomicBool::new(false),
        }
    }

    /// The value's length.
    fn len(&self) -> usize {
        self.bytes.len
    }

    /// The value's bytes.
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `bytes` was taken from `value`, which this entry holds: its bytes live, and do
        // not move (a boxed slice or a mapping), as long as the entry does, and nothing writes
        // them once shared.
        unsafe { std::slice::from_raw_parts(self.bytes.ptr.as_ptr(), self.bytes.len) }
    }

    fn charge(&self) -> u64 {
        self.value.held() as u64 + ENTRY_OVERHEAD
    }

    /// What writing this entry's run takes (`first`: its first page).
    fn victim(&self, first: u64) -> Victim {
        Victim {
            first,
            value: self.value.clone(),
            crc: self.crc,
            lsn: self.lsn,
            log_before: self.log_before,
            unlogged: self.unlogged,
        }
    }
}

#[derive(Default)]
struct Inner {
    map: HashMap<u64, Entry, rapidhash::fast::RandomState>,
    /// First pages in clock order (a page may appear after its entry left; skipped then).
    clock: VecDeque<u64>,
    /// First pages of the dirty entries whose records do not carry their values, and of
    /// some that have since been written or left (skipped then); emptied by
    /// [`RunCache::write_unlogged`].
    unlogged: Vec<u64>,
    /// Bytes of the values put on `unlogged` since it was last emptied.
    unlogged_bytes: u64,
}

/// The map and the clock behind their lock (module docs, "Memory").
struct Shared(ShardedLock<Inner>);

impl Shared {
    fn read(&self) -> ShardedLockReadGuard<'_, Inner> {
        // A panic while the map was held leaves it whole (every change is one map or list
        // operation), so a poisoned lock is used as it is.
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> ShardedLockWriteGuard<'_, Inner> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A dirty value to write: its run's first page and what its pages hold.
struct Victim {
    first: u64,
    value: Arc<Bytes>,
    crc: u32,
    lsn: u64,
    log_before: u64,
    unlogged: bool,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCacheStats {
    /// Gets served from the cache.
    pub hits: u64,
    /// Gets that read the file.
    pub misses: u64,
    /// Values held now, and their bytes (values only).
    pub values: u64,
    /// Bytes charged now (values and per-entry overhead).
    pub bytes: u64,
    /// Runs written back (by eviction or a checkpoint).
    pub runs_written: u64,
    /// Writes they took.
    pub writes: u64,
}

/// Out-of-line values in memory (module docs).
pub(crate) struct RunCache {
    inner: Shared,
    /// Bytes charged for the entries now.
    bytes: AtomicU64,
    /// The most the cache holds before evicting.
    cap: u64,
    /// The database's whole budget (the pool's is this less what the cache holds).
    total: u64,
    /// What the pool's budget was last lowered by.
    lent: AtomicU64,
    /// Serialises write-backs; holds the write buffer.
    writeback: Mutex<Option<AlignedBuf>>,
    /// The parallel writers' buffers, kept from one write-back to the next (at most
    /// [`WRITERS`]), so a write-back does not map, fault in and unmap 1 MiB per writer each
    /// time (module docs, "Memory").
    spare: Mutex<Vec<AlignedBuf>>,
    /// Serialises [`RunCache::write_unlogged`]; holds its write buffer.
    unlogged_lock: Mutex<Option<AlignedBuf>>,
    /// Writes of unlogged values completed (a count), and how many of them the last
    /// page-file sync of [`RunCache::write_unlogged`] covered.
    unlogged_written: AtomicU64,
    unlogged_synced: AtomicU64,
    /// Whether an unlogged value ever entered (until then the hook has nothing to do).
    any_unlogged: AtomicBool,
    /// The write-behind thread's, once started ([`unlogged`], "Written behind").
    behind: OnceLock<Arc<Behind>>,
    /// Write-backs keep several writes in flight (module docs, "Writing in parallel").
    parallel: bool,
    /// The long values' mappings, recycled and (with `parallel`) faulted in ahead.
    maps: Arc<Mappings>,
    /// Striped: gets on every thread count them.
    hits: Striped,
    misses: Striped,
    runs_written: AtomicU64,
    writes: AtomicU64,
}

impl RunCache {
    /// A cache within the database's budget of `total` bytes (module docs, "Memory"); `enabled`
    /// false gives one that holds nothing (`run_cache=false`: every run written at its put and
    /// read from the file, as before the cache); `parallel`: write back with several writes in
    /// flight (a database with background threads; without them its writes keep one order).
    pub(crate) fn new(total: u64, enabled: bool, parallel: bool) -> Self {
        let cap = if enabled { total / 4 * 3 } else { 0 };
        RunCache {
            inner: Shared(ShardedLock::new(Inner::default())),
            bytes: AtomicU64::new(0),
            cap,
            total,
            lent: AtomicU64::new(0),
            writeback: Mutex::new(None),
            spare: Mutex::new(Vec::new()),
            unlogged_lock: Mutex::new(None),
            unlogged_written: AtomicU64::new(0),
            unlogged_synced: AtomicU64::new(0),
            any_unlogged: AtomicBool::new(false),
            behind: OnceLock::new(),
            parallel,
            maps: Mappings::new((cap / 8).min(SPARE_BYTES) as usize, parallel && enabled),
            hits: Striped::default(),
            misses: Striped::default(),
            runs_written: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
    }

    /// Whether puts may leave their runs here to be written later.
    pub(crate) fn enabled(&self) -> bool {
        self.cap > 0
    }

    /// Copies the value `r` refers to into `out` if the cache holds it; whether it did.
    pub(crate) fn get(&self, r: ValueRef, out: &mut Vec<u8>) -> bool {
        if !self.enabled() {
            return false;
        }
        let inner = self.inner.read();
        let value = match inner.map.get(&r.first) {
            Some(e) if e.crc == r.crc && e.len() == r.len as usize => {
                if !e.referenced.load(Ordering::Relaxed) {
                    e.referenced.store(true, Ordering::Relaxed);
                }
                if e.len() <= COPY_UNDER_LOCK {
                    // A short value is copied at once: two atomic updates of the `Arc`'s count
                    // cost more than the copy.
                    out.clear();
                    out.extend_from_slice(e.as_slice());
                    drop(inner);
                    self.hits.add_one();
                    return true;
                }
                e.value.clone()
            }
            _ => {
                drop(inner);
                self.misses.add_one();
                return false;
            }
        };
        drop(inner);
        self.hits.add_one();
        out.clear();
        out.extend_from_slice(value.as_slice());
        true
    }

    /// Enters a value a put is about to link, not yet in the file (module docs); `unlogged`:
    /// its record will not carry it; `page_size`: the file's.
    pub(crate) fn insert_dirty(
        &self,
        r: ValueRef,
        value: &[u8],
        lsn: u64,
        log_before: u64,
        unlogged: bool,
        page_size: usize,
    ) {
        debug_assert!(!unlogged || log_before == 0);
        self.insert(
            r.first,
            Entry::new(
                Bytes::run_of(value, r.first, r.crc, lsn, page_size, &self.maps),
                r.crc,
                lsn,
                log_before,
                true,
                unlogged,
            ),
        );
    }

    /// Whether a value of `len` bytes may wait here dirty without its record carrying it: the
    /// cache is on and the value is at most a sixteenth of it (longer ones are written at their
    /// put, as values a read enters are not kept past that size).
    pub(crate) fn takes_unlogged(&self, len: usize) -> bool {
        self.enabled() && len as u64 <= self.cap / 16
    }

    /// Enters a value that is in the file (read on a miss, or written at its put), unless it is
    /// longer than a sixteenth of the budget.
    pub(crate) fn insert_clean(&self, r: ValueRef, value: &[u8]) {
        if !self.enabled() || value.len() as u64 > self.cap / 16 {
            return;
        }
        self.insert(
            r.first,
            Entry::new(Bytes::copy_of(value, &self.maps), r.crc, 0, 0, false, false),
        );
    }

    fn insert(&self, first: u64, entry: Entry) {
        let charge = entry.charge();
        let mut inner = self.inner.write();
        if entry.unlogged {
            inner.unlogged.push(first);
            inner.unlogged_bytes += entry.len() as u64;
            self.any_unlogged.store(true, Ordering::Release);
            if inner.unlogged_bytes >= WRITE_BEHIND_BYTES {
                if let Some(b) = self.behind.get() {
                    b.request();
                }
            }
        }
        match inner.map.entry(first) {
            MapEntry::Occupied(mut o) => {
                // A value of pages freed and reused (a clean entry a free did not find, or a
                // read's entry racing the put's): the new one replaces it, and goes on the
                // clock again in case the old one had left it (a page twice on the clock is
                // skipped the second time).
                let old = o.get().charge();
                o.insert(entry);
                self.bytes.fetch_sub(old, Ordering::Relaxed);
                inner.clock.push_back(first);
            }
            MapEntry::Vacant(v) => {
                v.insert(entry);
                inner.clock.push_back(first);
            }
        }
        self.bytes.fetch_add(charge, Ordering::Relaxed);
    }

    /// Forgets the value at `first`, whose put failed before its record: a dirty one is never
    /// written.
    pub(crate) fn forget(&self, first: u64) {
        if !self.enabled() {
            return;
        }
        let mut inner = self.inner.write();
        if let Some(e) = inner.map.remove(&first) {
            self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
        }
    }

    /// The run at `first` was freed (an overwrite or delete, under the write gate), while
    /// `checkpoint_lsn` is the LSN of the last checkpoint begun: a clean value leaves, and so does
    /// a dirty one put since that checkpoint began, which is then never written. A dirty one put
    /// before it stays, marked freed, until a write-back writes it (module docs, "Freed before
    /// written").
    ///
    /// Any other dirty value up to [`FILLER_MAX`] bytes stays as a *filler* (module docs,
    /// "Holes"): clean, first in line for the clock, until the next checkpoint's flush writes
    /// it into the hole its run leaves between dirty neighbours or drops it.
    pub(crate) fn freed(&self, first: u64, checkpoint_lsn: u64) {
        if !self.enabled() {
            return;
        }
        let mut inner = self.inner.write();
        if let Some(e) = inner.map.get_mut(&first) {
            // An unlogged value is written even so: its record may become durable, and
            // recovery finding the run not in the file would end the log there.
            if e.dirty && (e.lsn < checkpoint_lsn || e.unlogged) {
                e.freed = true;
            } else if e.dirty && e.len() <= FILLER_MAX {
                e.dirty = false;
                e.freed = true;
                *e.referenced.get_mut() = false;
            } else if let Some(e) = inner.map.remove(&first) {
                self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
            }
        }
    }

    /// Over the budget: evicts down to an eighth below it, writing dirty victims back (module
    /// docs), then moves the pool's budget. A thread finding another evicting goes on unless the
    /// cache is an eighth past its budget (then it waits its turn, so memory stays bounded).
    pub(crate) fn make_room(&self, pool: &BufferPool, wal: &Wal) -> Result<()> {
        if self.bytes.load(Ordering::Relaxed) > self.cap {
            let guard = match self.writeback.try_lock() {
                Some(g) => Some(g),
                None if self.bytes.load(Ordering::Relaxed) > self.cap + self.cap / 8 => {
                    Some(self.writeback.lock())
                }
                None => None,
            };
            if let Some(mut buf) = guard {
                // An eighth at a time: a load's runs leave in writes of several at once.
                let target = self.cap - self.cap / 8;
                while self.bytes.load(Ordering::Relaxed) > target {
                    let victims = self.take_victims(target);
                    if victims.is_empty() {
                        break;
                    }
                    self.write_and_drop(&victims, pool, wal, &mut buf)?;
                }
            }
        }
        self.lend(pool)
    }

    /// Moves the pool's budget to what the cache leaves of the whole, when that changed by a
    /// sixty-fourth or more.
    fn lend(&self, pool: &BufferPool) -> Result<()> {
        let now = self.bytes.load(Ordering::Relaxed).min(self.cap);
        let lent = self.lent.load(Ordering::Relaxed);
        if now.abs_diff(lent) >= (self.total / 64).max(1)
            && self
                .lent
                .compare_exchange(lent, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            pool.set_budget(self.total - now)?;
        }
        Ok(())
    }

    /// Runs the clock until the entries dropped and chosen bring the cache to `target`: clean
    /// ones leave at once; dirty ones are returned, still cached, to be written and dropped.
    fn take_victims(&self, target: u64) -> Vec<Victim> {
        let mut victims = Vec::new();
        let mut inner = self.inner.write();
        let mut need = self.bytes.load(Ordering::Relaxed).saturating_sub(target);
        // Twice round the clock at most: the first pass may only clear second chances.
        let mut budget = inner.clock.len() * 2;
        while need > 0 && budget > 0 {
            budget -= 1;
            let Some(first) = inner.clock.pop_front() else {
                break;
            };
            let Some(e) = inner.map.get_mut(&first) else {
                continue;
            };
            if *e.referenced.get_mut() {
                *e.referenced.get_mut() = false;
                inner.clock.push_back(first);
                continue;
            }
            need = need.saturating_sub(e.charge());
            if e.dirty {
                victims.push(e.victim(first));
            } else if let Some(e) = inner.map.remove(&first) {
                self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
            }
        }
        victims
    }

    /// Writes `victims` (taken off the clock) and drops those still cached as they were; on a
    /// failure puts them back on the clock, dirty.
    fn write_and_drop(
        &self,
        victims: &[Victim],
        pool: &BufferPool,
        wal: &Wal,
        buf: &mut Option<AlignedBuf>,
    ) -> Result<()> {
        let mut sorted: Vec<&Victim> = victims.iter().collect();
        sorted.sort_unstable_by_key(|v| v.first);
        if let Err(e) = self.write_refs(&sorted, pool.file(), Some(wal), buf) {
            let mut inner = self.inner.write();
            for v in victims {
                if inner.map.contains_key(&v.first) {
                    inner.clock.push_back(v.first);
                }
            }
            return Err(e);
        }
        let mut inner = self.inner.write();
        for v in victims {
            if let MapEntry::Occupied(o) = inner.map.entry(v.first) {
                if Arc::ptr_eq(&o.get().value, &v.value) {
                    let e = o.remove();
                    self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// Writes `victims` (sorted by first page): runs that follow one another on disk together,
    /// up to [`WRITE_BYTES`] a write; the log synced first as far as the WAL rule asks. With
    /// `parallel` (module docs, "Writing in parallel") several writes are in flight at once.
    fn write_refs(
        &self,
        victims: &[&Victim],
        file: &PageFile,
        wal: Option<&Wal>,
        buf: &mut Option<AlignedBuf>,
    ) -> Result<()> {
        let Some(log_before) = victims.iter().map(|v| v.log_before).max() else {
            return Ok(());
        };
        if log_before != 0 {
            // Unlogged values (the only ones written without a log at hand) never wait for it.
            let wal = wal.ok_or_else(|| Error::InvalidArgument {
                what: "a run over reused pages written back without the log".into(),
                limit: 0,
            })?;
            if wal.durable_below() <= log_before {
                wal.sync_to(log_before)?;
            }
        }
        let ps = file.page_size();
        let groups = groups(victims, ps);
        let threads = if self.parallel && !self.one_at_a_time(victims, file) {
            WRITERS.min(groups.len())
        } else {
            1
        };
        if threads <= 1 {
            let buf = buf.get_or_insert_with(|| AlignedBuf::new(WRITE_BYTES));
            for g in &groups {
                self.write_group(&victims[g.clone()], file, buf)?;
            }
            return Ok(());
        }
        let next = AtomicUsize::new(0);
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut buf = self
                        .spare
                        .lock()
                        .pop()
                        .unwrap_or_else(|| AlignedBuf::new(WRITE_BYTES));
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        if at >= groups.len() || failed.lock().is_some() {
                            break;
                        }
                        if let Err(e) =
                            self.write_group(&victims[groups[at].clone()], file, &mut buf)
                        {
                            failed.lock().get_or_insert(e);
                            break;
                        }
                    }
                    let mut spare = self.spare.lock();
                    if spare.len() < WRITERS {
                        spare.push(buf);
                    }
                });
            }
        });
        match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether `victims` (sorted by first page) are written one at a time even with background
    /// threads: every one is kept as its run's image (nothing to copy while another is written)
    /// and lies past the end of the file as it is now, so each write grows it (module docs,
    /// "Writing in parallel").
    fn one_at_a_time(&self, victims: &[&Victim], file: &PageFile) -> bool {
        if !victims.iter().all(|v| v.value.run_image().is_some()) {
            return false;
        }
        // A file whose length cannot be had is written as any other: it costs only the threads.
        let Ok(len) = file.file_len() else {
            return false;
        };
        let end = len.div_ceil(file.page_size() as u64);
        victims.first().is_some_and(|v| v.first >= end)
    }

    /// Writes one group of [`groups`]: with one write from the values' run images if each has
    /// one ([`Bytes::Run`]), else through `buf`, or a run longer than it alone by [`write_run`].
    fn write_group(&self, group: &[&Victim], file: &PageFile, buf: &mut AlignedBuf) -> Result<()> {
        let ps = file.page_size();
        let images: Option<Vec<&[u8]>> = group.iter().map(|v| v.value.run_image()).collect();
        if let Some(images) = images {
            // Every run laid out already: written from the values' own mappings.
            file.write_raw_runs(group[0].first, &images)?;
            self.count_written(group);
            return Ok(());
        }
        if let [v] = group {
            if run_pages(v.value.len(), ps) as usize * ps > buf.len() {
                write_run(file, v.first, &v.value, v.crc, v.lsn)?;
                self.count_written(group);
                return Ok(());
            }
        }
        let mut len = 0;
        for w in group {
            let b = run_pages(w.value.len(), ps) as usize * ps;
            lay_out(&mut buf[len..len + b], ps, w.first, &w.value, w.crc, w.lsn);
            len += b;
        }
        file.write_raw_run(group[0].first, &buf[..len])?;
        self.count_written(group);
        Ok(())
    }

    /// Counts a group's completed write (before its entries are marked clean or leave: the
    /// order [`RunCache::write_unlogged`]'s sync relies on).
    fn count_written(&self, group: &[&Victim]) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.runs_written
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        if group.iter().any(|v| v.unlogged) {
            self.unlogged_written.fetch_add(1, Ordering::Release);
        }
    }

    /// Gets that read the value from the page file, so far.
    pub(crate) fn misses(&self) -> u64 {
        self.misses.sum()
    }

    /// Counters.
    pub(crate) fn stats(&self) -> RunCacheStats {
        let values = self.inner.read().map.len() as u64;
        RunCacheStats {
            hits: self.hits.sum(),
            misses: self.misses.sum(),
            values,
            bytes: self.bytes.load(Ordering::Relaxed),
            runs_written: self.runs_written.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }
}

impl Drop for RunCache {
    fn drop(&mut self) {
        self.maps.stop();
        if let Some(b) = self.behind.get() {
            b.stop();
        }
    }
}

/// `victims` (sorted by first page) cut into the index ranges of single writes: runs that follow
/// one another on disk, up to [`WRITE_BYTES`] together; a run longer than that alone.
fn groups(victims: &[&Victim], page_size: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < victims.len() {
        let start = i;
        let mut next = victims[i].first;
        let mut len = 0;
        while i < victims.len() && victims[i].first == next {
            let n = run_pages(victims[i].value.len(), page_size);
            let b = n as usize * page_size;
            if len > 0 && len + b > WRITE_BYTES {
                break;
            }
            len += b;
            next += n;
            i += 1;
            if len >= WRITE_BYTES {
                break;
            }
        }
        out.push(start..i);
    }
    out
}

#[cfg(test)]
mod overhead_tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn the_entry_overhead_covers_what_an_entry_holds() {
        // The map's slot and control byte in a table at its fullest (7/8), the `Arc`'s
        // allocation (two counts and the value's `Bytes`) with glibc's 8-byte header rounded to
        // 16, and the clock's key: the least an entry costs beyond its value's bytes.
        let slot = (size_of::<(u64, Entry)>() + 1) * 8 / 7;
        let arc = (2 * size_of::<usize>() + size_of::<Bytes>() + 8).next_multiple_of(16);
        let least = slot + arc + size_of::<u64>();
        assert!(
            ENTRY_OVERHEAD as usize >= least,
            "ENTRY_OVERHEAD is {ENTRY_OVERHEAD}, an entry holds at least {least} bytes beside its value"
        );
    }
}
