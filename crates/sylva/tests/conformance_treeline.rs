//! TreeLine passes the conformance suite, with reopen points inside the model test that
//! alternate between a clean close and a simulated crash, and `check()` after every model
//! sequence: at its defaults, and with 64 cached records, goal 4 and epsilon 2, where
//! evictions, overflow pages and reorganizations happen all the time.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use sylva::{SyncMode, TreeLine, TreeLineOptions};
use sylva_conformance::{conformance_tests, Subject};

/// Stores in temporary directories (on tmpfs when there is one, so `fsync` is cheap).
struct Durable {
    options: TreeLineOptions,
    dirs: Vec<tempfile::TempDir>,
    reopened: u64,
}

impl Durable {
    fn new(options: TreeLineOptions) -> Self {
        Durable {
            options,
            dirs: Vec::new(),
            reopened: 0,
        }
    }

    fn dir(&self) -> PathBuf {
        self.dirs.last().unwrap().path().join("tl")
    }
}

/// The defaults, every write durable when it returns.
fn defaults() -> TreeLineOptions {
    TreeLineOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 << 20,
        ..TreeLineOptions::default()
    }
}

/// 64 cached records of 64 bytes, goal 4, epsilon 2: constant reorganization.
fn constant_reorganization() -> TreeLineOptions {
    let mut o = TreeLineOptions {
        sync: SyncMode::Always,
        goal: 4,
        epsilon: 2,
        checkpoint_bytes: 1 << 20,
        ..TreeLineOptions::default()
    };
    o.set("cache_records", "64").unwrap();
    // The fixed part of the budget comes on top: `treeline::store`'s, the index's first page,
    // the log's buffers (4 MiB), the histograms with the sample and its sorted copy, the record
    // cache's arena slack (256 KiB).
    o.cache_bytes +=
        (8 << 20) + 8192 + (4 << 20) + 2 * 20_000 * 16 + 2 * 10 * 20_000 * 8 + 1024 + (256 << 10);
    o
}

impl Subject for Durable {
    type Store = TreeLine;

    fn open(&mut self) -> TreeLine {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        self.dirs.push(dir);
        TreeLine::open(self.dir(), self.options).unwrap()
    }

    fn reopen(&mut self, store: TreeLine) -> TreeLine {
        self.reopened += 1;
        if self.options.sync == SyncMode::Always && self.reopened.is_multiple_of(2) {
            store.simulate_crash();
        } else {
            store.close().unwrap();
        }
        let db = TreeLine::open(self.dir(), self.options).unwrap();
        db.check().unwrap();
        db
    }

    fn reopens(&self) -> bool {
        true
    }

    fn check(&mut self, store: &TreeLine) -> Result<(), String> {
        store.check().map(|_| ()).map_err(|e| e.to_string())
    }
}

conformance_tests!(defaults_always, Durable::new(defaults()));
conformance_tests!(
    cache_64_goal_4_epsilon_2,
    Durable::new(constant_reorganization())
);
conformance_tests!(
    write_through_no_grouping,
    Durable::new(TreeLineOptions {
        record_cache: false,
        grouping: false,
        ..constant_reorganization()
    })
);
