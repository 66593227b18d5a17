//! Arbitrary bytes as the first page of an out-of-line value's run, checksummed: decoding its
//! run header must return an error or a header, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sylva::fuzz::overflow_run_header(data);
});
