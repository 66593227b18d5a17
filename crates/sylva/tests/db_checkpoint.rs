//! Fuzzy checkpoints: writers go on while a checkpoint writes the dirty pages, and recovery
//! from such a checkpoint (its log position and record count taken when it began, its pages
//! written later) gives back exactly what was synced. The kill -9 rounds of `db_crash` cover
//! crashes at random moments inside checkpoints; this test covers many checkpoints overlapping
//! many writes, then a crash, and that the log's two segments stay bounded.

mod db_common;

use std::collections::BTreeMap;

use db_common::{contents, differences, options, scattered_key, tagged_value, tmp, Rng};
use sylva::{Db, DbOptions, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const WRITERS: u64 = 2;
const OPS_PER_WRITER: u64 = 30_000;
/// Keys per writer: overwrites and deletes of present keys are common.
const KEYS_PER_WRITER: u64 = 6_000;

fn db_options() -> DbOptions {
    DbOptions {
        // The smallest trigger, so the checkpoint thread runs many times as well.
        checkpoint_bytes: 1 << 20,
        ..options(SyncMode::Never, 96)
    }
}

/// Writer `w`'s operations on its own keys (those `n` with `n % WRITERS == w`); returns what
/// it left.
fn write(db: &Db, w: u64) -> Model {
    let mut rng = Rng::new(w + 100);
    let mut model = Model::new();
    for op in 0..OPS_PER_WRITER {
        let n = rng.below(KEYS_PER_WRITER) * WRITERS + w;
        let key = scattered_key(n);
        if rng.below(10) == 0 {
            let existed = db.delete(&key).expect("delete");
            assert_eq!(existed, model.remove(&key).is_some(), "delete of key {n}");
        } else {
            let value = tagged_value(&key, op, 20 + (op % 50) as usize);
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
    }
    model
}

#[test]
fn checkpoints_while_writers_run_then_a_crash_lose_nothing_synced() {
    let dir = tmp();
    let path = dir.path().join("db");
    // The size-triggered checkpoints run in the writer that triggers them, beside the other
    // writer and the explicit ones: a checkpoint thread could run one more after the tail below
    // (a request still pending when the writers end) and leave nothing to redo.
    let options = DbOptions {
        background: false,
        ..db_options()
    };
    let db = Db::open(&path, options).expect("open");
    let mut model = Model::new();
    let mut explicit = 0;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let db = &db;
                s.spawn(move || write(db, w))
            })
            .collect();
        while writers.iter().any(|h| !h.is_finished()) {
            db.checkpoint().expect("checkpoint");
            explicit += 1;
        }
        for h in writers {
            model.extend(h.join().expect("writer"));
        }
    });
    // The last explicit checkpoint may have begun after the writers' last write: a tail of
    // writes after it, so recovery always has records to redo (it once had none in 1 run of 16).
    for i in 0..50u64 {
        let (k, v) = (
            format!("tail-{i}").into_bytes(),
            tagged_value(b"tail", i, 20),
        );
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    }
    db.sync().expect("sync");
    let checkpoints = db.stats().checkpoints;
    assert!(
        explicit >= 5 && checkpoints > explicit,
        "{explicit} explicit checkpoints, {checkpoints} in all"
    );
    db.simulate_crash();

    let db = Db::open(&path, options).expect("reopen");
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    let got = contents(&db).expect("read back");
    assert!(got == model, "{}", differences(&got, &model, 10));
    let report = db.check().expect("check");
    assert_eq!(report.records, model.len() as u64);
    db.close().expect("close");
}

#[test]
fn the_log_stays_bounded_across_checkpoints() {
    let dir = tmp();
    let path = dir.path().join("db");
    let db = Db::open(&path, db_options()).expect("open");
    let log_bytes = || {
        [sylva::WAL_FILE, sylva::WAL_FILE_2]
            .iter()
            .map(|f| std::fs::metadata(path.join(f)).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    let (mut most, mut second_used) = (0, false);
    let value = vec![7u8; 100];
    for round in 0..40u64 {
        for i in 0..2_000u64 {
            db.put(&scattered_key(i + round * 7), &value).expect("put");
        }
        db.sync().expect("sync");
        most = most.max(log_bytes());
        second_used |= std::fs::metadata(path.join(sylva::WAL_FILE_2)).map_or(0, |m| m.len()) > 32;
        db.checkpoint().expect("checkpoint");
    }
    // 40 rounds wrote far more log than this (each round's first touch of a page logs its
    // image); only the last two checkpoints' worth may remain.
    let written: u64 = db.stats().checkpoints;
    assert!(written >= 40, "{written}");
    assert!(most < 8 << 20, "the log's files reached {most} bytes");
    assert!(
        second_used,
        "fuzzy checkpoints rotate into the second segment"
    );
    db.close().expect("close");
    assert_eq!(log_bytes(), 64, "a clean close empties both segments");
}

/// The checkpoint thread yields the CPU to the application's threads (nice 10): on a machine
/// with as many busy threads as cores its work would otherwise come out of theirs.
#[test]
#[cfg(target_os = "linux")]
fn the_checkpoint_thread_runs_at_a_lower_priority() {
    /// The nice values of this process's checkpoint threads (other tests run their own).
    fn checkpoint_nices() -> Vec<i32> {
        let mut nices = Vec::new();
        for task in std::fs::read_dir("/proc/self/task")
            .expect("tasks")
            .flatten()
        {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
                continue; // the thread ended meanwhile
            };
            if comm.trim_end() == "sylva-checkpoin" {
                // Fields after the parenthesised name; nice is field 19 of the whole line.
                let rest = &stat[stat.rfind(')').expect("comm ends") + 2..];
                nices.push(
                    rest.split(' ')
                        .nth(16)
                        .expect("nice")
                        .parse()
                        .expect("number"),
                );
            }
        }
        nices
    }
    let dir = tmp();
    let db = Db::open(dir.path(), db_options()).expect("open");
    // A new thread names itself and lowers its priority as it starts: wait for that.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !checkpoint_nices().iter().any(|&n| n >= 10) {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint thread at nice 10 or more: {:?}",
            checkpoint_nices()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    db.close().expect("close");
}
