//! A page file written by page format version 2 (free space as region bitmaps, docs/format.md),
//! checked in under `tests/fixtures/`, must keep opening with the same contents and free space.
//! A format change that breaks this is a version bump, not a fixture update.
//!
//! `pages-v2.db`: 4 KiB pages; pages 2..10 written, pages 3, 6 and 7 freed, then a checkpoint
//! whose owner's area fills the meta page, so the directory lives in an overflow page.
//! Written by `regenerate` (ignored; run it only when adding a new version's fixtures:
//! `cargo test -p sylva --test fixtures_v2 -- --ignored regenerate`).

mod fixture_pages;

use std::path::{Path, PathBuf};

use sylva::io::{decode_meta_page, PageFile};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The owner's area: fills the meta page (4096 − 80 bytes).
fn owner_area() -> Vec<u8> {
    let mut user = b"fixture meta v2".to_vec();
    user.resize(4096 - 80, b'.');
    user
}

const FREED: [u64; 3] = [3, 6, 7];

#[test]
#[ignore = "writes the fixture; run only when adding a format version"]
fn regenerate() {
    let path = fixture("pages-v2.db");
    let _ = std::fs::remove_file(&path);
    let file = PageFile::create(&path, 4096, false).expect("create");
    fixture_pages::write(&file, 8);
    for id in FREED {
        file.free(id).expect("free");
    }
    file.checkpoint(&owner_area()).expect("checkpoint");
}

#[test]
fn page_file_v2_opens_with_its_pages_and_free_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("pages-v2.db");
    std::fs::copy(fixture("pages-v2.db"), &p).expect("copy fixture");
    let bytes = std::fs::read(&p).expect("read");
    let meta = (0..2)
        .filter_map(|s| decode_meta_page(&bytes[s * 4096..(s + 1) * 4096]).ok())
        .max_by_key(|m| m.sequence)
        .expect("a meta page");
    assert_eq!(meta.version, 2);
    assert!(
        meta.inline.is_empty() && meta.entries == 1 && meta.chain_head != 0,
        "the directory is in an overflow page: {meta:?}"
    );
    let (file, meta) = PageFile::open(&p, false).expect("open v2 page file");
    assert_eq!(meta.user, owner_area());
    // A region page and an overflow page; the pages in use are the 8 written less the freed.
    assert_eq!(file.free_list_pages(), 2);
    assert_eq!(
        file.page_count() - 2 - file.free_pages() - file.free_list_pages(),
        8 - FREED.len() as u64
    );
    for i in 0..8u8 {
        let id = 2 + u64::from(i);
        if FREED.contains(&id) {
            assert!(file.is_free(id), "page {id} was freed");
            continue;
        }
        assert!(!file.is_free(id));
        fixture_pages::check(&file, id, i);
    }
}
