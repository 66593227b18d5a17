//! Arbitrary bytes as the NB-tree's manifest bytes: decoding must return an error or an s-tree, never panic.
//! The driver, `sylva::fuzz::nbtree_manifest`, is in the library so the stable tests run it too
//! (`tests/nbtree_fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sylva::fuzz::nbtree_manifest(data);
});
