//! The buffer pool: pages of a [`PageFile`] cached in memory within a byte budget, after
//! vmcache (Leis et al., SIGMOD 2023), the buffer manager the B-Trees Are Back paper integrates
//! its tree into (section 7).
//!
//! **Translation.** Page `i` lives at a fixed virtual address, `base + i × page size`, inside one
//! large `MAP_NORESERVE` reservation (`region`); no hash table maps page ids to frames. Only
//! resident pages consume memory; eviction hands the memory back with `MADV_DONTNEED`, a batch
//! of frames per system call (`region`).
//!
//! **Latching.** Each page has one state word (`state`): an exclusive lock bit, residency,
//! a clock mark, a dirty bit and a version. Readers are optimistic: [`BufferPool::read_lock`]
//! returns a version, the reader reads the frame, [`BufferPool::validate`] says whether it may
//! trust what it read. Readers never write shared memory, except to clear a clock mark (a page
//! the clock hand passed but that is still in use), which is rare. Writers take the exclusive
//! lock. A checkpoint's flush copies a page out holding it in a third mode, *writing*: writers
//! wait (for one page copy), readers go on and their versions stay valid, since the bytes do not
//! change. A thread that waits for a page's holder spins briefly, then sleeps on the page's
//! state word until the holder lets go (`state`, waiting), at once if the page is being loaded:
//! with more threads than cores, waiting threads that yield in a loop take the CPU the loaders
//! need.
//!
//! **Miss path, submit then complete.** A reader that finds its page evicted takes the lock in
//! *loading* state (`LOCKED | EVICTED`), reads the page and verifies its checksum, then releases
//! it resident. Other threads that want the page see it locked and sleep; when the loader
//! completes it wakes them. The two halves are public for a reader that does not block
//! (the PA-Tree mode's worker): [`BufferPool::begin_load`] takes the page and makes room, the
//! caller reads the frame itself (an io_uring read, `exec`), and [`BufferPool::complete_load`]
//! checks what arrived and releases the page; the blocking miss path is the same two halves
//! around a `pread`. A failed read (I/O error, short read, checksum mismatch) leaves the page
//! evicted and returns the error to that reader only.
//!
//! **Eviction** (`evict`): when the pool is full, the thread that needs room runs the clock
//! (second chance) and evicts a batch of pages, writing dirty ones back first without holding
//! the clock's lock, and discarding the frames of a batch with one system call; reused runs of
//! page ids are forgotten there too ([`BufferPool::forget_run`]).
//!
//! **Checkpoint write-back from a copy.** [`BufferPool::flush_all`] walks the resident pages in
//! page order and writes each run of consecutive dirty pages with one write (up to 1 MiB), but
//! never holds a writer for the I/O: for each page it takes the *writing* mode, copies the frame
//! into the run's slot of an aligned buffer and, in one atomic step, releases the page, clears
//! its dirty bit and marks it *in flight* (`IN_FLIGHT`, `state`). Then the log is made durable
//! up to the copies' highest LSN (the WAL rule, for the copy), the copies' headers are sealed
//! (checksum, id, LSN) in the buffer and the run is written from the buffer. Writers held the
//! page only for its 4 KiB copy; one that changes it after the copy sets the dirty bit again, and
//! a later flush or eviction writes it again: nothing is lost. When the write ends the pages
//! leave flight; a failed write marks them dirty again (their bytes stay in memory and the error
//! is returned, as before). Before, the run's pages stayed in writing mode for the whole
//! `O_DIRECT` write of up to 1 MiB, and any writer needing one of them (an insert's leaf, an
//! inner node on a split) waited for it: tens of thousands of waits per 5M-record load, up to
//! 86 ms each (`docs/results/db.md`, session 9).
//!
//! *In flight* is respected by eviction and by other flushers, not by readers or writers: the
//! clock must not drop a page whose older copy is still being written (a reader could reload
//! the older bytes from disk before the write lands), nor write a newer version that could land
//! before the older one. Flushes run one at a time (the copy buffer's lock), so a flush never
//! meets another's page in flight, and a page that is neither dirty nor in flight when a flush
//! reaches it is in the file. A page freed while in flight keeps the bit through its reuse, so
//! its new incarnation is not written or evicted before the old write ends.
//!
//! The copy buffer is one per pool, allocated at the first flush and reused: 1 MiB, or a
//! sixteenth of the budget if that is less (a run is then shorter), and it comes out of the
//! budget, so frames plus buffer stay within it. Copying costs the checkpoint thread a memcpy of
//! each page it writes, which is small next to sealing (a CRC32C of the page) and the write.
//!
//! **WAL rule.** Before a dirty page (or a copy of it) is written back, the log is made durable
//! up to the page's LSN (its header's LSN field, which the engine sets under the page's lock),
//! through [`LogFlush`], the one thing the pool asks of a log (the database's is its `Wal`). The
//! header's fields are read and written through [`crate::io::page_header`]'s accessors.
//! A flush syncs the log before it starts, and again before a run only if one of its copies is
//! newer than that; it never fsyncs while holding a page.
//!
//! Differences from vmcache: no shared-lock mode (sylva's trees use optimistic reads and
//! exclusive writes only); the clock keeps an explicit list of resident page ids instead of
//! sampling random ones, which is simpler at our sizes; eviction is done by whichever thread needs
//! room, and while it discards a batch of frames together, as vmcache does, it writes dirty
//! victims one at a time rather than as a batch of `O_DIRECT` writes issued together.

mod evict;
mod flush;
mod handoff;
mod region;
mod state;

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

thread_local! {
    /// Write-backs of dirty victims that allocations on this (non-blocking) thread handed out,
    /// until its worker takes them ([`BufferPool::take_handed`]).
    static HANDED: std::cell::RefCell<Vec<WriteBack>> = const { std::cell::RefCell::new(Vec::new()) };
}

use crate::error::{Error, Result};
use crate::io::page_header::{self, PageKind, PAGE_HEADER_LEN};
use crate::io::{AlignedBuf, PageFile};
use crate::util::striped::Striped;
use evict::MAX_EVICT_BATCH;
pub use handoff::{Load, WriteBack};
use region::Region;
use state::{
    is_evicted, stable, PageState, BUSY, DIRTY, EVICTED, FREED, IN_FLIGHT, LOCKED, MARKED, WAITING,
};

/// What the pool needs of a write-ahead log: the WAL rule, a page reaches the file only after
/// the log records up to its LSN are durable.
pub trait LogFlush: Send + Sync {
    /// Makes every record up to and including `lsn` durable (every record appended so far if
    /// `lsn` is past the last), and returns the LSN below which every record is durable.
    fn flush_to(&self, lsn: u64) -> Result<u64>;
    /// The LSN below which every record is durable now (without waiting).
    fn durable_below(&self) -> u64;
}

/// Buffer-pool settings.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Memory the pool may use for page frames and its write-back copy buffer (1 MiB, or a
    /// sixteenth of this if less), in bytes (at least 16 frames are always allowed).
    pub budget_bytes: u64,
    /// Address space reserved, in bytes: the largest database this pool can open. The default,
    /// 1 TiB, costs nothing until used.
    pub reserve_bytes: u64,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            budget_bytes: default_budget(),
            reserve_bytes: 1 << 40,
        }
    }
}

/// min(1 GiB, 25% of physical memory).
pub fn default_budget() -> u64 {
    // SAFETY: sysconf only reads system constants.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let ram = if pages > 0 && size > 0 {
        pages as u64 * size as u64
    } else {
        4 << 30
    };
    (ram / 4).min(1 << 30)
}

/// Counters of a pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Optimistic reads that found their page resident.
    pub hits: u64,
    /// Pages read from the file.
    pub misses: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Dirty pages written back (by eviction or flush).
    pub writebacks: u64,
    /// Pages resident now.
    pub resident: u64,
    /// The budget for frames, in pages (the budget less the copy buffer).
    pub budget_pages: u64,
}

/// Bytes a checkpoint writes back with one write at most (256 pages of 4 KiB): the size of its
/// copy buffer.
const MAX_RUN_BYTES: usize = 1 << 20;

struct Clock {
    pages: Vec<u64>,
    hand: usize,
    /// Pages the clock passes over, with how many pins each has (`evict`'s module docs,
    /// *pinned pages*).
    pinned: HashMap<u64, u32, rapidhash::fast::RandomState>,
}

/// Pages of a [`PageFile`], cached within a memory budget.
pub struct BufferPool {
    file: Arc<PageFile>,
    log: Option<Arc<dyn LogFlush>>,
    frames: Region,
    states: Region,
    /// The header kinds a page read from the file may have (empty: any; see
    /// [`BufferPool::accept_only`]).
    kinds: &'static [PageKind],
    capacity: u64,
    page_size: usize,
    /// The budget for frames, in pages: fixed at `new` unless the engine moves it
    /// ([`BufferPool::set_budget`]).
    budget_pages: AtomicU64,
    /// Pages an eviction evicts at once when the pool is full: a sixty-fourth of the budget,
    /// between 1 and [`MAX_EVICT_BATCH`].
    evict_batch: usize,
    /// Pages a checkpoint's write-back copies and writes at once: the length of `flush_buf`,
    /// taken out of the budget.
    run_pages: usize,
    /// The copy buffer of write-backs, allocated at the first; its lock also makes flushes
    /// run one at a time.
    flush_buf: Mutex<Option<AlignedBuf>>,
    /// Writes a flush keeps in flight ([`BufferPool::set_flush_writers`]).
    flush_writers: AtomicUsize,
    resident: AtomicU64,
    clock: Mutex<Clock>,
    hits: Striped,
    misses: AtomicU64,
    evictions: AtomicU64,
    writebacks: AtomicU64,
}

impl BufferPool {
    /// A pool over `file` (owned, or shared with an engine that writes runs past the pool,
    /// as the NB-tree's d-tree leaves are); `log`, when given, is flushed up to a page's LSN
    /// before the page is written back.
    pub fn new(
        file: impl Into<Arc<PageFile>>,
        log: Option<Arc<dyn LogFlush>>,
        options: PoolOptions,
    ) -> Result<Self> {
        let file = file.into();
        let page_size = file.page_size();
        let capacity = options.reserve_bytes / page_size as u64;
        let frames = Region::reserve((capacity as usize).saturating_mul(page_size))?;
        let states = Region::reserve((capacity as usize).saturating_mul(8))?;
        // The copy buffer comes out of the budget: a sixteenth of it at most, so a small pool
        // keeps most of its pages for frames.
        let total = (options.budget_bytes / page_size as u64).max(17);
        let run_pages = ((total / 16) as usize).clamp(1, (MAX_RUN_BYTES / page_size).max(1));
        let budget_pages = (total - run_pages as u64).max(16);
        Ok(BufferPool {
            file,
            log,
            frames,
            states,
            kinds: &[],
            capacity,
            page_size,
            budget_pages: AtomicU64::new(budget_pages),
            evict_batch: ((budget_pages / 64) as usize).clamp(1, MAX_EVICT_BATCH),
            run_pages,
            flush_buf: Mutex::new(None),
            flush_writers: AtomicUsize::new(1),
            resident: AtomicU64::new(0),
            clock: Mutex::new(Clock {
                pages: Vec::new(),
                hand: 0,
                pinned: HashMap::default(),
            }),
            hits: Striped::default(),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            writebacks: AtomicU64::new(0),
        })
    }

    /// Bytes of a page available to the engine (the page size minus the 32-byte common header).
    pub fn usable_size(&self) -> usize {
        self.page_size - PAGE_HEADER_LEN
    }

    /// The page file underneath.
    pub fn file(&self) -> &PageFile {
        &self.file
    }

    fn state(&self, id: u64) -> Result<&PageState> {
        self.state_of(id).ok_or_else(|| Error::InvalidArgument {
            what: format!("page {id} is beyond the pool's reserved address space"),
            limit: self.capacity as usize,
        })
    }

    #[inline]
    fn state_of(&self, id: u64) -> Option<&PageState> {
        // SAFETY: the states region holds `capacity` zero-initialised u64 slots, suitably aligned
        // (mmap returns page-aligned memory); AtomicU64 has the layout of u64, and zero is a
        // valid value. The slot is only ever accessed atomically.
        (id < self.capacity)
            .then(|| unsafe { &*(self.states.at(id as usize * 8).as_ptr() as *const PageState) })
    }

    fn frame(&self, id: u64) -> NonNull<u8> {
        self.frames.at(id as usize * self.page_size)
    }

    /// The engine's bytes of page `id` ([`BufferPool::usable_size`] long), at an address that
    /// never changes. Read them only between [`BufferPool::read_lock`] and a successful
    /// [`BufferPool::validate`], or while holding the lock.
    pub fn data(&self, id: u64) -> NonNull<u8> {
        // SAFETY: the header is within the page's frame.
        unsafe { self.frame(id).add(PAGE_HEADER_LEN) }
    }

    /// Asks the CPU to bring page `id`'s bytes into its caches, for a caller about to search
    /// it (a hint: it reads nothing, and an id beyond the pool or a page not resident costs
    /// nothing).
    pub fn prefetch(&self, id: u64) {
        if id >= self.capacity {
            return;
        }
        let page = self.frame(id).as_ptr();
        for line in (0..self.page_size).step_by(CACHE_LINE) {
            prefetch_line(page.wrapping_add(line));
        }
    }

    /// Starts an optimistic read of page `id`, loading it first if it is not resident. Returns
    /// the version to validate against, or `None` if the page was freed (restart from the root).
    ///
    /// Every level of every descent starts here, so the common case is inline: a resident page
    /// that nobody holds, freed or marked by the clock. Everything else (a wait, a load, the
    /// clock's mark to clear, an id out of range) is [`BufferPool::read_lock_slow`].
    #[inline]
    pub fn read_lock(&self, id: u64) -> Result<Option<u64>> {
        if let Some(st) = self.state_of(id) {
            let s = st.load();
            if s & (LOCKED | EVICTED | MARKED | FREED) == 0 && s != 0 {
                self.hits.add_one();
                return Ok(Some(stable(s)));
            }
        }
        self.read_lock_slow(id)
    }

    /// [`BufferPool::read_lock`] past its common case.
    #[inline(never)]
    fn read_lock_slow(&self, id: u64) -> Result<Option<u64>> {
        let st = self.state(id)?;
        let mut spins = 0;
        loop {
            let s = st.load();
            if s & FREED != 0 {
                return Ok(None);
            }
            if s & LOCKED != 0 {
                st.wait(s, LOCKED, &mut spins);
                continue;
            }
            if is_evicted(s) {
                self.load(id, st, s)?;
                continue;
            }
            st.touch(s);
            self.hits.add_one();
            return Ok(Some(stable(s)));
        }
    }

    /// [`BufferPool::read_lock`] for a caller that must not block (the PA-Tree mode's worker):
    /// never loads and never waits. [`Resident::Evicted`]: the page must be loaded first
    /// ([`BufferPool::begin_load`], which says so if a load is in progress already);
    /// [`Resident::Busy`]: another thread holds it, try again later.
    pub fn read_lock_resident(&self, id: u64) -> Result<Resident> {
        let st = self.state(id)?;
        let s = st.load();
        Ok(if s & FREED != 0 {
            Resident::Freed
        } else if is_evicted(s) {
            // Being loaded (locked) or not: either way it must be loaded before it is read.
            Resident::Evicted
        } else if s & LOCKED != 0 {
            Resident::Busy
        } else {
            st.touch(s);
            self.hits.add_one();
            Resident::Version(stable(s))
        })
    }

    /// Whether a thread holds page `id` exclusively now: loading it, evicting it (writing it
    /// back) or changing it. For a caller that must not wait ([`BufferPool::begin_load`] found
    /// nothing to load): a held page is worth trying again only once its holder let go.
    pub fn is_locked(&self, id: u64) -> bool {
        self.state_of(id).is_some_and(|st| st.load() & LOCKED != 0)
    }

    /// Whether nothing wrote page `id` since `read_lock` returned `version`.
    #[inline]
    pub fn validate(&self, id: u64, version: u64) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.state_of(id)
            .is_some_and(|st| stable(st.load()) == version)
    }

    /// Takes page `id` exclusively, loading it first if needed.
    pub fn lock(&self, id: u64) -> Result<()> {
        let st = self.state(id)?;
        let mut spins = 0;
        loop {
            let s = st.load();
            if s & FREED != 0 {
                return Err(Error::InvalidArgument {
                    what: format!("page {id} was freed"),
                    limit: 0,
                });
            }
            if s & BUSY != 0 {
                st.wait(s, BUSY, &mut spins);
                continue;
            }
            if is_evicted(s) {
                self.load(id, st, s)?;
                continue;
            }
            if st.try_lock(s & !MARKED) || st.try_lock(s) {
                return Ok(());
            }
        }
    }

    /// Takes the write lock of page `id` if its version is still `version` (from
    /// [`BufferPool::read_lock`]).
    #[inline]
    pub fn try_upgrade(&self, id: u64, version: u64) -> bool {
        let Some(st) = self.state_of(id) else {
            return false;
        };
        loop {
            let s = st.load();
            if stable(s) != version || s & BUSY != 0 {
                return false;
            }
            if st.try_lock(s) {
                return true;
            }
            // Only the clock mark changed under us (anything else fails the test above).
        }
    }

    /// Pages the pool can address (its reserved address space over the page size).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Takes page `id` exclusively to overwrite it whole (redo installing a logged image, or
    /// freeing it): a resident page is locked as usual; an evicted or freed one is made resident
    /// without reading the file. The file is told the page is in use.
    pub fn lock_for_overwrite(&self, id: u64) -> Result<()> {
        self.file.ensure_allocated(id)?;
        let st = self.state(id)?;
        let mut spins = 0;
        loop {
            let s = st.load();
            if s & BUSY != 0 {
                st.wait(s, BUSY, &mut spins);
                continue;
            }
            if !is_evicted(s) && s & FREED == 0 {
                if st.try_lock(s) {
                    return Ok(());
                }
                continue;
            }
            if !st.try_lock(s) {
                continue;
            }
            if let Err(e) = self.make_room() {
                st.unlock(s & (EVICTED | FREED), false);
                return Err(e);
            }
            // SAFETY: we hold the page exclusively.
            unsafe { self.frame_slice(id) }.fill(0);
            self.resident.fetch_add(1, Ordering::Relaxed);
            self.clock.lock().pages.push(id);
            // Still locked. A read-modify-write, as a flusher may clear IN_FLIGHT meanwhile (a
            // page freed while its copy was being written).
            st.0.fetch_and(!(EVICTED | FREED), Ordering::Release);
            return Ok(());
        }
    }

    /// The common header of page `id`'s frame. Read it holding the page's lock, or between
    /// [`BufferPool::read_lock`] and a successful [`BufferPool::validate`].
    fn header(&self, id: u64) -> &[u8] {
        // SAFETY: the header is the first `PAGE_HEADER_LEN` bytes of the frame, inside our
        // mapping; a reader without the lock validates what it read (as for `data`).
        unsafe { std::slice::from_raw_parts(self.frame(id).as_ptr(), PAGE_HEADER_LEN) }
    }

    /// The common header of page `id`'s frame, to change it.
    ///
    /// # Safety
    /// The caller holds the page's exclusive lock (as for [`BufferPool::frame_slice`]).
    #[allow(clippy::mut_from_ref)]
    unsafe fn header_mut(&self, id: u64) -> &mut [u8] {
        // SAFETY: as for `header`; only the lock holder writes (the caller's obligation).
        unsafe { std::slice::from_raw_parts_mut(self.frame(id).as_ptr(), PAGE_HEADER_LEN) }
    }

    /// The LSN in page `id`'s header (the caller holds the lock or validates afterwards).
    pub fn page_lsn(&self, id: u64) -> u64 {
        page_header::lsn(self.header(id))
    }

    /// Sets the kind in page `id`'s header (the caller holds the lock).
    pub fn set_kind(&self, id: u64, kind: PageKind) {
        // SAFETY: the caller holds the page's lock.
        page_header::set_kind(unsafe { self.header_mut(id) }, kind);
    }

    /// Releases the exclusive lock of page `id`; `dirty` if the holder changed it.
    pub fn unlock(&self, id: u64, dirty: bool) {
        if let Some(st) = self.state_of(id) {
            st.unlock(if dirty { DIRTY } else { 0 }, true);
        }
    }

    /// Sets the LSN in page `id`'s header (the caller holds the lock).
    pub fn set_lsn(&self, id: u64, lsn: u64) {
        // SAFETY: the caller holds the page's exclusive lock, so no one else writes it.
        page_header::set_lsn(unsafe { self.header_mut(id) }, lsn);
    }

    /// The whole frame of page `id`, header included.
    ///
    /// # Safety
    /// The caller holds the page's exclusive lock (loading, writing back or allocating it), so
    /// this is the only mutable view; optimistic readers may read concurrently, and validate.
    #[allow(clippy::mut_from_ref)]
    unsafe fn frame_slice(&self, id: u64) -> &mut [u8] {
        // SAFETY: the frame is `page_size` bytes of our mapping; exclusivity is the caller's
        // obligation (see above).
        unsafe { std::slice::from_raw_parts_mut(self.frame(id).as_ptr(), self.page_size) }
    }

    /// The miss path: takes the page in loading state, makes room, reads and verifies it.
    fn load(&self, id: u64, st: &PageState, s: u64) -> Result<()> {
        let Some(load) = self.begin_load_at(id, st, s, None)? else {
            return Ok(()); // someone else is loading it; the caller waits and retries
        };
        // SAFETY: the page is in loading state, held by `load` until it completes.
        let frame = unsafe { self.frame_slice(id) };
        let read = self
            .file
            .io()
            .read_at(frame, load.offset)
            .map(|()| frame.len());
        let read = match read {
            // The file ends before the page: `complete_load` reports it.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                Ok(0)
            }
            r => r,
        };
        self.complete_load(load, read)
    }

    /// Accepts only pages of `kinds` from the file: a page read with another kind in its
    /// (checksummed) header is refused as `Corruption` naming the kind, never handed to the
    /// engine as one of its own (the engine's pages and other engines' share one registry,
    /// `io::page_header`). Set it before the pool is shared.
    pub fn accept_only(&mut self, kinds: &'static [PageKind]) {
        self.kinds = kinds;
    }

    /// Starts loading page `id` for a caller that reads it itself (an asynchronous read):
    /// takes the page in loading state (`LOCKED | EVICTED`: other threads wanting it wait),
    /// makes room for it and returns where to read it from. The caller reads
    /// [`BufferPool::usable_size`] plus the header, the whole frame at [`Load::frame`], from
    /// the page file at [`Load::offset`], then calls [`BufferPool::complete_load`] with the
    /// outcome. `None` if the page is resident, or another thread is loading it (wait for it
    /// as for any holder).
    pub fn begin_load(&self, id: u64) -> Result<Option<Load>> {
        let st = self.state(id)?;
        let s = st.load();
        if s & FREED != 0 || !is_evicted(s) || s & BUSY != 0 {
            return Ok(None);
        }
        self.begin_load_at(id, st, s, None)
    }

    /// [`BufferPool::begin_load`] for a thread that must not wait for a write: making room for
    /// the page never writes a dirty victim back here, but hands it to the caller in `writes`
    /// (the eviction's module docs, *deferred write-backs*), to write and complete with
    /// [`BufferPool::complete_write_back`]. Write-backs may be handed out whether or not a load
    /// is returned.
    pub fn begin_load_deferring(
        &self,
        id: u64,
        writes: &mut Vec<WriteBack>,
    ) -> Result<Option<Load>> {
        let st = self.state(id)?;
        let s = st.load();
        if s & FREED != 0 || !is_evicted(s) || s & BUSY != 0 {
            return Ok(None);
        }
        self.begin_load_at(id, st, s, Some(writes))
    }

    fn begin_load_at(
        &self,
        id: u64,
        st: &PageState,
        s: u64,
        defer: Option<&mut Vec<WriteBack>>,
    ) -> Result<Option<Load>> {
        if !st.try_lock(s) {
            return Ok(None);
        }
        if let Err(e) = self.make_room_deferring(defer) {
            st.unlock(EVICTED, false);
            return Err(e);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // SAFETY: we hold the page in loading state (exclusively locked).
        let offset = match self.file.frame_offset(id, unsafe { self.frame_slice(id) }) {
            Ok(offset) => offset,
            Err(e) => {
                st.unlock(EVICTED, false);
                return Err(e);
            }
        };
        Ok(Some(Load {
            id,
            offset,
            frame: self.frame(id),
            len: self.page_size,
        }))
    }

    /// Ends a load [`BufferPool::begin_load`] started, with the outcome of its read (the bytes
    /// that arrived): verified (length, checksum, id), the page becomes resident and its
    /// waiters go on; otherwise its frame is discarded, it stays evicted, and the error (I/O,
    /// or `Corruption` for a short read or a bad checksum) is returned for this load only.
    pub fn complete_load(&self, load: Load, read: Result<usize>) -> Result<()> {
        self.complete_load_pinned(load, read, 0)
    }

    /// [`BufferPool::complete_load`] that, if the page becomes resident, pins it `pins` times
    /// in the same step (before any eviction can choose it): the clock passes over it until
    /// [`BufferPool::unpin`] was called as many times (`evict`'s module docs, *pinned pages*).
    pub fn complete_load_pinned(&self, load: Load, read: Result<usize>, pins: u32) -> Result<()> {
        let id = load.id;
        let st = self.state(id)?;
        // SAFETY: the page is in loading state, held by `load`.
        let frame = unsafe { self.frame_slice(id) };
        let verified = read
            .and_then(|n| self.file.verify_frame(id, frame, n))
            .and_then(|header| {
                if self.kinds.is_empty() || self.kinds.contains(&header.kind) {
                    Ok(header)
                } else {
                    Err(Error::Corruption {
                        page: id,
                        detail: format!(
                            "page kind {} ({:?}) where one of {:?} was expected",
                            header.kind as u8, header.kind, self.kinds
                        ),
                    })
                }
            });
        match verified {
            Ok(_) => {
                self.resident.fetch_add(1, Ordering::Relaxed);
                {
                    let mut clock = self.clock.lock();
                    clock.pages.push(id);
                    if pins > 0 {
                        *clock.pinned.entry(id).or_default() += pins;
                    }
                }
                st.unlock(0, false);
                Ok(())
            }
            Err(e) => {
                let _ = self
                    .frames
                    .discard(id as usize * self.page_size, self.page_size);
                st.unlock(EVICTED, false);
                Err(e)
            }
        }
    }

    /// Allocates a page of `kind`, resident, zeroed and exclusively locked. On a thread marked
    /// [non-blocking](crate::sync::nonblocking) (a PA-Tree worker's, in a split), making room
    /// for it hands dirty victims out as [`BufferPool::begin_load_deferring`] does, to this
    /// thread's list, which the worker takes after the attempt ([`BufferPool::take_handed`]).
    pub fn allocate(&self, kind: PageKind) -> Result<u64> {
        let id = self.file.allocate();
        let st = self.state(id)?;
        if crate::sync::nonblocking() {
            HANDED.with(|h| self.make_room_deferring(Some(&mut h.borrow_mut())))?;
        } else {
            self.make_room()?;
        }
        // A reused page id keeps counting versions, so stale readers never validate. It keeps
        // IN_FLIGHT too: the page may have been freed while a copy of it was being written, and
        // it must not be written again, or evicted, before that write ends. (WAITING is kept so
        // that a sleeper, if any, is woken by our unlock.)
        st.update(|s| {
            let version = s & !(state::VERSION - 1);
            (version + state::VERSION) | LOCKED | DIRTY | (s & (IN_FLIGHT | WAITING))
        });
        // SAFETY: the page was just allocated and is exclusively locked by us.
        let frame = unsafe { self.frame_slice(id) };
        frame.fill(0);
        page_header::set_kind(frame, kind);
        self.resident.fetch_add(1, Ordering::Relaxed);
        self.clock.lock().pages.push(id);
        Ok(id)
    }

    /// Moves the write-backs that allocations on this thread handed out
    /// ([`BufferPool::allocate`] on a non-blocking thread) to `into`; returns whether there
    /// were any. The worker calls it after each attempt, so they are always this pool's: an
    /// attempt runs against one pool.
    pub fn take_handed(&self, into: &mut Vec<WriteBack>) -> bool {
        HANDED.with(|h| {
            let mut h = h.borrow_mut();
            if h.is_empty() {
                return false;
            }
            into.append(&mut h);
            true
        })
    }

    /// Frees page `id`, whose exclusive lock the caller holds; releases the lock.
    ///
    /// The file learns of the free page last: once it does, another thread may allocate the id
    /// again, so by then the pool must be done with it.
    pub fn free(&self, id: u64) -> Result<()> {
        let st = self.state(id)?;
        let discarded = self
            .frames
            .discard(id as usize * self.page_size, self.page_size);
        {
            let mut clock = self.clock.lock();
            if let Some(pos) = clock.pages.iter().position(|&p| p == id) {
                clock.pages.swap_remove(pos);
                self.resident.fetch_sub(1, Ordering::Relaxed);
            }
        }
        st.unlock(FREED | EVICTED, false);
        discarded?;
        self.file.free(id)
    }

    /// The kind and LSN in the header of page `id` (locked or held for writing by the caller),
    /// for writing it (or its copy) back.
    fn frame_header(&self, id: u64) -> Result<(PageKind, u64)> {
        let kind_byte = page_header::kind_byte(self.header(id));
        let kind = PageKind::from_u8(kind_byte).ok_or_else(|| Error::Corruption {
            page: id,
            detail: format!("frame has unknown page kind {kind_byte}"),
        })?;
        Ok((kind, self.page_lsn(id)))
    }

    /// Writes page `id` (locked by the caller) to the file, after the log covering it.
    fn write_back(&self, id: u64) -> Result<()> {
        let (kind, lsn) = self.frame_header(id)?;
        if let Some(log) = &self.log {
            if lsn > 0 {
                log.flush_to(lsn)?;
            }
        }
        // SAFETY: the caller holds the page's exclusive lock.
        let frame = unsafe { self.frame_slice(id) };
        self.file.write_frame(id, frame, kind, lsn)?;
        self.writebacks.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The budget for frames now, in pages.
    #[inline]
    pub(crate) fn budget(&self) -> u64 {
        self.budget_pages.load(Ordering::Relaxed)
    }

    /// Lets [`BufferPool::flush_all`] keep up to `writers` writes in flight, from as many
    /// threads (`flush`'s module docs, "Writes in flight"); 1, the default, writes one run at
    /// a time, in page order, from the flushing thread.
    pub fn set_flush_writers(&self, writers: usize) {
        self.flush_writers.store(writers.max(1), Ordering::Relaxed);
    }

    /// Moves the budget to `budget_bytes` (counted as at [`BufferPool::new`]: the copy buffer
    /// fixed then comes out of it, and at least 16 frames are always allowed), evicting at once
    /// down to a smaller one. For an engine whose other memory grows and shrinks within one
    /// budget (the NB-tree's in-memory roots); a pool whose budget is never moved behaves as
    /// before. Eviction batches keep the size chosen at `new`.
    pub fn set_budget(&self, budget_bytes: u64) -> Result<()> {
        let total = (budget_bytes / self.page_size as u64).max(17);
        let pages = total.saturating_sub(self.run_pages as u64).max(16);
        self.budget_pages.store(pages, Ordering::Relaxed);
        self.make_room()
    }

    /// Pages read from the file into the pool, so far (what [`PoolStats::misses`] reports).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            hits: self.hits.sum(),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            writebacks: self.writebacks.load(Ordering::Relaxed),
            resident: self.resident.load(Ordering::Relaxed),
            budget_pages: self.budget(),
        }
    }
}

#[cfg(test)]
mod tests;

/// What [`BufferPool::read_lock_resident`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resident {
    /// Resident: the version to validate against.
    Version(u64),
    /// Not in memory (or being loaded).
    Evicted,
    /// Held by another thread (a writer, a flush).
    Busy,
    /// Freed (restart from the root).
    Freed,
}

/// The CPU's cache line, the unit [`prefetch_line`] brings in.
pub(crate) const CACHE_LINE: usize = 64;

/// Asks the CPU to bring the cache line holding `p` in (any address: a prefetch never faults).
#[inline]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE, which the instruction needs, is part of every x86_64 CPU; a prefetch is
        // a hint that reads nothing the program sees and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
