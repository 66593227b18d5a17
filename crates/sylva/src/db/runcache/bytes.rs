//! A cached value's bytes ([`Bytes`]) and the span an entry keeps of them ([`Span`]).

use std::sync::Arc;

use crate::db::mappings::{Mapping, Mappings};
use crate::db::overflow::{lay_out, run_pages, RUN_HEADER_LEN};

/// The address and length of an entry's bytes.
pub(super) struct Span {
    pub(super) ptr: std::ptr::NonNull<u8>,
    pub(super) len: usize,
}

impl Span {
    pub(super) fn of(bytes: &[u8]) -> Self {
        Span {
            ptr: std::ptr::NonNull::from(bytes).cast(),
            len: bytes.len(),
        }
    }
}

// SAFETY: a `Span` is a shared borrow of the bytes of the `Arc<Bytes>` in the same entry, which
// are `Send` and `Sync` and never written once shared (`Entry::as_slice`).
unsafe impl Send for Span {}
// SAFETY: as for `Send`.
unsafe impl Sync for Span {}

/// A cached value's bytes: on the heap when shorter than [`MAP_MIN`], else in pages of their
/// own (`mmap`), handed back to the cache's [`Mappings`] when the value leaves (module docs,
/// "Memory").
pub(crate) enum Bytes {
    Heap(Box<[u8]>),
    /// `len` bytes at the start of a mapping of their own.
    Mapped {
        map: Mapping,
        len: usize,
    },
    /// A dirty value of at least [`RUN_IMAGE_MIN`] bytes laid out in its mapping as its run
    /// will be in the file (`run` bytes: the header, the value at [`RUN_HEADER_LEN`], zeros to
    /// the last page's end; the first page sealed), so a write-back writes the mapping itself
    /// (module docs, "Memory").
    Run {
        map: Mapping,
        len: usize,
        run: usize,
    },
}

/// Values at least this long get pages of their own.
pub(super) const MAP_MIN: usize = 8 << 10;
/// Dirty values at least this long are kept as their run's image ([`Bytes::Run`]): with 4 KiB
/// pages the header page costs at most one page in sixteen more than the value.
pub(super) const RUN_IMAGE_MIN: usize = 64 << 10;

impl Bytes {
    /// A dirty value's bytes: the image of its run at page `first` (stamped `lsn`, pages of
    /// `page_size`) in a mapping if it is at least [`RUN_IMAGE_MIN`] bytes long, else as
    /// [`Bytes::copy_of`].
    pub(super) fn run_of(
        value: &[u8],
        first: u64,
        crc: u32,
        lsn: u64,
        page_size: usize,
        maps: &Arc<Mappings>,
    ) -> Self {
        if value.len() >= RUN_IMAGE_MIN {
            let run = run_pages(value.len(), page_size) as usize * page_size;
            if let Some(map) = maps.take(run) {
                // SAFETY: the mapping holds at least `run` writable bytes, is owned here alone
                // and does not overlap `value`.
                let image = unsafe { std::slice::from_raw_parts_mut(map.as_ptr(), run) };
                lay_out(image, page_size, first, value, crc, lsn);
                return Bytes::Run {
                    map,
                    len: value.len(),
                    run,
                };
            }
        }
        Bytes::copy_of(value, maps)
    }

    /// A copy of `value`, in a mapping from `maps` if it is long.
    pub(super) fn copy_of(value: &[u8], maps: &Arc<Mappings>) -> Self {
        if value.len() >= MAP_MIN {
            // No mapping (address space or map count exhausted): the heap, as shorter values.
            if let Some(map) = maps.take(value.len()) {
                // SAFETY: the mapping holds at least `value.len()` writable bytes, is owned here
                // alone and does not overlap `value`.
                unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), map.as_ptr(), value.len()) };
                return Bytes::Mapped {
                    map,
                    len: value.len(),
                };
            }
        }
        Bytes::Heap(value.into())
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Heap(b) => b,
            // SAFETY: the mapping holds at least `len` bytes, written by `copy_of` before the
            // value was shared (bytes past `len` may be another value's, never read), and lives
            // as long as `self`.
            Bytes::Mapped { map, len } => unsafe { std::slice::from_raw_parts(map.as_ptr(), *len) },
            // SAFETY: the mapping holds the run's `run` bytes, the value's `len` of them from
            // `RUN_HEADER_LEN`, laid out by `run_of` before the value was shared.
            Bytes::Run { map, len, .. } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().add(RUN_HEADER_LEN), *len)
            },
        }
    }

    /// The run's image, ready to write, if the value is kept as one.
    pub(super) fn run_image(&self) -> Option<&[u8]> {
        match self {
            Bytes::Run { map, run, .. } => {
                // SAFETY: as in `as_slice`: `run` bytes laid out by `run_of`.
                Some(unsafe { std::slice::from_raw_parts(map.as_ptr(), *run) })
            }
            _ => None,
        }
    }

    /// The memory the bytes take: the run's image for [`Bytes::Run`], else the value's length.
    pub(super) fn held(&self) -> usize {
        match self {
            Bytes::Run { run, .. } => *run,
            _ => self.len(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}
