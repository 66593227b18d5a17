//! Arbitrary bytes as a Db log record's payload: decoding must return an error or a view whose every accessor
//! answers, never panic. The driver is `sylva::fuzz::db_log_payload`, which the stable tests also run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sylva::fuzz::db_log_payload(data));
