//! Creating a database: built whole under a temporary name, then renamed into place (the docs
//! of [`super::Db::open_in`]; `docs/format.md`, "Creation and names").

use std::path::Path;

use super::options::DbOptions;
use super::{DATA_FILE, NEW_DATA_FILE, WAL_FILE, WAL_FILE_2};
use crate::error::Result;
use crate::io::{Io, OpenFile, PageFile, Vfs};
use crate::wal::Wal;

/// Builds a new, empty database's files in `dir` (module docs of [`Db::open_in`]): a page file
/// under [`NEW_DATA_FILE`] and both log segments with their headers, all durable with their
/// names, then renames the page file to [`DATA_FILE`] and makes that durable. What an earlier,
/// unfinished creation left is removed first.
pub(super) fn create_files(vfs: &dyn Vfs, dir: &Path, options: &DbOptions) -> Result<()> {
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
            direct: options.direct_io,
        },
    )?;
    // Writes both meta pages, each fsynced.
    drop(PageFile::create_io(
        opened.io,
        options.page_size,
        opened.direct,
    )?);
    let segment = |name: &str| -> Result<Box<dyn Io>> {
        let how = OpenFile {
            create: true,
            direct: false,
        };
        Ok(vfs.open(&dir.join(name), how)?.io)
    };
    // Opening empty segments writes and fsyncs their headers.
    drop(Wal::open_segments(
        [segment(WAL_FILE)?, segment(WAL_FILE_2)?],
        1,
    )?);
    vfs.sync_dir(dir)?;
    vfs.rename(&new, &dir.join(DATA_FILE))?;
    vfs.sync_dir(dir)
}
