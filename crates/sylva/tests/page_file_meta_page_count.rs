//! Regression (found through the `meta_page` fuzz target, whose first crash was a meta page
//! counting 2^36 pages: the driver's in-memory file grew to hold them): a meta page whose page
//! count is more than a file can hold (its bytes past the largest file offset, `i64::MAX`) was
//! taken at open; the offsets of pages near the end, `id × page size`, then overflowed (a panic
//! with overflow checks, a write over another page without them), and growing the file past
//! the count overflowed the count. Open now refuses such a meta page as corruption; one whose
//! count fits opens as before.

use sylva::io::page_header::{seal, PageKind};
use sylva::io::{MemIo, PageFile, FIRST_DATA_PAGE};
use sylva::Error;

const PAGE: usize = 4096;

/// A page file of two meta pages (sequence 1 in slot 1) counting `page_count` pages.
fn file_counting(page_count: u64) -> Vec<u8> {
    let mut file = vec![0u8; 4 * PAGE];
    for id in 0..2u64 {
        let page = &mut file[id as usize * PAGE..(id as usize + 1) * PAGE];
        page[32..36].copy_from_slice(&(PAGE as u32).to_le_bytes());
        page[40..48].copy_from_slice(&id.to_le_bytes());
        page[48..56].copy_from_slice(&page_count.to_le_bytes());
        seal(page, PageKind::Meta, id, 0);
    }
    file
}

#[test]
fn a_meta_page_counting_more_pages_than_a_file_holds_is_corruption() {
    let largest = i64::MAX as u64 / PAGE as u64;
    for count in [
        largest + 1,
        u64::MAX / PAGE as u64 + 2,
        u64::MAX - 1,
        u64::MAX,
    ] {
        match PageFile::open_io(Box::new(MemIo::new(file_counting(count))), false) {
            // The corruption names the meta page it read (slot 1 has the higher sequence).
            Err(Error::Corruption { page, detail }) if page < FIRST_DATA_PAGE => {
                assert!(detail.contains(&count.to_string()), "{count}: {detail}");
            }
            Err(e) => panic!("page count {count}: {e:?}"),
            Ok(_) => panic!("page count {count}: opened"),
        }
    }
    for count in [FIRST_DATA_PAGE, 4, 1000, largest] {
        let (file, _) = PageFile::open_io(Box::new(MemIo::new(file_counting(count))), false)
            .unwrap_or_else(|e| panic!("page count {count}: {e:?}"));
        assert_eq!(file.page_count(), count);
    }
}
