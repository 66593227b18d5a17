//! Arbitrary bytes as a page file whose first two pages, checksummed by the driver, are its meta
//! pages: open must refuse them or give a file whose pages read, allocate and checkpoint,
//! never panic.
//! The driver, `sylva::fuzz::meta_page`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::meta_page(data));
