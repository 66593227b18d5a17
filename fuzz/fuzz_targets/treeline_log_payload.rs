//! Arbitrary bytes as a TreeLine log record's payload: decoding returns an error or a record, never panics.
//! The driver, `sylva::fuzz::treeline_log_payload`, is in the library so the stable tests run it too
//! (`tests/treeline_fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::treeline_log_payload(data));
