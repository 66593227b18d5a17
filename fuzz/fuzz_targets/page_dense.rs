//! Arbitrary bytes as a fully-dense leaf: the view must refuse them or answer every accessor a
//! lookup, scan and split call, never panic.
//! The driver, `sylva::fuzz::dense_leaf`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::dense_leaf(data));
