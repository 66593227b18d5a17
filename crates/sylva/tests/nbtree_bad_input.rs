//! Bad input to the NB-tree is a clear error, never a panic: options out of range, oversized
//! keys and values, another engine's directory, a locked directory, damaged pages.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Seek, SeekFrom, Write};

use sylva::{Db, DbOptions, Error, NbTree, NbTreeOptions, SyncMode};

fn options() -> NbTreeOptions {
    NbTreeOptions {
        sync: SyncMode::Never,
        sigma: Some(64 << 10),
        fanout: 3,
        deamortize: false,
        ..NbTreeOptions::default()
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

fn limit_of(e: Error) -> usize {
    match e {
        Error::InvalidArgument { limit, .. } => limit,
        e => panic!("expected InvalidArgument, got {e:?}"),
    }
}

#[test]
fn options_out_of_range_are_invalid_arguments_with_the_limit() {
    let dir = tmp();
    let open = |o: NbTreeOptions| NbTree::open(dir.path().join("nb"), o).err().unwrap();
    assert_eq!(
        limit_of(open(NbTreeOptions {
            fanout: 2,
            ..options()
        })),
        3
    );
    assert_eq!(
        limit_of(open(NbTreeOptions {
            sigma: Some(4096),
            ..options()
        })),
        16 * 4096
    );
    assert_eq!(
        limit_of(open(NbTreeOptions {
            fanout: 8,
            sigma: Some(16 * 4096),
            ..options()
        })),
        32 * 4096
    );
    assert_eq!(
        limit_of(open(NbTreeOptions {
            bloom_bits: 33,
            ..options()
        })),
        32
    );
}

#[test]
fn keys_and_values_outside_the_limits_are_refused() {
    let dir = tmp();
    let nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    let l = nb.limits();
    assert!(matches!(
        nb.put(b"", b"v"),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        limit_of(nb.put(&vec![1; l.max_key + 1], b"v").unwrap_err()),
        l.max_key
    );
    assert_eq!(
        limit_of(nb.put(b"k", &vec![1; l.max_value + 1]).unwrap_err()),
        l.max_value
    );
    assert_eq!(
        limit_of(nb.get(&vec![1; l.max_key + 1]).unwrap_err()),
        l.max_key
    );
    // The largest record fits a d-tree leaf: written, moved down, read back.
    nb.put(&vec![9; l.max_key], &vec![8; l.max_value]).unwrap();
    for i in 0..2000u32 {
        nb.put(&i.to_be_bytes(), &[1; 100]).unwrap();
    }
    nb.checkpoint().unwrap();
    assert_eq!(
        nb.get(&vec![9; l.max_key]).unwrap(),
        Some(vec![8; l.max_value])
    );
    nb.check().unwrap();
}

#[test]
fn a_db_directory_is_not_an_nbtree_and_the_other_way_round() {
    let dir = tmp();
    let db_dir = dir.path().join("db");
    Db::open(&db_dir, DbOptions::default())
        .unwrap()
        .close()
        .unwrap();
    let e = NbTree::open(&db_dir, options()).err().unwrap();
    assert!(matches!(e, Error::NotSylva { .. }), "{e:?}");
    let nb_dir = dir.path().join("nb");
    NbTree::open(&nb_dir, options()).unwrap().close().unwrap();
    let e = Db::open(&nb_dir, DbOptions::default()).err().unwrap();
    assert!(matches!(e, Error::NotSylva { .. }), "{e:?}");
    // And an NB-tree holding data still opens afterwards.
    NbTree::open(&nb_dir, options()).unwrap();
}

#[test]
fn an_open_store_is_locked() {
    let dir = tmp();
    let _nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    let e = NbTree::open(dir.path().join("nb"), options())
        .err()
        .unwrap();
    assert!(matches!(e, Error::Locked { .. }), "{e:?}");
}

#[test]
fn the_stored_fanout_and_sigma_win_at_reopen() {
    let dir = tmp();
    let nb = NbTree::open(dir.path().join("nb"), options()).unwrap();
    nb.put(b"k", b"v").unwrap();
    nb.close().unwrap();
    let other = NbTreeOptions {
        fanout: 7,
        sigma: Some(1 << 20),
        bloom_bits: 4,
        ..options()
    };
    let nb = NbTree::open(dir.path().join("nb"), other).unwrap();
    let o = nb.options();
    assert_eq!((o.fanout, o.sigma, o.bloom_bits), (3, Some(64 << 10), 10));
    assert_eq!(nb.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Flips one byte in every page of the data file whose kind byte is `kind`, after the header.
fn damage_pages_of_kind(path: &std::path::Path, kind: u8) -> usize {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).unwrap();
    let mut n = 0;
    for (i, page) in bytes.chunks(4096).enumerate() {
        if page.len() == 4096 && &page[0..4] == b"SYpg" && page[6] == kind {
            let at = i as u64 * 4096 + 100;
            f.seek(SeekFrom::Start(at)).unwrap();
            f.write_all(&[page[100] ^ 0x5a]).unwrap();
            n += 1;
        }
    }
    n
}

fn filled(dir: &std::path::Path) {
    let nb = NbTree::open(dir, options()).unwrap();
    for i in 0..3000u32 {
        nb.put(&i.to_be_bytes(), &[3; 100]).unwrap();
    }
    nb.close().unwrap();
}

#[test]
fn a_damaged_d_tree_leaf_is_a_checksum_error_not_a_panic_or_a_wrong_answer() {
    let dir = tmp();
    let path = dir.path().join("nb");
    filled(&path);
    assert!(damage_pages_of_kind(&path.join("data.sylva"), 32) > 0);
    let nb = NbTree::open(&path, options()).unwrap();
    let mut errors = 0;
    for i in 0..3000u32 {
        match nb.get(&i.to_be_bytes()) {
            Ok(v) => assert_eq!(v, Some(vec![3; 100])),
            Err(Error::ChecksumMismatch { .. }) => errors += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(errors > 0);
    assert!(nb.check().is_err());
}

#[test]
fn a_damaged_manifest_or_inner_page_refuses_to_open() {
    for kind in [33u8, 35] {
        let dir = tmp();
        let path = dir.path().join("nb");
        filled(&path);
        assert!(
            damage_pages_of_kind(&path.join("data.sylva"), kind) > 0,
            "kind {kind}"
        );
        let e = NbTree::open(&path, options()).err().unwrap();
        assert!(
            matches!(e, Error::ChecksumMismatch { .. } | Error::Corruption { .. }),
            "kind {kind}: {e:?}"
        );
    }
}
