//! Files written by format version 1, checked in under `tests/fixtures/`, must keep opening with
//! the same contents; their deliberately damaged copies must give clear errors. A format change
//! that breaks these is a version bump (see docs/format.md), not a fixture update.
//!
//! The fixtures were written by `regenerate` (ignored; run it only when adding a new version's
//! fixtures: `cargo test -p sylva --test fixtures_v1 -- --ignored regenerate`).

mod fixture_pages;

use std::path::{Path, PathBuf};

use sylva::io::page_header::PageKind;
use sylva::io::{decode_meta_page, FileIo, MetaPage, PageFile, FIRST_DATA_PAGE};
use sylva::wal::Wal;
use sylva::Error;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Copies a fixture to a temporary directory (opening may repair a torn tail in place).
fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join(name);
    std::fs::copy(fixture(name), &p).expect("copy fixture");
    (dir, p)
}

fn wal_payload(i: u64) -> Vec<u8> {
    format!("fixture record {i}").into_bytes()
}

#[test]
#[ignore = "writes the fixtures; run only when adding a format version"]
fn regenerate() {
    let dir = fixture("");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let wal_path = dir.join("wal-v1.log");
    let _ = std::fs::remove_file(&wal_path);
    let (wal, _) =
        Wal::open(Box::new(FileIo::open(&wal_path, true).expect("open")), 1).expect("wal");
    for i in 1..=20 {
        let lsn = wal.append(&wal_payload(i)).expect("append");
        wal.sync_to(lsn).expect("sync");
    }
    drop(wal);
    let mut bytes = std::fs::read(&wal_path).expect("read");
    bytes.truncate(bytes.len() - 5);
    std::fs::write(dir.join("wal-v1-torn.log"), &bytes).expect("write torn");

    let pages_path = dir.join("pages-v1.db");
    let _ = std::fs::remove_file(&pages_path);
    let file = PageFile::create(&pages_path, 4096, false).expect("create");
    fixture_pages::write(&file, 4);
    file.free(3).expect("free");
    file.checkpoint(b"fixture meta v1").expect("checkpoint");
    drop(file);
    let mut bytes = std::fs::read(&pages_path).expect("read");
    bytes[2 * 4096 + 70] ^= 0x10;
    std::fs::write(dir.join("pages-v1-bitflip.db"), &bytes).expect("write corrupt");
}

#[test]
fn wal_v1_opens_with_its_records() {
    let (_d, p) = scratch("wal-v1.log");
    let (wal, rec) =
        Wal::open(Box::new(FileIo::open(&p, false).expect("open")), 1).expect("open v1 log");
    assert_eq!(rec.cut_bytes, 0);
    let records = wal.recovered_records().expect("replay");
    assert_eq!(records.len(), 20);
    for (i, (lsn, payload)) in records.iter().enumerate() {
        assert_eq!(
            (*lsn, payload.clone()),
            (i as u64 + 1, wal_payload(i as u64 + 1))
        );
    }
    assert_eq!(wal.next_lsn(), 21);
}

#[test]
fn wal_v1_with_a_torn_tail_loses_only_the_torn_record() {
    let (_d, p) = scratch("wal-v1-torn.log");
    let (wal, rec) =
        Wal::open(Box::new(FileIo::open(&p, false).expect("open")), 1).expect("open torn log");
    assert_eq!(wal.recovered_records().expect("replay").len(), 19);
    assert!(rec.cut_bytes > 0);
}

#[test]
fn page_file_v1_opens_with_its_pages() {
    let (_d, p) = scratch("pages-v1.db");
    let (file, meta) = PageFile::open(&p, false).expect("open v1 page file");
    assert_eq!(meta.user, b"fixture meta v1");
    assert_eq!(file.page_size(), 4096);
    assert_eq!(file.free_pages() + file.free_list_pages(), 1);
    for (id, i) in [(2u64, 0u8), (4, 2), (5, 3)] {
        fixture_pages::check(&file, id, i);
    }
}

#[test]
fn page_file_v1_with_a_flipped_bit_reports_that_page() {
    let (_d, p) = scratch("pages-v1-bitflip.db");
    let (file, _) = PageFile::open(&p, false).expect("the meta pages are intact");
    let mut buf = file.buffer(1);
    match file.read_page(2, &mut buf, PageKind::BTreeLeaf) {
        Err(Error::ChecksumMismatch {
            page: 2,
            expected,
            got,
        }) => assert_ne!(expected, got),
        other => panic!("expected a checksum mismatch on page 2, got {other:?}"),
    }
    file.read_page(4, &mut buf, PageKind::BTreeLeaf)
        .expect("other pages are fine");
}

/// The page format version and sequence of a page file's newest meta page (4 KiB pages).
fn newest_meta_version(path: &Path) -> u16 {
    let bytes = std::fs::read(path).expect("read");
    let metas: Vec<MetaPage> = (0..2)
        .filter_map(|slot| decode_meta_page(&bytes[slot * 4096..(slot + 1) * 4096]).ok())
        .collect();
    metas
        .iter()
        .max_by_key(|m| m.sequence)
        .expect("a meta page")
        .version
}

/// A version 1 page file is upgraded by its first checkpoint: the free list's page becomes free,
/// the free space is written as region bitmaps under a version 2 meta page, and the pages keep
/// their contents.
#[test]
fn page_file_v1_is_upgraded_to_version_2_at_its_first_checkpoint() {
    let (_d, p) = scratch("pages-v1.db");
    assert_eq!(newest_meta_version(&p), 1, "the fixture is version 1");
    let (file, _) = PageFile::open(&p, false).expect("open v1 page file");
    let mut buf = file.buffer(1);
    let new = file.allocate();
    buf.fill(0);
    buf[64..73].copy_from_slice(b"upgraded!");
    file.write_page(new, &mut buf, PageKind::BTreeLeaf, 200)
        .expect("write");
    file.free(4).expect("free page 4");
    file.checkpoint(b"fixture meta v2").expect("checkpoint");
    drop(file);
    assert_eq!(newest_meta_version(&p), 2, "the checkpoint wrote version 2");

    let (file, meta) = PageFile::open(&p, false).expect("reopen");
    assert_eq!(meta.user, b"fixture meta v2");
    for (id, i) in [(2u64, 0u8), (5, 3)] {
        fixture_pages::check(&file, id, i);
    }
    assert_eq!(
        file.read_page(new, &mut buf, PageKind::BTreeLeaf)
            .expect("read"),
        200
    );
    assert_eq!(&buf[64..73], b"upgraded!");
    assert!(file.is_free(4), "page 4 was freed");
    assert!(!file.is_free(2) && !file.is_free(5) && !file.is_free(new));
    // Pages 2..6 and the new one: every other page is free or holds the free space.
    assert_eq!(
        file.page_count() - FIRST_DATA_PAGE - file.free_pages() - file.free_list_pages(),
        3
    );
}
