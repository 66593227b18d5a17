//! `kill -9` of a process writing to a [`Db`]: whatever it acknowledged (under
//! `SyncMode::Always`) or covered by a completed `sync()` (under `SyncMode::Batch`) must be there
//! after reopening, write batches are all or nothing, and `check()` passes.
//!
//! The test binary is its own child: `crash_child` does nothing unless `SYLVA_DB_CRASH_DIR` is
//! set, in which case it opens the database there and runs a script of operations forever —
//! puts of random keys (values naming the key and the write), overwrites, deletes, write batches,
//! `sync()` and, in some rounds, `checkpoint()` — printing `ack N` after operation `N` returns
//! and `synced N` after a `sync()` that covers operations up to `N`. The script is a pure function
//! of the round number, so the parent regenerates exactly what the child did from the last `N` it
//! read. The parent kills the child with SIGKILL at a random moment after its first ack, reopens
//! the same directory in-process (all rounds share it, so recovery runs on an accumulating
//! database) and checks that the database equals its model after some prefix of the script that
//! includes every durable operation: the acknowledged ones under `Always` (the one in flight at
//! the kill may or may not be there), the synced ones under `Batch`. A prefix, because the log is
//! replayed in order: a later write surviving while an earlier one is lost is a failure too, and a
//! write batch, being one step of the script, can only be wholly in or wholly out.
//!
//! Odd rounds run with a 64-page pool and `checkpoint_bytes` at its 1 MiB minimum, and every third
//! round calls `checkpoint()` now and then, so kills land during evictions and checkpoints; the
//! test asserts that the children's pools missed, that checkpoints triggered by
//! `checkpoint_bytes` (not only explicit ones) happened, and that the children's trees moved
//! records between leaves and split two leaves into three (deferred splits), so kills land
//! around those structure changes too.
//!
//! Rounds: `SYLVA_CRASH_ROUNDS` (default 50); seed of the kill delays: `SYLVA_CRASH_SEED`.
//! A soak: `SYLVA_CRASH_ROUNDS=1000 cargo test -p sylva --test db_crash`.

mod db_common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use db_common::{
    apply_members, batch_of, contents, differences, options, scattered_key, splitmix, tagged_value,
    Rng,
};
use sylva::{Db, DbOptions, KvStore, SyncMode};

/// Distinct keys the script writes: small enough that overwrites and deletes of present keys are
/// common, large enough for a few hundred leaves.
const KEYS: u64 = 3000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Distinct keys, each with a new value or `None` for a delete.
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Sync,
    Checkpoint,
}

/// The operations of one round, a pure function of the round number.
struct Script {
    rng: Rng,
    round: u64,
    next: u64,
    checkpoints: bool,
}

impl Script {
    fn new(round: u64) -> Self {
        Script {
            rng: Rng::new(0xC0FFEE ^ round),
            round,
            next: 0,
            checkpoints: round.is_multiple_of(3),
        }
    }

    fn value(&self, key: &[u8], index: u64, member: u64) -> Vec<u8> {
        let tag = (self.round << 40) | (index << 4) | member;
        tagged_value(key, tag, 16 + (splitmix(tag) % 580) as usize)
    }

    /// Operation number `self.next`, and advances.
    fn step(&mut self) -> (u64, Op) {
        let i = self.next;
        self.next += 1;
        let key = scattered_key(self.rng.below(KEYS));
        let op = match self.rng.below(1000) {
            0..600 => Op::Put(key.clone(), self.value(&key, i, 0)),
            600..750 => Op::Delete(key),
            750..900 => {
                let n = 2 + self.rng.below(9);
                let mut seen = BTreeSet::new();
                let mut members = Vec::new();
                for m in 0..n {
                    let k = scattered_key(self.rng.below(KEYS));
                    if !seen.insert(k.clone()) {
                        continue;
                    }
                    let v = (self.rng.below(10) < 7).then(|| self.value(&k, i, m + 1));
                    members.push((k, v));
                }
                Op::Batch(members)
            }
            900..990 => Op::Sync,
            _ if self.checkpoints => Op::Checkpoint,
            _ => Op::Sync,
        };
        (i, op)
    }
}

/// Applies `op` to `model`; returns the keys it touched.
fn apply(model: &mut Model, op: &Op) -> Vec<Vec<u8>> {
    match op {
        Op::Put(k, v) => {
            model.insert(k.clone(), v.clone());
            vec![k.clone()]
        }
        Op::Delete(k) => {
            model.remove(k);
            vec![k.clone()]
        }
        Op::Batch(members) => {
            apply_members(model, members);
            members.iter().map(|(k, _)| k.clone()).collect()
        }
        Op::Sync | Op::Checkpoint => Vec::new(),
    }
}

fn mode(name: &str) -> SyncMode {
    match name {
        "always" => SyncMode::Always,
        _ => SyncMode::Batch {
            ops: 64,
            interval: Duration::from_millis(5),
        },
    }
}

fn round_options(mode_name: &str, round: u64) -> DbOptions {
    if round % 2 == 1 {
        DbOptions {
            // Small enough that every child checkpoints by itself before it is killed, even
            // when fsyncs are slow (the struct field takes any value; `set` clamps to 1 MiB).
            checkpoint_bytes: 64 << 10,
            ..options(mode(mode_name), 64)
        }
    } else {
        options(mode(mode_name), 4096)
    }
}

#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SYLVA_DB_CRASH_DIR") else {
        return;
    };
    let mode_name = std::env::var("SYLVA_DB_CRASH_MODE").expect("mode");
    let round: u64 = std::env::var("SYLVA_DB_CRASH_ROUND")
        .expect("round")
        .parse()
        .expect("round number");
    // The parent runs the `always` and `batch` tests in parallel threads. A child spawned by one
    // of them holds copies of the parent's descriptors, the other test's lock file included,
    // until it reaches `exec` (close-on-exec); on a loaded machine that can take a while, so a
    // lock conflict at open is retried briefly before it counts as a failure.
    let mut tries = 0;
    let db = loop {
        match Db::open(Path::new(&dir), round_options(&mode_name, round)) {
            Err(sylva::Error::Locked { .. }) if tries < 250 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => break r.expect("child open"),
        }
    };
    let mut out = std::io::stdout().lock();
    let mut script = Script::new(round);
    loop {
        let (i, op) = script.step();
        match &op {
            Op::Put(k, v) => db.put(k, v).expect("child put"),
            Op::Delete(k) => {
                db.delete(k).expect("child delete");
            }
            Op::Batch(members) => db.write(&batch_of(members)).expect("child write batch"),
            Op::Sync => db.sync().expect("child sync"),
            Op::Checkpoint => db.checkpoint().expect("child checkpoint"),
        }
        writeln!(out, "ack {i}").expect("stdout");
        if matches!(op, Op::Sync) {
            writeln!(out, "synced {i}").expect("stdout");
        }
        if i.is_multiple_of(32) {
            let s = db.stats();
            let tree = KvStore::stats(&db);
            let counter = |name| {
                tree.counters
                    .iter()
                    .find(|c| c.0 == name)
                    .map_or(0, |c| c.1)
            };
            writeln!(
                out,
                "stats {} {} {} {}",
                s.checkpoints,
                s.cache_misses,
                counter("redistributions"),
                counter("splits_2to3")
            )
            .expect("stdout");
        }
        out.flush().expect("stdout");
    }
}

/// What the parent read from one child.
#[derive(Debug, Default)]
struct Progress {
    last_ack: Option<u64>,
    last_synced: Option<u64>,
    /// `stats()` figures at the child's first report and its last one: the run's own
    /// checkpoints and misses are the growth (opening may checkpoint and read pages itself).
    first_stats: Option<(u64, u64)>,
    last_stats: (u64, u64),
    /// The tree's redistributions and 2-to-3 splits since the child opened the database, at
    /// its last report.
    deferred_splits: (u64, u64),
}

impl Progress {
    fn checkpoints(&self) -> u64 {
        self.last_stats.0 - self.first_stats.map_or(0, |f| f.0)
    }
    fn misses(&self) -> u64 {
        self.last_stats.1 - self.first_stats.map_or(0, |f| f.1)
    }
}

/// Kills the child if the parent panics, so no child outlives a failed test.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs one child until a random moment after its first ack and kills it.
fn run_child(dir: &Path, mode_name: &str, round: u64, delay: Duration) -> Progress {
    let exe = std::env::current_exe().expect("test binary");
    let child = Command::new(exe)
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("SYLVA_DB_CRASH_DIR", dir)
        .env("SYLVA_DB_CRASH_MODE", mode_name)
        .env("SYLVA_DB_CRASH_ROUND", round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let mut guard = ChildGuard(Some(child));
    let child = guard.0.as_mut().expect("child");
    let stdout = child.stdout.take().expect("child stdout");
    let progress = Arc::new(Mutex::new(Progress::default()));
    let (first_ack, started) = std::sync::mpsc::channel();
    let reader = {
        let progress = progress.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut words = line.split_whitespace();
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                let mut p = progress.lock().expect("progress");
                match what {
                    "ack" => {
                        if p.last_ack.is_none() {
                            let _ = first_ack.send(());
                        }
                        p.last_ack = Some(n);
                    }
                    "synced" => p.last_synced = Some(n),
                    "stats" => {
                        let mut next = || words.next().and_then(|m| m.parse().ok()).unwrap_or(0);
                        let misses = next();
                        p.first_stats.get_or_insert((n, misses));
                        p.last_stats = (n, misses);
                        p.deferred_splits = (next(), next());
                    }
                    _ => {}
                }
            }
        })
    };
    let died = |child: &mut Child| {
        let mut err = String::new();
        if let Some(e) = child.stderr.as_mut() {
            let _ = e.read_to_string(&mut err);
        }
        err
    };
    if started.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "round {round}: the child acknowledged nothing within 60 s; its stderr:\n{}",
            died(child)
        );
    }
    std::thread::sleep(delay);
    if let Some(status) = child.try_wait().expect("try_wait") {
        panic!(
            "round {round}: the child stopped by itself ({status}) before the kill; its stderr:\n{}",
            died(child)
        );
    }
    child.kill().expect("kill -9");
    child.wait().expect("reap child");
    guard.0 = None;
    reader.join().expect("reader thread");
    Arc::try_unwrap(progress)
        .expect("reader finished")
        .into_inner()
        .expect("progress")
}

/// Checks the reopened database against `model` (the state after every durable operation) and
/// the operations that may or may not have reached it; returns the state it was found in.
fn verify(round: u64, db: &Db, model: Model, uncertain: &[(u64, Op)], durable: &str) -> Model {
    let got = contents(db).unwrap_or_else(|e| panic!("round {round}: reading back: {e}"));
    let mut state = model.clone();
    let mut mismatch: BTreeSet<Vec<u8>> = got
        .keys()
        .chain(state.keys())
        .filter(|k| got.get(*k) != state.get(*k))
        .cloned()
        .collect();
    let mut steps = 0;
    while !mismatch.is_empty() && steps < uncertain.len() {
        for k in apply(&mut state, &uncertain[steps].1) {
            if got.get(&k) == state.get(&k) {
                mismatch.remove(&k);
            } else {
                mismatch.insert(k);
            }
        }
        steps += 1;
    }
    if mismatch.is_empty() {
        return state;
    }
    let later: BTreeSet<&Vec<u8>> = uncertain
        .iter()
        .flat_map(|(_, op)| match op {
            Op::Put(_, v) => vec![v],
            Op::Batch(m) => m.iter().filter_map(|(_, v)| v.as_ref()).collect(),
            _ => Vec::new(),
        })
        .collect();
    let from_later = got
        .iter()
        .filter(|(k, v)| model.get(*k) != Some(*v) && later.contains(v))
        .count();
    panic!(
        "round {round}: after the kill the database is not the state after any prefix of the \
         script that includes {durable} ({} later operations may or may not be there; \
         {from_later} of the differing values come from those).\nCompared with the state after \
         {durable} operation, {}",
        uncertain.len(),
        differences(&got, &model, 12)
    );
}

fn crash_rounds(mode_name: &str) {
    let rounds: u64 = std::env::var("SYLVA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("SYLVA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED);
    let mut delays = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::new();
    let (mut checkpoints, mut automatic, mut misses) = (0, 0, 0);
    let (mut redistributions, mut splits_2to3) = (0, 0);
    let (mut acked, mut uncertain_total, mut cut, mut reapplied) = (0, 0, 0, 0);
    for round in 0..rounds {
        // Mostly short runs (many kills early in a run, during recovery's aftermath and the first
        // checkpoints), some long enough for the log to pass 1 MiB.
        let delay = match delays.below(4) {
            0 => delays.below(5),
            1 | 2 => delays.below(150),
            _ => 300 + delays.below(1200),
        };
        let p = run_child(dir.path(), mode_name, round, Duration::from_millis(delay));
        checkpoints += p.checkpoints();
        if !Script::new(round).checkpoints {
            automatic += p.checkpoints();
        }
        misses += p.misses();
        redistributions += p.deferred_splits.0;
        splits_2to3 += p.deferred_splits.1;
        let last_ack = p.last_ack.expect("at least one ack");
        acked += last_ack + 1;
        // Operations up to `durable` must be there; the rest may be, as a prefix. The one after
        // the last ack may have been in flight.
        let durable = match mode_name {
            "always" => Some(last_ack),
            _ => p.last_synced,
        };
        let mut script = Script::new(round);
        let mut uncertain = Vec::new();
        while script.next <= last_ack + 1 {
            let (i, op) = script.step();
            if durable.is_some_and(|d| i <= d) {
                apply(&mut model, &op);
            } else if !matches!(op, Op::Sync | Op::Checkpoint) {
                uncertain.push((i, op));
            }
        }
        uncertain_total += uncertain.len();

        let db = Db::open(dir.path(), round_options(mode_name, round))
            .unwrap_or_else(|e| panic!("round {round}: reopening after kill -9: {e}"));
        let what = if mode_name == "always" {
            "every acknowledged"
        } else {
            "every synced"
        };
        model = verify(round, &db, model, &uncertain, what);
        cut += u64::from(db.recovery().cut_bytes > 0);
        reapplied += u64::from(db.recovery().batch_reapplied);
        let report = db
            .check()
            .unwrap_or_else(|e| panic!("round {round}: check after recovery: {e}"));
        assert_eq!(
            report.records,
            model.len() as u64,
            "round {round}: check() counts a different number of records"
        );
        assert_eq!(
            db.stats().records,
            model.len() as u64,
            "round {round}: stats().records after recovery"
        );
        if mode_name == "always" {
            assert_eq!(
                db.recovery().intact_after_cut,
                None,
                "round {round}: recovery found intact log records after the cut under \
                 SyncMode::Always: {:?}",
                db.recovery()
            );
        }
        db.close()
            .unwrap_or_else(|e| panic!("round {round}: close: {e}"));
    }
    eprintln!(
        "db_crash {mode_name}: {rounds} rounds, {acked} operations acknowledged, {uncertain_total} \
         in the uncertain window, {checkpoints} checkpoints ({automatic} in rounds without \
         checkpoint() calls), {misses} pool misses, {redistributions} redistributions and \
         {splits_2to3} 2-to-3 splits seen in the children; recovery cut a torn log tail {cut} \
         times and applied a write batch again {reapplied} times; {} records at the end",
        model.len()
    );
    assert!(
        redistributions > 0 && splits_2to3 > 0,
        "the children never redistributed ({redistributions}) or split 2-to-3 \
         ({splits_2to3}): kills did not land around deferred splits"
    );
    assert!(
        automatic > 0,
        "no child checkpointed by itself (checkpoint_bytes): the rounds did not exercise kills \
         around automatic checkpoints"
    );
    assert!(
        misses > 0,
        "no child ever missed the pool: the small-pool rounds did not exercise eviction"
    );
}

#[test]
fn kill_9_loses_nothing_acknowledged_under_sync_always() {
    crash_rounds("always");
}

#[test]
fn kill_9_loses_nothing_synced_under_sync_batch() {
    crash_rounds("batch");
}
