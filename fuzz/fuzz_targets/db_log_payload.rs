//! Arbitrary bytes as a `Db` log record's payload: decoding must return an error or a record
//! whose page images restore over a page, never panic.
//! The driver, `sylva::fuzz::db_log_payload`, is in the library so the stable tests run it too
//! (`tests/fuzz_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::db_log_payload(data));
