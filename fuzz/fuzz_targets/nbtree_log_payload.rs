//! Arbitrary bytes as an NB-tree log record's payload: decoding must return an error or a record, never panic.
//! The driver, `sylva::fuzz::nbtree_log_payload`, is in the library so the stable tests run it too
//! (`tests/nbtree_fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::nbtree_log_payload(data));
