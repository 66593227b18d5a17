//! A large anonymous virtual-memory reservation, as vmcache uses: page `i` of the database lives
//! at a fixed address `base + i × stride` for the pool's whole life, so a page pointer never
//! dangles, and eviction returns the physical memory with `madvise(MADV_DONTNEED)` while the
//! address stays mapped (a stale optimistic reader reads zeros and then fails validation).
//!
//! The reservation is `MAP_NORESERVE`: untouched pages cost no memory, so reserving a terabyte
//! of address space imposes no size limit the user has to configure up front.

use std::ptr::NonNull;

use crate::error::{Error, Result};

/// A reserved, lazily backed region of `len` bytes.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
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
        Ok(Region { base, len })
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
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `reserve`, once.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
