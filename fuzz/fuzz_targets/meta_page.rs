//! Arbitrary bytes as a page file's meta pages (checksummed by the entry point): decoding must return an error or a view whose every accessor
//! answers, never panic. The driver is `sylva::fuzz::meta_page`, which the stable tests also run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::meta_page(data));
