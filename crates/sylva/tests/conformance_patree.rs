//! The PA-Tree mode (`PaDb`, issue 20) passes the conformance suite over both backends: point
//! operations on the worker thread, a pool of 16 pages so that most operations miss and wait
//! for their reads, reopen points alternating between a clean close and a simulated crash, and
//! `check()` after every model sequence. The io_uring subjects skip, saying why, where the
//! kernel refuses a ring.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use sylva::{BackendKind, DbOptions, PaDb, PaOptions, SyncMode};
use sylva_conformance::{conformance_tests, Subject};

struct Pa {
    sync: SyncMode,
    cache_bytes: u64,
    backend: BackendKind,
    inflight: usize,
    dirs: Vec<tempfile::TempDir>,
    reopened: u64,
}

impl Pa {
    fn new(sync: SyncMode, cache_bytes: u64, backend: BackendKind) -> Self {
        Pa {
            sync,
            cache_bytes,
            backend,
            inflight: 64,
            dirs: Vec::new(),
            reopened: 0,
        }
    }

    fn dir(&self) -> PathBuf {
        self.dirs.last().unwrap().path().join("db")
    }

    fn options(&self) -> PaOptions {
        let mut o = PaOptions {
            db: DbOptions {
                sync: self.sync,
                cache_bytes: self.cache_bytes,
                checkpoint_bytes: 1 << 20,
                ..DbOptions::default()
            },
            backend: self.backend,
            ..PaOptions::default()
        };
        o.worker.inflight = self.inflight;
        o
    }

    fn start(&self) -> PaDb {
        match PaDb::open(self.dir(), self.options()) {
            Ok(db) => db,
            Err(e) if self.backend == BackendKind::Uring => {
                panic!("io_uring backend: {e} (run the inline subjects where the kernel refuses io_uring)")
            }
            Err(e) => panic!("{e}"),
        }
    }
}

impl Subject for Pa {
    type Store = PaDb;

    fn open(&mut self) -> PaDb {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        self.dirs.push(dir);
        self.start()
    }

    fn reopen(&mut self, store: PaDb) -> PaDb {
        self.reopened += 1;
        if self.sync == SyncMode::Always && self.reopened.is_multiple_of(2) {
            store.simulate_crash();
        } else {
            store.close().unwrap();
        }
        let db = self.start();
        db.db().check().unwrap();
        db
    }

    fn reopens(&self) -> bool {
        true
    }

    fn value_size_limit(&self) -> Option<usize> {
        Some(sylva::btree::max_value_len(4096))
    }

    fn check(&mut self, store: &PaDb) -> Result<(), String> {
        store.db().check().map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Whether this kernel sets up an io_uring ring (the uring subjects skip, saying so, if not).
fn uring_works() -> bool {
    match sylva::exec::open_backend(BackendKind::Uring, 8) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipping an io_uring subject: {e}");
            false
        }
    }
}

macro_rules! uring_conformance {
    ($name:ident, $subject:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn edge_cases() {
                if uring_works() {
                    sylva_conformance::edge_cases(&mut $subject);
                }
            }

            #[test]
            fn model() {
                if uring_works() {
                    sylva_conformance::model_test(&mut $subject);
                }
            }

            #[test]
            fn stress() {
                if uring_works() {
                    sylva_conformance::stress(
                        &mut $subject,
                        sylva_conformance::StressConfig::default(),
                    );
                }
            }
        }
    };
}

conformance_tests!(
    inline_always_small_pool,
    Pa::new(SyncMode::Always, 16 * 4096, BackendKind::Inline)
);
conformance_tests!(
    inline_never_large_pool,
    Pa::new(SyncMode::Never, 64 << 20, BackendKind::Inline)
);
uring_conformance!(
    uring_always_small_pool,
    Pa::new(SyncMode::Always, 16 * 4096, BackendKind::Uring)
);
uring_conformance!(
    uring_batch_small_pool,
    Pa {
        inflight: 4,
        ..Pa::new(
            SyncMode::Batch {
                ops: 64,
                interval: std::time::Duration::from_millis(5)
            },
            16 * 4096,
            BackendKind::Uring
        )
    }
);

/// The paper's synchronous baselines (`patree:mode=dedicated|shared`): `Db` itself, its page
/// reads through a ring per thread or through one shared I/O thread (`exec::RingVfs`), with a
/// pool of 16 pages so that most operations read.
struct Baseline {
    mode: sylva::exec::BlockingMode,
    dirs: Vec<tempfile::TempDir>,
    reopened: u64,
}

impl Baseline {
    fn new(mode: sylva::exec::BlockingMode) -> Self {
        Baseline {
            mode,
            dirs: Vec::new(),
            reopened: 0,
        }
    }

    fn start(&self) -> sylva::Db {
        let vfs = sylva::exec::RingVfs::new(std::sync::Arc::new(sylva::vfs::OsFs), self.mode);
        let options = DbOptions {
            sync: SyncMode::Always,
            cache_bytes: 16 * 4096,
            checkpoint_bytes: 1 << 20,
            ..DbOptions::default()
        };
        let dir = self.dirs.last().unwrap().path().join("db");
        sylva::Db::open_in(&vfs, &dir, options).unwrap()
    }
}

impl Subject for Baseline {
    type Store = sylva::Db;

    fn open(&mut self) -> sylva::Db {
        self.dirs.push(tempfile::tempdir().unwrap());
        self.start()
    }

    fn reopen(&mut self, store: sylva::Db) -> sylva::Db {
        self.reopened += 1;
        if self.reopened.is_multiple_of(2) {
            store.simulate_crash();
        } else {
            store.close().unwrap();
        }
        let db = self.start();
        db.check().unwrap();
        db
    }

    fn reopens(&self) -> bool {
        true
    }

    fn value_size_limit(&self) -> Option<usize> {
        Some(sylva::btree::max_value_len(4096))
    }

    fn check(&mut self, store: &sylva::Db) -> Result<(), String> {
        store.check().map(|_| ()).map_err(|e| e.to_string())
    }
}

uring_conformance!(
    baseline_dedicated,
    Baseline::new(sylva::exec::BlockingMode::Dedicated)
);
uring_conformance!(
    baseline_shared,
    Baseline::new(sylva::exec::BlockingMode::Shared)
);
