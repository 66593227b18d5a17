//! Where nodes live: the node-store interface and its in-memory implementation.
//!
//! The tree addresses nodes only by [`PageId`] and never keeps a Rust reference from one node
//! into another, so a later buffer pool can implement [`NodeStore`] over a page file. Each page
//! has a versioned latch (optimistic lock coupling, paper section 7.1 / Leis et al.): the tree
//! reaches it through [`NodeLatch`]; the in-memory store's is [`Latch`] (`crate::sync`).
//!
//! [`MemNodeStore`] keeps pages in chunks that are never moved or returned to the allocator
//! before the store is dropped: a reader holding a stale page id can always read the bytes it
//! points to (and then fails validation), which is what optimistic reads need. Freed pages are
//! reused; their latch versions keep counting so no stale reader validates against them.
//! Chunks and the chunk directory are mapped from the kernel (`Zeroed`) rather than taken
//! from the heap: they read as zeros without being zeroed, and cost memory only where touched.
//! From the heap, glibc zeroed each reused chunk (and the 512 KiB directory) by hand, which was
//! most of the cost of creating and dropping a small tree (the NB-tree makes one at each
//! rotation of its root, TreeLine two at each open).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::page::PageId;
use crate::sync::{Latch, Olc};

/// A page's latch as the tree uses it: a cheap handle (`Copy`), one per access.
pub trait NodeLatch: Copy {
    /// Waits until the page is not write-locked and returns its version. `Restart` if the page
    /// was freed; a store that loads pages on demand may fail here with a real error.
    fn read_lock(self) -> Olc<u64>;
    /// [`NodeLatch::read_lock`] for a caller that knows already whether its thread is marked
    /// non-blocking ([`crate::sync::nonblocking`]): a descent asks once, not at every level,
    /// and is compiled once for each answer, so that the blocking descent carries no trace of
    /// the non-blocking one. A store that never stops at a page not in memory ignores it.
    #[inline]
    fn read_lock_as(self, nonblocking: bool) -> Olc<u64> {
        let _ = nonblocking;
        self.read_lock()
    }
    /// Whether the version is still `v`.
    fn validate(self, v: u64) -> Olc<()>;
    /// Takes the write lock if the version is still `v`.
    fn upgrade(self, v: u64) -> Olc<()>;
    /// Releases the write lock after a change (which the tree has reported to the store's
    /// logging hooks).
    fn unlock(self);
    /// Releases the write lock after changing only hints (the adaptive layout's operation
    /// counter): a durable store need not log or write back such a change.
    fn unlock_hint(self) {
        self.unlock()
    }
}

impl NodeLatch for &Latch {
    #[inline]
    fn read_lock(self) -> Olc<u64> {
        Latch::read_lock(self)
    }
    #[inline]
    fn validate(self, v: u64) -> Olc<()> {
        Latch::validate(self, v)
    }
    #[inline]
    fn upgrade(self, v: u64) -> Olc<()> {
        Latch::upgrade(self, v)
    }
    #[inline]
    fn unlock(self) {
        Latch::unlock(self)
    }
}

/// The longest old value [`NodeStore::replaced`] is told about.
pub const REPLACED_MAX: usize = 32;

/// Fixed-size node pages addressed by id, each with a latch.
///
/// The logging hooks are how a durable store learns what changed: the tree calls them while it
/// still holds the write latches of the pages named, after changing them. Each returns the LSN
/// of the record it appended (0 if it logged nothing), which the tree hands back to its caller
/// (`BTree::put_logged`): what a write must make durable before it is acknowledged. An
/// in-memory store ignores them.
pub trait NodeStore: Send + Sync {
    /// The latch handle of one page.
    type Latch<'a>: NodeLatch
    where
        Self: 'a;
    /// Page size in bytes.
    fn page_size(&self) -> usize;
    /// Allocates a page and returns it write-locked (contents unspecified).
    fn allocate(&self) -> Result<PageId>;
    /// Frees a page whose write lock the caller holds; releases the lock.
    fn free(&self, id: PageId) -> Result<()>;
    /// The latch of page `id`, or `None` for an id the store cannot hold.
    fn latch(&self, id: PageId) -> Option<Self::Latch<'_>>;
    /// The bytes of page `id` (`page_size` long), or `None` for an id the store cannot hold.
    ///
    /// The pointer stays valid for the store's lifetime. Readers may read through it
    /// optimistically (validating the latch afterwards); only the write-lock holder writes.
    fn page_ptr(&self, id: PageId) -> Option<NonNull<u8>>;
    /// [`NodeStore::latch`] and [`NodeStore::page_ptr`] of page `id` in one call (a store may
    /// find both with one lookup; a descent asks for both at every level).
    #[inline]
    fn node(&self, id: PageId) -> Option<(Self::Latch<'_>, NonNull<u8>)> {
        Some((self.latch(id)?, self.page_ptr(id)?))
    }
    /// Pages currently allocated (not free).
    fn pages_in_use(&self) -> u64;
    /// Pages that take memory: those in use, and for a store that keeps freed pages for reuse
    /// (an in-memory one), those too. By default the pages in use.
    fn pages_resident(&self) -> u64 {
        self.pages_in_use()
    }
    /// What [`NodeStore::write_gate`] returns: held for the whole of one write.
    type Gate<'a>
    where
        Self: 'a;
    /// Entered by every operation that may change pages (puts, deletes, and the rare writes of
    /// readers: adaptive conversions, fingerprint sorts) before it takes any write latch, and
    /// held until all its latches are released. A durable store closes the gate while it
    /// checkpoints; an in-memory store's gate is free.
    fn write_gate(&self) -> Self::Gate<'_>;
    /// [`NodeStore::write_gate`] without waiting: `None` while it is closed (a thread that
    /// must not block tries again later).
    fn try_write_gate(&self) -> Option<Self::Gate<'_>> {
        Some(self.write_gate())
    }
    /// `key` was put into leaf `leaf` with `value` (by the leaf's own insert or overwrite);
    /// `inserted` if it was not there before.
    #[inline]
    fn log_put(&self, leaf: PageId, key: &[u8], value: &[u8], inserted: bool) -> Result<u64> {
        let _ = (leaf, key, value, inserted);
        Ok(0)
    }
    /// Whether the store wants [`NodeStore::replaced`] called (`Db`'s databases with
    /// out-of-line values: an overwritten or deleted reference frees its run). Off, the tree
    /// captures nothing and the small-value path does no extra work.
    #[inline]
    fn tracks_replaced(&self) -> bool {
        false
    }
    /// For a store that [`NodeStore::tracks_replaced`]: whether it wants to hear that `old` was
    /// replaced or removed. Only a value it answers `true` for is copied out of the leaf and
    /// reported, so one it has no use for (`Db`: anything but a reference) costs this call
    /// and no copy.
    #[inline]
    fn tracks_value(&self, old: &[u8]) -> bool {
        let _ = old;
        true
    }
    /// A live put or delete (not redo) is about to log that it replaced or removed a record
    /// whose old value was `old` (only values of at most [`REPLACED_MAX`] bytes are reported).
    /// Called with the leaf still write-latched, before [`NodeStore::log_put`] or
    /// [`NodeStore::log_delete`] of the same change.
    #[inline]
    fn replaced(&self, old: &[u8]) {
        let _ = old;
    }
    /// `key` was removed from leaf `leaf`.
    #[inline]
    fn log_delete(&self, leaf: PageId, key: &[u8]) -> Result<u64> {
        let _ = (leaf, key);
        Ok(0)
    }
    /// The pages `changed` were rewritten in some other way (split, merge, new root, layout
    /// conversion, sort), and the pages `freed` are about to be freed.
    #[inline]
    fn log_pages(&self, changed: &[PageId], freed: &[PageId]) -> Result<u64> {
        let _ = (changed, freed);
        Ok(0)
    }
    /// The pages `changed` were rewritten (a split or a redistribution), and inner page
    /// `parent` changed only by `edit`: a durable store may log the edit instead of the
    /// parent's image (redo applies it with [`crate::btree::BTree`]'s own code).
    #[inline]
    fn log_pages_edit(
        &self,
        changed: &[PageId],
        parent: PageId,
        edit: &ParentEdit<'_>,
    ) -> Result<u64> {
        let _ = (changed, parent, edit);
        Ok(0)
    }
}

/// How a split or a redistribution changes its parent: the separator at slot `remove` (if any)
/// is removed, then each `(separator, child)` of `insert` is inserted at its place, the
/// separator untruncated. With `remove`, the insertions land at `remove`, `remove + 1`, ...
/// (they replace the removed separator); anything else means the parent is not the page the
/// edit was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentEdit<'a> {
    /// Slot of the separator removed first.
    pub remove: Option<usize>,
    /// Separators inserted, each with the child to its left.
    pub insert: Vec<(&'a [u8], PageId)>,
}

const DIRECTORY_LEN: usize = 1 << 16;
const CHUNK_BYTES: usize = 1 << 20;

struct Chunk {
    latches: Box<[Latch]>,
    data: Zeroed,
}

/// `len` bytes of anonymous memory mapped by the kernel: zeros until written, backed only
/// where touched, unmapped when dropped. (The buffer pool's `Region` maps memory too, but it
/// reserves address space and discards frames; the node store sits below the pool and needs
/// only this. The run cache keeps long values in one, `crate::db::runcache`.)
pub(crate) struct Zeroed {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `Zeroed` owns its mapping exclusively, like a `Box<[u8]>`; who writes through
// `as_ptr` while others read is the owner's protocol (the node store's latches).
unsafe impl Send for Zeroed {}
// SAFETY: as above.
unsafe impl Sync for Zeroed {}

impl Zeroed {
    /// Maps `len` (> 0) bytes; out of memory ends the process, as a failed allocation does.
    pub(crate) fn new(len: usize) -> Self {
        Self::try_new(len).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(len, 4096)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            )
        })
    }

    /// Maps `len` (> 0) bytes, or `None` if the kernel refuses (address space or map count
    /// exhausted).
    pub(crate) fn try_new(len: usize) -> Option<Self> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing: nothing
        // existing is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        NonNull::new(p.cast::<u8>())
            .filter(|_| p != libc::MAP_FAILED)
            .map(|ptr| Zeroed { ptr, len })
    }

    /// The mapping's first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Zeroed {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, once.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

struct Alloc {
    next: u64,
    /// Freed pages, their bytes still in memory.
    free: Vec<PageId>,
    /// Freed pages whose memory [`MemNodeStore::release_freed`] gave back (reused after `free`'s).
    released: Vec<PageId>,
}

/// Pages in memory, in chunks of about 1 MiB.
pub struct MemNodeStore {
    page_size: usize,
    chunk_shift: u32,
    /// [`DIRECTORY_LEN`] chunk pointers (null: not made yet); all zero bits is null.
    directory: Zeroed,
    alloc: Mutex<Alloc>,
}

// SAFETY: the raw chunk pointers are owned by the store and only freed in `Drop`; page bytes are
// shared between threads under the latch protocol documented on `NodeStore::page_ptr`.
unsafe impl Send for MemNodeStore {}
// SAFETY: as above; all shared mutable state is atomics or behind the `alloc` mutex.
unsafe impl Sync for MemNodeStore {}

impl MemNodeStore {
    /// An empty store of `page_size`-byte pages.
    pub fn new(page_size: usize) -> Self {
        let chunk_pages = (CHUNK_BYTES / page_size).max(16).next_power_of_two();
        MemNodeStore {
            page_size,
            chunk_shift: chunk_pages.trailing_zeros(),
            directory: Zeroed::new(DIRECTORY_LEN * std::mem::size_of::<AtomicPtr<Chunk>>()),
            alloc: Mutex::new(Alloc {
                next: 0,
                free: Vec::new(),
                released: Vec::new(),
            }),
        }
    }

    /// Gives the memory of the freed pages back to the kernel (they stay mapped, and read as
    /// zeros until reused: an optimistic reader holding a stale id may still read one, and then
    /// fails validation, as the page's latch is kept apart from its bytes). Returns the pages
    /// given back. Pages smaller than the kernel's or not aligned to them are kept.
    pub fn release_freed(&self) -> usize {
        // SAFETY: sysconf only reads a system constant.
        let kernel_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if kernel_page <= 0 || !self.page_size.is_multiple_of(kernel_page as usize) {
            return 0;
        }
        let mut a = self.alloc.lock();
        let free = std::mem::take(&mut a.free);
        for &id in &free {
            if let Some((c, i)) = self.chunk(id) {
                // SAFETY: the page lies within its chunk's mapping, page-aligned (chunks are
                // mapped at page boundaries and hold whole pages); it is free, and the `alloc`
                // lock keeps it from being handed out meanwhile, so nobody writes it; readers
                // read it optimistically and validate against the latch, which is not in it.
                unsafe {
                    libc::madvise(
                        c.data.as_ptr().add(i * self.page_size).cast(),
                        self.page_size,
                        libc::MADV_DONTNEED,
                    );
                }
            }
        }
        a.released.extend_from_slice(&free);
        free.len()
    }

    /// The chunk directory.
    #[inline]
    fn directory(&self) -> &[AtomicPtr<Chunk>] {
        // SAFETY: the mapping holds DIRECTORY_LEN pointers, is page-aligned, lives as long as
        // `self`, and starts as zeros, which is a null `AtomicPtr`; it is only accessed
        // atomically.
        unsafe {
            std::slice::from_raw_parts(
                self.directory.ptr.as_ptr().cast::<AtomicPtr<Chunk>>(),
                DIRECTORY_LEN,
            )
        }
    }

    #[inline]
    fn chunk(&self, id: PageId) -> Option<(&Chunk, usize)> {
        let c = (id >> self.chunk_shift) as usize;
        let p = self.directory().get(c)?.load(Ordering::Acquire);
        // SAFETY: non-null directory entries point to chunks created by `allocate` and freed
        // only in `Drop`, which has exclusive access.
        let chunk = unsafe { p.as_ref()? };
        Some((chunk, (id & ((1 << self.chunk_shift) - 1)) as usize))
    }
}

impl NodeStore for MemNodeStore {
    type Latch<'a> = &'a Latch;
    type Gate<'a> = ();

    #[inline]
    fn write_gate(&self) {}

    fn page_size(&self) -> usize {
        self.page_size
    }

    fn allocate(&self) -> Result<PageId> {
        let mut a = self.alloc.lock();
        if let Some(id) = a.free.pop().or_else(|| a.released.pop()) {
            if let Some(l) = self.latch(id) {
                l.lock_for_reuse();
            }
            return Ok(id);
        }
        let id = a.next;
        let c = (id >> self.chunk_shift) as usize;
        if c >= DIRECTORY_LEN {
            return Err(Error::InvalidArgument {
                what: "in-memory node store is full".into(),
                limit: DIRECTORY_LEN << self.chunk_shift,
            });
        }
        if self.directory()[c].load(Ordering::Relaxed).is_null() {
            let pages = 1usize << self.chunk_shift;
            let chunk = Box::new(Chunk {
                latches: (0..pages).map(|_| Latch::default()).collect(),
                data: Zeroed::new(pages * self.page_size),
            });
            self.directory()[c].store(Box::into_raw(chunk), Ordering::Release);
        }
        a.next += 1;
        if let Some(l) = self.latch(id) {
            l.lock_for_reuse();
        }
        Ok(id)
    }

    fn free(&self, id: PageId) -> Result<()> {
        if let Some(l) = self.latch(id) {
            l.unlock_obsolete();
            self.alloc.lock().free.push(id);
        }
        Ok(())
    }

    #[inline]
    fn latch(&self, id: PageId) -> Option<&Latch> {
        let (c, i) = self.chunk(id)?;
        c.latches.get(i)
    }

    #[inline]
    fn page_ptr(&self, id: PageId) -> Option<NonNull<u8>> {
        self.node(id).map(|(_, p)| p)
    }

    #[inline]
    fn node(&self, id: PageId) -> Option<(&Latch, NonNull<u8>)> {
        let (c, i) = self.chunk(id)?;
        if (i + 1) * self.page_size > c.data.len {
            return None;
        }
        // SAFETY: `i * page_size` is inside the chunk's mapping (checked above).
        Some((c.latches.get(i)?, unsafe {
            c.data.ptr.add(i * self.page_size)
        }))
    }

    fn pages_in_use(&self) -> u64 {
        let a = self.alloc.lock();
        a.next - (a.free.len() + a.released.len()) as u64
    }

    /// Every page made so far but those whose memory [`MemNodeStore::release_freed`] gave back:
    /// a freed page stays in its chunk, written, until it is reused or given back.
    fn pages_resident(&self) -> u64 {
        let a = self.alloc.lock();
        a.next - a.released.len() as u64
    }
}

impl Drop for MemNodeStore {
    fn drop(&mut self) {
        // Chunks are made in order as pages are first allocated: only those below `next`.
        let made = self.alloc.get_mut().next.div_ceil(1 << self.chunk_shift) as usize;
        for e in self.directory().iter().take(made) {
            let p = e.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: created by `Box::into_raw` in `allocate`; dropped once, here, with
                // exclusive access (its mapping goes with it).
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_leave_the_resident_count_and_come_back_as_zeros() {
        let s = MemNodeStore::new(4096);
        let ids: Vec<PageId> = (0..64).map(|_| s.allocate().unwrap()).collect();
        for &id in &ids {
            // SAFETY: the page is write-locked by its allocation; nobody else touches it.
            unsafe { s.page_ptr(id).unwrap().as_ptr().write_bytes(0xAB, 4096) };
            s.latch(id).unwrap().unlock();
        }
        for &id in &ids[..40] {
            let l = s.latch(id).unwrap();
            assert!(l.read_lock().is_ok_and(|v| l.upgrade(v).is_ok()));
            s.free(id).unwrap();
            assert!(l.read_lock().is_err(), "a freed page's readers restart");
        }
        assert_eq!((s.pages_resident(), s.pages_in_use()), (64, 24));
        assert_eq!(s.release_freed(), 40);
        assert_eq!((s.pages_resident(), s.pages_in_use()), (24, 24));
        assert_eq!(s.release_freed(), 0, "nothing left to give back");
        // A page freed after the release is reused before the released ones.
        let l = s.latch(ids[50]).unwrap();
        assert!(l.read_lock().is_ok_and(|v| l.upgrade(v).is_ok()));
        s.free(ids[50]).unwrap();
        assert_eq!(s.allocate().unwrap(), ids[50]);
        let again = s.allocate().unwrap();
        assert!(ids[..40].contains(&again));
        assert_eq!(s.pages_resident(), 25);
        // Allocated and write-locked by this thread.
        let page = s.page_ptr(again).unwrap().as_ptr();
        // SAFETY: as above; the page is 4096 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(page, 4096) };
        assert!(bytes.iter().all(|&b| b == 0), "its old bytes are gone");
        assert_eq!(s.pages_in_use(), 25);
    }
}
