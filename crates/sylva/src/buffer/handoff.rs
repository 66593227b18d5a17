//! The I/O a caller carries out itself for the pool ([`Load`], [`WriteBack`]): the PA-Tree
//! worker's reads of missing pages and its write-backs of evicted dirty ones, each holding its
//! page locked until completed.

use std::ptr::NonNull;

/// A page load a caller reads itself: from [`BufferPool::begin_load`] to
/// [`BufferPool::complete_load`], the page is held in loading state for it. Dropping it without
/// completing leaves the page locked (every thread wanting it waits): always complete it.
#[derive(Debug)]
#[must_use = "a load holds its page until it is completed"]
pub struct Load {
    pub(crate) id: u64,
    pub(crate) offset: u64,
    pub(crate) frame: NonNull<u8>,
    pub(crate) len: usize,
}

// SAFETY: a `Load` names a frame of the pool that only its holder may write (the page is in
// loading state); moving that right to another thread is sound.
unsafe impl Send for Load {}

impl Load {
    /// The page.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where in the page file to read it from.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The frame to read into, and its length: the page's whole frame, header included. It is
    /// the caller's alone until the load completes.
    pub fn frame(&self) -> (*mut u8, usize) {
        (self.frame.as_ptr(), self.len)
    }
}

/// A dirty page evicted by a thread that writes it back itself, asynchronously
/// ([`BufferPool::begin_load_deferring`]): sealed in its frame and held locked until
/// [`BufferPool::complete_write_back`]. Dropping it without completing leaves the page locked:
/// always complete it.
#[derive(Debug)]
#[must_use = "a write-back holds its page until it is completed"]
pub struct WriteBack {
    pub(crate) id: u64,
    pub(crate) offset: u64,
    pub(crate) frame: NonNull<u8>,
    pub(crate) len: usize,
    /// Where the clock's list held it when it was chosen (a hint for its removal).
    pub(crate) at: usize,
}

// SAFETY: as for `Load`: the frame is the holder's alone (the page is locked) until completed.
unsafe impl Send for WriteBack {}

impl WriteBack {
    /// The page.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where in the page file to write it.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The sealed frame to write, and its length. Neither changes until the write-back is
    /// completed.
    pub fn frame(&self) -> (*const u8, usize) {
        (self.frame.as_ptr(), self.len)
    }
}
