//! The lowest layer: positioned reads and writes on one file behind the [`Io`] trait, and the
//! directory operations (create, open, list, rename, directory fsync, lock) behind [`Vfs`], so
//! tests can put a fault-injecting file ([`FaultyIo`]) or a whole simulated file system that
//! loses power ([`SimFs`]) under everything above.
//!
//! Everything above (the log, the page file, the buffer pool, `Db`) goes through `Io` and `Vfs`;
//! nothing above calls `std::fs`. [`FileIo`] and [`OsFs`] are the operating system's. Every error
//! carries the file's path.

mod aligned;
mod faulty;
mod mem;
mod page_file;
pub mod page_header;
mod sim;
mod vfs;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub use aligned::{AlignedBuf, IO_ALIGN};
pub use faulty::{Fault, FaultHandle, FaultyIo};
pub use mem::MemIo;
#[doc(hidden)]
pub use page_file::{decode_free_space_page, decode_meta_page, FreeSpacePage, MetaPage};
pub use page_file::{
    FreeExtents, Meta, PageFile, ShrinkStep, FIRST_DATA_PAGE, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
};
pub use sim::{SimFs, SimOptions, SECTOR};
pub use vfs::{create_dir_all_durable, parent_dir, LockGuard, OpenFile, Opened, OsFs, Vfs};

use crate::error::{Error, Result};

/// Positioned I/O on one file.
pub trait Io: Send + Sync {
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes every completed write durable (`fdatasync`).
    fn sync(&self) -> Result<()>;
    /// Current length in bytes.
    fn file_len(&self) -> Result<u64>;
    /// Truncates or extends to `len` bytes.
    fn set_file_len(&self, len: u64) -> Result<()>;
    /// The file's path, for error messages.
    fn path(&self) -> &Path;
    /// Asks the OS to start writing `len` bytes from `offset` to the device without waiting
    /// (a hint: nothing becomes durable by it, and a later [`Io::sync`] reports any failure).
    /// The log calls it for what it writes without an fsync, so that an fsync later (a
    /// checkpoint's, or `sync()`) finds little left to write, and writers are not throttled
    /// meanwhile by a large backlog of dirty log pages. The default does nothing.
    fn start_writeback(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// Tells the OS that `len` bytes from `offset`, already durable, will not be read again
    /// soon, so it may drop them from its page cache (a hint). The log calls it for what it
    /// has synced: only recovery reads the log. The default does nothing.
    fn drop_cache(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// The operating system's descriptor of the file, for an asynchronous backend that submits
    /// reads and writes on it directly (`exec::Uring`); `None` (the default) for a file that is
    /// not an OS file or whose calls must go through this trait (a fault-injecting wrapper, the
    /// simulated disk): such a file is served by `exec::Inline`.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// A plain file, read and written with `pread`/`pwrite`.
#[derive(Debug)]
pub struct FileIo {
    file: File,
    path: PathBuf,
}

impl FileIo {
    /// Opens `path` for reading and writing, creating it if `create`.
    pub fn open(path: &Path, create: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io_at(path, e))?;
        Ok(FileIo {
            file,
            path: path.to_path_buf(),
        })
    }
}

impl FileIo {
    /// Calls `hint` with the descriptor and the byte range as the `off_t` values the range
    /// syscalls take; a range beyond them is skipped (hints may be dropped).
    fn range_hint(&self, offset: u64, len: u64, hint: impl FnOnce(i32, i64, i64)) {
        use std::os::fd::AsRawFd;
        if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
            hint(self.file.as_raw_fd(), offset, len);
        }
    }

    /// Wraps an already opened file.
    pub fn from_file(file: File, path: &Path) -> Self {
        FileIo {
            file,
            path: path.to_path_buf(),
        }
    }
}

impl Io for FileIo {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io_at(&self.path, e))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io_at(&self.path, e))
    }
    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io_at(&self.path, e))
    }
    fn start_writeback(&self, offset: u64, len: u64) {
        // Its result is ignored on purpose: it is only a hint, and an I/O error it would see
        // is reported again by the next fsync.
        self.range_hint(offset, len, |fd, offset, len| {
            // SAFETY: a plain syscall on our own open descriptor; it reads no memory of ours.
            unsafe { libc::sync_file_range(fd, offset, len, libc::SYNC_FILE_RANGE_WRITE) };
        });
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
    fn drop_cache(&self, offset: u64, len: u64) {
        // Its result is ignored on purpose: it is only a hint.
        self.range_hint(offset, len, |fd, offset, len| {
            // SAFETY: a plain syscall on our own open descriptor; it reads no memory of ours.
            unsafe { libc::posix_fadvise(fd, offset, len, libc::POSIX_FADV_DONTNEED) };
        });
    }
    fn file_len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io_at(&self.path, e))?
            .len())
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io_at(&self.path, e))
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
