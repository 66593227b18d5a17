//! The data pages of the page-file fixtures (`tests/fixtures/pages-v*.db`): the `i`-th page
//! allocated holds "fixture page i" at byte 64 and has LSN 100 + i.

use sylva::io::page_header::PageKind;
use sylva::io::PageFile;

/// Allocates and writes `n` fixture pages.
pub fn write(file: &PageFile, n: u8) {
    let mut buf = file.buffer(1);
    for i in 0..n {
        let id = file.allocate();
        buf.fill(0);
        buf[64..64 + 13].copy_from_slice(b"fixture page ");
        buf[77] = b'0' + i;
        file.write_page(id, &mut buf, PageKind::BTreeLeaf, 100 + u64::from(i))
            .expect("write");
    }
}

/// Checks that page `id` is the `i`-th fixture page.
pub fn check(file: &PageFile, id: u64, i: u8) {
    let mut buf = file.buffer(1);
    let lsn = file
        .read_page(id, &mut buf, PageKind::BTreeLeaf)
        .expect("read page");
    assert_eq!(lsn, 100 + u64::from(i), "page {id}");
    assert_eq!(&buf[64..78], format!("fixture page {i}").as_bytes());
}
