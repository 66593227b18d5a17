//! `Db`'s online backups: the methods over [`crate::durable::backup`], whose module docs give
//! the scheme and why the copy is consistent.

use std::path::Path;

use super::Db;
use crate::durable::{BackupOptions, BackupProgress, BackupReport};
use crate::error::Result;
use crate::io::{OsFs, Vfs};

impl Db {
    /// Copies the database into the directory `dir` (which must not exist or be empty:
    /// [`Error::NotEmpty`] otherwise) while other threads go on reading and writing: the copy
    /// opens as this database holding exactly the writes logged below
    /// [`BackupReport::end_lsn`], every write acknowledged before the call among them. Writers
    /// are held back only briefly (while the log's end is noted); checkpoints wait for the
    /// copy, which starts from the last one, so the copy's first open replays the log since it
    /// (as recovery after a crash would). Every file of the copy and the directory are durable on
    /// return. The scheme and why it is consistent: the `durable::backup` module docs.
    ///
    /// While other threads read pages the pool and the run cache do not hold, or write (and so
    /// log), the copy takes about a quarter of the device's time ([`BackupOptions`];
    /// [`Db::backup_with`] chooses).
    ///
    /// [`Error::NotEmpty`]: crate::Error::NotEmpty
    pub fn backup_to(&self, dir: impl AsRef<Path>) -> Result<BackupReport> {
        self.backup_with(dir, BackupOptions::default())
    }

    /// [`Db::backup_to`] with the copy's share of the device chosen: `options.device_share`
    /// of 1 copies at the disk's full speed whatever other threads do; the default leaves
    /// them three quarters of the device's time while they read or write. Refused
    /// ([`Error::InvalidArgument`]) unless over 0 and at most 1.
    ///
    /// [`Error::InvalidArgument`]: crate::Error::InvalidArgument
    pub fn backup_with(
        &self,
        dir: impl AsRef<Path>,
        options: BackupOptions,
    ) -> Result<BackupReport> {
        self.backup_watched(dir, options, &mut |_| {})
    }

    /// [`Db::backup_with`], showing `watcher` how far the copy has got after each piece it
    /// writes (at most 1 MiB; [`BackupProgress`]), on the calling thread. The copy waits while
    /// the watcher runs (its reading side at most a few pieces ahead), so a watcher that sleeps
    /// pauses the backup; checkpoints keep waiting meanwhile. `sylva backup` draws its progress
    /// bar from it.
    pub fn backup_watched(
        &self,
        dir: impl AsRef<Path>,
        options: BackupOptions,
        watcher: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupReport> {
        self.durable
            .backup_to(&OsFs, dir.as_ref(), options, watcher, &mut || {})
    }

    /// [`Db::backup_to`] with the target on the file system `vfs` (the one the database was
    /// opened on, in crash tests).
    pub fn backup_to_in(&self, vfs: &dyn Vfs, dir: &Path) -> Result<BackupReport> {
        self.durable
            .backup_to(vfs, dir, BackupOptions::default(), &mut |_| {}, &mut || {})
    }

    /// [`Db::backup_to_in`], calling `after_page_copy` once the page file is copied and before
    /// the log's end is noted: what it writes is in the copy, though the copied page file
    /// missed it. For tests.
    #[doc(hidden)]
    pub fn backup_to_paused(
        &self,
        vfs: &dyn Vfs,
        dir: &Path,
        after_page_copy: &mut dyn FnMut(),
    ) -> Result<BackupReport> {
        self.durable.backup_to(
            vfs,
            dir,
            BackupOptions::default(),
            &mut |_| {},
            after_page_copy,
        )
    }
}
