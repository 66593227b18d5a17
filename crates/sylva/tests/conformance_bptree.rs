//! The BP-tree and its baseline pass the conformance suite, with the structural check after every
//! model sequence and after the stress test. Besides the defaults, tiny shapes make flushes,
//! case 2b redistributes and splits happen every few operations.

#![allow(clippy::unwrap_used)] // tests may unwrap

use sylva::mem::bptree::{BaselineOptions, BpTreeOptions, BpTreeStore};
use sylva_conformance::{conformance_tests, Subject};

/// Opens stores from options and checks their structure.
struct Checked<F>(F);

impl<F: FnMut() -> BpTreeStore> Subject for Checked<F> {
    type Store = BpTreeStore;

    fn open(&mut self) -> BpTreeStore {
        (self.0)()
    }

    fn check(&mut self, store: &BpTreeStore) -> Result<(), String> {
        store.check()
    }
}

fn bpa(log_size: usize, num_blocks: usize, block_size: usize, internal_size: usize) -> BpTreeStore {
    BpTreeStore::new(&BpTreeOptions {
        log_size,
        num_blocks,
        block_size,
        internal_size,
    })
    .unwrap()
}

fn baseline(node_size: usize, internal_size: Option<usize>) -> BpTreeStore {
    BpTreeStore::baseline(&BaselineOptions {
        node_size,
        internal_size,
    })
    .unwrap()
}

conformance_tests!(bptree, Checked(|| bpa(32, 32, 32, 1024)));
conformance_tests!(bptree_tiny, Checked(|| bpa(3, 2, 3, 64)));
conformance_tests!(bptree_small, Checked(|| bpa(4, 4, 4, 64)));
conformance_tests!(bptree_baseline, Checked(|| baseline(1024, None)));
conformance_tests!(bptree_baseline_256, Checked(|| baseline(256, Some(64))));
