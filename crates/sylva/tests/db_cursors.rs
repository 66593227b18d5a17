//! Cursors open while other threads write: two writer threads insert runs of keys (splitting
//! leaves) and delete them again (merging leaves), while two reader threads walk cursors —
//! forward and reverse, with inclusive, exclusive and open bounds, some moved by `seek` — slowly,
//! so that each cursor lives across many writes and the structure changes under it.
//!
//! Keys are numbers (12 decimal digits, so key order is numeric order). Even numbers are
//! *stable*: loaded before the threads start and never touched again, as in the conformance
//! crate's stress test. Odd numbers belong to the writers, each owning every other one. Every
//! cursor result must be strictly ordered in its direction, inside its bounds (and past its
//! seek), carry the right value for its key, and include every stable key of its range: those
//! were present for the cursor's whole life. At the end the database equals the stable keys plus
//! each writer's model, and `check()` passes. If the threads stop making progress for 20 s the
//! test fails instead of hanging (see `db_free_allocate_race.rs`).

mod db_common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use db_common::{
    bound_ref, contents, join_watching, options, ordered_key, ordered_number, tagged_value, Rng,
};
use sylva::{Db, SyncMode};

/// Stable keys are `0, 2, .., 2 * (STABLE - 1)`.
const STABLE: u64 = 3000;
const SPAN: u64 = 2 * STABLE;
const WRITERS: u64 = 2;
const READERS: u64 = 2;
const OPS_PER_WRITER: u64 = 30_000;

fn stable_value(n: u64) -> Vec<u8> {
    tagged_value(&ordered_key(n), 0, 40 + (n % 7) as usize * 10)
}

/// The label every value starts with: the key it belongs to.
fn value_names(key: &[u8], value: &[u8]) -> bool {
    value.starts_with(key) && value.get(key.len()) == Some(&b'#')
}

fn writer(db: &Db, w: u64, writes: &AtomicU64, progress: &AtomicU64) -> BTreeMap<u64, Vec<u8>> {
    let wrote = || {
        writes.fetch_add(1, Ordering::Relaxed);
        progress.fetch_add(1, Ordering::Relaxed);
    };
    let mut rng = Rng::new(0xBEEF + w);
    let mut model = BTreeMap::new();
    let owned = SPAN / 2 / WRITERS;
    let number = |j: u64| 2 * (j * WRITERS + w) + 1;
    let mut op = 0;
    while op < OPS_PER_WRITER {
        // A run of contiguous owned keys: inserted (large values, so leaves split), then mostly
        // deleted again (so they merge), with scattered single writes in between.
        let start = rng.below(owned);
        let len = 20 + rng.below(200);
        for j in start..(start + len).min(owned) {
            let n = number(j);
            let v = tagged_value(&ordered_key(n), op, 150 + rng.below(300) as usize);
            db.put(&ordered_key(n), &v).expect("writer put");
            model.insert(n, v);
            wrote();
            op += 1;
        }
        for j in start..(start + len).min(owned) {
            if rng.below(10) < 8 {
                let n = number(j);
                let was = db.delete(&ordered_key(n)).expect("writer delete");
                assert_eq!(was, model.remove(&n).is_some(), "writer {w}: delete of {n}");
                wrote();
                op += 1;
            }
        }
        for _ in 0..20 {
            let n = number(rng.below(owned));
            let v = tagged_value(&ordered_key(n), op, 20 + rng.below(100) as usize);
            db.put(&ordered_key(n), &v).expect("writer put");
            model.insert(n, v);
            wrote();
            op += 1;
        }
    }
    model
}

fn random_bound(rng: &mut Rng) -> Bound<u64> {
    let n = rng.below(SPAN + 2);
    match rng.below(5) {
        0 | 1 => Bound::Included(n),
        2 | 3 => Bound::Excluded(n),
        _ => Bound::Unbounded,
    }
}

fn contains(lower: Bound<u64>, upper: Bound<u64>, n: u64) -> bool {
    (match lower {
        Bound::Included(l) => n >= l,
        Bound::Excluded(l) => n > l,
        Bound::Unbounded => true,
    }) && (match upper {
        Bound::Included(u) => n <= u,
        Bound::Excluded(u) => n < u,
        Bound::Unbounded => true,
    })
}

/// What the readers saw, for the test to show that cursors lived across writes.
#[derive(Default)]
struct Seen {
    cursors: u64,
    records: u64,
    /// Most writes that happened during one cursor's life.
    longest: u64,
    reverse: u64,
    sought: u64,
}

fn reader(
    db: &Db,
    r: u64,
    writes: &AtomicU64,
    progress: &AtomicU64,
    writers_running: &AtomicUsize,
) -> Seen {
    let mut rng = Rng::new(0xF00D + r);
    let mut seen = Seen::default();
    while writers_running.load(Ordering::Acquire) > 0 || seen.cursors < 20 {
        // Narrow the range to at most ~1,500 numbers so a cursor is walked to its end.
        let (mut lower, mut upper) = (random_bound(&mut rng), random_bound(&mut rng));
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
            (lower, upper)
        {
            if l > u {
                std::mem::swap(&mut lower, &mut upper);
            }
        }
        if let Bound::Unbounded = upper {
            if let Bound::Included(l) | Bound::Excluded(l) = lower {
                if rng.below(2) == 0 {
                    upper = Bound::Excluded(l + 1 + rng.below(1500));
                }
            }
        }
        let reverse = rng.below(2) == 0;
        let seek = (rng.below(3) == 0).then(|| rng.below(SPAN));
        let key = |b: Bound<u64>| b.map(ordered_key);
        let (lk, uk) = (key(lower), key(upper));
        let started = writes.load(Ordering::Relaxed);
        let mut cursor = db.range(bound_ref(&lk), bound_ref(&uk));
        if reverse {
            cursor = cursor.rev();
            seen.reverse += 1;
        }
        if let Some(s) = seek {
            cursor.seek(&ordered_key(s));
            seen.sought += 1;
        }
        // The part of the range the cursor must cover: narrowed by the seek.
        let (mut lo, mut hi) = (lower, upper);
        if let Some(s) = seek {
            if reverse {
                if contains(Bound::Unbounded, hi, s) {
                    hi = Bound::Included(s);
                }
            } else if contains(lo, Bound::Unbounded, s) {
                lo = Bound::Included(s);
            }
        }
        let what = format!(
            "reader {r}: cursor over {lower:?}..{upper:?} (reverse {reverse}, seek {seek:?})"
        );
        let mut got: Vec<u64> = Vec::new();
        for (i, item) in cursor.enumerate() {
            let (k, v) = item.unwrap_or_else(|e| panic!("{what}: {e}"));
            let n = ordered_number(&k).unwrap_or_else(|| panic!("{what}: a foreign key {k:?}"));
            assert!(
                contains(lo, hi, n),
                "{what}: returned {n}, outside the range"
            );
            if let Some(&p) = got.last() {
                assert!(
                    if reverse { n < p } else { n > p },
                    "{what}: returned {n} after {p}"
                );
            }
            if n.is_multiple_of(2) {
                assert_eq!(v, stable_value(n), "{what}: the value of stable key {n}");
            } else {
                assert!(
                    value_names(&k, &v),
                    "{what}: the value of {n} names another key"
                );
            }
            got.push(n);
            progress.fetch_add(1, Ordering::Relaxed);
            // Walk slowly: let the writers change the tree under the cursor.
            if i % 16 == 15 {
                std::thread::yield_now();
            }
        }
        // Every stable key of the covered range is there.
        let mut stable_got = got
            .iter()
            .filter(|n| *n % 2 == 0)
            .copied()
            .collect::<Vec<_>>();
        if reverse {
            stable_got.reverse();
        }
        let want: Vec<u64> = (0..STABLE)
            .map(|i| 2 * i)
            .filter(|n| contains(lo, hi, *n))
            .collect();
        if stable_got != want {
            let missing: Vec<u64> = want
                .iter()
                .filter(|n| !stable_got.contains(n))
                .take(10)
                .copied()
                .collect();
            panic!(
                "{what}: {} stable keys in the range, {} returned; missing e.g. {missing:?}",
                want.len(),
                stable_got.len()
            );
        }
        seen.cursors += 1;
        seen.records += got.len() as u64;
        seen.longest = seen.longest.max(writes.load(Ordering::Relaxed) - started);
    }
    seen
}

/// What the threads share.
struct Shared {
    db: Db,
    /// Writes so far (a cursor's life is measured in them).
    writes: AtomicU64,
    /// Writes and records read: the watchdog's measure of progress.
    progress: AtomicU64,
    writers_running: AtomicUsize,
}

/// What a thread returns.
enum Done {
    Writer(BTreeMap<u64, Vec<u8>>),
    Reader(Seen),
}

struct WriterDone<'a>(&'a AtomicUsize);

impl Drop for WriterDone<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

#[test]
fn cursors_stay_ordered_and_complete_while_writers_split_and_merge_leaves() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A 256-page pool: the tree outgrows it, so cursors also meet evicted leaves.
    let db = Db::open(dir.path(), options(SyncMode::Never, 256)).expect("open");
    for i in 0..STABLE {
        db.put(&ordered_key(2 * i), &stable_value(2 * i))
            .expect("loading stable keys");
    }
    let shared = Arc::new(Shared {
        db,
        writes: AtomicU64::new(0),
        progress: AtomicU64::new(0),
        writers_running: AtomicUsize::new(WRITERS as usize),
    });
    let mut threads = Vec::new();
    for r in 0..READERS {
        let s = shared.clone();
        threads.push(std::thread::spawn(move || {
            Done::Reader(reader(&s.db, r, &s.writes, &s.progress, &s.writers_running))
        }));
    }
    for w in 0..WRITERS {
        let s = shared.clone();
        threads.push(std::thread::spawn(move || {
            // Count the writer out even if it panics, or the readers would go on forever.
            let _done = WriterDone(&s.writers_running);
            Done::Writer(writer(&s.db, w, &s.writes, &s.progress))
        }));
    }
    let (mut models, mut seen) = (Vec::new(), Vec::new());
    for done in join_watching(
        threads,
        &shared.progress,
        Duration::from_secs(20),
        "db_cursors",
    ) {
        match done {
            Done::Writer(m) => models.push(m),
            Done::Reader(s) => seen.push(s),
        }
    }

    let mut want: BTreeMap<Vec<u8>, Vec<u8>> = (0..STABLE)
        .map(|i| (ordered_key(2 * i), stable_value(2 * i)))
        .collect();
    for m in &models {
        want.extend(m.iter().map(|(n, v)| (ordered_key(*n), v.clone())));
    }
    let db = &shared.db;
    let got = contents(db).expect("full scan");
    assert!(
        got == want,
        "after the threads: {}",
        db_common::differences(&got, &want, 10)
    );
    let report = db.check().expect("check");
    assert_eq!(report.records, want.len() as u64);

    let total = |f: fn(&Seen) -> u64| seen.iter().map(f).sum::<u64>();
    let longest = seen.iter().map(|s| s.longest).max().unwrap_or(0);
    eprintln!(
        "db_cursors: {} cursors ({} reverse, {} sought) returned {} records; {} writes, the \
         longest-lived cursor saw {longest} of them",
        total(|s| s.cursors),
        total(|s| s.reverse),
        total(|s| s.sought),
        total(|s| s.records),
        shared.writes.load(Ordering::Relaxed)
    );
    assert!(
        longest >= 200,
        "no cursor lived across more than {longest} writes: the test did not exercise cursors \
         during splits and merges"
    );
    assert!(total(|s| s.reverse) > 0 && total(|s| s.sought) > 0);
    Arc::try_unwrap(shared)
        .unwrap_or_else(|_| panic!("the threads are done"))
        .db
        .close()
        .expect("close");
}
