//! The durable `Db` passes the conformance suite, with reopen points inside the model test that
//! alternate between a clean close and a simulated crash (no checkpoint, unflushed buffers
//! dropped), and `check()` after every model sequence. A tiny buffer pool and the smallest
//! checkpoint threshold make evictions and checkpoints happen inside short sequences. Values go
//! up to 1 MiB, around the leaf limit where they start going out of line (issue 23).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use sylva::btree::Layout;
use sylva::{Db, DbOptions, SyncMode};
use sylva_conformance::{conformance_tests, Subject};

/// Databases in temporary directories (on tmpfs when there is one, so `fsync` is cheap).
struct Durable {
    sync: SyncMode,
    cache_bytes: u64,
    layout: Layout,
    dirs: Vec<tempfile::TempDir>,
    reopened: u64,
}

impl Durable {
    fn new(sync: SyncMode, cache_bytes: u64) -> Self {
        Durable {
            sync,
            cache_bytes,
            layout: Layout::Adaptive,
            dirs: Vec::new(),
            reopened: 0,
        }
    }

    fn dir(&self) -> PathBuf {
        self.dirs.last().unwrap().path().join("db")
    }

    fn options(&self) -> DbOptions {
        DbOptions {
            sync: self.sync,
            cache_bytes: self.cache_bytes,
            checkpoint_bytes: 1 << 20,
            layout: self.layout,
            ..DbOptions::default()
        }
    }
}

impl Subject for Durable {
    type Store = Db;

    fn open(&mut self) -> Db {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        self.dirs.push(dir);
        Db::open(self.dir(), self.options()).unwrap()
    }

    fn reopen(&mut self, store: Db) -> Db {
        self.reopened += 1;
        // Under `Always` every acknowledged write survives a crash; otherwise close cleanly.
        if self.sync == SyncMode::Always && self.reopened.is_multiple_of(2) {
            store.simulate_crash();
        } else {
            store.close().unwrap();
        }
        let db = Db::open(self.dir(), self.options()).unwrap();
        db.check().unwrap();
        db
    }

    fn reopens(&self) -> bool {
        true
    }

    /// Values longer than a leaf holds go out of line (issue 23): the suite puts values of 0, 1,
    /// that − 1, that, that + 1, 64 KiB and 1 MiB bytes.
    fn value_size_limit(&self) -> Option<usize> {
        Some(sylva::btree::max_value_len(self.options().page_size))
    }

    fn check(&mut self, store: &Db) -> Result<(), String> {
        store.check().map(|_| ()).map_err(|e| e.to_string())
    }
}

conformance_tests!(always_small_pool, Durable::new(SyncMode::Always, 16 * 4096));
conformance_tests!(never_large_pool, Durable::new(SyncMode::Never, 64 << 20));
// The model's runs of consecutive numeric keys fill semi-dense leaves (kind 4): their page
// images and redo go through the same log and recovery.
conformance_tests!(
    semidense_always_small_pool,
    Durable {
        layout: Layout::Semidense,
        ..Durable::new(SyncMode::Always, 16 * 4096)
    }
);
