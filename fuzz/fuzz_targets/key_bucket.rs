//! Arbitrary bytes as a bucket of long keys (a `Db` value of state version 6): decoding must
//! return an error or the entries, which encode back to the same bytes, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sylva::fuzz::key_bucket(data);
});
