//! Data several times larger than the buffer pool: a [`Db`] with a 4 MiB pool holding ~17 MiB
//! of records (160,000 records of a 12-byte key and a 100-byte value, over four times the pool)
//! answers random puts, deletes, gets and range scans (forward and reverse, with bounds and
//! seeks) exactly like a std `BTreeMap` model, across a close and reopen; and the process's
//! resident memory grows by no more than the pool's budget plus a stated overhead.
//!
//! **The model** is a `BTreeMap<u32, u32>` from key number to the version of its value (0: no
//! record), filled with every key number before the baseline is taken, so updating it allocates
//! nothing and the model's own memory is not counted as the database's. Keys are
//! [`db_common::ordered_key`]s, so the model's order is the database's order.
//!
//! **Memory.** Resident set size from `/proc/self/status` (`VmRSS`, and `VmHWM` for the peak),
//! measured against a baseline taken before the database is opened. The pool's frames are an
//! anonymous mapping whose evicted pages are returned with `MADV_DONTNEED`, so they count only
//! while resident. The database runs with `direct_io: false` to keep the test fast on a shared
//! machine; the kernel's page cache is not part of RSS either way.
//!
//! The bound asserted, for the RSS growth sampled along the way and for the peak, is
//! `cache_bytes + OVERHEAD` with `OVERHEAD` = 8 MiB. Measured on the development machine (glibc
//! malloc, 2 cores; the test prints its figures with `--nocapture`): a peak growth of 6.3 MiB,
//! i.e. the pool's 4 MiB plus 2.3 MiB of overhead — the log's 1 MiB write-behind buffer, cursors'
//! leaf copies, the allocator's arenas, the page file's free set and the test's own short-lived
//! vectors. (The checkpoints' write-back copy buffer is inside the pool's budget: the pool keeps
//! a sixteenth of it, 256 KiB here, for that buffer and the rest for frames. Session 9, with
//! it, measured peaks of 6.6–8.8 MiB on a busy machine, the same range as without it.) A pool
//! that did not return evicted frames would reach the file's ~26 MiB and fail.
//!
//! A larger run (2,000,000 records, 213 MiB raw, a 32 MiB pool; about 5 minutes):
//! `cargo test -p sylva --release --test db_memory -- --ignored --nocapture`. Measured: a peak
//! growth of 34.9 MiB, the pool's 32 MiB plus 2.9 MiB.

mod db_common;

use std::collections::BTreeMap;
use std::ops::Bound;

use db_common::{bound_ref, ordered_key, ordered_number, tagged_value, Rng};
use sylva::{Db, DbOptions, SyncMode};

/// What the test allows on top of the pool's budget, in bytes.
const OVERHEAD: u64 = 8 << 20;

const VALUE_LEN: usize = 100;

/// `VmRSS` and `VmHWM` of this process, in bytes.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or_else(|| panic!("{name} in /proc/self/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn value(n: u32, version: u32) -> Vec<u8> {
    tagged_value(&ordered_key(u64::from(n)), u64::from(version), VALUE_LEN)
}

struct Sizes {
    records: u32,
    cache_bytes: u64,
    mixed_ops: u32,
}

struct Memory {
    baseline: u64,
    worst: u64,
    cache_bytes: u64,
}

impl Memory {
    fn sample(&mut self, when: &str) {
        let (now, _) = rss();
        let growth = now.saturating_sub(self.baseline);
        self.worst = self.worst.max(growth);
        within_budget(growth, self.cache_bytes, when);
    }
}

fn within_budget(growth: u64, cache_bytes: u64, when: &str) {
    assert!(
        growth <= cache_bytes + OVERHEAD,
        "{when}: RSS grew by {} KiB, more than the pool's {} KiB plus {} KiB",
        growth >> 10,
        cache_bytes >> 10,
        OVERHEAD >> 10
    );
}

/// Compares a cursor over `(lower, upper)` (reversed if `reverse`, first moved by `seek`) with
/// the model, for up to `limit` records.
fn compare_range(
    db: &Db,
    model: &BTreeMap<u32, u32>,
    lower: Bound<u32>,
    upper: Bound<u32>,
    reverse: bool,
    seek: Option<u32>,
    limit: usize,
) {
    let key = |b: Bound<u32>| b.map(|n| ordered_key(u64::from(n)));
    let (lo, hi) = (key(lower), key(upper));
    let mut cursor = db.range(bound_ref(&lo), bound_ref(&hi));
    if reverse {
        cursor = cursor.rev();
    }
    if let Some(s) = seek {
        cursor.seek(&ordered_key(u64::from(s)));
    }
    // The model's answer: the range, narrowed by the seek, in the cursor's direction.
    let (mut mlo, mut mhi) = (lower, upper);
    if let Some(s) = seek {
        if reverse {
            mhi = match mhi {
                Bound::Included(h) | Bound::Excluded(h) if h <= s => mhi,
                _ => Bound::Included(s),
            };
        } else {
            mlo = match mlo {
                Bound::Included(l) | Bound::Excluded(l) if l >= s => mlo,
                _ => Bound::Included(s),
            };
        }
    }
    let valid = match (mlo, mhi) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
            l < h || (l == h && matches!((mlo, mhi), (Bound::Included(_), Bound::Included(_))))
        }
        _ => true,
    };
    let want: Vec<(u32, u32)> = if !valid {
        Vec::new()
    } else {
        let r = model.range((mlo, mhi)).filter(|(_, v)| **v != 0);
        if reverse {
            r.rev().take(limit).map(|(k, v)| (*k, *v)).collect()
        } else {
            r.take(limit).map(|(k, v)| (*k, *v)).collect()
        }
    };
    let mut got = Vec::with_capacity(want.len());
    for item in cursor.take(limit) {
        let (k, v) = item.expect("cursor");
        let n = ordered_number(&k).expect("a key the test wrote") as u32;
        assert_eq!(
            v,
            value(n, model[&n]),
            "cursor over {lower:?}..{upper:?} (reverse {reverse}, seek {seek:?}): value of {n}"
        );
        got.push((n, model[&n]));
    }
    assert_eq!(
        got, want,
        "cursor over {lower:?}..{upper:?} (reverse {reverse}, seek {seek:?})"
    );
}

/// Walks the whole database and the model side by side, in one direction.
fn compare_all(db: &Db, model: &BTreeMap<u32, u32>, reverse: bool) {
    let mut cursor = db.range(Bound::Unbounded, Bound::Unbounded);
    if reverse {
        cursor = cursor.rev();
    }
    let live = model.iter().filter(|(_, v)| **v != 0);
    let mut want: Box<dyn Iterator<Item = (&u32, &u32)>> = if reverse {
        Box::new(live.rev())
    } else {
        Box::new(live)
    };
    let mut i = 0u64;
    for item in cursor {
        let (k, v) = item.expect("cursor");
        let (&n, &version) = want.next().unwrap_or_else(|| {
            panic!("a full scan (reverse {reverse}) returned more records than the model holds")
        });
        assert_eq!(
            (k, v),
            (ordered_key(u64::from(n)), value(n, version)),
            "record {i} of a full scan (reverse {reverse})"
        );
        i += 1;
    }
    assert!(
        want.next().is_none(),
        "a full scan (reverse {reverse}) ended after {i} records; the model holds more"
    );
}

fn random_bound(rng: &mut Rng, space: u32) -> Bound<u32> {
    let n = rng.below(u64::from(space)) as u32;
    match rng.below(3) {
        0 => Bound::Included(n),
        1 => Bound::Excluded(n),
        _ => Bound::Unbounded,
    }
}

/// One measurement at a time: RSS is the whole process's, and the test harness runs tests on
/// parallel threads (`--include-ignored` would run both at once).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(sizes: Sizes) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let space = sizes.records + sizes.records / 4;
    // Everything the test itself needs, allocated before the baseline.
    let mut model: BTreeMap<u32, u32> = (0..space).map(|n| (n, 0)).collect();
    let mut order: Vec<u32> = (0..space).collect();
    let mut rng = Rng::new(42);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order.truncate(sizes.records as usize);
    let dir = tempfile::tempdir().expect("tempdir");
    let options = DbOptions {
        sync: SyncMode::Never,
        cache_bytes: sizes.cache_bytes,
        checkpoint_bytes: 64 << 20,
        direct_io: false,
        ..DbOptions::default()
    };
    let (baseline, _) = rss();
    let mut mem = Memory {
        baseline,
        worst: 0,
        cache_bytes: sizes.cache_bytes,
    };

    let clock = std::time::Instant::now();
    let mut db = Db::open(dir.path(), options).expect("open");
    let mut version = 0u32;
    for (i, &n) in order.iter().enumerate() {
        version += 1;
        db.put(&ordered_key(u64::from(n)), &value(n, version))
            .expect("load put");
        model.insert(n, version);
        if i % 20_000 == 0 {
            mem.sample(&format!("loading, after {i} records"));
        }
    }
    let stats = db.stats();
    let raw = u64::from(sizes.records) * (12 + VALUE_LEN as u64);
    assert!(
        raw >= 4 * sizes.cache_bytes,
        "the data ({raw} bytes) must be at least 4 times the pool"
    );
    assert!(
        stats.resident_pages <= stats.budget_pages,
        "the pool holds {} pages, over its budget of {}",
        stats.resident_pages,
        stats.budget_pages
    );
    assert!(
        stats.cache_misses > 0,
        "no page was ever read back: the data did not outgrow the pool"
    );
    mem.sample("after loading");
    db.close().expect("close");
    db = Db::open(dir.path(), options).expect("reopen");
    mem.sample("after reopening");
    let loaded = clock.elapsed();
    let (mut gets, mut scans) = (0u64, 0u64);

    for i in 0..sizes.mixed_ops {
        let n = rng.below(u64::from(space)) as u32;
        let k = ordered_key(u64::from(n));
        match rng.below(100) {
            0..40 => {
                version += 1;
                db.put(&k, &value(n, version)).expect("put");
                model.insert(n, version);
            }
            40..55 => {
                let was = db.delete(&k).expect("delete");
                assert_eq!(was, model[&n] != 0, "delete({n}) reports presence");
                model.insert(n, 0);
            }
            55..92 => {
                gets += 1;
                let got = db.get(&k).expect("get");
                let want = (model[&n] != 0).then(|| value(n, model[&n]));
                assert_eq!(got, want, "get({n})");
            }
            _ => {
                scans += 1;
                let (lower, upper) = (random_bound(&mut rng, space), random_bound(&mut rng, space));
                let reverse = rng.below(2) == 0;
                // Seeks mostly land near the range: a seek far outside it walks every leaf in
                // between (see the crate's issue notes), which is correct but slow.
                let near = |b: Bound<u32>, open: u32| match b {
                    Bound::Included(n) | Bound::Excluded(n) => n,
                    Bound::Unbounded => open,
                };
                let seek = match rng.below(24) {
                    0..6 => Some(near(lower, 0) + rng.below(100) as u32),
                    6..12 => Some(near(upper, space).saturating_sub(rng.below(100) as u32)),
                    12 => Some(rng.below(u64::from(space)) as u32),
                    _ => None,
                };
                compare_range(
                    &db,
                    &model,
                    lower,
                    upper,
                    reverse,
                    seek,
                    1 + rng.below(60) as usize,
                );
            }
        }
        if i % 20_000 == 0 {
            mem.sample(&format!("after {i} mixed operations"));
        }
    }

    let mixed = clock.elapsed() - loaded;
    // The whole database, in both directions, in step with the model (streamed: collecting
    // both sides would count the test's own vectors against the database).
    compare_all(&db, &model, false);
    compare_all(&db, &model, true);
    let live = model.values().filter(|v| **v != 0).count() as u64;
    let report = db.check().expect("check");
    assert_eq!(report.records, live, "check() records");
    assert_eq!(db.stats().records, live, "stats().records");
    mem.sample("at the end");
    let (_, peak) = rss();
    let peak_growth = peak.saturating_sub(baseline);
    let stats = db.stats();
    eprintln!(
        "db_memory: {} records ({} MiB raw) over a {} MiB pool; RSS baseline {} MiB, worst \
         sampled growth {} KiB, peak growth {} KiB (allowed {} KiB); {} cache misses, {} page \
         writes, {} file pages; load {:.1} s, mixed phase {:.1} s ({gets} gets, {scans} scans), \
         total {:.1} s",
        sizes.records,
        raw >> 20,
        sizes.cache_bytes >> 20,
        baseline >> 20,
        mem.worst >> 10,
        peak_growth >> 10,
        (sizes.cache_bytes + OVERHEAD) >> 10,
        stats.cache_misses,
        stats.page_writes,
        stats.file_pages,
        loaded.as_secs_f64(),
        mixed.as_secs_f64(),
        clock.elapsed().as_secs_f64()
    );
    within_budget(peak_growth, sizes.cache_bytes, "at the peak");
    db.close().expect("close");
}

#[test]
fn data_five_times_the_pool_matches_the_model_within_the_memory_budget() {
    run(Sizes {
        records: 160_000,
        cache_bytes: 4 << 20,
        mixed_ops: 60_000,
    });
}

#[test]
#[ignore = "minutes; run with --release"]
fn two_million_records_over_a_32_mib_pool() {
    run(Sizes {
        records: 2_000_000,
        cache_bytes: 32 << 20,
        mixed_ops: 300_000,
    });
}
