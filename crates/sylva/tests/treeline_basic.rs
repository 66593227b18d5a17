//! TreeLine scenarios: bad input is an error (never a panic), reorganizations build grouped
//! segments (or single pages without grouping) and keep every record findable, a flush writes
//! a page once for all its dirty entries, the record count stays exact through deletes of
//! uncached keys and reopens, and damage on disk is a checksum error.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use sylva::io::PageFile;
use sylva::{Db, DbOptions, Error, KvStore, SyncMode, TreeLine, TreeLineOptions};

fn tmp() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// A small cache (a few hundred 64-byte records), goal 4, epsilon 2: reorganizations often.
fn small(grouping: bool) -> TreeLineOptions {
    let mut o = TreeLineOptions {
        sync: SyncMode::Never,
        goal: 4,
        epsilon: 2,
        grouping,
        direct_io: false,
        background: false,
        forecast: false,
        bins: 64,
        epoch_inserts: 500,
        ..TreeLineOptions::default()
    };
    o.set("cache_records", "300").unwrap();
    // The fixed part of the budget on top, and the record cache's arena slack (256 KiB).
    o.cache_bytes +=
        (8 << 20) + 8192 + (4 << 20) + 2 * 64 * 16 + 2 * 10 * 64 * 8 + 1024 + (256 << 10);
    o
}

fn counter(db: &TreeLine, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|c| c.1)
        .unwrap()
}

fn key(i: u64) -> [u8; 8] {
    // Spread over the key space, not dense: the models must fit real gaps.
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

#[test]
fn bad_input_is_invalid_argument() {
    let dir = tmp();
    let db = TreeLine::open(dir.path().join("tl"), small(true)).unwrap();
    let invalid = |r: sylva::Result<()>, what: &str| {
        assert!(
            matches!(r, Err(Error::InvalidArgument { .. })),
            "{what}: {r:?}"
        );
    };
    invalid(db.put(b"", b"v"), "empty key");
    invalid(db.put(&[7u8; 257], b"v"), "a 257-byte key");
    invalid(
        db.put(b"k", &vec![0u8; 1017]),
        "a value past a quarter page less 8",
    );
    invalid(db.get(&[1u8; 300]).map(drop), "a long key on get");
    invalid(db.delete(b"").map(drop), "empty key on delete");
    db.put(&[7u8; 256], &vec![1u8; 1016]).unwrap();
    assert_eq!(db.get(&[7u8; 256]).unwrap().unwrap().len(), 1016);
    // A scan may start anywhere, however long the start.
    let mut n = 0;
    KvStore::scan(&db, &[6u8; 1000], 10, &mut |_, _| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(
        n, 1,
        "the 256-byte key follows a 1,000-byte start of smaller bytes"
    );
    db.close().unwrap();
    for (k, v) in [("goal", "0"), ("epsilon", "0"), ("page_size", "5000")] {
        let mut o = small(true);
        o.set(k, v).unwrap();
        let r = TreeLine::open(dir.path().join(format!("bad-{k}")), o);
        assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{k}={v}");
    }
}

#[test]
fn other_engines_directories_newer_versions_and_a_second_opener_are_refused() {
    let dir = tmp();
    let db_dir = dir.path().join("db");
    Db::open(
        &db_dir,
        DbOptions {
            direct_io: false,
            ..DbOptions::default()
        },
    )
    .unwrap()
    .close()
    .unwrap();
    assert!(matches!(
        TreeLine::open(&db_dir, small(true)),
        Err(Error::NotSylva { .. })
    ));
    let tl_dir = dir.path().join("tl");
    let tl = TreeLine::open(&tl_dir, small(true)).unwrap();
    assert!(matches!(
        TreeLine::open(&tl_dir, small(true)),
        Err(Error::Locked { .. })
    ));
    tl.put(b"a", b"1").unwrap();
    tl.close().unwrap();
    assert!(matches!(
        Db::open(
            &tl_dir,
            DbOptions {
                direct_io: false,
                ..DbOptions::default()
            }
        ),
        Err(Error::NotSylva { .. })
    ));
    // The state's version raised to 2 in the meta page.
    let (file, meta) = PageFile::open(&tl_dir.join("data.sylva"), false).unwrap();
    let mut user = meta.user.clone();
    user[8..12].copy_from_slice(&2u32.to_le_bytes());
    file.checkpoint(&user).unwrap();
    drop(file);
    assert!(matches!(
        TreeLine::open(&tl_dir, small(true)),
        Err(Error::UnsupportedVersion { found: 2, .. })
    ));
}

#[test]
fn a_damaged_page_is_a_checksum_error_not_a_panic() {
    let dir = tmp();
    let tl_dir = dir.path().join("tl");
    let db = TreeLine::open(&tl_dir, small(true)).unwrap();
    for i in 0..3000 {
        db.put(&key(i), &[i as u8; 56]).unwrap();
    }
    db.close().unwrap();
    let path = tl_dir.join("data.sylva");
    let mut bytes = std::fs::read(&path).unwrap();
    // Flip a byte in the body of every data page in turn would take long: flip the first page
    // that starts a live segment (page 2 onwards, kind 16, offset 0, a production ID that is not
    // 0). A segment's other pages keep their ID when it is invalidated and freed, and a free
    // page that does not verify is what a crash can leave, not damage.
    let ps = 4096;
    let victim = (2..bytes.len() / ps)
        .find(|&p| {
            bytes[p * ps + 6] == 16
                && bytes[p * ps + 32..p * ps + 40] != [0; 8]
                && bytes[p * ps + 40..p * ps + 42] == [0; 2]
        })
        .unwrap();
    bytes[victim * ps + 2000] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    match TreeLine::open(&tl_dir, small(true)) {
        Err(Error::ChecksumMismatch { page, .. }) => assert_eq!(page, victim as u64),
        Err(e) => panic!("expected a checksum mismatch, got {e}"),
        Ok(_) => panic!("a damaged page went unnoticed"),
    }
}

/// Value length of [`load`]'s records: about 5 a page, so pages fill after a few inserts. (A
/// reorganization takes the range's dirty entries along: with 18 a page, 6,000 inserts through
/// a cache of a few hundred reorganized twice.)
const VALUE: usize = 700;

/// Loads `n` keys, deletes every third (through the cache or not), and returns the store.
fn load(dir: &Path, o: TreeLineOptions, n: u64) -> TreeLine {
    let db = TreeLine::open(dir, o).unwrap();
    for i in 0..n {
        db.put(&key(i), &[(i % 251) as u8; VALUE]).unwrap();
    }
    for i in (0..n).step_by(3) {
        assert!(db.delete(&key(i)).unwrap(), "delete {i}");
        assert!(!db.delete(&key(i)).unwrap(), "second delete {i}");
    }
    db
}

fn verify(db: &TreeLine, n: u64) {
    for i in 0..n {
        let want = (i % 3 != 0).then(|| vec![(i % 251) as u8; VALUE]);
        assert_eq!(db.get(&key(i)).unwrap(), want, "key {i}");
    }
    let live = n - n.div_ceil(3);
    assert_eq!(KvStore::stats(db).records, live);
    let mut seen = 0;
    let mut prev: Option<Vec<u8>> = None;
    KvStore::scan(db, &[], usize::MAX, &mut |k, _| {
        assert!(prev.as_deref().is_none_or(|p| p < k), "scan out of order");
        prev = Some(k.to_vec());
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, live);
    assert_eq!(db.check().unwrap().records, live);
}

#[test]
fn reorganizations_group_pages_and_every_record_is_found_through_reopens() {
    let dir = tmp();
    let n = 6000;
    let db = load(dir.path(), small(true), n);
    verify(&db, n);
    let reorgs = counter(&db, "reorganizations");
    assert!(reorgs >= 5, "{reorgs} reorganizations");
    let grouped: u64 = ["segments_2", "segments_4", "segments_8", "segments_16"]
        .iter()
        .map(|s| counter(&db, s))
        .sum();
    assert!(
        grouped > 0,
        "no multi-page segment after {reorgs} reorganizations"
    );
    assert!(
        counter(&db, "index_entries") < 6000 / 4,
        "one index entry a page or worse"
    );
    db.close().unwrap();
    let db = TreeLine::open(dir.path(), small(true)).unwrap();
    verify(&db, n);
    db.simulate_crash();
    let db = TreeLine::open(dir.path(), small(true)).unwrap();
    verify(&db, n);
}

#[test]
fn without_grouping_every_segment_is_one_page() {
    let dir = tmp();
    let n = 3000;
    let db = load(dir.path(), small(false), n);
    verify(&db, n);
    assert!(counter(&db, "reorganizations") > 10);
    assert_eq!(counter(&db, "index_entries"), counter(&db, "segments_1"));
    for s in ["segments_2", "segments_4", "segments_8", "segments_16"] {
        assert_eq!(counter(&db, s), 0, "{s}");
    }
}

#[test]
fn write_through_without_the_record_cache_keeps_nothing_cached() {
    let dir = tmp();
    let o = TreeLineOptions {
        record_cache: false,
        ..small(true)
    };
    let n = 1500;
    let db = load(dir.path(), o, n);
    assert_eq!(counter(&db, "cache_entries"), 0);
    verify(&db, n);
    assert_eq!(counter(&db, "cache_hits"), 0);
}

#[test]
fn a_flush_writes_the_page_once_for_all_its_dirty_entries() {
    let dir = tmp();
    let o = TreeLineOptions {
        cache_bytes: 64 << 20,
        ..small(true)
    };
    let db = TreeLine::open(dir.path(), o).unwrap();
    // A new store has one single-page segment: every key's page is that page.
    for i in 0..20 {
        db.put(&key(i), b"value").unwrap();
    }
    assert_eq!(counter(&db, "cache_dirty"), 20);
    let before = counter(&db, "page_writes");
    db.checkpoint().unwrap();
    assert_eq!(
        counter(&db, "page_writes") - before,
        1,
        "one write for 20 entries"
    );
    assert_eq!(counter(&db, "cache_dirty"), 0);
    assert_eq!(
        counter(&db, "cache_entries"),
        20,
        "flushed entries stay cached"
    );
    // A read miss caches the key and (prefetch) its page-mates.
    db.close().unwrap();
    let db = TreeLine::open(dir.path(), o).unwrap();
    assert_eq!(db.get(&key(3)).unwrap().unwrap(), b"value");
    assert_eq!(counter(&db, "cache_misses"), 1);
    assert_eq!(counter(&db, "cache_entries"), 20);
    assert_eq!(db.get(&key(4)).unwrap().unwrap(), b"value");
    assert_eq!(
        (counter(&db, "cache_misses"), counter(&db, "cache_hits")),
        (1, 1)
    );
}

#[test]
fn string_keys_with_a_long_shared_prefix_are_placed_and_found() {
    let dir = tmp();
    let db = TreeLine::open(dir.path(), small(true)).unwrap();
    let k = |i: u64| {
        format!(
            "https://example.org/some/long/shared/path/{:08}",
            i * 7919 % 100_003
        )
    };
    for i in 0..3000 {
        db.put(k(i).as_bytes(), &i.to_le_bytes()).unwrap();
    }
    db.checkpoint().unwrap();
    for i in 0..3000 {
        assert_eq!(
            db.get(k(i).as_bytes()).unwrap().unwrap(),
            i.to_le_bytes(),
            "{}",
            k(i)
        );
    }
    assert_eq!(db.check().unwrap().records, 3000);
    assert!(counter(&db, "reorganizations") > 0);
}

/// Insert forecasting (§4.6): with the histogram of past epochs, reorganizations leave room
/// where inserts keep coming, so a uniform insert load reorganizes less often than with the
/// goal alone (the thesis: 41% fewer, §5.5). The records are sized as the thesis's are for its
/// goal: a page holds about 12 of these 308-byte records, half again the goal of 8 (the thesis:
/// 45 of about 60). With 100-byte records a page holds 36, so the room a reorganization leaves
/// is set by the page, not the goal, and the forecast changes little (5 against 5 at 60,000
/// inserts). The counts no longer depend on the cache's hash seed: 24 against 41 here; 7 against
/// 19 at 30,000 inserts, 24 against 43 at 100,000.
#[test]
fn forecasting_leaves_room_and_saves_reorganizations() {
    let run = |forecast: bool| {
        let dir = tmp();
        let o = TreeLineOptions {
            forecast,
            goal: 8,
            epsilon: 2,
            bins: 64,
            epoch_inserts: 1000,
            forecast_epochs: 20,
            ..small(true)
        };
        let db = TreeLine::open(dir.path(), o).unwrap();
        for i in 0..60_000 {
            db.put(&key(i), &[1u8; 300]).unwrap();
        }
        assert_eq!(db.check().unwrap().records, 60_000);
        (
            counter(&db, "reorganizations"),
            counter(&db, "forecast_epochs_done"),
        )
    };
    let (with, epochs) = run(true);
    let (without, _) = run(false);
    eprintln!("{with} reorganizations with forecasting, {without} without, {epochs} epochs");
    assert!(epochs >= 10, "{epochs} epochs counted");
    assert!(
        with * 10 < without * 8,
        "{with} reorganizations with forecasting, {without} without"
    );
}
