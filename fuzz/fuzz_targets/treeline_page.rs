//! Arbitrary bytes as a TreeLine page (sealed as kind 16): decoding, every record, lookups and
//! the model's page, never a panic.
//! The driver, `sylva::fuzz::treeline_page`, is in the library so the stable tests run it too
//! (`tests/treeline_fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::treeline_page(data));
