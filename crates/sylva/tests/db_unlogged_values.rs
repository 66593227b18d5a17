//! Out-of-line values their log records do not carry (issue 23, `db/overflow.rs`, "Writing";
//! `db/runcache.rs`, "Values the log does not carry"): a value longer than
//! `DbOptions::logged_value_max` waits in the run cache, and the log's next sync writes its run
//! and syncs the page file before it makes the record durable. Recovery checks the runs of
//! records the crash may have left unsynced and ends the log before the first whose run is not
//! in the file.

use std::path::Path;

use sylva::io::{SimFs, SimOptions};
use sylva::{Db, DbOptions, SyncMode};

fn options(sync: SyncMode) -> DbOptions {
    DbOptions {
        sync,
        cache_bytes: 64 << 20,
        checkpoint_bytes: 1 << 40,
        background: false,
        ..DbOptions::default()
    }
}

fn big(n: u32) -> Vec<u8> {
    let len = 100_000 + n as usize * 10_007;
    (0..len)
        .map(|i| (i as u32 ^ n.wrapping_mul(0x9E37)) as u8)
        .collect()
}

fn small_key(i: u32) -> Vec<u8> {
    format!("small{i:05}").into_bytes()
}

fn small(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 200]
}

/// Under `Always` every put returns durable: its run was written and the page file synced by
/// the commit's log sync, so a power loss dropping every unsynced write keeps them all.
#[test]
fn always_puts_of_unlogged_values_survive_a_power_loss() {
    let dir = Path::new("/db");
    let fs = SimFs::new(SimOptions::default());
    let db = Db::open_in(&fs, dir, options(SyncMode::Always)).expect("open");
    assert!(
        big(0).len() > db.options().logged_value_max,
        "values the log does not carry"
    );
    for n in 0..24 {
        db.put(format!("big{n:02}").as_bytes(), &big(n))
            .expect("put");
        if n % 3 == 2 {
            // Overwrites and deletes free runs the cache may not have written yet.
            db.put(format!("big{:02}", n - 1).as_bytes(), &big(n + 100))
                .expect("overwrite");
            db.delete(format!("big{:02}", n - 2).as_bytes())
                .expect("delete");
        }
    }
    fs.crash_after(0);
    db.simulate_crash();
    fs.reboot_losing_unsynced();

    let db = Db::open_in(&fs, dir, options(SyncMode::Always)).expect("reopen");
    for n in 0..24u32 {
        let want = match n % 3 {
            0 if n + 2 < 24 => None,
            1 if n + 1 < 24 => Some(big(n + 1 + 100)),
            _ => Some(big(n)),
        };
        let got = db.get(format!("big{n:02}").as_bytes()).expect("get");
        assert_eq!(
            got.as_ref().map(Vec::len),
            want.as_ref().map(Vec::len),
            "big{n:02}"
        );
        assert!(got == want, "big{n:02}: the value differs");
    }
    db.check().expect("check after the power loss");
}

/// Under `Never` the log's records may reach the disk written behind, without a sync, and so
/// without the runs that only a sync writes: a process killed then leaves a record whose run
/// is not in the file. Recovery must end the log before it (the records after it were not
/// acknowledged either), never serve or keep a reference to a run that is not there.
#[test]
fn a_record_whose_run_never_reached_the_file_ends_the_log_there() {
    let dir = Path::new("/db");
    let fs = SimFs::new(SimOptions::default());
    let db = Db::open_in(&fs, dir, options(SyncMode::Never)).expect("open");
    for i in 0..100 {
        db.put(&small_key(i), &small(i)).expect("put");
    }
    db.put(b"big", &big(7)).expect("put big");
    // Enough small records after it that the log writes them (and the big one's) behind.
    for i in 100..20_000 {
        db.put(&small_key(i), &small(i)).expect("put");
    }
    fs.crash_after(0);
    db.simulate_crash();
    // What a killed process leaves: the log's written records on disk, the run never written.
    fs.reboot_keeping_unsynced();

    let db = Db::open_in(&fs, dir, options(SyncMode::Never)).expect("reopen");
    assert!(
        db.recovery().cut_bytes > 0,
        "the log is cut at the record whose run is missing: {:?}",
        db.recovery()
    );
    assert_eq!(db.get(b"big").expect("get big"), None);
    for i in 0..100 {
        assert_eq!(
            db.get(&small_key(i)).expect("get"),
            Some(small(i)),
            "small {i}"
        );
    }
    for i in 100..20_000 {
        assert_eq!(
            db.get(&small_key(i)).expect("get"),
            None,
            "small {i}, after the cut"
        );
    }
    db.check().expect("check after the cut");
    // The log goes on from the cut.
    db.put(b"big", &big(8)).expect("put again");
    db.sync().expect("sync");
    drop(db);
    let db = Db::open_in(&fs, dir, options(SyncMode::Never)).expect("reopen again");
    assert!(db.get(b"big").expect("get") == Some(big(8)));
    db.check().expect("check");
}

/// The same life with the run written (a sync before the kill): nothing is cut.
#[test]
fn a_synced_unlogged_value_is_kept_whole() {
    let dir = Path::new("/db");
    let fs = SimFs::new(SimOptions::default());
    let db = Db::open_in(&fs, dir, options(SyncMode::Never)).expect("open");
    db.put(b"big", &big(7)).expect("put big");
    db.sync().expect("sync");
    for i in 0..20_000 {
        db.put(&small_key(i), &small(i)).expect("put");
    }
    fs.crash_after(0);
    db.simulate_crash();
    fs.reboot_keeping_unsynced();

    let db = Db::open_in(&fs, dir, options(SyncMode::Never)).expect("reopen");
    assert!(db.get(b"big").expect("get big") == Some(big(7)));
    assert_eq!(db.recovery().cut_bytes, 0, "{:?}", db.recovery());
    // The records written behind are kept (the last ones were still in the process's buffer).
    assert_eq!(db.get(&small_key(0)).expect("get"), Some(small(0)));
    db.check().expect("check");
}

/// An online backup copies the page file, then the log to a point its sync makes durable. An
/// unlogged value still in the run cache when the backup starts, or put during the copy,
/// reaches the page file only with that sync, after the copy passed its pages: the backup
/// copies such runs again (`durable/backup.rs`), so the copy opens with every value whole.
#[test]
fn a_backup_holds_unlogged_values_the_page_copy_missed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = DbOptions {
        background: true,
        ..options(SyncMode::Never)
    };
    let db = Db::open(tmp.path().join("db"), options).expect("open");
    let mut model = std::collections::BTreeMap::new();
    for i in 0..2000 {
        db.put(&small_key(i), &small(i)).expect("put");
        model.insert(small_key(i), small(i));
    }
    // Dirty in the run cache when the backup starts: no sync, no checkpoint since.
    for n in 0..4u32 {
        db.put(format!("big{n}").as_bytes(), &big(n))
            .expect("put big");
        model.insert(format!("big{n}").into_bytes(), big(n));
    }
    let target = tmp.path().join("backup");
    let during = |model: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>| {
        for n in 2..6u32 {
            db.put(format!("big{n}").as_bytes(), &big(n + 20))
                .expect("put big");
            model.insert(format!("big{n}").into_bytes(), big(n + 20));
        }
    };
    let report = db
        .backup_to_paused(&sylva::io::OsFs, &target, &mut || during(&mut model))
        .expect("backup");
    assert!(report.recopied_bytes > 0, "{report:?}");
    db.put(b"big0", b"after the backup").expect("put");

    let copy = Db::open(&target, options).expect("open the backup");
    copy.check().expect("the backup checks clean");
    assert_eq!(copy.recovery().cut_bytes, 0, "{:?}", copy.recovery());
    for (k, v) in &model {
        assert!(
            copy.get(k).expect("get").as_ref() == Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    copy.close().expect("close");
    db.close().expect("close");
}

/// With background threads, unlogged values are written behind (`db/runcache.rs`, "Written
/// behind") once 1 MiB of them was put, before any sync asks for them: nothing is synced here,
/// and the run cache reports the runs written all the same.
#[test]
fn unlogged_values_are_written_behind_before_a_sync() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = DbOptions {
        background: true,
        ..options(SyncMode::Never)
    };
    let db = Db::open(tmp.path().join("db"), options).expect("open");
    assert_eq!(db.stats().run_cache.runs_written, 0);
    let mut bytes = 0;
    let mut n = 0;
    while bytes < 3 << 20 {
        db.put(format!("big{n:02}").as_bytes(), &big(n))
            .expect("put");
        bytes += big(n).len();
        n += 1;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().run_cache.runs_written == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no run was written behind in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for i in 0..n {
        assert!(db.get(format!("big{i:02}").as_bytes()).expect("get") == Some(big(i)));
    }
    db.check().expect("check");
    db.close().expect("close");
}

/// The write-behind thread and the log's hook together on the simulated disk: runs the thread
/// wrote are not durable until the hook's sync of the page file, which must happen even when
/// the thread left the hook no run to write. Each value here is over 1 MiB, so every put wakes
/// the thread; once it has written them all, `sync()` and a power loss that drops every
/// unsynced write keep them all.
#[test]
fn runs_written_behind_are_synced_by_the_next_log_sync() {
    let dir = Path::new("/db");
    let fs = SimFs::new(SimOptions::default());
    let options = DbOptions {
        background: true,
        ..options(SyncMode::Never)
    };
    let huge = |n: u32| {
        let mut v = big(n);
        v.resize((1 << 20) + 4096 * n as usize + 7, n as u8);
        v
    };
    let db = Db::open_in(&fs, dir, options).expect("open");
    let count = 6u32;
    for n in 0..count {
        db.put(format!("huge{n}").as_bytes(), &huge(n))
            .expect("put");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().run_cache.runs_written < u64::from(count) {
        assert!(
            std::time::Instant::now() < deadline,
            "the thread did not write every run in 30 s: {:?}",
            db.stats().run_cache
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    db.sync().expect("sync");
    fs.crash_after(0);
    db.simulate_crash();
    fs.reboot_losing_unsynced();

    let db = Db::open_in(&fs, dir, options).expect("reopen");
    for n in 0..count {
        let got = db.get(format!("huge{n}").as_bytes()).expect("get");
        assert!(got == Some(huge(n)), "huge{n}");
    }
    db.check().expect("check after the power loss");
}
