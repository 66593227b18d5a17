//! The registry of page kinds (`sylva::io::page_header::PageKind`, docs/format.md "Page kinds"):
//! every kind registered is in use by an engine of this build (none is reserved any longer); a
//! `Db` tree page resealed as a kind another engine (or `Db`'s out-of-line values) owns is
//! refused by every reader with an error, never read as a tree node and never a panic; and the
//! table in docs/format.md lists exactly the registry.

mod db_common;

use std::path::Path;

use db_common::ordered_key;
use sylva::io::page_header::{lsn, seal, PageKind, PAGE_MAGIC};
use sylva::io::{FileIo, PageFile};
use sylva::{Db, DbOptions, Error, SyncMode};

const PAGE_SIZE: usize = 4096;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 * PAGE_SIZE as u64,
        page_size: PAGE_SIZE,
        direct_io: false,
        background: false,
        ..DbOptions::default()
    }
}

/// Whether `e` is a corruption error about the page's kind (naming it, by name or number).
fn names_kind(e: &Error, kind: PageKind) -> bool {
    matches!(e, Error::Corruption { detail, .. }
        if detail.contains(&format!("{kind:?}")) || detail.contains(&format!("kind {}", kind as u8)))
}

#[test]
fn a_db_page_resealed_as_another_engines_kind_is_refused() {
    let reserved: Vec<_> = PageKind::ALL
        .into_iter()
        .filter(|k| k.is_reserved())
        .collect();
    assert_eq!(
        reserved.len(),
        0,
        "out-of-line values, TreeLine's and the NB-tree's kinds are all in use"
    );
    // Kinds of pages a tree never points at: each must be refused where a tree node is read.
    let foreign = [
        PageKind::OverflowValue,
        PageKind::SegmentPage,
        PageKind::SegmentOverflow,
        PageKind::DTreeLeaf,
        PageKind::DTreeInner,
        PageKind::Bloom,
        PageKind::Manifest,
    ];
    let data = std::fs::read(fixture("db-v1").join("data.sylva")).expect("read the fixture");
    let leaves: Vec<usize> = data
        .chunks(PAGE_SIZE)
        .enumerate()
        .filter(|(_, p)| &p[0..4] == PAGE_MAGIC && p[6] == PageKind::BTreeLeaf as u8)
        .map(|(id, _)| id)
        .collect();
    assert!(leaves.len() > 4, "db-v1 has leaves: {leaves:?}");
    for (i, kind) in foreign.into_iter().enumerate() {
        // A different leaf for each kind; every leaf of db-v1 is in use.
        let id = leaves[i % leaves.len()];
        let mut damaged = data.clone();
        let page = &mut damaged[id * PAGE_SIZE..(id + 1) * PAGE_SIZE];
        let at = lsn(page);
        seal(page, kind, id as u64, at);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("data.sylva"), &damaged).expect("write");
        std::fs::copy(fixture("db-v1").join("wal.log"), dir.path().join("wal.log")).expect("copy");

        // The page file's reader.
        let (file, _) = PageFile::open_io(
            Box::new(FileIo::open(&dir.path().join("data.sylva"), false).expect("open")),
            false,
        )
        .expect("the page file opens");
        let mut buf = file.buffer(1);
        let err = file
            .read_page(id as u64, &mut buf, PageKind::BTreeLeaf)
            .expect_err("another kind read as a leaf");
        assert!(names_kind(&err, kind), "{kind:?}: {err:?}");
        drop(file);

        // The database's: every read either right or refused naming the kind, at least one
        // refused, and `check` refuses.
        // db-v1's log is empty: open reads the inner nodes, no leaf.
        let db = Db::open(dir.path(), options()).expect("open");
        let mut refused = 0;
        for n in 0..800 {
            match db.get(&ordered_key(n)) {
                Ok(_) => {}
                Err(e) => {
                    assert!(names_kind(&e, kind), "{kind:?}: get gave {e:?}");
                    refused += 1;
                }
            }
        }
        assert!(refused > 0, "{kind:?}: no read met page {id}");
        let err = db.check().expect_err("check passed");
        assert!(names_kind(&err, kind), "{kind:?}: check gave {err:?}");
        db.simulate_crash();
    }
}

#[test]
fn docs_format_lists_every_page_kind_with_its_number_and_state() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/format.md"))
            .expect("read docs/format.md");
    let section = doc
        .split("### Page kinds")
        .nth(1)
        .expect("docs/format.md has a \"Page kinds\" section");
    // Table rows: `| number | name | owner | state | ... |`.
    let rows: Vec<(u8, String, String)> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((
                cells.get(1)?.parse().ok()?,
                cells.get(2)?.trim_matches('`').to_string(),
                cells.get(4)?.to_string(),
            ))
        })
        .collect();
    let want: Vec<(u8, String, String)> = PageKind::ALL
        .into_iter()
        .map(|k| {
            let state = if k.is_reserved() {
                "reserved"
            } else {
                "in use"
            };
            (k as u8, format!("{k:?}"), state.to_string())
        })
        .collect();
    assert_eq!(
        rows, want,
        "docs/format.md's page-kind table against the registry"
    );
}
