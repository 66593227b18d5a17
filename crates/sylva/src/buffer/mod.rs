//! The buffer pool: pages of a [`PageFile`] cached in memory within a byte budget, after
//! vmcache (Leis et al., SIGMOD 2023), the buffer manager the B-Trees Are Back paper integrates
//! its tree into (section 7).
//!
//! **Translation.** Page `i` lives at a fixed virtual address, `base + i × page size`, inside one
//! large `MAP_NORESERVE` reservation ([`region`]); no hash table maps page ids to frames. Only
//! resident pages consume memory; eviction hands the memory back with `madvise(MADV_DONTNEED)`.
//!
//! **Latching.** Each page has one state word ([`state`]): an exclusive lock bit, residency,
//! a clock mark, a dirty bit and a version. Readers are optimistic: [`BufferPool::read_lock`]
//! returns a version, the reader reads the frame, [`BufferPool::validate`] says whether it may
//! trust what it read. Readers never write shared memory, except to clear a clock mark (a page
//! the clock hand passed but that is still in use), which is rare. Writers take the exclusive
//! lock. Writing a page back (a checkpoint's flush) holds it in a third mode, *writing*: writers
//! wait, readers go on and their versions stay valid, since the bytes do not change.
//!
//! **Miss path, submit then complete.** A reader that finds its page evicted takes the lock in
//! *loading* state (`LOCKED | EVICTED`), reads the page and verifies its checksum, then releases
//! it resident. Other threads that want the page see it locked and wait; when the loader
//! completes they resume. The read here is a blocking `pread`; the PA-Tree executor of a later
//! issue submits the same read to io_uring and completes the frame on the completion event,
//! without a second buffer pool. A failed read (I/O error, checksum mismatch) leaves the page
//! evicted and returns the error to the reader.
//!
//! **Eviction.** When a load or an allocation would exceed the budget, the loading thread runs
//! the clock (second chance): an unmarked resident page gets marked; a marked page that is not
//! locked is locked, written back if dirty, discarded and left evicted. The budget is counted in
//! pages, so the resident set (the RSS this pool causes) stays within it.
//!
//! **WAL rule.** Before a dirty page is written back, the log is made durable up to the page's
//! LSN (its header's LSN field, which the engine sets under the page's lock).
//!
//! Differences from vmcache: no shared-lock mode (sylva's trees use optimistic reads and
//! exclusive writes only); the clock keeps an explicit list of resident page ids instead of
//! sampling random ones, which is simpler at our sizes; eviction is done by whichever thread needs
//! room rather than by batches of `O_DIRECT` writes issued together.

mod region;
mod state;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::io::page_header::{PageKind, PAGE_HEADER_LEN};
use crate::io::PageFile;
use crate::wal::Wal;
use region::Region;
use state::{is_evicted, stable, PageState, BUSY, DIRTY, EVICTED, FREED, LOCKED, MARKED};

/// Buffer-pool settings.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Memory the pool may use for page frames, in bytes (at least 16 pages are always allowed).
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
    /// The budget, in pages.
    pub budget_pages: u64,
}

/// A counter spread over cache lines so that threads counting hits on every page access do not
/// contend on one line (a shared `fetch_add` per access measurably slows two-thread reads).
#[derive(Default)]
struct Striped([Padded; 8]);

#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

static NEXT_STRIPE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    /// Each thread's stripe, assigned round-robin.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % 8;
}

impl Striped {
    #[inline]
    fn add_one(&self) {
        let i = STRIPE.with(|s| *s);
        self.0[i].0.fetch_add(1, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

/// Pages written back with one write at most (1 MiB of 4 KiB pages).
const MAX_RUN: usize = 256;

struct Clock {
    pages: Vec<u64>,
    hand: usize,
}

/// Pages of a [`PageFile`], cached within a memory budget.
pub struct BufferPool {
    file: PageFile,
    wal: Option<Arc<Wal>>,
    frames: Region,
    states: Region,
    capacity: u64,
    page_size: usize,
    budget_pages: u64,
    resident: AtomicU64,
    clock: Mutex<Clock>,
    hits: Striped,
    misses: AtomicU64,
    evictions: AtomicU64,
    writebacks: AtomicU64,
}

/// Spin briefly, then yield (on 2 cores a spinning waiter can starve the holder).
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

impl BufferPool {
    /// A pool over `file`; `wal`, when given, is synced up to a page's LSN before the page is
    /// written back.
    pub fn new(file: PageFile, wal: Option<Arc<Wal>>, options: PoolOptions) -> Result<Self> {
        let page_size = file.page_size();
        let capacity = options.reserve_bytes / page_size as u64;
        let frames = Region::reserve((capacity as usize).saturating_mul(page_size))?;
        let states = Region::reserve((capacity as usize).saturating_mul(8))?;
        Ok(BufferPool {
            file,
            wal,
            frames,
            states,
            capacity,
            page_size,
            budget_pages: (options.budget_bytes / page_size as u64).max(16),
            resident: AtomicU64::new(0),
            clock: Mutex::new(Clock {
                pages: Vec::new(),
                hand: 0,
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
        if id >= self.capacity {
            return Err(Error::InvalidArgument {
                what: format!("page {id} is beyond the pool's reserved address space"),
                limit: self.capacity as usize,
            });
        }
        // SAFETY: the states region holds `capacity` zero-initialised u64 slots, suitably aligned
        // (mmap returns page-aligned memory); AtomicU64 has the layout of u64, and zero is a
        // valid value. The slot is only ever accessed atomically.
        Ok(unsafe { &*(self.states.at(id as usize * 8).as_ptr() as *const PageState) })
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

    /// Starts an optimistic read of page `id`, loading it first if it is not resident. Returns
    /// the version to validate against, or `None` if the page was freed (restart from the root).
    pub fn read_lock(&self, id: u64) -> Result<Option<u64>> {
        let st = self.state(id)?;
        let mut spins = 0;
        loop {
            let s = st.load();
            if s & FREED != 0 {
                return Ok(None);
            }
            if s & LOCKED != 0 {
                backoff(&mut spins);
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

    /// Whether nothing wrote page `id` since `read_lock` returned `version`.
    #[inline]
    pub fn validate(&self, id: u64, version: u64) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.state(id).is_ok_and(|st| stable(st.load()) == version)
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
                backoff(&mut spins);
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
        let Ok(st) = self.state(id) else {
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
                backoff(&mut spins);
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
            // Still locked; the state word's residency bits are cleared when it is unlocked.
            st.0.store((s & !(EVICTED | FREED)) | LOCKED, Ordering::Release);
            return Ok(());
        }
    }

    /// The LSN in page `id`'s header (the caller holds the lock or validates afterwards).
    pub fn page_lsn(&self, id: u64) -> u64 {
        let mut b = [0u8; 8];
        // SAFETY: bytes 16..24 of the frame are the header's LSN field, inside our mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(self.frame(id).add(16).as_ptr(), b.as_mut_ptr(), 8)
        };
        u64::from_le_bytes(b)
    }

    /// Sets the kind in page `id`'s header (the caller holds the lock).
    pub fn set_kind(&self, id: u64, kind: PageKind) {
        // SAFETY: byte 6 of the frame is the header's kind; the caller holds the lock.
        unsafe { *self.frame(id).add(6).as_ptr() = kind as u8 }
    }

    /// Releases the exclusive lock of page `id`; `dirty` if the holder changed it.
    pub fn unlock(&self, id: u64, dirty: bool) {
        if let Ok(st) = self.state(id) {
            st.unlock(if dirty { DIRTY } else { 0 }, true);
        }
    }

    /// Sets the LSN in page `id`'s header (the caller holds the lock).
    pub fn set_lsn(&self, id: u64, lsn: u64) {
        // SAFETY: bytes 16..24 of the frame are the header's LSN field; the caller holds the
        // page's exclusive lock, so no one else writes them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                lsn.to_le_bytes().as_ptr(),
                self.frame(id).add(16).as_ptr(),
                8,
            )
        }
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
        if !st.try_lock(s) {
            return Ok(()); // someone else is loading it; the caller waits and retries
        }
        if let Err(e) = self.make_room() {
            st.unlock(EVICTED, false);
            return Err(e);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // SAFETY: we hold the page in loading state (exclusively locked).
        match self.file.read_frame(id, unsafe { self.frame_slice(id) }) {
            Ok(_) => {
                self.resident.fetch_add(1, Ordering::Relaxed);
                self.clock.lock().pages.push(id);
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

    /// Allocates a page of `kind`, resident, zeroed and exclusively locked.
    pub fn allocate(&self, kind: PageKind) -> Result<u64> {
        let id = self.file.allocate();
        let st = self.state(id)?;
        self.make_room()?;
        let s = st.load();
        // A reused page id keeps counting versions, so stale readers never validate.
        let version = s & !(state::VERSION - 1);
        st.0.store(
            (version + state::VERSION) | LOCKED | DIRTY,
            Ordering::Release,
        );
        // SAFETY: the page was just allocated and is exclusively locked by us.
        let frame = unsafe { self.frame_slice(id) };
        frame.fill(0);
        frame[6] = kind as u8;
        self.resident.fetch_add(1, Ordering::Relaxed);
        self.clock.lock().pages.push(id);
        Ok(id)
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

    /// Evicts pages until one more fits within the budget.
    fn make_room(&self) -> Result<()> {
        let mut clock = self.clock.lock();
        let mut passes = 0usize;
        while self.resident.load(Ordering::Relaxed) >= self.budget_pages {
            let n = clock.pages.len();
            if n == 0 || passes > 3 * n {
                // Everything resident is locked by someone: allow a brief overshoot rather
                // than deadlock; the next load evicts again.
                break;
            }
            passes += 1;
            clock.hand %= n;
            let id = clock.pages[clock.hand];
            let st = self.state(id)?;
            let s = st.load();
            if s & (BUSY | EVICTED | FREED) != 0 {
                clock.hand += 1;
                continue;
            }
            if s & MARKED == 0 {
                let _ =
                    st.0.compare_exchange(s, s | MARKED, Ordering::AcqRel, Ordering::Relaxed);
                clock.hand += 1;
                continue;
            }
            if !st.try_lock(s) {
                clock.hand += 1;
                continue;
            }
            if s & DIRTY != 0 {
                if let Err(e) = self.write_back(id) {
                    st.unlock(0, true);
                    return Err(e);
                }
            }
            self.frames
                .discard(id as usize * self.page_size, self.page_size)?;
            let hand = clock.hand;
            clock.pages.swap_remove(hand);
            self.resident.fetch_sub(1, Ordering::Relaxed);
            self.evictions.fetch_add(1, Ordering::Relaxed);
            st.unlock(EVICTED, false);
        }
        Ok(())
    }

    /// The kind and LSN in the header of page `id` (locked or held for writing by the caller),
    /// for writing it back.
    fn frame_header(&self, id: u64) -> Result<(PageKind, u64)> {
        // SAFETY: byte 6 of the frame is the header's kind; the caller holds the page's lock.
        let kind_byte = unsafe { *self.frame(id).add(6).as_ptr() };
        let kind = PageKind::from_u8(kind_byte).ok_or_else(|| Error::Corruption {
            page: id,
            detail: format!("frame has unknown page kind {kind_byte}"),
        })?;
        Ok((kind, self.page_lsn(id)))
    }

    /// Writes page `id` (locked by the caller) to the file, after the log covering it.
    fn write_back(&self, id: u64) -> Result<()> {
        let (kind, lsn) = self.frame_header(id)?;
        if let Some(wal) = &self.wal {
            if lsn > 0 {
                wal.sync_to(lsn)?;
            }
        }
        // SAFETY: the caller holds the page's exclusive lock.
        let frame = unsafe { self.frame_slice(id) };
        self.file.write_frame(id, frame, kind, lsn)?;
        self.writebacks.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes back every dirty resident page (they stay resident, now clean), in page order,
    /// each run of consecutive dirty pages with one write: the frames of consecutive pages are
    /// consecutive in memory, so a run needs no copy. A checkpoint after a load so writes mostly
    /// long sequential runs instead of one `O_DIRECT` write per page.
    pub fn flush_all(&self) -> Result<()> {
        // Make the log durable first, with no page locked: otherwise the first run's
        // `sync_to` fsyncs the log while that run's pages (the root among them, often) are
        // locked, and writers wait on them for the whole fsync. A page changed after this is
        // released and the log synced again before it is locked for good (below).
        if let Some(wal) = &self.wal {
            wal.sync()?;
        }
        // How far the log is known durable; re-read from the log (a lock) only for a page
        // whose LSN is past it.
        let mut durable = self.wal.as_ref().map_or(0, |w| w.durable_below());
        let mut pages: Vec<u64> = self.clock.lock().pages.clone();
        pages.sort_unstable();
        let mut run: Vec<u64> = Vec::new();
        for id in pages {
            let st = self.state(id)?;
            let mut spins = 0;
            let mut synced = false;
            loop {
                let s = st.load();
                if s & (EVICTED | FREED) != 0 || s & DIRTY == 0 {
                    break;
                }
                if run.last().is_some_and(|&last| last + 1 != id) || run.len() >= MAX_RUN {
                    self.write_back_run(&run)?;
                    run.clear();
                }
                if st.try_lock_writing(s) {
                    let lsn = self.page_lsn(id);
                    if let Some(wal) = self.wal.as_ref().filter(|_| !synced) {
                        if lsn >= durable {
                            durable = wal.durable_below();
                        }
                        if lsn >= durable {
                            // Changed since the log was synced above: syncing it in
                            // `write_back_run` would hold the run's locks (and a writer
                            // needing one of those pages) for an fsync. Release the page
                            // unchanged, write the run so far, sync with nothing locked, and
                            // lock it again (once).
                            st.unlock_writing(false);
                            self.write_back_run(&run)?;
                            run.clear();
                            wal.sync_to(lsn)?;
                            synced = true;
                            continue;
                        }
                    }
                    run.push(id);
                    break;
                }
                if s & BUSY != 0 {
                    // Someone holds it: write what we hold before waiting, so we never wait
                    // while holding locks.
                    self.write_back_run(&run)?;
                    run.clear();
                    backoff(&mut spins);
                }
            }
        }
        self.write_back_run(&run)
    }

    /// Writes back the consecutive pages `run` (held for writing by the caller, dirty) with one
    /// write, after the log covering them, and releases them: clean if the write succeeded.
    fn write_back_run(&self, run: &[u64]) -> Result<()> {
        let Some(&first) = run.first() else {
            return Ok(());
        };
        let result = (|| {
            let mut pages = Vec::with_capacity(run.len());
            let mut max_lsn = 0;
            for &id in run {
                let (kind, lsn) = self.frame_header(id)?;
                max_lsn = max_lsn.max(lsn);
                pages.push((kind, lsn));
            }
            if let Some(wal) = &self.wal {
                if max_lsn > 0 {
                    wal.sync_to(max_lsn)?;
                }
            }
            // SAFETY: the frames of pages `first..first + run.len()` are consecutive in the
            // mapping, and the caller holds every one of them for writing, so no writer changes
            // them. Sealing writes only their 32-byte headers, which optimistic readers never
            // read (they read `data`, past the header).
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(
                    self.frame(first).as_ptr(),
                    run.len() * self.page_size,
                )
            };
            self.file.write_frames(first, bytes, &pages)
        })();
        for &id in run {
            if let Ok(st) = self.state(id) {
                st.unlock_writing(result.is_ok());
            }
        }
        if result.is_ok() {
            self.writebacks
                .fetch_add(run.len() as u64, Ordering::Relaxed);
        }
        result
    }

    /// Flushes every dirty page, then checkpoints the file with `user` meta bytes.
    pub fn checkpoint(&self, user: &[u8]) -> Result<()> {
        self.flush_all()?;
        self.file.checkpoint(user)
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            hits: self.hits.sum(),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            writebacks: self.writebacks.load(Ordering::Relaxed),
            resident: self.resident.load(Ordering::Relaxed),
            budget_pages: self.budget_pages,
        }
    }
}

#[cfg(test)]
mod tests;
