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
    /// Writes all of `bufs`, one after another, from `offset`. The default writes each with
    /// [`Io::write_at`]; an OS file does it with `pwritev`, one call for all of them.
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        let mut at = offset;
        for buf in bufs {
            self.write_at(buf, at)?;
            at += buf.len() as u64;
        }
        Ok(())
    }
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
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        write_all_vectored_at(&self.file, bufs, offset).map_err(|e| Error::io_at(&self.path, e))
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

/// `pwritev` of all of `bufs` from `offset`, in as many calls as it takes: a call may write
/// less than asked (then the rest follows, from the first byte not written), or be
/// interrupted; at most `IOV_MAX` buffers go to one call.
fn write_all_vectored_at(file: &File, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    /// Linux's `IOV_MAX`.
    const IOV_MAX: usize = 1024;
    let mut iov: Vec<libc::iovec> = bufs
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    let (mut start, mut at) = (0, offset);
    while start < iov.len() {
        let n = (iov.len() - start).min(IOV_MAX);
        // SAFETY: the descriptor is our open file; `iov[start..start + n]` describes live
        // buffers borrowed from `bufs` (or their tails, below) that the call only reads.
        let written = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov[start..].as_ptr(),
                n as libc::c_int,
                at as libc::off_t,
            )
        };
        if written < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut left = written as usize;
        at += left as u64;
        // Skip what was written: whole buffers, then the start of a partly written one.
        while left > 0 && left >= iov[start].iov_len {
            left -= iov[start].iov_len;
            start += 1;
        }
        if left > 0 {
            let b = &mut iov[start];
            // SAFETY: `left` is less than the buffer's length, so the tail is inside it.
            b.iov_base = unsafe { b.iov_base.cast::<u8>().add(left).cast() };
            b.iov_len -= left;
        }
    }
    Ok(())
}

#[cfg(test)]
mod vectored_tests {
    use super::*;

    #[test]
    fn a_vectored_write_lands_every_buffer_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        let io = FileIo::from_file(file, &path);
        let (a, b, c) = (vec![1u8; 5000], Vec::new(), vec![3u8; 70_000]);
        // More buffers than one call takes: the rest follows in further calls.
        let many: Vec<Vec<u8>> = (0..1500).map(|i| vec![(i % 251) as u8; 3]).collect();
        let mut bufs: Vec<&[u8]> = vec![&a, &b, &c];
        bufs.extend(many.iter().map(Vec::as_slice));
        io.write_vectored_at(&bufs, 100).expect("write");
        let want: Vec<u8> = bufs.concat();
        let mut got = vec![0u8; want.len()];
        io.read_at(&mut got, 100).expect("read");
        assert_eq!(got, want);
        assert_eq!(io.file_len().expect("len"), 100 + want.len() as u64);
    }
}
