//! `Vfs`: the file system's directory operations (create, open, list, remove, rename, directory
//! fsync, lock) behind one small trait, beside [`Io`] for a file's contents, so that nothing in
//! the library calls `std::fs` itself and a simulated file system ([`super::SimFs`]) can stand
//! under a whole database, its directory included.
//!
//! The durability rules the callers follow are POSIX's, not one file system's: a write is
//! durable after its file's fsync ([`Io::sync`]); a file's *name* (its creation, a rename, a
//! removal) only after an fsync of the directory holding it ([`Vfs::sync_dir`]), and a new
//! directory's name only after an fsync of its parent. Linux file systems often persist a name
//! with the file's own fsync; nothing here relies on that.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{FileIo, Io};
use crate::error::{Error, Result};

/// How [`Vfs::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenFile {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Ask for `O_DIRECT` (bypassing the page cache); a file system that refuses it opens the
    /// file buffered, and [`Opened::direct`] says which happened.
    pub direct: bool,
}

/// A file opened by [`Vfs::open`].
pub struct Opened {
    /// Its contents.
    pub io: Box<dyn Io>,
    /// Whether it bypasses the page cache (`O_DIRECT`).
    pub direct: bool,
}

/// An exclusive lock on a path, held until dropped.
pub trait LockGuard: Send + Sync {}

/// Directory operations and file opening; see the module docs for the durability rules.
pub trait Vfs: Send + Sync {
    /// Opens (or creates, per `how`) the file at `path`.
    fn open(&self, path: &Path, how: OpenFile) -> Result<Opened>;
    /// Whether `path` exists (a file or a directory).
    fn exists(&self, path: &Path) -> Result<bool>;
    /// The names in directory `dir`, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<OsString>>;
    /// Creates directory `dir`, whose parent must exist; creating one that exists is an error.
    fn create_dir(&self, dir: &Path) -> Result<()>;
    /// Removes the file at `path`.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Renames a file within one directory, replacing `to` if it exists (atomically).
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes the names in directory `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes an exclusive lock on the file at `path` (creating it) without waiting:
    /// [`Error::Locked`] naming `owner` if someone holds it.
    fn lock(&self, path: &Path, owner: &Path) -> Result<Box<dyn LockGuard>>;
}

/// Creates `dir` and any missing parents, and makes the name of `dir` and of each of its
/// ancestors durable in its parent (an fsync of every parent up the path, also of directories
/// that already exist: a process killed between a creation and its parent's fsync leaves a name
/// that exists but would not survive a power loss). A parent this process may not open is
/// skipped: it cannot have been created by a database opened as this user.
pub fn create_dir_all_durable(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() || dir.parent().is_none() {
        return Ok(());
    }
    let parent = parent_dir(dir);
    if parent != Path::new(".") {
        create_dir_all_durable(vfs, parent)?;
    }
    if !vfs.exists(dir)? {
        match vfs.create_dir(dir) {
            Ok(()) => {}
            // Another process created it meanwhile; the fsync below makes it durable for us.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
            }
            Err(e) => return Err(e),
        }
    }
    match vfs.sync_dir(parent) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::PermissionDenied => {
            Ok(())
        }
        r => r,
    }
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

struct FlockGuard(#[allow(dead_code)] File);

impl LockGuard for FlockGuard {}

impl Vfs for OsFs {
    fn open(&self, path: &Path, how: OpenFile) -> Result<Opened> {
        if how.direct {
            let attempt = OpenOptions::new()
                .read(true)
                .write(true)
                .create(how.create)
                .truncate(false)
                .custom_flags(libc::O_DIRECT)
                .open(path);
            match attempt {
                Ok(file) => {
                    return Ok(Opened {
                        io: Box::new(FileIo::from_file(file, path)),
                        direct: true,
                    })
                }
                // The file system does not do O_DIRECT (tmpfs, some overlays): open buffered.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(Error::io_at(path, e)),
            }
        }
        Ok(Opened {
            io: Box::new(FileIo::open(path, how.create)?),
            direct: false,
        })
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| Error::io_at(path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<OsString>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io_at(dir, e))? {
            names.push(entry.map_err(|e| Error::io_at(dir, e))?.file_name());
        }
        Ok(names)
    }

    fn create_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir(dir).map_err(|e| Error::io_at(dir, e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io_at(path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io_at(from, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io_at(dir, e))
    }

    fn lock(&self, path: &Path, owner: &Path) -> Result<Box<dyn LockGuard>> {
        use std::os::fd::AsRawFd;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io_at(path, e))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked {
                    path: owner.to_path_buf(),
                });
            }
            return Err(Error::io_at(path, e));
        }
        Ok(Box::new(FlockGuard(file)))
    }
}
