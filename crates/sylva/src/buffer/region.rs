//! A large anonymous virtual-memory reservation, as vmcache uses: page `i` of the database lives
//! at a fixed address `base + i × stride` for the pool's whole life, so a page pointer never
//! dangles, and eviction returns the physical memory with `madvise(MADV_DONTNEED)` while the
//! address stays mapped (a stale optimistic reader reads zeros and then fails validation).
//!
//! The reservation is `MAP_NORESERVE`: untouched pages cost no memory, so reserving a terabyte
//! of address space imposes no size limit the user has to configure up front.
//!
//! **Discarding in batches.** `madvise` takes one contiguous range, and each call on memory
//! that other threads of the process have used ends with a TLB shootdown, an interrupt to the
//! other CPUs that ran the process. Evicted frames are scattered, so one call each pays that
//! per page: with 32 threads on 2 CPUs and the pool a ninth of the data, the interrupts were
//! a tenth of the CPU time of a read-only workload. [`Region::discard_many`] hands up to
//! [`DISCARD_BATCH`] ranges to one `process_madvise` call on this process's own pidfd
//! (measured here, Linux 6.18 on 2 vCPUs with another thread of the process running: 7.4 µs a
//! page with a call per page, 3.8 µs in calls of 32 pages, 3.4 µs in calls of 64). The kernel
//! accepts `MADV_DONTNEED` through `process_madvise` for the calling process since Linux 6.13;
//! older kernels refuse it with `EINVAL`, kernels without the call answer `ENOSYS`, and a
//! seccomp filter may answer `EPERM` (to `pidfd_open` too). On any of those the region falls
//! back to one `madvise` per range for the rest of its life: slower, otherwise the same.

use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// Ranges [`Region::discard_many`] passes to the kernel in one call.
pub(crate) const DISCARD_BATCH: usize = 64;

/// A reserved, lazily backed region of `len` bytes.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    /// This process's pidfd for `process_madvise`, opened at the first batch; `None` once the
    /// kernel refused it (then `batches` is false too).
    pidfd: std::sync::OnceLock<Option<OwnedFd>>,
    /// Whether batches still go to `process_madvise`.
    batches: AtomicBool,
}

// SAFETY: the region is plain memory owned by this value; synchronisation of its contents is
// the buffer pool's job (page latches).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Reserves `len` bytes of address space.
    pub(crate) fn reserve(len: usize) -> Result<Self> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; no file
        // descriptor, no fixed address, so nothing existing can be clobbered.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Io {
                path: None,
                source: std::io::Error::last_os_error(),
            });
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Io {
            path: None,
            source: std::io::Error::other("mmap returned null"),
        })?;
        Ok(Region {
            base,
            len,
            pidfd: std::sync::OnceLock::new(),
            batches: AtomicBool::new(true),
        })
    }

    /// The address `offset` bytes into the region (`offset < len`).
    #[inline]
    pub(crate) fn at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset < self.len);
        // SAFETY: offset is within the mapping (callers index by page id below the capacity).
        unsafe { self.base.add(offset) }
    }

    /// Gives the physical memory behind `[offset, offset + len)` back to the kernel; the range
    /// reads as zeros afterwards.
    pub(crate) fn discard(&self, offset: usize, len: usize) -> Result<()> {
        debug_assert!(offset + len <= self.len);
        // SAFETY: the range lies within our own mapping; MADV_DONTNEED on private anonymous
        // memory only drops its contents.
        let rc = unsafe {
            libc::madvise(
                self.base.add(offset).as_ptr().cast(),
                len,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(Error::Io {
                path: None,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Discards `len` bytes at each of `offsets` (as [`Region::discard`] each), up to
    /// [`DISCARD_BATCH`] ranges a system call (module docs).
    pub(crate) fn discard_many(&self, offsets: &[usize], len: usize) -> Result<()> {
        for chunk in offsets.chunks(DISCARD_BATCH) {
            let done = self.process_madvise(chunk, len);
            for &offset in &chunk[done..] {
                self.discard(offset, len)?;
            }
        }
        Ok(())
    }

    /// Discards the ranges of `offsets` (at most [`DISCARD_BATCH`]) with one `process_madvise`
    /// if the kernel takes it; returns how many leading ranges it discarded in full (the rest
    /// are the caller's, with `madvise`).
    fn process_madvise(&self, offsets: &[usize], len: usize) -> usize {
        if offsets.len() < 2 || !self.batches.load(Ordering::Relaxed) {
            return 0;
        }
        let Some(pidfd) = self.pidfd.get_or_init(open_own_pidfd) else {
            self.batches.store(false, Ordering::Relaxed);
            return 0;
        };
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut iov = [empty; DISCARD_BATCH];
        for (v, &offset) in iov.iter_mut().zip(offsets) {
            debug_assert!(offset + len <= self.len);
            // SAFETY: the offset is within the mapping (callers pass frames of page ids below
            // the pool's capacity).
            v.iov_base = unsafe { self.base.add(offset) }.as_ptr().cast();
            v.iov_len = len;
        }
        let n = offsets.len().min(DISCARD_BATCH);
        // SAFETY: `iov` holds `n` ranges inside our own mapping; MADV_DONTNEED on private
        // anonymous memory only drops its contents, and the pidfd is this process's.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                std::os::fd::AsRawFd::as_raw_fd(pidfd),
                iov.as_ptr(),
                n,
                libc::MADV_DONTNEED,
                0u32,
            )
        };
        if rc < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error();
            if matches!(errno, Some(libc::ENOSYS | libc::EPERM | libc::EINVAL)) {
                self.batches.store(false, Ordering::Relaxed);
            }
            return 0;
        }
        // The kernel advises the ranges in order; a short count means it stopped inside one.
        (rc as usize / len).min(n)
    }
}

/// A pidfd of this process, or `None` if the kernel refuses one.
fn open_own_pidfd() -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0u32) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just returned to us by the kernel and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `reserve`, once.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
