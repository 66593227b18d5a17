//! Every B-tree layout passes the conformance suite, with `check()` after every model sequence
//! and after the stress test; with deferred splits (`redistribute=true`, the database's default)
//! and, for a few layouts, with the in-memory default of plain 1-to-2 splits.

#![allow(clippy::unwrap_used)]

use sylva::btree::{BTree, Layout, Options};
use sylva_conformance::{conformance_tests, Subject};

/// Opens B-trees with one layout, page size and split policy (deferred splits or not); checks
/// their structure.
struct Tree(Layout, usize, bool);

impl Subject for Tree {
    type Store = BTree;

    fn open(&mut self) -> BTree {
        BTree::new(Options {
            layout: self.0,
            page_size: self.1,
            redistribute: self.2,
        })
        .unwrap()
    }

    fn check(&mut self, store: &BTree) -> Result<(), String> {
        store.check().map(|_| ()).map_err(|e| e.to_string())
    }
}

conformance_tests!(baseline, Tree(Layout::Baseline, 4096, true));
conformance_tests!(prefix, Tree(Layout::Prefix, 4096, true));
conformance_tests!(heads, Tree(Layout::Heads, 4096, true));
conformance_tests!(hints, Tree(Layout::Hints, 4096, true));
conformance_tests!(fingerprint, Tree(Layout::Fingerprint, 4096, true));
conformance_tests!(fingerprint_2k, Tree(Layout::Fingerprint, 2048, true));
conformance_tests!(fingerprint_64k, Tree(Layout::Fingerprint, 65536, true));
conformance_tests!(semidense, Tree(Layout::Semidense, 4096, true));
conformance_tests!(semidense_2k, Tree(Layout::Semidense, 2048, true));
conformance_tests!(semidense_64k, Tree(Layout::Semidense, 65536, true));
conformance_tests!(dense, Tree(Layout::Dense, 4096, true));
conformance_tests!(dense_2k, Tree(Layout::Dense, 2048, true));
conformance_tests!(dense_64k, Tree(Layout::Dense, 65536, true));
conformance_tests!(adaptive, Tree(Layout::Adaptive, 4096, true));
conformance_tests!(adaptive_2k, Tree(Layout::Adaptive, 2048, true));
conformance_tests!(adaptive_64k, Tree(Layout::Adaptive, 65536, true));
// Small pages split and merge more, and have the tightest limits; large pages use offsets near
// the top of the u16 range.
conformance_tests!(hints_2k, Tree(Layout::Hints, 2048, true));
conformance_tests!(baseline_64k, Tree(Layout::Baseline, 65536, true));
conformance_tests!(hints_64k, Tree(Layout::Hints, 65536, true));
// Plain 1-to-2 splits (`redistribute=false`).
conformance_tests!(adaptive_plain_splits, Tree(Layout::Adaptive, 4096, false));
conformance_tests!(hints_2k_plain_splits, Tree(Layout::Hints, 2048, false));
