//! Arbitrary bytes as a page file: open and reading every page must return errors, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sylva::io::page_header::PageKind;
use sylva::io::{MemIo, PageFile, FIRST_DATA_PAGE};

fuzz_target!(|data: &[u8]| {
    let Ok((file, _meta)) = PageFile::open_io(Box::new(MemIo::new(data.to_vec())), false) else {
        return;
    };
    let mut buf = file.buffer(1);
    for id in FIRST_DATA_PAGE..file.page_count().min(64) {
        let _ = file.read_page(id, &mut buf, PageKind::BTreeLeaf);
    }
    let _ = file.allocate();
    let _ = file.checkpoint(b"fuzz");
});
