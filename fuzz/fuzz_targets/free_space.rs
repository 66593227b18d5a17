//! Arbitrary bytes as a page file whose meta pages and free-space pages (kind 2) the driver
//! checksums: open must refuse it or rebuild its free space so that allocating, freeing and
//! checkpointing work, never panic.
//! The driver, `sylva::fuzz::free_space`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::free_space(data));
