//! Arbitrary bytes as a slotted node (inner node, comparison or fingerprinting leaf): the view
//! must refuse them or answer every accessor a descent, scan, split and compaction call, never
//! panic.
//! The driver, `sylva::fuzz::slotted_node`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::slotted_node(data));
