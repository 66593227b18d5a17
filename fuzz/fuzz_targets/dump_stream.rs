//! Arbitrary bytes as a dump stream (`sylva load`'s input): verifying it must return an error or
//! a record count, never panic, and never allocate more than the input holds plus a megabyte.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sylva::fuzz::dump_stream(data);
});
