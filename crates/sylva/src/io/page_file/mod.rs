//! `PageFile`: a file of fixed-size pages with checksummed headers, two alternating meta pages,
//! the file's free space, and contiguous runs read or written in one I/O.
//!
//! Pages 0 and 1 are meta pages written alternately by [`PageFile::checkpoint`], each carrying a
//! sequence number: a torn meta write leaves the other intact, and open takes the valid one with
//! the higher sequence. The meta page records the page size, the page count, where the free
//! space is recorded, and an opaque area for the layer above (the database's root page id,
//! checkpoint LSN and so on).
//!
//! # Free space
//!
//! **In memory: extents.** Free pages are runs kept by start and by length ([`extents`]):
//! [`PageFile::allocate_run`] takes `n` contiguous pages in O(log runs), best fit (the shortest
//! run that holds them, lowest address among equals), and grows the file only when no run
//! does; a free run coalesces with its neighbours. [`PageFile::allocate`] is `allocate_run(1)`:
//! one map lookup and an update, or a counter when nothing is free (a load).
//!
//! **Two ways to free.** [`PageFile::free`] / [`PageFile::free_run`] make pages allocatable at
//! once. [`PageFile::free_deferred`] / [`PageFile::free_run_deferred`] make them allocatable
//! only once the next checkpoint to *begin* after the call is durable: that checkpoint records
//! them free, and until its meta page is on disk the checkpoint in force (which a crash
//! recovers) may still point at them, so they must keep their contents. Which to use:
//! - an engine whose redo rebuilds every page it changed since the checkpoint from logged
//!   images, in LSN order, may free immediately. `Db` does: a page's first change after a
//!   checkpoint logs its full image, so a reused page is rewritten by redo whatever it held,
//!   and immediate reuse keeps the file from growing between checkpoints (1 GiB of log apart
//!   by default).
//! - an engine whose recovery reads pages the last checkpoint's state points at (TreeLine's
//!   page groups, the NB-tree's sequentially written nodes, out-of-line values: copy-on-write
//!   structures that replace a run and free the old one) must defer: an immediately reused
//!   run would be overwritten while the durable state still names it.
//!
//! **On disk: region bitmaps, rewritten only when they changed.** The page ids are cut into
//! regions of R = 8 × (page size − 48) pages (32,384 for 4 KiB pages: 126 MiB of file). A
//! region's *page* is a bitmap marking every page of the region that is not in use by the owner
//! (free, deferred-and-recorded-free, or holding free space itself); a region that marks
//! nothing has no page. A *directory* lists (region, page) for the regions that have one, in
//! region order: as many entries as fit in the meta page after the owner's area (248 for 4 KiB
//! pages and `Db`'s 40 bytes), the rest in a chain of overflow pages. A checkpoint writes a new
//! page only for the regions whose marks changed since the last checkpoint began (tracked per
//! allocation and free; the hot path compares one integer), the directory only if some entry
//! changed, and the meta page always. A bitmap, not a list of extents, because it has a fixed
//! size: a region's page never overflows however fragmented the region is, and the encoding
//! needs no length fields a damaged page could lie with.
//!
//! Free-space pages are themselves marked in their region's bitmap (at open, the free pages are
//! the marked ones minus the free-space pages), so taking a free page for free space, or
//! releasing a free-space page, changes no mark and dirties no region. That is what keeps a
//! checkpoint's writes to the dirty regions: a new region page placed in a clean region does not
//! make that region dirty.
//!
//! **Crash safety** (as with the free list before): a checkpoint writes its new free-space pages
//! to pages that the checkpoint in force does not use (taken from the free pages, or the file's
//! end), fsyncs, writes the meta page, fsyncs; only then do the pages it replaced become free.
//! A crash at any point leaves one meta page whose free space is intact. Regions not rewritten
//! are shared by both checkpoints, and are right for both, since no mark of theirs changed.
//!
//! **Fuzzy checkpoints** record the free space of the moment they *began*
//! ([`PageFile::begin_fuzzy`], under the caller's writers' lock), since recovery redoes every
//! allocation and free logged from then on. Beginning notes the marks of the dirty regions and
//! takes enough free pages for the checkpoint's own pages out of use. Those pages were free when
//! it began and are never allocated meanwhile, so redo never finds a record allocating one
//! (pages allocated since are marked in use again by redo; pages freed since are marked free
//! again by redo). Pages the file grows by after it began are marked free in it (their records
//! may be lost in a crash; redo allocates again those whose records survive), and if it needs
//! more pages than it took, it grows the file for them. The page count the meta page records
//! is the one when its free space was built: pages a writer adds during its fsyncs are not
//! counted (nor marked), so a crash then leaves them outside the file. Regions changed after
//! it began stay dirty for the next checkpoint.
//!
//! **Giving space back** ([`shrink`]): a checkpoint may take the free run at the file's end out
//! of the file (its meta page records the shorter page count), and the file is truncated once
//! that meta page is durable; a file longer than its page count is valid.
//!
//! **Versions.** Page format version 1 kept a free list (every free page id, rewritten whole at
//! each checkpoint). It is still read: its free pages and the list's own pages (free after the
//! next checkpoint) become the extents, every region that marks something is dirty, and the
//! next checkpoint writes the version 2 free space and a version 2 meta page.
//!
//! `O_DIRECT` is used where the filesystem allows it (it bypasses the page cache, so the buffer
//! pool's budget is the real memory bound); where it does not (tmpfs, some overlay filesystems)
//! the file is opened buffered and [`PageFile::direct_io`] says so.

mod encoding;
mod extents;
mod free_space;
mod raw;
mod shrink;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::aligned::{AlignedBuf, IO_ALIGN};
use super::page_header::{seal, verify, PageHeader, PageKind};
use super::{Io, OpenFile, OsFs, Vfs};
use crate::error::{Error, Result};
use encoding::{
    decode_free_list_page, encode_meta, inline_entries, le_u32, le_u64, MetaFields,
    EXTENTS_VERSION, FREE_SPACE_KIND, META_BODY, META_USER,
};
pub use encoding::{decode_free_space_page, decode_meta_page, FreeSpacePage, MetaPage};
use free_space::FreeSpace;
pub use shrink::{FreeExtents, ShrinkStep};

/// Smallest and largest page sizes.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size.
pub const MAX_PAGE_SIZE: usize = 64 * 1024;
/// The first page id that holds data (0 and 1 are the meta pages).
pub const FIRST_DATA_PAGE: u64 = 2;

struct State {
    space: FreeSpace,
    /// Sequence number of the last meta page written.
    sequence: u64,
}

/// What a checkpoint recorded, as read back at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Checkpoint sequence number (0: never checkpointed).
    pub sequence: u64,
    /// The layer above's opaque bytes.
    pub user: Vec<u8>,
}

/// A file of fixed-size pages.
pub struct PageFile {
    io: Arc<dyn Io>,
    page_size: usize,
    direct: bool,
    state: Mutex<State>,
    /// What was wrong with the meta page open did not take (module docs), if anything.
    meta_damage: Option<String>,
}

fn io_starts_with_magic(io: &dyn Io) -> Result<bool> {
    let mut first = AlignedBuf::new(MIN_PAGE_SIZE);
    io.read_at(&mut first, 0)?;
    Ok(&first[0..4] == super::page_header::PAGE_MAGIC)
}

fn open_file(path: &Path, create: bool, direct: bool) -> Result<(Box<dyn Io>, bool)> {
    let opened = OsFs.open(path, OpenFile { create, direct })?;
    Ok((opened.io, opened.direct))
}

impl PageFile {
    /// Creates a new, empty page file at `path` (which must not exist).
    pub fn create(path: &Path, page_size: usize, direct: bool) -> Result<Self> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(Error::InvalidArgument {
                what: format!("page size {page_size} is not a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}"),
                limit: MAX_PAGE_SIZE,
            });
        }
        if OsFs.exists(path)? {
            return Err(Error::io_at(
                path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let (io, direct) = open_file(path, true, direct)?;
        Self::create_io(io, page_size, direct)
    }

    /// Creates a new, empty page file over `io` (which should be empty); `direct` tells whether
    /// `io` was opened with `O_DIRECT`.
    pub fn create_io(io: Box<dyn Io>, page_size: usize, direct: bool) -> Result<Self> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(Error::InvalidArgument {
                what: format!("page size {page_size} is not a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}"),
                limit: MAX_PAGE_SIZE,
            });
        }
        let file = PageFile {
            io: Arc::from(io),
            page_size,
            direct,
            meta_damage: None,
            state: Mutex::new(State {
                space: FreeSpace::new(page_size, FIRST_DATA_PAGE),
                sequence: 0,
            }),
        };
        // Both meta slots start valid, so open never meets a file without one.
        file.checkpoint(&[])?;
        file.checkpoint(&[])?;
        Ok(file)
    }

    /// Opens an existing page file, reading its newest valid meta page and free list.
    pub fn open(path: &Path, direct: bool) -> Result<(Self, Meta)> {
        let (io, direct) = open_file(path, false, direct)?;
        Self::open_io(io, direct)
    }

    /// Opens a page file over any [`Io`] (`direct` says whether it bypasses the page cache).
    pub fn open_io(io: Box<dyn Io>, direct: bool) -> Result<(Self, Meta)> {
        let path = io.path().to_path_buf();
        let not_sylva = |detail: String| Error::NotSylva {
            path: path.clone(),
            expected: "page file",
            detail,
        };
        let len = io.file_len()?;
        if len < (2 * MIN_PAGE_SIZE) as u64 {
            return Err(not_sylva(format!(
                "{len} bytes is too short for two meta pages"
            )));
        }
        if !io_starts_with_magic(&*io)? {
            return Err(not_sylva("wrong page magic".into()));
        }
        // The page size is recorded in the meta pages, which cannot be located before it is
        // known: try every legal size and keep the valid meta page (of either slot) with the
        // highest sequence whose recorded size is the size it was read at. A torn meta page 0
        // so never hides an intact meta page 1.
        let mut best: Option<(u64, usize, u64, AlignedBuf)> = None;
        let mut errors = Vec::new();
        let mut size = MIN_PAGE_SIZE;
        while size <= MAX_PAGE_SIZE {
            for id in 0..2u64 {
                if (id + 1) * size as u64 > len {
                    continue;
                }
                let mut buf = AlignedBuf::new(size);
                io.read_at(&mut buf, id * size as u64)?;
                match verify(&buf, id) {
                    Ok(h)
                        if h.kind == PageKind::Meta && le_u32(&buf, META_BODY) as usize == size =>
                    {
                        let seq = le_u64(&buf, META_BODY + 8);
                        if best.as_ref().is_none_or(|(s, _, _, _)| seq > *s) {
                            best = Some((seq, size, id, buf));
                        }
                    }
                    Ok(_) => {}
                    Err(e) if size == MIN_PAGE_SIZE || errors.is_empty() => {
                        errors.push(format!("meta page {id}: {e}"))
                    }
                    Err(_) => {}
                }
            }
            size *= 2;
        }
        let Some((sequence, page_size, meta_id, meta)) = best else {
            return Err(Error::Corruption {
                page: 0,
                detail: format!("no valid meta page: {}", errors.join("; ")),
            });
        };
        // The other slot holds the checkpoint before (or, in a new file, the same empty one).
        // A crash while a checkpoint wrote it leaves it torn, which is harmless, and so is
        // damage to it; but damage is worth reporting, so it is remembered for `check`.
        let other = 1 - meta_id;
        let mut buf = AlignedBuf::new(page_size);
        let meta_damage = match io.read_at(&mut buf, other * page_size as u64) {
            Err(e) => Some(format!("meta page {other} could not be read: {e}")),
            Ok(()) => match verify(&buf, other) {
                Err(e) => Some(format!("meta page {other} (the older): {e}")),
                Ok(h) if h.kind != PageKind::Meta => Some(format!(
                    "meta page {other} (the older) is a {:?} page",
                    h.kind
                )),
                Ok(_) if le_u32(&buf, META_BODY) as usize != page_size => Some(format!(
                    "meta page {other} (the older) records another page size"
                )),
                Ok(_) => None,
            },
        };
        let decoded = decode_meta_page(&meta)?;
        if decoded.page_count > u64::MAX / 2 / page_size as u64 {
            return Err(Error::Corruption {
                page: meta_id,
                detail: format!(
                    "meta page counts {} pages: more than a file can hold",
                    decoded.page_count
                ),
            });
        }
        let mut file = PageFile {
            io: Arc::from(io),
            page_size,
            direct,
            meta_damage,
            state: Mutex::new(State {
                space: FreeSpace::new(page_size, decoded.page_count),
                sequence,
            }),
        };
        let space = if decoded.version >= EXTENTS_VERSION {
            file.read_free_space(&decoded)?
        } else {
            file.read_free_list(decoded.page_count, decoded.chain_head)?
        };
        file.state.get_mut().space = space;
        Ok((
            file,
            Meta {
                sequence,
                user: decoded.user,
            },
        ))
    }

    /// Reads a version 1 free list (module docs, "Versions").
    fn read_free_list(&self, page_count: u64, mut head: u64) -> Result<FreeSpace> {
        let mut ids = Vec::new();
        let mut chain = Vec::new();
        let mut seen = BTreeSet::new();
        let mut buf = self.buffer(1);
        while head != 0 {
            if !(FIRST_DATA_PAGE..page_count).contains(&head) || !seen.insert(head) {
                return Err(Error::Corruption {
                    page: head,
                    detail: "free list points outside the file or loops".into(),
                });
            }
            self.read_page_in(head, &mut buf, FREE_SPACE_KIND, page_count)?;
            chain.push(head);
            let (next, listed) = decode_free_list_page(&buf[..self.page_size], head)?;
            ids.extend(listed);
            head = next;
        }
        FreeSpace::from_free_list(self.page_size, page_count, &ids, chain)
    }

    /// Reads the version 2 free space: the directory (in the meta page, then its overflow
    /// chain) and every region page it lists.
    fn read_free_space(&self, meta: &MetaPage) -> Result<FreeSpace> {
        let page_count = meta.page_count;
        let mut entries = meta.inline.clone();
        let mut overflow = Vec::new();
        let mut seen = BTreeSet::new();
        let mut buf = self.buffer(1);
        let mut head = meta.chain_head;
        while (entries.len() as u64) < meta.entries {
            if !(FIRST_DATA_PAGE..page_count).contains(&head) || !seen.insert(head) {
                return Err(Error::Corruption {
                    page: head,
                    detail: "free-space directory points outside the file or loops".into(),
                });
            }
            self.read_page_in(head, &mut buf, FREE_SPACE_KIND, page_count)?;
            overflow.push(head);
            match decode_free_space_page(&buf[..self.page_size])? {
                FreeSpacePage::Directory { next, entries: e } if !e.is_empty() => {
                    entries.extend(e);
                    head = next;
                }
                _ => {
                    return Err(Error::Corruption {
                        page: head,
                        detail: "expected a non-empty free-space directory page".into(),
                    })
                }
            }
        }
        if entries.len() as u64 != meta.entries || (!overflow.is_empty() && head != 0) {
            return Err(Error::Corruption {
                page: head,
                detail: format!(
                    "free-space directory holds {} entries, the meta page says {}",
                    entries.len(),
                    meta.entries
                ),
            });
        }
        let mut regions = Vec::with_capacity(entries.len());
        let mut last = None;
        for (region, page) in entries {
            if last.is_some_and(|l| region <= l) {
                return Err(Error::Corruption {
                    page,
                    detail: format!("free-space directory out of region order at region {region}"),
                });
            }
            last = Some(region);
            self.read_page_in(page, &mut buf, FREE_SPACE_KIND, page_count)?;
            match decode_free_space_page(&buf[..self.page_size])? {
                FreeSpacePage::Region { index, runs } if index == region => {
                    regions.push((region, page, runs))
                }
                _ => {
                    return Err(Error::Corruption {
                        page,
                        detail: format!("expected the bitmap page of region {region}"),
                    })
                }
            }
        }
        let space = FreeSpace::from_regions(
            self.page_size,
            page_count,
            regions,
            overflow,
            inline_entries(self.page_size, meta.user.len()),
        )?;
        if space.marked() != meta.free_count {
            return Err(Error::Corruption {
                page: 0,
                detail: format!(
                    "the region pages mark {} pages, the meta page says {}",
                    space.marked(),
                    meta.free_count
                ),
            });
        }
        Ok(space)
    }

    /// Reads page `id` of `kind` while opening, before the page count is set.
    fn read_page_in(
        &self,
        id: u64,
        buf: &mut AlignedBuf,
        kind: PageKind,
        page_count: u64,
    ) -> Result<()> {
        if !(FIRST_DATA_PAGE..page_count).contains(&id) {
            return Err(Error::Corruption {
                page: id,
                detail: format!("page {id} is outside the file's {page_count} pages"),
            });
        }
        let bytes = &mut buf[..self.page_size];
        self.io.read_at(bytes, id * self.page_size as u64)?;
        let h = verify(bytes, id)?;
        if h.kind != kind {
            return Err(Error::Corruption {
                page: id,
                detail: format!("expected a {kind:?} page, found {:?}", h.kind),
            });
        }
        Ok(())
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// What was wrong, when the file was opened, with the meta page not taken (the older
    /// checkpoint's): a crash during a checkpoint leaves it torn, and damage to it is harmless
    /// too (the next checkpoint rewrites it), but [`crate::Db::check`] reports it.
    pub fn meta_damage_at_open(&self) -> Option<&str> {
        self.meta_damage.as_deref()
    }

    /// Whether the file bypasses the OS page cache (`O_DIRECT`).
    pub fn direct_io(&self) -> bool {
        self.direct
    }

    /// A zeroed, aligned buffer for `pages` pages.
    pub fn buffer(&self, pages: usize) -> AlignedBuf {
        AlignedBuf::new((self.page_size * pages.max(1)).next_multiple_of(IO_ALIGN))
    }

    /// Pages in the file (allocated or free), including the two meta pages.
    pub fn page_count(&self) -> u64 {
        self.state.lock().space.page_count
    }

    /// Pages not in use: free, freed with a deferred free, or kept for a running checkpoint
    /// (not counting the pages holding the free space, [`PageFile::free_list_pages`]).
    pub fn free_pages(&self) -> u64 {
        self.state.lock().space.free_pages()
    }

    /// Pages holding the recorded free space (region bitmaps and directory overflow pages;
    /// after opening a version 1 file, its free list until the next checkpoint).
    pub fn free_list_pages(&self) -> u64 {
        self.state.lock().space.space_pages()
    }

    /// Checks that `pages` pages from `first` are data pages of the file. A read of others
    /// follows a damaged page id (a child pointer, say): corruption; a write of others is the
    /// caller's mistake.
    fn check_range(&self, first: u64, pages: usize, read: bool) -> Result<()> {
        let count = self.state.lock().space.page_count;
        let end = first.saturating_add(pages as u64);
        if first >= FIRST_DATA_PAGE && end <= count {
            return Ok(());
        }
        let what = format!(
            "pages {first}..{end} are not data pages of this file, which has pages \
             {FIRST_DATA_PAGE}..{count} (0 and 1 are its meta pages)"
        );
        Err(if read {
            Error::Corruption {
                page: first,
                detail: format!("a damaged page id: {what}"),
            }
        } else {
            Error::InvalidArgument {
                what,
                limit: (count as usize).saturating_mul(self.page_size),
            }
        })
    }

    /// Reads page `id` into `buf` (one page long) and verifies it is an intact page of `kind`.
    pub fn read_page(&self, id: u64, buf: &mut AlignedBuf, kind: PageKind) -> Result<u64> {
        self.read_run(id, buf, &[kind])?;
        Ok(le_u64(buf, 16))
    }

    /// Reads `kinds.len()` contiguous pages from `first` into `buf` in one I/O and verifies each.
    pub fn read_run(&self, first: u64, buf: &mut AlignedBuf, kinds: &[PageKind]) -> Result<()> {
        let n = kinds.len();
        self.check_range(first, n, true)?;
        if buf.len() < n * self.page_size {
            return Err(Error::InvalidArgument {
                what: format!("buffer of {} bytes for {n} pages", buf.len()),
                limit: n * self.page_size,
            });
        }
        let bytes = &mut buf[..n * self.page_size];
        self.io.read_at(bytes, first * self.page_size as u64)?;
        for (i, page) in bytes.chunks_exact(self.page_size).enumerate() {
            let id = first + i as u64;
            let h = verify(page, id)?;
            if h.kind != kinds[i] {
                return Err(Error::Corruption {
                    page: id,
                    detail: format!("expected a {:?} page, found {:?}", kinds[i], h.kind),
                });
            }
        }
        Ok(())
    }

    /// Reads page `id` straight into `frame` (one page, aligned to [`IO_ALIGN`], as a buffer
    /// pool's frames are) and verifies it, whatever its kind.
    pub fn read_frame(&self, id: u64, frame: &mut [u8]) -> Result<PageHeader> {
        let offset = self.frame_offset(id, frame)?;
        match self.io.read_at(frame, offset) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(truncated(id))
            }
            r => r.and_then(|()| verify(frame, id)),
        }
    }

    /// The file's I/O, for a caller that reads or writes pages itself ([`PageFile::frame_offset`]).
    pub fn io(&self) -> &Arc<dyn Io> {
        &self.io
    }

    /// Where page `id` is read into `frame` from, for a caller that reads it itself (an
    /// asynchronous read), after checking the frame and the id as [`PageFile::read_frame`]
    /// does; then [`PageFile::verify_frame`] checks what arrived.
    pub fn frame_offset(&self, id: u64, frame: &[u8]) -> Result<u64> {
        self.check_frame(frame)?;
        self.check_range(id, 1, true)?;
        Ok(id * self.page_size as u64)
    }

    /// Checks a frame the caller read itself ([`PageFile::frame_offset`]), of which `read`
    /// bytes arrived: a short read is a file that ends before the page; then the checksum
    /// and the id, as [`PageFile::read_frame`].
    pub fn verify_frame(&self, id: u64, frame: &[u8], read: usize) -> Result<PageHeader> {
        if read < self.page_size {
            return Err(truncated(id));
        }
        verify(frame, id)
    }

    /// Seals `frame` as page `id` of `kind` at `lsn` for a write the caller makes itself (an
    /// asynchronous one), and returns where in the file it goes.
    pub fn seal_frame(&self, id: u64, frame: &mut [u8], kind: PageKind, lsn: u64) -> Result<u64> {
        self.check_frame(frame)?;
        self.check_range(id, 1, false)?;
        seal(frame, kind, id, lsn);
        Ok(id * self.page_size as u64)
    }

    /// Seals `frame` as page `id` of `kind` at `lsn` and writes it (see [`PageFile::read_frame`]).
    pub fn write_frame(&self, id: u64, frame: &mut [u8], kind: PageKind, lsn: u64) -> Result<()> {
        self.check_frame(frame)?;
        self.check_range(id, 1, false)?;
        seal(frame, kind, id, lsn);
        self.io.write_at(frame, id * self.page_size as u64)
    }

    fn check_frame(&self, frame: &[u8]) -> Result<()> {
        if frame.len() != self.page_size || !(frame.as_ptr() as usize).is_multiple_of(IO_ALIGN) {
            return Err(Error::InvalidArgument {
                what: format!(
                    "page frame of {} bytes at a {}-aligned address",
                    frame.len(),
                    (frame.as_ptr() as usize) % IO_ALIGN
                ),
                limit: self.page_size,
            });
        }
        Ok(())
    }

    /// Seals and writes `buf` as page `id` of `kind` at `lsn`.
    pub fn write_page(
        &self,
        id: u64,
        buf: &mut AlignedBuf,
        kind: PageKind,
        lsn: u64,
    ) -> Result<()> {
        self.write_run(id, buf, &[(kind, lsn)])
    }

    /// Seals and writes contiguous pages from `first` in one I/O.
    pub fn write_run(
        &self,
        first: u64,
        buf: &mut AlignedBuf,
        pages: &[(PageKind, u64)],
    ) -> Result<()> {
        self.check_range(first, pages.len(), false)?;
        if buf.len() < pages.len() * self.page_size {
            return Err(Error::InvalidArgument {
                what: format!("buffer of {} bytes for {} pages", buf.len(), pages.len()),
                limit: pages.len() * self.page_size,
            });
        }
        self.write_frames(first, &mut buf[..pages.len() * self.page_size], pages)
    }

    /// Seals the frames in `bytes` (pages `first..`, one per entry of `pages`, which gives each
    /// one's kind and LSN) and writes them with one I/O. `bytes` must be aligned for direct I/O
    /// and exactly `pages.len()` pages long (the buffer pool's frames of consecutive pages are).
    pub fn write_frames(
        &self,
        first: u64,
        bytes: &mut [u8],
        pages: &[(PageKind, u64)],
    ) -> Result<()> {
        self.check_range(first, pages.len(), false)?;
        if bytes.len() != pages.len() * self.page_size
            || !(bytes.as_ptr() as usize).is_multiple_of(IO_ALIGN)
        {
            return Err(Error::InvalidArgument {
                what: format!(
                    "{} bytes at a {}-aligned address for {} pages",
                    bytes.len(),
                    (bytes.as_ptr() as usize) % IO_ALIGN,
                    pages.len()
                ),
                limit: pages.len() * self.page_size,
            });
        }
        for (i, page) in bytes.chunks_exact_mut(self.page_size).enumerate() {
            seal(page, pages[i].0, first + i as u64, pages[i].1);
        }
        self.io.write_at(bytes, first * self.page_size as u64)
    }

    /// Allocates one page (reusing a free one when there is one).
    #[inline]
    pub fn allocate(&self) -> u64 {
        self.state.lock().space.allocate_run(1)
    }

    /// Allocates `n` contiguous pages and returns the first id: the shortest run of free pages
    /// that holds them (the lowest among equals), else new pages at the end of the file.
    pub fn allocate_run(&self, n: usize) -> u64 {
        self.state.lock().space.allocate_run(n as u64)
    }

    /// Allocates `n` pages in pieces of at least `min` pages (the last may be shorter), in
    /// order: (first page, pages) of each. Holes of `min` pages or more are reused.
    pub fn allocate_pieces(&self, n: usize, min: usize) -> Vec<(u64, u64)> {
        self.state
            .lock()
            .space
            .allocate_pieces(n as u64, min as u64)
    }

    /// Marks page `id` in use, as recovery does for a page the log shows allocated after the
    /// last checkpoint: it leaves the free pages, or the file grows to hold it (pages skipped on
    /// the way become free).
    pub fn ensure_allocated(&self, id: u64) -> Result<()> {
        self.state.lock().space.ensure_allocated(id)
    }

    /// Every byte of the underlying file (tests that copy a database's state).
    #[cfg(test)]
    pub(crate) fn io_contents(&self) -> Vec<u8> {
        let len = self.io.file_len().unwrap_or(0) as usize;
        let mut bytes = vec![0u8; len];
        if self.io.read_at(&mut bytes, 0).is_err() {
            bytes.clear();
        }
        bytes
    }

    /// Whether page `id` is not in use: free, freed (deferred or not), or holding the free
    /// space itself.
    pub fn is_free(&self, id: u64) -> bool {
        self.state.lock().space.is_free(id)
    }

    /// Returns page `id` to the free pages, allocatable at once (module docs, "Two ways to
    /// free"). Freeing a meta page, a page outside the file or a page not in use is an error.
    pub fn free(&self, id: u64) -> Result<()> {
        self.free_run(id, 1)
    }

    /// Returns `n` pages from `first` to the free pages, allocatable at once; like
    /// [`PageFile::free`] for each.
    pub fn free_run(&self, first: u64, n: usize) -> Result<()> {
        self.state.lock().space.free_run(first, n as u64)
    }

    /// Frees page `id` so that it becomes allocatable only once the next checkpoint to begin
    /// is durable (module docs, "Two ways to free").
    pub fn free_deferred(&self, id: u64) -> Result<()> {
        self.free_run_deferred(id, 1)
    }

    /// Frees `n` pages from `first` as [`PageFile::free_deferred`] does.
    pub fn free_run_deferred(&self, first: u64, n: usize) -> Result<()> {
        self.state.lock().space.free_run_deferred(first, n as u64)
    }

    /// The sequence number the next checkpoint's meta page will carry (the last one written
    /// plus one). Checkpoints are written one at a time, so a change made now is recorded, at
    /// the earliest, by the checkpoint with this number.
    pub fn next_sequence(&self) -> u64 {
        self.state.lock().sequence + 1
    }

    /// Frees `n` pages from `first` for reuse once the checkpoint whose meta page carries
    /// `sequence` (or a later one) is durable; at once if one already is. Unlike
    /// [`PageFile::free_run_deferred`] the pages stay in use in the free space that checkpoint
    /// records: this is for an owner whose recovery takes the free space from its own state
    /// (the NB-tree: the complement of the runs its manifest names), which frees a run as soon
    /// as the first durable checkpoint no longer names it, not one checkpoint later.
    pub fn free_run_after_checkpoint(&self, sequence: u64, first: u64, n: usize) -> Result<()> {
        let mut st = self.state.lock();
        let durable = st.sequence;
        st.space.free_run_after(sequence, durable, first, n as u64)
    }

    /// Pages freed with [`PageFile::free_run_after_checkpoint`] that wait for their checkpoint.
    pub fn pages_waiting_for_checkpoint(&self) -> u64 {
        self.state.lock().space.waiting_after()
    }

    /// Space report: the free runs' lengths, and the pages the file grew by while free runs
    /// were too short for a request though as many pages were free, and while fewer were.
    pub fn space_report(&self) -> (Vec<u64>, u64, u64) {
        let st = self.state.lock();
        (
            st.space.free_run_lengths(),
            st.space.grown_fragmented,
            st.space.grown_short,
        )
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.io.sync()
    }

    /// Notes the free space as it is now, for the fuzzy checkpoint that begins: its
    /// [`PageFile::checkpoint`] then records this free space (the one that goes with the state
    /// the checkpoint's log position recovers from), not the one of the moment it ends, and
    /// the deferred frees so far become allocatable when it is durable. Allocations and frees
    /// may go on in between. The caller keeps them out while this runs.
    pub fn begin_fuzzy(&self) {
        self.state.lock().space.begin();
    }

    /// Forgets what [`PageFile::begin_fuzzy`] noted, for a checkpoint that failed before
    /// [`PageFile::checkpoint`], or one that must record the free space of now (a quiet one):
    /// left in place, the next checkpoint would record that older free space, where the pages
    /// the file grew by since are free, whatever was logged before it in the meantime.
    pub fn abandon_fuzzy(&self) {
        self.state.lock().space.abandon_begun();
    }

    /// Persists the free space and a new meta page carrying `user` (at most
    /// `page_size - 80` bytes), and makes everything written so far durable. Without
    /// [`PageFile::begin_fuzzy`] before, the caller keeps allocations and frees out while this
    /// runs and the free space is the current one; after it, they may go on, and the free space
    /// is the one `begin_fuzzy` saw. The writes and the two fsyncs run without the free-space
    /// lock, so that allocations (a writer's split) are not held back for them.
    pub fn checkpoint(&self, user: &[u8]) -> Result<()> {
        let max_user = self.page_size - META_USER;
        if user.len() > max_user {
            return Err(Error::InvalidArgument {
                what: format!("meta area of {} bytes is too large", user.len()),
                limit: max_user,
            });
        }
        let plan = self.state.lock().space.plan(user.len())?;
        match self.write_checkpoint(&plan, user) {
            Ok(sequence) => {
                let mut st = self.state.lock();
                st.space.commit(sequence);
                st.sequence = sequence;
                Ok(())
            }
            Err(e) => {
                self.state.lock().space.abort();
                Err(e)
            }
        }
    }

    /// Writes a planned checkpoint: its free-space pages, fsync, the meta page, fsync. Every
    /// page the meta page refers to is durable before it is written. Returns its sequence.
    fn write_checkpoint(&self, plan: &free_space::Plan, user: &[u8]) -> Result<u64> {
        let mut buf = self.buffer(1);
        for (id, body) in &plan.writes {
            buf[..self.page_size].copy_from_slice(body);
            seal(&mut buf[..self.page_size], FREE_SPACE_KIND, *id, 0);
            self.io
                .write_at(&buf[..self.page_size], id * self.page_size as u64)?;
        }
        self.io.sync()?;
        // Only checkpoints change `sequence`, and the caller runs one at a time.
        let sequence = self.state.lock().sequence + 1;
        encode_meta(
            &mut buf[..self.page_size],
            &MetaFields {
                page_size: self.page_size,
                sequence,
                page_count: plan.page_count,
                overflow_head: plan.overflow_head,
                marked: plan.marked,
                user,
                entries: plan.entries,
                inline: &plan.inline,
            },
        )?;
        let slot = sequence % 2;
        seal(&mut buf[..self.page_size], PageKind::Meta, slot, 0);
        self.io
            .write_at(&buf[..self.page_size], slot * self.page_size as u64)?;
        self.io.sync()?;
        Ok(sequence)
    }
}

/// The error for page `id` when the file ends before it.
fn truncated(id: u64) -> Error {
    Error::Corruption {
        page: id,
        detail: "the file ends before this page (truncated?)".into(),
    }
}

#[cfg(test)]
mod tests;
