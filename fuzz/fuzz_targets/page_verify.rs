//! Arbitrary bytes as a page: verification must return an error or a header, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sylva::io::page_header::verify;

fuzz_target!(|data: &[u8]| {
    let _ = verify(data, 2);
});
