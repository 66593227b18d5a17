//! Online backup (issue 23, `durable/backup.rs`): `Db::backup_to` while writers run gives a
//! copy that opens, checks clean and holds a prefix of every writer's operations, each
//! acknowledged before the backup began among them and none begun after it returned; writes
//! the copied page file missed are in the copy (from the log, or copied again for values over
//! 1 MiB, whose bytes the log does not carry); a target that is not empty is refused; a crash
//! during a backup leaves the source intact and a target that is either whole or refused; the
//! copy waits while the store reads its pages or logs, and only then; a device share out of
//! range is refused; a watcher sees the copy's progress up to every byte the report counts.

mod db_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use db_common::{contents, tmp};
use sylva::io::{SimFs, SimOptions, Vfs};
use sylva::{
    BackupOptions, Db, DbOptions, Error, SyncMode, DATA_FILE, DEFAULT_DEVICE_SHARE,
    PARTIAL_DATA_FILE,
};

const THREADS: u64 = 4;
/// Keys per writer: operation `n` of a writer changes its key `n % SLOTS` (the first `SLOTS`
/// insert: leaves split and the file grows while the backups run).
const SLOTS: u64 = 1500;

fn slot_key(t: u64, slot: u64) -> Vec<u8> {
    format!("t{t}-s{slot:04}").into_bytes()
}

/// Operation `n` of writer `t` deletes its key, or puts this value (every 40th of writer 0's is
/// over 1 MiB: out of line and not carried by the log).
fn op_value(t: u64, n: u64) -> Option<Vec<u8>> {
    if n % 7 == 6 {
        return None;
    }
    let len = if t == 0 && n % 40 == 39 {
        (1 << 20) + 5000
    } else {
        8 + (n % 50) as usize
    };
    let mut v = vec![(n as u8) ^ (t as u8); len];
    v[..8].copy_from_slice(&n.to_le_bytes());
    Some(v)
}

/// Writer `t`'s keys after its first `m` operations.
fn prefix_state(t: u64, m: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut state = BTreeMap::new();
    for slot in 0..SLOTS.min(m) {
        let last = (m - 1 - slot) / SLOTS * SLOTS + slot;
        if let Some(v) = op_value(t, last) {
            state.insert(slot_key(t, slot), v);
        }
    }
    state
}

/// The number of writer `t`'s operations the keys in `copy` are the result of, if they are the
/// result of a prefix of them at all.
fn prefix_length(t: u64, copy: &BTreeMap<Vec<u8>, Vec<u8>>) -> Option<u64> {
    let prefix = format!("t{t}-").into_bytes();
    let mine: BTreeMap<Vec<u8>, Vec<u8>> = copy
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let last_put = mine
        .values()
        .map(|v| u64::from_le_bytes(v[..8].try_into().expect("8 bytes")))
        .max();
    // After the last put seen, only deletes: at most one (no two deletes are adjacent).
    let from = last_put.map_or(0, |n| n + 1);
    (from..from + 2).find(|&m| prefix_state(t, m) == mine)
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        // A small pool: pages are evicted (written) while the backup copies the file.
        cache_bytes: 64 * 4096,
        // Checkpoints would run during the backup (they wait for it).
        checkpoint_bytes: 1 << 20,
        ..DbOptions::default()
    }
}

#[test]
fn backup_during_writers_holds_a_prefix_of_the_acknowledged_writes() {
    let tmp = tmp();
    let db = Db::open(tmp.path().join("db"), options()).expect("open");
    let begun: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let acked: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, begun, acked, stop) = (&db, &begun[t as usize], &acked[t as usize], &stop);
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    begun.store(n + 1, Ordering::SeqCst);
                    let key = slot_key(t, n % SLOTS);
                    match op_value(t, n) {
                        Some(v) => db.put(&key, &v).expect("put"),
                        None => drop(db.delete(&key).expect("delete")),
                    }
                    acked.store(n + 1, Ordering::SeqCst);
                    n += 1;
                }
            });
        }
        // Stops the writers however this ends: a failed assertion must fail the test, not
        // leave the scope waiting for writers that never stop.
        let _stop = StopOnDrop(&stop);
        for round in 0..3 {
            std::thread::sleep(Duration::from_millis(300));
            let acked_before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
            let target = tmp.path().join(format!("backup{round}"));
            // The first round yields to the writers' reads, as by default; the others copy at
            // full speed: a yielding backup lets the writers grow the file (their freed runs
            // wait for a checkpoint), so each round would copy more than the last.
            let share = BackupOptions {
                device_share: if round == 0 {
                    DEFAULT_DEVICE_SHARE
                } else {
                    1.0
                },
            };
            let report = db.backup_with(&target, share).expect("backup");
            let begun_after: Vec<u64> = begun.iter().map(|b| b.load(Ordering::SeqCst)).collect();
            assert!(report.end_lsn > report.checkpoint_lsn, "{report:?}");

            let copy = Db::open(&target, options()).expect("open the backup");
            let check = copy.check().expect("the backup checks clean");
            let state = contents(&copy).expect("read the backup");
            assert_eq!(check.records, state.len() as u64);
            for t in 0..THREADS {
                let m = prefix_length(t, &state).unwrap_or_else(|| {
                    panic!("round {round}: writer {t}'s keys are no prefix of its operations")
                });
                assert!(
                    m >= acked_before[t as usize],
                    "round {round}: writer {t}: {m} operations in the copy, {} acknowledged \
                     before the backup began",
                    acked_before[t as usize]
                );
                assert!(
                    m <= begun_after[t as usize],
                    "round {round}: writer {t}: {m} operations in the copy, {} begun when it ended",
                    begun_after[t as usize]
                );
            }
            let ours: usize = (0..THREADS)
                .map(|t| {
                    let prefix = format!("t{t}-").into_bytes();
                    state.keys().filter(|k| k.starts_with(&prefix)).count()
                })
                .sum();
            assert_eq!(ours, state.len(), "round {round}: keys no writer wrote");
            copy.close().expect("close the backup");
        }
    });
    db.check().expect("the source checks clean");
}

fn quiet_options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 128 * 4096,
        background: false,
        ..DbOptions::default()
    }
}

fn big(n: u8) -> Vec<u8> {
    (0..(2 << 20) + 777)
        .map(|i| (i as u8).wrapping_mul(n))
        .collect()
}

fn small_key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn writes_the_page_copy_missed_are_in_the_backup() {
    let tmp = tmp();
    let db = Db::open(tmp.path().join("db"), quiet_options()).expect("open");
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        let v = format!("value {i}").into_bytes();
        db.put(&small_key(i), &v).expect("put");
        model.insert(small_key(i), v);
    }
    for n in 1..=2u8 {
        db.put(&[b'b', n], &big(n)).expect("put big");
        model.insert(vec![b'b', n], big(n));
    }
    let target = tmp.path().join("backup");
    let during = |model: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
        // After the page copy: new values over 1 MiB (at the file's end, and, for the
        // overwrite, in a new run while the old one is freed), leaf splits, merges.
        for n in 1..=4u8 {
            db.put(&[b'b', n], &big(n + 10)).expect("put big");
            model.insert(vec![b'b', n], big(n + 10));
        }
        for i in 3000..4000 {
            let v = vec![i as u8; 300];
            db.put(&small_key(i), &v).expect("put");
            model.insert(small_key(i), v);
        }
        for i in 0..1500 {
            assert!(db.delete(&small_key(i)).expect("delete"));
            model.remove(&small_key(i));
        }
    };
    let report = db
        .backup_to_paused(&sylva::io::OsFs, &target, &mut || during(&mut model))
        .expect("backup");
    assert!(
        report.recopied_bytes >= 4 * (2 << 20),
        "the four runs over 1 MiB written after the page copy are copied again: {report:?}"
    );
    // After the backup: not in it.
    db.put(b"after", b"not in the backup").expect("put");
    db.put(&[b'b', 1], &big(99)).expect("put big");

    let copy = Db::open(&target, quiet_options()).expect("open the backup");
    copy.check().expect("the backup checks clean");
    let state = contents(&copy).expect("read the backup");
    assert_eq!(state.len(), model.len());
    assert!(
        state == model,
        "the backup differs from the source at the pause"
    );
    copy.close().expect("close");
    db.check().expect("the source checks clean");
}

/// The backup takes no checkpoint of its own (`durable/backup.rs`, "Why no checkpoint of its
/// own"): it starts from the last one, so what was written after it, before the backup began
/// (small values through the log, values over 1 MiB as runs written before the page copy,
/// leaves evicted meanwhile), reaches the copy from the log and the fuzzy page copy.
#[test]
fn a_backup_starts_from_the_last_checkpoint_and_takes_none() {
    let tmp = tmp();
    let db = Db::open(tmp.path().join("db"), quiet_options()).expect("open");
    let mut model = BTreeMap::new();
    let put = |model: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>, v: Vec<u8>| {
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    };
    for i in 0..2000 {
        put(&mut model, small_key(i), format!("value {i}").into_bytes());
    }
    put(&mut model, b"b1".to_vec(), big(1));
    put(&mut model, b"b2".to_vec(), big(2));
    db.checkpoint().expect("checkpoint");
    // After the checkpoint, before the backup: overwrites (leaves evicted from the small pool),
    // deletes, a value over 1 MiB overwritten (its old run freed) and a new one.
    for i in 0..2000 {
        put(&mut model, small_key(i), vec![i as u8; 200]);
    }
    for i in 0..500 {
        assert!(db.delete(&small_key(i)).expect("delete"));
        model.remove(&small_key(i));
    }
    put(&mut model, b"b1".to_vec(), big(11));
    put(&mut model, b"b3".to_vec(), big(13));
    let checkpoints = db.stats().checkpoints;

    let target = tmp.path().join("backup");
    let report = db.backup_to(&target).expect("backup");
    assert_eq!(
        db.stats().checkpoints,
        checkpoints,
        "the backup took a checkpoint"
    );
    assert!(report.end_lsn > report.checkpoint_lsn, "{report:?}");
    let again = db.backup_to(tmp.path().join("again")).expect("backup");
    assert_eq!(
        again.checkpoint_lsn, report.checkpoint_lsn,
        "no checkpoint between two backups: both start from the same one"
    );
    for dir in ["backup", "again"] {
        let copy = Db::open(tmp.path().join(dir), quiet_options()).expect("open the backup");
        copy.check().expect("the backup checks clean");
        assert!(
            contents(&copy).expect("read") == model,
            "{dir}: the backup differs from the source"
        );
        copy.close().expect("close");
    }

    // A checkpoint after the backups moves where the next one starts.
    put(
        &mut model,
        b"after".to_vec(),
        b"the next backup has it".to_vec(),
    );
    db.checkpoint().expect("checkpoint");
    let later = db.backup_to(tmp.path().join("later")).expect("backup");
    assert!(
        later.checkpoint_lsn > report.end_lsn - 1,
        "{later:?} after {report:?}"
    );
    let copy = Db::open(tmp.path().join("later"), quiet_options()).expect("open the backup");
    assert!(contents(&copy).expect("read") == model);
    copy.close().expect("close");
    db.check().expect("the source checks clean");
}

/// Backups of `db` into `dir/busy0`, `dir/busy1`, ... while a thread runs `op(n)` for n = 0,
/// 1, ..., until one waited for the store or ten did not; every report (the last is the one
/// that waited, if any did).
fn backups_beside(db: &Db, dir: &Path, op: impl Fn(u64) + Sync) -> Vec<sylva::BackupReport> {
    let ops = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    // A few tries: on a busy machine the operations' thread may not run during a whole copy.
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                op(n);
                n += 1;
                ops.store(n, Ordering::Relaxed);
            }
        });
        while ops.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        let mut tries = Vec::new();
        for i in 0..10 {
            let report = db.backup_to(dir.join(format!("busy{i}")));
            // An error ends the tries too (and the test, below).
            let waited = match &report {
                Ok(r) => r.yielded > Duration::ZERO,
                Err(_) => true,
            };
            tries.push(report);
            if waited {
                break;
            }
        }
        done.store(true, Ordering::Relaxed);
        tries
    })
    .into_iter()
    .map(|r| r.expect("backup"))
    .collect()
}

/// 64,000 keys of 200-byte values (some 16 MiB of leaves: the copy is many pieces long), then
/// an idle backup, which must not wait, and backups beside `op` (the store busy), the last of
/// which must have waited; both copies check clean and hold every key.
fn the_copy_waits_for(cache_bytes: u64, op: impl Fn(&Db, u64) + Sync) {
    let tmp = tmp();
    let options = DbOptions {
        cache_bytes,
        ..quiet_options()
    };
    let db = Db::open(tmp.path().join("db"), options).expect("open");
    for i in 0..KEYS {
        db.put(&small_key(i), &[7u8; 200]).expect("put");
    }
    db.checkpoint().expect("checkpoint");

    let idle = db.backup_to(tmp.path().join("idle")).expect("backup");
    assert_eq!(idle.yielded, Duration::ZERO, "the store idle, yet {idle:?}");

    let busy = backups_beside(&db, tmp.path(), |n| op(&db, n));
    let last = busy.len() - 1;
    assert!(
        busy[last].yielded > Duration::ZERO,
        "the copy never waited in {} backups: {busy:?}",
        busy.len()
    );
    let busy_dir = format!("busy{last}");
    for dir in ["idle", busy_dir.as_str()] {
        let copy = Db::open(tmp.path().join(dir), options).expect("open the backup");
        copy.check().expect("the backup checks clean");
        assert_eq!(contents(&copy).expect("read").len(), KEYS as usize, "{dir}");
        copy.close().expect("close");
    }
}

const KEYS: u32 = 64_000;

/// The n-th of a sequence of keys spread over all `KEYS`.
fn spread(n: u64) -> Vec<u8> {
    let x = n
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    small_key((x >> 33) as u32 % KEYS)
}

#[test]
fn the_copy_waits_for_the_stores_reads_and_only_for_them() {
    // Leaves miss the pool: every get reads the page file.
    the_copy_waits_for(32 * 4096, |db, n| {
        assert!(db.get(&spread(n)).expect("get").is_some());
    });
}

#[test]
fn the_copy_waits_for_the_stores_log_writes() {
    // Every page cached: the writer only logs.
    the_copy_waits_for(64 << 20, |db, n| {
        db.put(&spread(n), &[n as u8; 200]).expect("put");
    });
}

#[test]
fn a_device_share_out_of_range_is_refused_before_the_target_is_made() {
    let tmp = tmp();
    let db = Db::open(tmp.path().join("db"), quiet_options()).expect("open");
    db.put(b"k", b"v").expect("put");
    for share in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let target = tmp.path().join("backup");
        let got = db.backup_with(
            &target,
            BackupOptions {
                device_share: share,
            },
        );
        assert!(
            matches!(got, Err(Error::InvalidArgument { .. })),
            "share {share}: {got:?}"
        );
        assert!(!target.exists(), "share {share}: the target was made");
    }
    let report = db
        .backup_with(tmp.path().join("full"), BackupOptions { device_share: 1.0 })
        .expect("a share of 1 is taken");
    assert_eq!(report.yielded, Duration::ZERO);
}

#[test]
fn a_watcher_sees_every_byte_the_report_counts() {
    let tmp = tmp();
    let db = Db::open(tmp.path().join("db"), quiet_options()).expect("open");
    // A page file of several pieces, and a value over 1 MiB that the copy takes whole.
    for i in 0..3000u32 {
        db.put(&i.to_be_bytes(), &[i as u8; 700]).expect("put");
    }
    db.put(b"long", &vec![7u8; (1 << 20) + 3000]).expect("put");
    db.sync().expect("sync");
    let mut seen = Vec::new();
    let report = db
        .backup_watched(
            tmp.path().join("copy"),
            BackupOptions::default(),
            &mut |p| seen.push(*p),
        )
        .expect("backup");
    let first = seen.first().expect("the watcher was never called");
    assert_eq!(
        first.total, report.page_bytes,
        "the page file is copied first"
    );
    assert!(
        seen.len() > 2,
        "one call per piece: {} calls for {} bytes of pages",
        seen.len(),
        report.page_bytes
    );
    for w in seen.windows(2) {
        assert!(w[0].copied < w[1].copied, "progress went back: {w:?}");
        assert!(w[0].total <= w[1].total, "the total shrank: {w:?}");
    }
    let last = seen.last().expect("calls");
    let all = report.page_bytes + report.recopied_bytes + report.log_bytes;
    assert_eq!((last.copied, last.total), (all, all));
    let copy = Db::open(tmp.path().join("copy"), quiet_options()).expect("open the copy");
    assert_eq!(contents(&copy).expect("contents").len(), 3001);
}

#[test]
fn a_target_that_is_not_empty_is_refused() {
    let tmp = tmp();
    let src = tmp.path().join("db");
    let db = Db::open(&src, quiet_options()).expect("open");
    db.put(b"k", b"v").expect("put");

    let full = tmp.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("notes.txt"), b"mine").expect("write");
    match db.backup_to(&full) {
        Err(Error::NotEmpty { path, first }) => {
            assert_eq!(path, full);
            assert_eq!(first, "notes.txt");
        }
        other => panic!("a non-empty target: {other:?}"),
    }
    assert_eq!(
        std::fs::read(full.join("notes.txt")).expect("read"),
        b"mine"
    );
    assert_eq!(std::fs::read_dir(&full).expect("list").count(), 1);
    // The database's own directory is not empty either.
    assert!(matches!(db.backup_to(&src), Err(Error::NotEmpty { .. })));
    // A file where the directory should be.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").expect("write");
    assert!(db.backup_to(&file).is_err(), "a file as the target");

    // An empty directory, and one whose parents do not exist yet, are fine.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    db.backup_to(&empty)
        .expect("backup into an empty directory");
    let nested = tmp.path().join("a/b/c");
    db.backup_to(&nested)
        .expect("backup into a new nested directory");
    for dir in [empty, nested] {
        let copy = Db::open(&dir, quiet_options()).expect("open the backup");
        assert_eq!(copy.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}

#[test]
fn a_crash_during_a_backup_leaves_the_source_intact_and_the_target_whole_or_refused() {
    let dir = Path::new("/db");
    let target = Path::new("/backup");
    let fill = |db: &Db| {
        for i in 0..400 {
            db.put(&small_key(i), &[i as u8; 40]).expect("put");
        }
        db.put(b"big", &big(3)).expect("put big");
    };
    let expected = || {
        let mut m: BTreeMap<Vec<u8>, Vec<u8>> = (0..400)
            .map(|i| (small_key(i), vec![i as u8; 40]))
            .collect();
        m.insert(b"big".to_vec(), big(3));
        m
    };
    // How many changes a whole backup makes.
    let changes = {
        let fs = SimFs::new(SimOptions::default());
        let db = Db::open_in(&fs, dir, quiet_options()).expect("open");
        fill(&db);
        let before = fs.changes();
        db.backup_to_in(&fs, target).expect("backup");
        fs.changes() - before
    };
    assert!(changes > 5, "a backup makes {changes} changes");
    let mut whole = 0;
    for at in 0..changes {
        for loss in 0..3u64 {
            let fs = SimFs::new(SimOptions::default());
            let db = Db::open_in(&fs, dir, quiet_options()).expect("open");
            fill(&db);
            fs.crash_after(at);
            assert!(
                db.backup_to_in(&fs, target).is_err(),
                "the power failed at change {at}"
            );
            db.simulate_crash();
            match loss {
                0 => fs.reboot_losing_unsynced(),
                1 => fs.reboot_keeping_unsynced(),
                seed => fs.reboot(at * 7 + seed),
            }
            let db = Db::open_in(&fs, dir, quiet_options())
                .unwrap_or_else(|e| panic!("crash at change {at}, loss {loss}: source: {e}"));
            db.check().expect("the source checks clean");
            assert!(
                contents(&db).expect("read") == expected(),
                "crash at change {at}, loss {loss}: the source lost writes"
            );
            let has = |name: &str| fs.exists(&target.join(name)).expect("exists");
            if has(DATA_FILE) {
                let copy = Db::open_in(&fs, target, quiet_options())
                    .unwrap_or_else(|e| panic!("crash at change {at}, loss {loss}: copy: {e}"));
                copy.check().expect("the backup checks clean");
                assert!(contents(&copy).expect("read") == expected());
                whole += 1;
            } else if has(PARTIAL_DATA_FILE) {
                match Db::open_in(&fs, target, quiet_options()) {
                    Err(Error::NotSylva { .. }) => {}
                    Err(e) => panic!("crash at change {at}, loss {loss}: {e}"),
                    Ok(_) => panic!("crash at change {at}, loss {loss}: a partial backup opened"),
                }
            } else if fs.exists(target).expect("exists") {
                assert!(
                    fs.list(target).expect("list").is_empty(),
                    "crash at change {at}, loss {loss}: files in the target but no page file"
                );
            }
        }
    }
    assert!(whole > 0, "some crash came after the backup was durable");
}
