//! Arbitrary bytes as a semi-dense leaf: decoding must return an error or a view whose every accessor
//! answers, never panic. The driver is `sylva::fuzz::semidense_leaf`, which the stable tests also run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::semidense_leaf(data));
