//! Arbitrary bytes as a slotted node (inner, leaf, fingerprinting leaf): decoding must return an error or a view whose every accessor
//! answers, never panic. The driver is `sylva::fuzz::slotted_node`, which the stable tests also run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::slotted_node(data));
