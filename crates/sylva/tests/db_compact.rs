//! `Db::compact` and the free-space figures of `Db::stats` (issue 23, "Space"): the runs of
//! deleted out-of-line values at the file's end go back to the file system, holes below pages
//! in use stay (and are counted), writers may run meanwhile, and a crash at any point of a
//! compaction (between its meta page and the truncation included) opens with nothing lost.

mod db_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use db_common::{assert_same_contents, options, tagged_value, tmp, Rng};
use sylva::io::{SimFs, SimOptions};
use sylva::{Db, DbOptions, SyncMode, DATA_FILE};

const PAGE: u64 = 4096;
/// A value of 64 KiB takes a run of 17 pages (the run's 48-byte header pushes it past 16).
const BIG: usize = 64 << 10;
const RUN_PAGES: u64 = 17;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn big_key(i: u64) -> Vec<u8> {
    format!("big{i:04}").into_bytes()
}

fn small_key(i: u64) -> Vec<u8> {
    format!("small{i:05}").into_bytes()
}

/// 300 small records, then `n` values of 64 KiB, whose runs lie at the file's end, checkpointed.
fn fill(db: &Db, n: u64, want: &mut Model) {
    for i in 0..300 {
        let (k, v) = (small_key(i), tagged_value(&small_key(i), i, 40));
        db.put(&k, &v).expect("put small");
        want.insert(k, v);
    }
    for i in 0..n {
        let (k, v) = (big_key(i), tagged_value(&big_key(i), i, BIG));
        db.put(&k, &v).expect("put big");
        want.insert(k, v);
    }
    // The run cache keeps the last runs in memory; a checkpoint puts them in the file.
    db.checkpoint().expect("checkpoint");
}

fn file_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(DATA_FILE))
        .expect("data file")
        .len()
}

#[test]
fn compact_gives_the_runs_at_the_files_end_back() {
    let dir = tmp();
    let opts = options(SyncMode::Never, 64);
    let mut want = Model::new();
    let n = 24;
    let db = Db::open(dir.path(), opts).expect("open");
    fill(&db, n, &mut want);
    let s = db.stats();
    assert_eq!(s.overflow_values, n);
    assert_eq!(s.overflow_pages, n * RUN_PAGES);
    assert_eq!(s.overflow_run_bytes(), n * RUN_PAGES * PAGE);
    for i in 0..n {
        assert!(db.delete(&big_key(i)).expect("delete"));
        want.remove(&big_key(i));
    }
    let before = db.stats();
    assert!(
        before.free_pages >= n * RUN_PAGES && before.free_pages_at_end >= n * RUN_PAGES,
        "the deleted runs wait for a checkpoint, and are counted free: {before:?}"
    );
    let r = db.compact().expect("compact");
    assert!(r.bytes_before >= n * RUN_PAGES * PAGE, "{r:?}");
    assert!(
        r.bytes_returned() >= (n * RUN_PAGES - 2) * PAGE,
        "every run's pages but the free space's own go back: {r:?}"
    );
    assert_eq!(file_len(dir.path()), r.bytes_after, "{r:?}");
    let s = db.stats();
    assert_eq!(s.file_bytes, r.bytes_after);
    assert_eq!(s.file_pages * PAGE, r.bytes_after, "{s:?}");
    assert!(s.free_pages_at_end <= 2, "{s:?}");
    assert_same_contents(&db, &want, "after compact");
    db.close().expect("close");

    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
    assert!(file_len(dir.path()) <= r.bytes_after + PAGE);
    // The file grows again from its new end.
    let (k, v) = (big_key(999), tagged_value(&big_key(999), 999, BIG));
    db.put(&k, &v).expect("put");
    want.insert(k, v);
    assert_same_contents(&db, &want, "grown again");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "grown again, reopened");
}

#[test]
fn stats_count_free_extents_and_compact_leaves_the_holes() {
    let dir = tmp();
    let mut want = Model::new();
    let n = 16;
    let db = Db::open(dir.path(), options(SyncMode::Never, 64)).expect("open");
    fill(&db, n, &mut want);
    // Every other run: holes of 17 pages between runs in use, and the last run at the end.
    for i in (1..n).step_by(2) {
        db.delete(&big_key(i)).expect("delete");
        want.remove(&big_key(i));
    }
    db.checkpoint().expect("checkpoint");
    let s = db.stats();
    assert!(s.free_extents >= n / 2, "{s:?}");
    assert!(s.largest_free_extent >= RUN_PAGES, "{s:?}");
    assert!(s.free_pages_at_end >= RUN_PAGES, "{s:?}");
    assert_eq!(s.free_bytes(), s.free_pages * PAGE);
    let r = db.compact().expect("compact");
    assert!(r.bytes_returned() >= (RUN_PAGES - 2) * PAGE, "{r:?}");
    assert!(
        r.free_pages_left >= (n / 2 - 1) * RUN_PAGES - 2,
        "holes below runs in use stay (less the free space's own pages): {r:?}"
    );
    let after = db.stats();
    assert!(after.free_extents >= n / 2 - 1, "{after:?}");
    assert_same_contents(&db, &want, "after compact");
    // Holes are reused before the file grows.
    let len = file_len(dir.path());
    let (k, v) = (big_key(1), tagged_value(&big_key(1), 7, BIG));
    db.put(&k, &v).expect("put");
    want.insert(k, v);
    db.checkpoint().expect("checkpoint");
    assert!(
        file_len(dir.path()) <= len + 2 * PAGE,
        "a hole took the run"
    );
    assert_same_contents(&db, &want, "hole reused");
}

#[test]
fn compact_on_a_new_or_compacted_database_changes_nothing() {
    let dir = tmp();
    let opts = options(SyncMode::Never, 64);
    let db = Db::open(dir.path(), opts).expect("open");
    let len = file_len(dir.path());
    let r = db.compact().expect("compact");
    assert_eq!((r.bytes_before, r.bytes_after), (len, len), "{r:?}");
    assert_eq!(r.checkpoints, 1, "nothing free at the end: one checkpoint");
    assert_same_contents(&db, &Model::new(), "new");
    db.close().expect("close");

    let db = Db::open(dir.path(), opts).expect("reopen");
    let mut want = Model::new();
    fill(&db, 6, &mut want);
    for i in 0..6 {
        db.delete(&big_key(i)).expect("delete");
        want.remove(&big_key(i));
    }
    let first = db.compact().expect("compact");
    assert!(first.bytes_returned() > 0, "{first:?}");
    let again = db.compact().expect("compact again");
    assert_eq!(again.bytes_before, again.bytes_after, "{again:?}");
    assert_eq!(again.bytes_after, first.bytes_after, "{again:?}");
    assert_same_contents(&db, &want, "compacted twice");
}

/// Two writers put, overwrite and delete values small and large (their own keys each, checked
/// against their own models as they go) and a reader reads the first writer's keys, while the
/// main thread compacts again and again.
#[test]
fn compact_while_two_writers_run() {
    let dir = tmp();
    let opts = DbOptions {
        sync: SyncMode::Never,
        cache_bytes: 256 * PAGE,
        direct_io: false,
        ..DbOptions::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let done = AtomicBool::new(false);
    let models: Vec<Model> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let mut rng = Rng::new(t + 11);
                    let mut model = Model::new();
                    for op in 0..1500u64 {
                        let k = format!("w{t}-{:03}", rng.below(60)).into_bytes();
                        match rng.below(10) {
                            0..=2 => {
                                db.delete(&k).expect("delete");
                                model.remove(&k);
                            }
                            r => {
                                let len = if r < 6 {
                                    30
                                } else {
                                    1000 + 6000 * (r as usize - 5)
                                };
                                let v = tagged_value(&k, op, len);
                                db.put(&k, &v).expect("put");
                                model.insert(k.clone(), v);
                            }
                        }
                        if op % 50 == 0 {
                            let k = format!("w{t}-{:03}", rng.below(60)).into_bytes();
                            assert_eq!(db.get(&k).expect("get").as_ref(), model.get(&k));
                        }
                    }
                    model
                })
            })
            .collect();
        let reader = {
            let (db, done) = (&db, &done);
            s.spawn(move || {
                let mut rng = Rng::new(99);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let k = format!("w0-{:03}", rng.below(60)).into_bytes();
                    if let Some(v) = db.get(&k).expect("a read racing a compaction") {
                        assert!(v.starts_with(&k), "a value of another key under {k:?}");
                    }
                    reads += 1;
                }
                reads
            })
        };
        let mut compactions = 0;
        while writers.iter().any(|w| !w.is_finished()) || compactions < 3 {
            db.compact().expect("compact while writers run");
            compactions += 1;
        }
        let models = writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect();
        done.store(true, Ordering::Release);
        assert!(reader.join().expect("reader") > 0);
        models
    });
    let want: Model = models.into_iter().flatten().collect();
    assert_same_contents(&db, &want, "after the writers");
    let r = db.compact().expect("compact");
    assert_eq!(file_len(dir.path()), r.bytes_after);
    assert_same_contents(&db, &want, "compacted once more");
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    assert_same_contents(&db, &want, "reopened");
}

fn sim_options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 * PAGE,
        background: false,
        ..DbOptions::default()
    }
}

/// On a simulated disk: small records and large values, the large ones deleted (acknowledged,
/// under `SyncMode::Always`), ready to compact.
fn sim_setup(fs: &SimFs, dir: &Path) -> (Db, Model) {
    let db = Db::open_in(fs, dir, sim_options()).expect("open");
    let mut want = Model::new();
    fill(&db, 8, &mut want);
    for i in 0..8 {
        db.delete(&big_key(i)).expect("delete");
        want.remove(&big_key(i));
    }
    (db, want)
}

/// A power loss at every change a compaction makes to the simulated disk (before, between and
/// after its checkpoints' meta pages and its truncation), with the unsynced changes lost, kept
/// or torn: the database opens, holds exactly the acknowledged records, and passes `check`;
/// a compaction then gives the space back.
#[test]
fn a_crash_at_any_point_of_a_compaction_loses_nothing() {
    let dir = Path::new("/db");
    let (changes, compacted) = {
        let fs = SimFs::new(SimOptions::default());
        let (db, _) = sim_setup(&fs, dir);
        let before = fs.changes();
        let r = db.compact().expect("compact");
        assert!(r.bytes_returned() >= (8 * RUN_PAGES - 2) * PAGE, "{r:?}");
        (fs.changes() - before, r.bytes_after)
    };
    assert!(changes > 4, "{changes} changes");
    for at in 0..=changes {
        for loss in 0..3u64 {
            let fs = SimFs::new(SimOptions::default());
            let (db, want) = sim_setup(&fs, dir);
            fs.crash_after(at);
            let r = db.compact();
            assert_eq!(
                r.is_ok(),
                at >= changes,
                "crash after {at} of {changes} changes"
            );
            db.simulate_crash();
            match loss {
                0 => fs.reboot_losing_unsynced(),
                1 => fs.reboot_keeping_unsynced(),
                seed => fs.reboot(at * 31 + seed),
            }
            let what = format!("crash after {at} of {changes} changes, loss {loss}");
            let db = Db::open_in(&fs, dir, sim_options())
                .unwrap_or_else(|e| panic!("{what}: open: {e}"));
            assert_same_contents(&db, &want, &what);
            let r = db.compact().expect("compact after the crash");
            let len = fs.read_file(&dir.join(DATA_FILE)).expect("data file").len() as u64;
            assert_eq!(len, r.bytes_after, "{what}");
            assert!(
                r.bytes_after <= compacted + 2 * PAGE,
                "{what}: the runs are given back ({compacted} bytes without a crash): {r:?}"
            );
            assert_same_contents(&db, &want, &format!("{what}, compacted again"));
        }
    }
}

/// A page file longer than its meta page's page count (a crash after the meta page, before
/// the truncation reached the disk) opens, and the next compaction cuts the extra bytes.
#[test]
fn a_file_longer_than_its_page_count_opens_and_is_cut_by_compact() {
    let fs = SimFs::new(SimOptions::default());
    let dir = Path::new("/db");
    let (db, want) = sim_setup(&fs, dir);
    let r = db.compact().expect("compact");
    db.close().expect("close");
    let data = dir.join(DATA_FILE);
    let mut image = fs.read_file(&data).expect("data file");
    assert_eq!(image.len() as u64, r.bytes_after);
    // Five pages of leftovers past the end, as an old run's pages would be.
    image.extend(std::iter::repeat_n(0xA5u8, 5 * PAGE as usize));
    fs.write_file(&data, &image).expect("extend");
    let db = Db::open_in(&fs, dir, sim_options()).expect("open a longer file");
    assert_same_contents(&db, &want, "longer file");
    assert_eq!(db.stats().file_bytes, r.bytes_after + 5 * PAGE);
    let again = db.compact().expect("compact");
    assert_eq!(
        (again.bytes_before, again.bytes_after),
        (r.bytes_after + 5 * PAGE, r.bytes_after)
    );
    assert_same_contents(&db, &want, "cut");
}
