//! The store's state under its lock: the record cache, the index, page reads, eviction and a
//! read miss's three steps (§4.1.1, §4.1.2, §4.2), with the logging rules of the module docs
//! of [`super`]; a page's flush is [`super::flush`].

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::cache::{RecordCache, PRIORITY_ADMIT, PRIORITY_PREFETCH};
use super::checkpoint::Preread;
use super::flush::{InnerGuard, SKIPS};
use super::group::Groups;
use super::index::{Segment, SegmentIndex};
use super::locks::{Locks, SegMode};
use super::options::TreeLineOptions;
use super::page::{Header, Record, SegmentPage};
use crate::error::{Error, Result};
use crate::io::page_header::{PageKind, PAGE_HEADER_LEN};
use crate::io::{AlignedBuf, PageFile};
use crate::util::histogram::InsertTracker;
use crate::wal::Wal;

/// Memory the store keeps outside the cache, the index and the histograms: a reorganization's
/// records (up to 2r + 1 segments of 16 base and 16 overflow pages, as owned keys and values)
/// and page buffers (one reorganization builds at a time, [`Store::building`]), the pages
/// waiting in the group (up to 1 MiB, written out before a reorganization reads), the read
/// misses' spare page buffers ([`SPARE_PAGES`]), scratch; and what a checkpoint's flush holds
/// while a writer's reorganization builds with the state lock let go (2 MiB of the 8;
/// `docs/results/treeline.md`, session 46).
/// Calibrated with the record cache's exact accounting (`tests/treeline_memory.rs`).
const FIXED_BYTES: usize = 8 << 20;

/// Counters `stats()` reports.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) page_reads: AtomicU64,
    /// Of those, overflow pages read alone (a lookup or a flush that needed one).
    pub(crate) overflow_reads: AtomicU64,
    pub(crate) page_writes: AtomicU64,
    pub(crate) page_images: AtomicU64,
    pub(crate) reorganizations: AtomicU64,
    pub(crate) overflow_pages: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) cache_misses: AtomicU64,
    pub(crate) check1_relinked: AtomicU64,
    pub(crate) check2_done: AtomicU64,
    pub(crate) check2_voided: AtomicU64,
    pub(crate) check2_reinvalidated: AtomicU64,
    /// Read misses whose segment or base page changed while they read with no lock held,
    /// read again under the exclusive lock.
    pub(crate) miss_rereads: AtomicU64,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Stripes of the page writes (number of stripes).
const WRITE_STRIPES: usize = 256;

/// Page writes counted in stripes by page id, bumped under the exclusive lock at every page
/// write. A read miss notes its segment and its base page's count under the shared lock, reads
/// the pages with no lock held, then takes the exclusive lock to admit the record: the same
/// segment in the index and the same count then say that no flush or reorganization changed
/// what it read in between (a flush that rewrites an overflow page rewrites its base page too;
/// a reorganization replaces the segment).
pub(crate) struct WriteStripes([AtomicU64; WRITE_STRIPES]);

impl Default for WriteStripes {
    fn default() -> Self {
        WriteStripes(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl WriteStripes {
    fn stripe(&self, id: u64) -> &AtomicU64 {
        &self.0[id as usize % WRITE_STRIPES]
    }

    pub(super) fn bump(&self, id: u64) {
        self.stripe(id).fetch_add(1, Ordering::Relaxed);
    }

    /// The count of page `id`'s stripe.
    pub(super) fn of(&self, id: u64) -> u64 {
        self.stripe(id).load(Ordering::Relaxed)
    }
}

/// A read miss's segment and page, noted under the shared lock ([`Store::plan_miss`]), for
/// reading with no lock held ([`Store::read_miss`]).
pub(crate) struct MissPlan {
    seg: Segment,
    /// The base page's overflow link as recovery corrected it, if it did.
    relinked: Option<u64>,
    /// The base page's count of writes ([`WriteStripes`]).
    writes: u64,
    /// The cache's inserts ([`RecordCache::inserts`]) and the index's version
    /// ([`SegmentIndex::version`]) when the miss was planned.
    inserts: u64,
    index_version: u64,
}

/// A read miss's pages, read with no lock held, for [`Store::admit_miss`] under the exclusive
/// lock: the value found and the pages, or the error met (a torn read of a page being written
/// is an error only if its segment and page turn out unchanged).
pub(crate) struct MissRead {
    pub(crate) found: Result<(Option<Vec<u8>>, PagePair)>,
    plan: MissPlan,
}

/// TreeLine's engine over the durability layer: the page file, the log, and the state under
/// the lock.
pub(crate) struct Store {
    pub(crate) file: PageFile,
    pub(crate) wal: Arc<Wal>,
    /// Writers hold it shared while they log and cache a write; a checkpoint holds it
    /// exclusively ([`crate::durable::Engine::hold_writers`]).
    pub(crate) gate: RwLock<()>,
    /// Shared by cache hits and scans (which read pages under it, side by side); exclusive
    /// for everything that changes the cache, the index or the pages.
    pub(crate) inner: RwLock<Inner>,
    pub(crate) log_bytes: AtomicU64,
    /// Bytes of the list of dirty entries a flush of the whole cache (a checkpoint's) works
    /// through, while it does: 4 a dirty entry, charged against the budget.
    pub(crate) flush_list_bytes: AtomicUsize,
    pub(crate) options: TreeLineOptions,
    pub(crate) counters: Counters,
    /// Page writes waiting for one log sync ([`super::group`]).
    pub(crate) groups: Groups,
    /// Page writes by stripe, for read misses that read with no lock held.
    pub(crate) writes: WriteStripes,
    /// Page buffers of read misses done with, for the next ones ([`Store::page_buffer`]).
    pub(crate) spare_pages: Mutex<Vec<AlignedBuf>>,
    /// Segment and page locks ([`super::locks`]).
    pub(crate) locks: Locks,
    /// Held by a reorganization while it reads, plans and writes (Phases II and III, no state
    /// lock held): one at a time, so that the memory allowed for one ([`FIXED_BYTES`]) holds
    /// however many threads reorganize.
    pub(crate) building: Mutex<()>,
}

/// Page buffers kept for reuse (within the store's fixed allowance).
const SPARE_PAGES: usize = 8;

/// What the lock protects.
pub(crate) struct Inner {
    pub(crate) cache: RecordCache,
    pub(crate) index: SegmentIndex,
    /// Pages whose image was logged since the last checkpoint began.
    pub(crate) imaged: HashSet<u64>,
    /// Base pages whose overflow link recovery corrected in memory (Check I), until the base
    /// page is next written: base → overflow (0: none, the link on disk dangles).
    pub(crate) relinked: HashMap<u64, u64>,
    pub(crate) next_production: u64,
    /// Records on the pages (base and overflow pages, distinct keys).
    pub(crate) disk_records: u64,
    pub(crate) tracker: InsertTracker,
    /// During redo: the cache grows past its budget (nothing may be logged yet).
    pub(crate) redoing: bool,
    pub(crate) log_buf: Vec<u8>,
    /// A flush that failed while writers were being held back, for the checkpoint's next call.
    pub(crate) held_flush_error: Option<Error>,
    /// Segments by page count (1, 2, 4, 8, 16).
    pub(crate) segment_sizes: [u64; 5],
    /// A segment's base pages read with one I/O by a checkpoint's flush
    /// ([`super::checkpoint`]); only while it holds the lock.
    pub(crate) preread: Option<Preread>,
}

/// A segment's records read from its pages.
pub(crate) struct SegmentRecords {
    /// Sorted, distinct keys (a base page's record wins over its overflow page's).
    pub(crate) records: Vec<Record>,
    /// Overflow pages linked from its base pages.
    pub(crate) overflows: Vec<u64>,
}

/// The size class (0..5) of a segment of `pages` pages.
pub(crate) fn size_class(pages: u16) -> usize {
    (pages.max(1).trailing_zeros() as usize).min(4)
}

/// Merges two sorted record lists, the first's record winning on equal keys.
pub(crate) fn merge_records(a: Vec<Record>, b: Vec<Record>) -> Vec<Record> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                std::cmp::Ordering::Less => out.extend(a.next()),
                std::cmp::Ordering::Greater => out.extend(b.next()),
                std::cmp::Ordering::Equal => {
                    out.extend(a.next());
                    b.next();
                }
            },
            (Some(_), None) => out.extend(a.next()),
            (None, Some(_)) => out.extend(b.next()),
            (None, None) => return out,
        }
    }
}

/// Keys in `a` or `b` (both sorted).
pub(super) fn distinct(a: &[Record], b: &[Record]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0u64);
    while i < a.len() || j < b.len() {
        n += 1;
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            },
            (Some(_), None) => i += 1,
            _ => j += 1,
        }
    }
    n
}

/// A base page (and its overflow page) read.
pub(crate) struct PagePair {
    pub(crate) base_id: u64,
    pub(crate) base: AlignedBuf,
    pub(crate) header: Header,
    pub(crate) overflow: Option<(u64, AlignedBuf)>,
}

impl Store {
    pub(crate) fn page_size(&self) -> usize {
        self.file.page_size()
    }

    /// Reads base page `k` of `seg` and its overflow page.
    pub(crate) fn read_pair(&self, inner: &Inner, seg: &Segment, k: usize) -> Result<PagePair> {
        let (mut pair, link) = self.read_base(inner, seg, k)?;
        if link != 0 {
            pair.overflow = Some((
                link,
                self.read_overflow(link, pair.base_id, seg.production)?,
            ));
        }
        Ok(pair)
    }

    /// A buffer for one page, to be read into: a read miss's earlier one if there is one,
    /// sparing a miss an aligned, zeroed allocation and its free. Its header is zeroed, so
    /// that a read which wrote nothing can never pass for the page read before.
    fn page_buffer(&self) -> AlignedBuf {
        let Some(mut buf) = self.spare_pages.lock().pop() else {
            return self.file.buffer(1);
        };
        buf[..PAGE_HEADER_LEN].fill(0);
        buf
    }

    /// Keeps `pair`'s buffers for [`Store::page_buffer`].
    pub(super) fn recycle(&self, pair: PagePair) {
        let mut spare = self.spare_pages.lock();
        for buf in std::iter::once(pair.base).chain(pair.overflow.map(|(_, b)| b)) {
            if spare.len() < SPARE_PAGES {
                spare.push(buf);
            }
        }
    }

    /// Reads base page `k` of `seg` alone; returns it (no overflow page read) and its
    /// overflow page's id (0: none).
    fn read_base(&self, inner: &Inner, seg: &Segment, k: usize) -> Result<(PagePair, u64)> {
        let base_id = seg.first + k as u64;
        self.read_base_at(
            seg,
            k,
            inner.preread.as_ref(),
            inner.relinked.get(&base_id).copied(),
        )
    }

    /// [`Store::read_base`] with what it needs of the store's state: the checkpoint's
    /// pre-read pages, and the base page's overflow link as recovery corrected it.
    pub(super) fn read_base_at(
        &self,
        seg: &Segment,
        k: usize,
        preread: Option<&Preread>,
        relinked: Option<u64>,
    ) -> Result<(PagePair, u64)> {
        let base_id = seg.first + k as u64;
        let mut base = self.page_buffer();
        let ps = self.page_size();
        match preread.and_then(|p| p.page(base_id, ps)) {
            Some(copy) => base[..ps].copy_from_slice(copy),
            None => {
                self.settle(base_id, 1)?;
                self.file
                    .read_page(base_id, &mut base, PageKind::SegmentPage)?;
                Counters::add(&self.counters.page_reads, 1);
            }
        }
        let header = Header::decode(base_id, &base)?;
        if header.production != seg.production || header.offset as usize != k {
            return Err(Error::Corruption {
                page: base_id,
                detail: format!(
                    "page {} of segment {} (production {}) holds page {} of production {}",
                    k, seg.first, seg.production, header.offset, header.production
                ),
            });
        }
        let link = relinked.unwrap_or(header.link);
        Ok((
            PagePair {
                base_id,
                base,
                header,
                overflow: None,
            },
            link,
        ))
    }

    /// Looks `key` up on its page (§4.1.1): the base page, and only if the key is not there
    /// its overflow page (a key is on one of the two). Returns the value and the pages read.
    pub(crate) fn find_on_pages(
        &self,
        inner: &Inner,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, PagePair)> {
        self.find_in_segment(inner, &inner.index.segment_of(key)?, key)
    }

    /// [`Store::find_on_pages`] in `seg`, the segment of `key`.
    fn find_in_segment(
        &self,
        inner: &Inner,
        seg: &Segment,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, PagePair)> {
        let base_id = seg.first + seg.page_of(key) as u64;
        let relinked = inner.relinked.get(&base_id).copied();
        self.find_at(seg, key, inner.preread.as_ref(), relinked)
    }

    /// [`Store::find_in_segment`] with what it needs of the store's state (as
    /// [`Store::read_base_at`]).
    fn find_at(
        &self,
        seg: &Segment,
        key: &[u8],
        preread: Option<&Preread>,
        relinked: Option<u64>,
    ) -> Result<(Option<Vec<u8>>, PagePair)> {
        let (mut pair, link) = self.read_base_at(seg, seg.page_of(key), preread, relinked)?;
        if let Some(v) = SegmentPage::new(pair.base_id, &pair.base)?.get(key)? {
            return Ok((Some(v.to_vec()), pair));
        }
        if link == 0 {
            return Ok((None, pair));
        }
        let buf = self.read_overflow(link, pair.base_id, seg.production)?;
        let value = SegmentPage::new(link, &buf)?.get(key)?.map(<[u8]>::to_vec);
        pair.overflow = Some((link, buf));
        Ok((value, pair))
    }

    /// Reads overflow page `id` of base page `base_id` in a segment of `production`.
    pub(crate) fn read_overflow(
        &self,
        id: u64,
        base_id: u64,
        production: u64,
    ) -> Result<AlignedBuf> {
        self.settle(id, 1)?;
        let mut buf = self.page_buffer();
        self.file
            .read_page(id, &mut buf, PageKind::SegmentOverflow)?;
        Counters::add(&self.counters.page_reads, 1);
        Counters::add(&self.counters.overflow_reads, 1);
        let h = Header::decode(id, &buf)?;
        if h.link != base_id || h.production != production {
            return Err(Error::Corruption {
                page: id,
                detail: format!(
                    "overflow page of base {} (production {}) claims base {} (production {})",
                    base_id, production, h.link, h.production
                ),
            });
        }
        Ok(buf)
    }

    /// The value of `key` on its pages (no cache).
    pub(crate) fn lookup_disk(&self, inner: &Inner, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.find_on_pages(inner, key)?.0)
    }

    /// Distinct keys on a page pair.
    pub(crate) fn pair_distinct(&self, pair: &PagePair) -> Result<u64> {
        let (b, o) = Self::pair_records(pair)?;
        Ok(distinct(&b, &o))
    }

    /// Every record of a page pair: the base page's and the overflow page's, each sorted.
    pub(super) fn pair_records(pair: &PagePair) -> Result<(Vec<Record>, Vec<Record>)> {
        let mut base = Vec::new();
        SegmentPage::new(pair.base_id, &pair.base)?.records_into(&mut base)?;
        let mut over = Vec::new();
        if let Some((id, buf)) = &pair.overflow {
            SegmentPage::new(*id, buf)?.records_into(&mut over)?;
        }
        Ok((base, over))
    }

    /// The records of base pages `pages` of `seg` (and of their overflow pages), the base
    /// pages read with one I/O; `relinked`: overflow links as recovery corrected them
    /// ([`Inner::relinked`]).
    pub(super) fn read_pages(
        &self,
        relinked: &HashMap<u64, u64>,
        seg: &Segment,
        pages: Range<usize>,
    ) -> Result<SegmentRecords> {
        let n = pages.len();
        let ps = self.page_size();
        let first = seg.first + pages.start as u64;
        self.settle(first, n as u64)?;
        let mut buf = self.file.buffer(n);
        self.file
            .read_run(first, &mut buf, &vec![PageKind::SegmentPage; n])?;
        Counters::add(&self.counters.page_reads, n as u64);
        let mut records = Vec::new();
        let mut overflows = Vec::new();
        for (at, k) in pages.enumerate() {
            let id = seg.first + k as u64;
            let bytes = &buf[at * ps..(at + 1) * ps];
            let p = SegmentPage::new(id, bytes)?;
            if p.header.production != seg.production || p.header.offset as usize != k {
                return Err(Error::Corruption {
                    page: id,
                    detail: format!(
                        "not page {k} of the segment of production {}",
                        seg.production
                    ),
                });
            }
            let mut base = Vec::new();
            p.records_into(&mut base)?;
            let link = relinked.get(&id).copied().unwrap_or(p.header.link);
            if link != 0 {
                let o = self.read_overflow(link, id, seg.production)?;
                let mut over = Vec::new();
                SegmentPage::new(link, &o)?.records_into(&mut over)?;
                base = merge_records(base, over);
                overflows.push(link);
            }
            records.push(base);
        }
        // Pages of a grouped segment hold interleaved key ranges only for keys outside the
        // records' shared prefix (model docs); sort to be safe, it is nearly sorted.
        let mut all: Vec<Record> = records.into_iter().flatten().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|b, a| a.0 == b.0);
        Ok(SegmentRecords {
            records: all,
            overflows,
        })
    }

    /// Memory the store holds against `cache_bytes`.
    pub(crate) fn memory(&self, inner: &Inner) -> usize {
        inner.cache.bytes()
            + inner.index.memory_bytes()
            + self.wal.buffer_bytes()
            + self.flush_list_bytes.load(Ordering::Relaxed)
            // The set of pages imaged since the checkpoint: a u64 and a control byte a bucket,
            // at most seven eighths of the buckets used.
            + (inner.imaged.capacity() + inner.imaged.capacity() / 7) * 9
            + if self.options.forecast {
                inner.tracker.memory_bytes()
            } else {
                0
            }
            + FIXED_BYTES
    }

    /// Evicts entries (writing dirty victims' pages) until the store is within its budget.
    pub(crate) fn evict_to_budget(&self, guard: &mut InnerGuard<'_>) -> Result<()> {
        self.evict_to(guard, self.options.cache_bytes as usize)
            .map(|_| ())
    }

    /// Evicts entries until the store takes at most `target` bytes; returns whether it evicted
    /// any. A dirty victim's page is written first, its read with the state lock let go
    /// ([`super::flush`]); a victim whose page is locked by another is passed over, up to
    /// [`SKIPS`] of them.
    fn evict_to(&self, guard: &mut InnerGuard<'_>, target: usize) -> Result<bool> {
        if guard.redoing {
            return Ok(false);
        }
        let mut evicted = false;
        let mut skipped = 0;
        while self.memory(guard) > target {
            if guard.cache.compact_if_loose() {
                continue;
            }
            let Some(v) = guard.cache.victim() else {
                break;
            };
            let Some(e) = guard.cache.entry(v) else {
                continue;
            };
            evicted = true;
            if e.dirty {
                let key = e.key.to_vec();
                if !self.flush_key(guard, &key, true, skipped < SKIPS)? {
                    skipped += 1;
                    continue;
                }
                // The flush removed a delete marker's entry and kept a put's, clean.
                if let Some(s) = guard.cache.slot_of(&key) {
                    guard.cache.remove(s)?;
                }
            } else {
                guard.cache.remove(v)?;
            }
        }
        Ok(evicted)
    }

    /// Caches a write logged at `lsn` (`value: None` deletes); `on_disk`: what the caller
    /// knows of the key's presence on its page. Making room may let the state lock go.
    pub(crate) fn cache_write(
        &self,
        guard: &mut InnerGuard<'_>,
        key: &[u8],
        value: Option<&[u8]>,
        lsn: u64,
        on_disk: Option<bool>,
    ) -> Result<()> {
        match guard.cache.slot_of(key) {
            Some(s) => guard.cache.write(s, value, lsn, on_disk)?,
            None => {
                guard
                    .cache
                    .insert(key, value, true, lsn, PRIORITY_ADMIT, on_disk)?;
            }
        }
        if !self.options.record_cache && !guard.redoing {
            // Write-through (Table 5.3's "Base"): to the page at once, and not kept.
            self.flush_key(guard, key, true, false)?;
            if let Some(s) = guard.cache.slot_of(key) {
                if !guard.cache.entry(s).is_some_and(|e| e.dirty) {
                    guard.cache.remove(s)?;
                }
            }
            return Ok(());
        }
        self.evict_to_budget(guard)
    }

    /// Looks `key` up in the cache alone (under the shared lock): `Some(found)` on a hit
    /// (a delete marker: not found), `None` if it is not cached.
    pub(crate) fn get_cached(
        &self,
        inner: &Inner,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<bool>> {
        let found = Self::cached(inner, key, out)?;
        if found.is_some() {
            Counters::add(&self.counters.cache_hits, 1);
        }
        Ok(found)
    }

    /// [`Store::get_cached`] without counting.
    fn cached(inner: &Inner, key: &[u8], out: &mut Vec<u8>) -> Result<Option<bool>> {
        let Some(s) = inner.cache.slot_of(key) else {
            return Ok(None);
        };
        inner.cache.touch(s);
        Ok(Some(match inner.cache.entry(s).and_then(|e| e.value) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                true
            }
            None => false,
        }))
    }

    /// Notes what a read miss will read, under the shared lock (held only for this: misses of
    /// several threads read their pages side by side, and writers are not held up by them).
    pub(crate) fn plan_miss(&self, inner: &Inner, key: &[u8]) -> Result<MissPlan> {
        Counters::add(&self.counters.cache_misses, 1);
        let seg = inner.index.segment_of(key)?;
        let base_id = seg.first + seg.page_of(key) as u64;
        Ok(MissPlan {
            relinked: inner.relinked.get(&base_id).copied(),
            writes: self.writes.of(base_id),
            inserts: inner.cache.inserts(),
            index_version: inner.index.version(),
            seg,
        })
    }

    /// Reads a read miss's pages with no state lock held, under the segment's IR lock and the
    /// page's S lock (§4.8.1), released before the miss is admitted.
    pub(crate) fn read_miss(&self, plan: MissPlan, key: &[u8]) -> MissRead {
        let _segment = self.locks.segment(plan.seg.first, SegMode::Ir);
        let _page = self
            .locks
            .page(plan.seg.first + plan.seg.page_of(key) as u64, false);
        MissRead {
            found: self.find_at(&plan.seg, key, None, plan.relinked),
            plan,
        }
    }

    /// Answers and caches a read miss read by [`Store::read_miss`]: from the cache if a writer
    /// cached the key since; from what was read if its segment and base page are unchanged
    /// (nothing else changes what a page says for a key not cached); else the pages are read
    /// again, under the lock. If nothing was cached and the index did not change since the
    /// plan (always, at one thread), the key is still not cached and its segment is the
    /// planned one: neither is looked up again (after the read's wait each lookup is a round
    /// of cache misses).
    pub(crate) fn admit_miss(
        &self,
        guard: &mut InnerGuard<'_>,
        key: &[u8],
        read: MissRead,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        // Room for the record is made first, so that it takes the slot and the arena chunk
        // its victim left, still in the CPU's caches. A dirty victim's flush lets the state
        // lock go, so what the read found is checked only after.
        let mut evicted = false;
        if let (true, Ok((Some(v), _))) = (self.options.record_cache, &read.found) {
            let cost = RecordCache::entry_cost(key.len(), v.len());
            evicted = self.evict_to(
                guard,
                (self.options.cache_bytes as usize).saturating_sub(cost),
            )?;
        }
        let inner: &mut Inner = guard;
        let plan = &read.plan;
        let current;
        let seg = if inner.cache.inserts() == plan.inserts
            && inner.index.version() == plan.index_version
        {
            &plan.seg
        } else {
            if let Some(found) = Self::cached(inner, key, out)? {
                return Ok(found);
            }
            current = inner.index.segment_of(key)?;
            &current
        };
        let unchanged = seg.first == plan.seg.first
            && seg.production == plan.seg.production
            && self.writes.of(seg.first + seg.page_of(key) as u64) == plan.writes;
        let (value, pair) = if unchanged {
            read.found?
        } else {
            Counters::add(&self.counters.miss_rereads, 1);
            self.find_in_segment(inner, seg, key)?
        };
        let r = self.admit(guard, key, value, &pair, out, evicted);
        self.recycle(pair);
        r
    }

    /// A record read from `pair`, its page, not cached: copied out and cached (with prefetch
    /// its page-mates too, into room the budget has left, if making room for the record
    /// `evicted` nothing).
    fn admit(
        &self,
        guard: &mut InnerGuard<'_>,
        key: &[u8],
        value: Option<Vec<u8>>,
        pair: &PagePair,
        out: &mut Vec<u8>,
        evicted: bool,
    ) -> Result<bool> {
        let Some(value) = value else {
            return Ok(false);
        };
        out.clear();
        out.extend_from_slice(&value);
        if !self.options.record_cache {
            return Ok(true);
        }
        let budget = self.options.cache_bytes as usize;
        let cost = RecordCache::entry_cost(key.len(), value.len());
        let inner: &mut Inner = guard;
        inner
            .cache
            .insert(key, Some(&value), false, 0, PRIORITY_ADMIT, Some(true))?;
        // Page-mates are cached only into room the budget has left (they evict nothing): in a
        // full cache, none, and the page's records are not copied out for nothing.
        if self.options.prefetch && !evicted && self.memory(inner) + cost <= budget {
            let (base, over) = Self::pair_records(pair)?;
            for (k, v) in base.into_iter().chain(over) {
                let cost = RecordCache::entry_cost(k.len(), v.len());
                if self.memory(inner) + cost > budget {
                    break;
                }
                if inner.cache.slot_of(&k).is_none() {
                    inner
                        .cache
                        .insert(&k, Some(&v), false, 0, PRIORITY_PREFETCH, Some(true))?;
                }
            }
        }
        self.evict_to_budget(guard)?;
        Ok(true)
    }

    /// Live records: those on the pages, corrected by every dirty entry (an entry that does
    /// not know whether its key is on its page looks).
    pub(crate) fn records(&self, inner: &mut Inner) -> Result<u64> {
        let mut n = inner.disk_records as i64;
        for s in inner.cache.dirty_slots()? {
            let Some(e) = inner.cache.entry(s) else {
                continue;
            };
            let on_disk = match e.on_disk {
                Some(b) => b,
                None => {
                    let key = e.key.to_vec();
                    let b = self.lookup_disk(inner, &key)?.is_some();
                    inner.cache.set_on_disk(s, b);
                    b
                }
            };
            let live = inner.cache.entry(s).is_some_and(|e| e.value.is_some());
            n += i64::from(live) - i64::from(on_disk);
        }
        Ok(n.max(0) as u64)
    }
}
