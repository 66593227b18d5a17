//! A durable store's directory: its files' names, the lock a process holds while it has the
//! store open, and creation, built whole under a temporary name and then renamed into place
//! (`docs/format.md`, "Creation and names").

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::{create_dir_all_durable, Io, LockGuard, Meta, OpenFile, PageFile, Vfs};
use crate::wal::Wal;

/// The page file in a database directory.
pub const DATA_FILE: &str = "data.sylva";
/// The write-ahead log in a database directory (its first segment).
pub const WAL_FILE: &str = "wal.log";
/// The write-ahead log's second segment (the log alternates between the two; `docs/format.md`).
pub const WAL_FILE_2: &str = "wal.2.log";
/// The lock file in a database directory.
pub const LOCK_FILE: &str = "LOCK";
/// A page file being created: renamed to [`DATA_FILE`] once the new database is whole.
pub const NEW_DATA_FILE: &str = "data.sylva.new";

/// What a new page file is created with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Create {
    /// Page size of a new page file.
    pub(crate) page_size: usize,
    /// Open the page file with `O_DIRECT` where the file system allows.
    pub(crate) direct_io: bool,
}

/// A store's files, opened: the page file with its meta page, the log's two segments, and the
/// directory's lock (`None` for files opened without a directory, in tests).
pub(crate) struct Files {
    pub(crate) file: PageFile,
    /// The page file's meta page (`None` for a page file created empty by `open_io`).
    pub(crate) meta: Option<Meta>,
    pub(crate) wal_io: [Box<dyn Io>; 2],
    pub(crate) lock: Option<Box<dyn LockGuard>>,
    /// Where the page file is (for error messages).
    pub(crate) path: PathBuf,
}

/// Opens the store in `dir`, creating the directory and an empty store if there is none: the
/// directory's lock taken ([`Error::Locked`] if another process, or another store in this one,
/// holds it), a directory holding other files and no page file refused ([`Error::NotSylva`]).
///
/// A new store is built whole under a temporary name ([`NEW_DATA_FILE`], the log's segments
/// beside it), made durable, and only then renamed to [`DATA_FILE`]; the rename is made durable
/// before anything is written to it. So after a crash the directory holds either a store or an
/// unfinished creation, which holds nothing acknowledged and is started over. Every name the
/// store needs (the directory itself in its parent, the log's segments) is durable before this
/// returns.
pub(crate) fn open_dir(vfs: &dyn Vfs, dir: &Path, create: Create) -> Result<Files> {
    create_dir_all_durable(vfs, dir)?;
    let data = dir.join(DATA_FILE);
    let exists = vfs.exists(&data)?;
    if !exists {
        for name in vfs.list(dir)? {
            if ![LOCK_FILE, WAL_FILE, WAL_FILE_2, NEW_DATA_FILE]
                .iter()
                .any(|n| name == *n)
            {
                return Err(Error::NotSylva {
                    path: dir.to_path_buf(),
                    expected: "database directory",
                    detail: format!(
                        "it holds {} but no {DATA_FILE}; refusing to create a database among other files",
                        name.to_string_lossy()
                    ),
                });
            }
        }
    }
    let lock = vfs.lock(&dir.join(LOCK_FILE), dir)?;
    if !exists {
        create_files(vfs, dir, create)?;
    }
    let opened = vfs.open(
        &data,
        OpenFile {
            create: false,
            direct: create.direct_io,
        },
    )?;
    let (file, meta) = PageFile::open_io(opened.io, opened.direct)?;
    // A version 1 directory has no second segment: it is created here.
    let wal_io = [segment(vfs, dir, WAL_FILE)?, segment(vfs, dir, WAL_FILE_2)?];
    // Every name the store needs made durable before anything is acknowledged, whoever created
    // it: a process that died (`kill -9`) between a creation and its directory's fsync leaves a
    // name that exists but would not survive a power loss.
    // (The directory's own name and its ancestors': `create_dir_all_durable` above.)
    vfs.sync_dir(dir)?;
    Ok(Files {
        file,
        meta: Some(meta),
        wal_io,
        lock: Some(lock),
        path: data,
    })
}

/// Opens (creating if missing) the log segment `name` in `dir`.
fn segment(vfs: &dyn Vfs, dir: &Path, name: &str) -> Result<Box<dyn Io>> {
    let how = OpenFile {
        create: true,
        direct: false,
    };
    Ok(vfs.open(&dir.join(name), how)?.io)
}

/// Files over the given page-file and log I/O, without a directory or lock file (for
/// fault-injection tests). An empty page file is initialised.
pub(crate) fn open_io(
    page_io: Box<dyn Io>,
    wal_io: [Box<dyn Io>; 2],
    page_size: usize,
) -> Result<Files> {
    let path = page_io.path().to_path_buf();
    let (file, meta) = if page_io.file_len()? == 0 {
        (PageFile::create_io(page_io, page_size, false)?, None)
    } else {
        let (f, m) = PageFile::open_io(page_io, false)?;
        (f, Some(m))
    };
    Ok(Files {
        file,
        meta,
        wal_io,
        lock: None,
        path,
    })
}

/// Builds a new, empty store's files in `dir` ([`open_dir`]): a page file under
/// [`NEW_DATA_FILE`] and both log segments with their headers, all durable with their names,
/// then renames the page file to [`DATA_FILE`] and makes that durable. What an earlier,
/// unfinished creation left is removed first.
fn create_files(vfs: &dyn Vfs, dir: &Path, create: Create) -> Result<()> {
    let new = dir.join(NEW_DATA_FILE);
    for name in [NEW_DATA_FILE, WAL_FILE, WAL_FILE_2] {
        let path = dir.join(name);
        if vfs.exists(&path)? {
            vfs.remove_file(&path)?;
        }
    }
    let opened = vfs.open(
        &new,
        OpenFile {
            create: true,
            direct: create.direct_io,
        },
    )?;
    // Writes both meta pages, each fsynced.
    drop(PageFile::create_io(
        opened.io,
        create.page_size,
        opened.direct,
    )?);
    // Opening empty segments writes and fsyncs their headers.
    drop(Wal::open_segments(
        [segment(vfs, dir, WAL_FILE)?, segment(vfs, dir, WAL_FILE_2)?],
        1,
    )?);
    vfs.sync_dir(dir)?;
    vfs.rename(&new, &dir.join(DATA_FILE))?;
    vfs.sync_dir(dir)
}
