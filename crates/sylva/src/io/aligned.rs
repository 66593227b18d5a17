//! Page-aligned buffers, as `O_DIRECT` requires (buffer address, length and file offset all
//! multiples of the device's logical block size; 4 KiB covers every device we target).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer handed to `O_DIRECT` reads and writes.
pub const IO_ALIGN: usize = 4096;

/// A zeroed, 4 KiB-aligned byte buffer of fixed length.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8], like a Box<[u8]>.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (`len` > 0 and a multiple of [`IO_ALIGN`]).
    pub fn new(len: usize) -> Self {
        assert!(
            len > 0 && len.is_multiple_of(IO_ALIGN),
            "aligned buffers are whole multiples of {IO_ALIGN} bytes"
        );
        let layout = Self::layout(len);
        // SAFETY: the layout has non-zero size (checked above).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, IO_ALIGN)
            .unwrap_or_else(|_| panic!("buffer of {len} bytes is too large"))
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated in `new` with exactly this layout and is freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to len initialised (zeroed at allocation) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}
