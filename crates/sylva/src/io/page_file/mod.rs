//! `PageFile`: a file of fixed-size pages with checksummed headers, two alternating meta pages,
//! a free-page list, and contiguous runs read or written in one I/O.
//!
//! Pages 0 and 1 are meta pages written alternately by [`PageFile::checkpoint`], each carrying a
//! sequence number: a torn meta write leaves the other intact, and open takes the valid one with
//! the higher sequence. The meta page records the page size, the page count, the head of the
//! persisted free list, and an opaque area for the layer above (the database's root page id,
//! checkpoint LSN and so on).
//!
//! Free pages are kept in memory and persisted at each checkpoint as a chain of free-list pages
//! drawn from the free pages themselves. The previous checkpoint's chain stays untouched until the
//! new meta page is durable (a crash in between still finds the old chain intact); its pages are
//! listed as free in the new chain and become reusable once the new meta lands.
//!
//! `O_DIRECT` is used where the filesystem allows it (it bypasses the page cache, so the buffer
//! pool's budget is the real memory bound); where it does not (tmpfs, some overlay filesystems)
//! the file is opened buffered and [`PageFile::direct_io`] says so.

use std::collections::BTreeSet;
use std::path::Path;

use parking_lot::Mutex;

use super::aligned::{AlignedBuf, IO_ALIGN};
use super::page_header::{seal, verify, PageHeader, PageKind, PAGE_HEADER_LEN};
use super::{Io, OpenFile, OsFs, Vfs};
use crate::error::{Error, Result};

/// Smallest and largest page sizes.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size.
pub const MAX_PAGE_SIZE: usize = 64 * 1024;
/// The first page id that holds data (0 and 1 are the meta pages).
pub const FIRST_DATA_PAGE: u64 = 2;

const META_BODY: usize = PAGE_HEADER_LEN;
const META_USER: usize = META_BODY + 48;

struct State {
    /// Pages the file has (allocated or free), including the meta pages.
    page_count: u64,
    free: BTreeSet<u64>,
    /// Pages holding the free list of the last checkpoint: not reusable until the next one lands.
    chain: Vec<u64>,
    /// Sequence number of the last meta page written.
    sequence: u64,
    /// The free list as a fuzzy checkpoint began, while one runs.
    fuzzy: Option<FuzzyFree>,
}

/// The free list a fuzzy checkpoint records: the pages free when it began (its log position),
/// and those of them never allocated since, which alone may hold the new free-list chain
/// (recovery redoes every allocation since the beginning, and must never find one of them
/// allocating a chain page).
struct FuzzyFree {
    listed: BTreeSet<u64>,
    untouched: BTreeSet<u64>,
    /// The page count when it began: pages the file grew by since are allocations after the
    /// checkpoint's log position, whose records a crash may lose.
    page_count: u64,
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
    io: Box<dyn Io>,
    page_size: usize,
    direct: bool,
    state: Mutex<State>,
    /// What was wrong with the meta page open did not take (module docs), if anything.
    meta_damage: Option<String>,
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
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
            io,
            page_size,
            direct,
            meta_damage: None,
            state: Mutex::new(State {
                page_count: FIRST_DATA_PAGE,
                free: BTreeSet::new(),
                chain: Vec::new(),
                sequence: 0,
                fuzzy: None,
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
        let file = PageFile {
            io,
            page_size,
            direct,
            meta_damage,
            state: Mutex::new(State {
                page_count: FIRST_DATA_PAGE,
                free: BTreeSet::new(),
                chain: Vec::new(),
                sequence: 0,
                fuzzy: None,
            }),
        };
        let page_count = le_u64(&meta, META_BODY + 16);
        let mut free_head = le_u64(&meta, META_BODY + 24);
        let user_len = le_u32(&meta, META_BODY + 40) as usize;
        // A count whose bytes lie past the largest file offset would overflow the offsets of
        // its last pages (tests/page_file_meta_page_count.rs).
        let most_pages = i64::MAX as u64 / page_size as u64;
        if !(FIRST_DATA_PAGE..=most_pages).contains(&page_count) || user_len > page_size - META_USER
        {
            return Err(Error::Corruption {
                page: 0,
                detail: format!("meta page counts {page_count} pages, {user_len} user bytes"),
            });
        }
        let user = meta[META_USER..META_USER + user_len].to_vec();
        file.state.lock().page_count = page_count;
        let mut free = BTreeSet::new();
        let mut chain = Vec::new();
        let mut seen = BTreeSet::new();
        let mut buf = file.buffer(1);
        while free_head != 0 {
            if free_head >= page_count || !seen.insert(free_head) {
                return Err(Error::Corruption {
                    page: free_head,
                    detail: "free list points outside the file or loops".into(),
                });
            }
            file.read_page(free_head, &mut buf, PageKind::FreeList)?;
            chain.push(free_head);
            let count = le_u32(&buf, PAGE_HEADER_LEN + 8) as usize;
            if count > Self::ids_per_free_page(page_size) {
                return Err(Error::Corruption {
                    page: free_head,
                    detail: format!("free-list page lists {count} ids"),
                });
            }
            for i in 0..count {
                let id = le_u64(&buf, PAGE_HEADER_LEN + 16 + 8 * i);
                if !(FIRST_DATA_PAGE..page_count).contains(&id) {
                    return Err(Error::Corruption {
                        page: free_head,
                        detail: format!("free page id {id} outside the file"),
                    });
                }
                free.insert(id);
            }
            free_head = le_u64(&buf, PAGE_HEADER_LEN);
        }
        *file.state.lock() = State {
            page_count,
            free,
            chain,
            sequence,
            fuzzy: None,
        };
        Ok((file, Meta { sequence, user }))
    }

    fn ids_per_free_page(page_size: usize) -> usize {
        (page_size - PAGE_HEADER_LEN - 16) / 8
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
        self.state.lock().page_count
    }

    /// Free pages.
    pub fn free_pages(&self) -> u64 {
        self.state.lock().free.len() as u64
    }

    /// Pages holding the persisted free list of the last checkpoint (free again after the next).
    pub fn free_list_pages(&self) -> u64 {
        self.state.lock().chain.len() as u64
    }

    /// Checks that `pages` pages from `first` are data pages of the file. A read of others
    /// follows a damaged page id (a child pointer, say): corruption; a write of others is the
    /// caller's mistake.
    fn check_range(&self, first: u64, pages: usize, read: bool) -> Result<()> {
        let count = self.state.lock().page_count;
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
        self.check_frame(frame)?;
        self.check_range(id, 1, true)?;
        match self.io.read_at(frame, id * self.page_size as u64) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::Corruption {
                    page: id,
                    detail: "the file ends before this page (truncated?)".into(),
                })
            }
            r => r?,
        }
        verify(frame, id)
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
    pub fn allocate(&self) -> u64 {
        self.allocate_run(1)
    }

    /// Allocates `n` contiguous pages and returns the first id: a run of free pages if one
    /// exists, else new pages at the end of the file.
    pub fn allocate_run(&self, n: usize) -> u64 {
        let n = n.max(1) as u64;
        let mut st = self.state.lock();
        let mut run_start = None;
        let (mut start, mut len, mut prev) = (0u64, 0u64, u64::MAX);
        for &id in &st.free {
            if prev != u64::MAX && id == prev + 1 {
                len += 1;
            } else {
                start = id;
                len = 1;
            }
            prev = id;
            if len == n {
                run_start = Some(start);
                break;
            }
        }
        match run_start {
            Some(s) => {
                for id in s..s + n {
                    st.free.remove(&id);
                    if let Some(f) = st.fuzzy.as_mut() {
                        f.untouched.remove(&id);
                    }
                }
                s
            }
            None => {
                let s = st.page_count;
                st.page_count += n;
                s
            }
        }
    }

    /// Marks page `id` in use, as recovery does for a page the log shows allocated after the
    /// last checkpoint: it leaves the free list, or the file grows to hold it (pages skipped on
    /// the way become free).
    pub fn ensure_allocated(&self, id: u64) -> Result<()> {
        let mut st = self.state.lock();
        if id < FIRST_DATA_PAGE || st.chain.contains(&id) {
            return Err(Error::Corruption {
                page: id,
                detail: "the log allocates a meta or free-list page".into(),
            });
        }
        if id >= st.page_count {
            let old = st.page_count;
            st.free.extend(old..id);
            st.page_count = id + 1;
        } else {
            st.free.remove(&id);
            if let Some(f) = st.fuzzy.as_mut() {
                f.untouched.remove(&id);
            }
        }
        Ok(())
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

    /// Whether page `id` is on the free list or holds the free list itself.
    pub fn is_free(&self, id: u64) -> bool {
        let st = self.state.lock();
        st.free.contains(&id) || st.chain.contains(&id)
    }

    /// Returns page `id` to the free list. Freeing a meta page, a page outside the file or a page
    /// already free is an error.
    pub fn free(&self, id: u64) -> Result<()> {
        let mut st = self.state.lock();
        if !(FIRST_DATA_PAGE..st.page_count).contains(&id)
            || st.chain.contains(&id)
            || !st.free.insert(id)
        {
            return Err(Error::InvalidArgument {
                what: format!("page {id} cannot be freed (not an allocated data page)"),
                limit: 0,
            });
        }
        Ok(())
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.io.sync()
    }

    /// Remembers the free list as it is now, for the fuzzy checkpoint that begins: its
    /// [`PageFile::checkpoint`] then records this free list (the one that goes with the state
    /// the checkpoint's log position recovers from), not the one of the moment it ends.
    /// Allocations and frees may go on in between. The caller keeps them out while this runs.
    pub fn begin_fuzzy(&self) {
        let mut st = self.state.lock();
        st.fuzzy = Some(FuzzyFree {
            listed: st.free.clone(),
            untouched: st.free.clone(),
            page_count: st.page_count,
        });
    }

    /// Persists the free list and a new meta page carrying `user` (at most
    /// `page_size - 80` bytes), and makes everything written so far durable. Without
    /// [`PageFile::begin_fuzzy`] before, the caller keeps allocations and frees out while this
    /// runs and the free list is the current one; after it, they may go on, and the free list
    /// is the one `begin_fuzzy` saw. The two fsyncs run without the free-list lock, so that
    /// allocations (a writer's split) are not held back for them.
    pub fn checkpoint(&self, user: &[u8]) -> Result<()> {
        let max_user = self.page_size - META_USER;
        if user.len() > max_user {
            return Err(Error::InvalidArgument {
                what: format!("meta area of {} bytes is too large", user.len()),
                limit: max_user,
            });
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let fuzzy = st.fuzzy.take();
        // The new chain lists every free page plus the old chain's pages (free once this meta
        // lands), and is written to pages that are neither.
        // For a fuzzy checkpoint, the pages the file grew by since it began are listed free
        // too: the state it records is the one of its beginning, when they did not exist.
        // Redo marks each in use again from the record that allocated it; one whose record a
        // crash lost stays free, instead of counted in the file but neither free nor in use
        // (and perhaps never written, past the file's end).
        let (free_listed, mut candidates, grown) = match fuzzy {
            Some(f) => (f.listed, f.untouched, f.page_count..st.page_count),
            None => (st.free.clone(), st.free.clone(), 0..0),
        };
        let mut listed: Vec<u64> = free_listed
            .iter()
            .copied()
            .chain(grown)
            .chain(st.chain.iter().copied())
            .collect();
        let per_page = Self::ids_per_free_page(self.page_size);
        let mut chain_pages = Vec::new();
        while chain_pages.len() * per_page < listed.len() {
            // Take chain pages from the free set (they leave the list), else from the file end.
            let id = match candidates.pop_first() {
                Some(id) => {
                    st.free.remove(&id);
                    listed.retain(|&x| x != id);
                    id
                }
                None => {
                    st.page_count += 1;
                    st.page_count - 1
                }
            };
            chain_pages.push(id);
        }
        // The page count this free list goes with. Writers may grow the file while the lock is
        // released for the fsync below; pages they add then are after this checkpoint's state
        // (redo allocates them again from their records), so the meta page must not count them:
        // counted but neither listed free nor in use, a crash would leave them unwritten.
        let page_count = st.page_count;
        let mut buf = self.buffer(1);
        let mut next = 0u64;
        for (i, &page) in chain_pages.iter().enumerate().rev() {
            buf.fill(0);
            let ids =
                &listed[(i * per_page).min(listed.len())..((i + 1) * per_page).min(listed.len())];
            buf[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 8].copy_from_slice(&next.to_le_bytes());
            buf[PAGE_HEADER_LEN + 8..PAGE_HEADER_LEN + 12]
                .copy_from_slice(&(ids.len() as u32).to_le_bytes());
            for (j, id) in ids.iter().enumerate() {
                let at = PAGE_HEADER_LEN + 16 + 8 * j;
                buf[at..at + 8].copy_from_slice(&id.to_le_bytes());
            }
            seal(&mut buf, PageKind::FreeList, page, 0);
            self.io.write_at(&buf, page * self.page_size as u64)?;
            next = page;
        }
        // Everything the meta page refers to must be durable before the meta page itself. The
        // chain pages have left the free set and the old chain stays out of it until the meta
        // page is durable, so allocations and frees may go on meanwhile; only checkpoints
        // change `sequence` and `chain`, and the caller runs one at a time.
        drop(guard);
        self.io.sync()?;
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let sequence = st.sequence + 1;
        buf.fill(0);
        buf[META_BODY..META_BODY + 4].copy_from_slice(&(self.page_size as u32).to_le_bytes());
        buf[META_BODY + 8..META_BODY + 16].copy_from_slice(&sequence.to_le_bytes());
        buf[META_BODY + 16..META_BODY + 24].copy_from_slice(&page_count.to_le_bytes());
        buf[META_BODY + 24..META_BODY + 32].copy_from_slice(&next.to_le_bytes());
        buf[META_BODY + 32..META_BODY + 40].copy_from_slice(&(listed.len() as u64).to_le_bytes());
        buf[META_BODY + 40..META_BODY + 44].copy_from_slice(&(user.len() as u32).to_le_bytes());
        buf[META_USER..META_USER + user.len()].copy_from_slice(user);
        let slot = sequence % 2;
        seal(&mut buf, PageKind::Meta, slot, 0);
        self.io.write_at(&buf, slot * self.page_size as u64)?;
        drop(guard);
        self.io.sync()?;
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let old_chain = std::mem::replace(&mut st.chain, chain_pages);
        st.free.extend(old_chain);
        st.sequence = sequence;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
