//! Arbitrary bytes as a fully-dense leaf: decoding must return an error or a view whose every accessor
//! answers, never panic. The driver is `sylva::fuzz::dense_leaf`, which the stable tests also run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::dense_leaf(data));
