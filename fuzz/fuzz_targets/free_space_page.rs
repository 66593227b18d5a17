//! Arbitrary bytes as one free-space page of the page file (version 2, a region bitmap or a
//! directory overflow page): decoding must return an error or the page, never panic.
//! The driver, `sylva::fuzz::free_space_page`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::free_space_page(data));
