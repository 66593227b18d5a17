//! Arbitrary bytes as an NB-tree Bloom filter's bytes: decoding must return an error or a filter that answers probes, never panic.
//! The driver, `sylva::fuzz::nbtree_bloom`, is in the library so the stable tests run it too
//! (`tests/nbtree_fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::nbtree_bloom(data));
