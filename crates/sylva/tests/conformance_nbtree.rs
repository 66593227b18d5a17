//! The NB-tree passes the conformance suite at σ = 64 KiB and f = 3 (so short sequences fill
//! roots, split leaves and grow the s-tree), with reopen points inside the model test that
//! alternate between a clean close and a simulated crash, and `check()` after every sequence.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use sylva::{NbTree, NbTreeOptions, SyncMode};
use sylva_conformance::{conformance_tests, Subject};

struct Durable {
    sync: SyncMode,
    deamortize: bool,
    dirs: Vec<tempfile::TempDir>,
    reopened: u64,
}

impl Durable {
    fn new(sync: SyncMode, deamortize: bool) -> Self {
        Durable {
            sync,
            deamortize,
            dirs: Vec::new(),
            reopened: 0,
        }
    }

    fn dir(&self) -> PathBuf {
        self.dirs.last().unwrap().path().join("nb")
    }

    fn options(&self) -> NbTreeOptions {
        NbTreeOptions {
            sync: self.sync,
            sigma: Some(64 << 10),
            fanout: 3,
            deamortize: self.deamortize,
            ..NbTreeOptions::default()
        }
    }
}

impl Subject for Durable {
    type Store = NbTree;

    fn open(&mut self) -> NbTree {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        self.dirs.push(dir);
        NbTree::open(self.dir(), self.options()).unwrap()
    }

    fn reopen(&mut self, store: NbTree) -> NbTree {
        self.reopened += 1;
        // Under `Always` every acknowledged write survives a crash; otherwise close cleanly.
        if self.sync == SyncMode::Always && self.reopened.is_multiple_of(2) {
            store.simulate_crash();
        } else {
            store.close().unwrap();
        }
        let nb = NbTree::open(self.dir(), self.options()).unwrap();
        nb.check().unwrap();
        nb
    }

    fn reopens(&self) -> bool {
        true
    }

    fn check(&mut self, store: &NbTree) -> Result<(), String> {
        store.check().map(|_| ()).map_err(|e| e.to_string())
    }
}

conformance_tests!(always_inline, Durable::new(SyncMode::Always, false));
conformance_tests!(never_background, Durable::new(SyncMode::Never, true));
