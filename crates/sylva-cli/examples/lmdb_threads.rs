//! LMDB with one and two threads, straight through heed, without sylva's adapter (no group
//! commit, no boundary sync thread, no `KvStore`): does LMDB itself lose throughput when two
//! threads mix reads and updates, and what do its updates cost in bytes written (issue 24,
//! part 3; `docs/benchmarking.md`, "LMDB with two threads")?
//!
//! ```text
//! cargo run --release -p sylva-cli --features peers-no-rocksdb --example lmdb_threads -- \
//!     DIR [RECORDS] [OPS] [ROUNDS] [--zipfian] [--sync-every=N | --cadence=OPS,MS] [--threads=1,2] \
//!     [--steps=a,split,reads,updates,pin] [--pin-txns=N] [--single-load]
//! ```
//!
//! Loads RECORDS records (8-byte keys, 56-byte values; in key order in transactions of 10,000,
//! or with `--single-load` in random order a transaction each, as `sylva bench` loads; with
//! `MDB_NOSYNC` and `MDB_NORDAHEAD`, as the adapter opens LMDB), then runs the steps in order.
//! The bytes per update below count each page-cache folio an update dirties at its full size,
//! and the kernel caches a file written in large runs (the bulk load) in large folios: compare
//! bytes per update only between runs on the same load. A mix runs,
//! per round and alternating the thread counts' order, OPS operations on each thread count
//! (split between the threads), each operation its own transaction (a read transaction per
//! read, a write transaction committed per update, as LMDB's documentation describes use from
//! many threads). Mixes: `a` (half reads, half updates, every thread), `split` (the same half
//! and half, but with two threads one only reads and the other only updates), `reads`,
//! `updates`. The step `pin` holds a read transaction on one thread while the main thread
//! commits `--pin-txns=N` (default 2,000) single updates, then ends it: what a reader preempted
//! for a while does to LMDB's free pages.
//!
//! Keys are drawn uniformly, or with `--zipfian` from YCSB's scrambled zipfian (θ 0.99), as
//! `sylva bench` draws them. `--sync-every=N` makes every N-th update (counted over all
//! threads) call `mdb_env_sync(force)` after its commit, on the updating thread: the durable
//! points of the benchmark's `sync=batch`, counted in updates instead of time so that the bytes
//! an update costs do not depend on how fast the machine runs (at `sylva bench`'s rates its
//! 10 ms interval falls every 200 to 400 updates). `--cadence=OPS,MS` instead syncs as the
//! adapter does under `sync=batch,batch_ops=OPS,batch_ms=MS`: on `sylva::SyncCadence`, with its
//! boundary sync thread.
//!
//! Per run it prints ops/s and what does not depend on how busy the machine is: bytes the
//! process dirtied per update (`/proc/self/io`'s `write_bytes`: a page counts each time it
//! goes from clean to dirty, so a page rewritten before the next sync counts once), how far the
//! file grew, LMDB's *free pages* afterwards (pages of the file in neither the data tree nor
//! the two meta pages: the free list and the pages holding it), CPU time per operation, and
//! read transactions that lasted over a millisecond.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};
use sylva::{SyncCadence, SyncMode};
use ycsb::process::{CpuTime, IoCounters};

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// YCSB's scrambled zipfian (θ 0.99 over 10^10 items, hashed with FNV-1a onto the records), the
/// distribution `sylva bench` uses for YCSB A.
struct Zipfian {
    alpha: f64,
    zetan: f64,
    eta: f64,
    theta: f64,
}

impl Zipfian {
    const ITEMS: f64 = 1e10;

    fn new() -> Self {
        let theta = ycsb::dist::ZIPFIAN_THETA;
        // ζ(10^10, 0.99), the constant YCSB precomputes (as `ycsb::dist` does).
        let zetan = 26.469_028_201_783_02;
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = (1.0 - (2.0 / Self::ITEMS).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian {
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            theta,
        }
    }

    fn sample(&self, rng: &mut Rng, records: u64) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        let item = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (Self::ITEMS * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        ycsb::dist::fnv64(item) % records
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mix {
    A,
    Split,
    Reads,
    Updates,
}

struct Setup {
    records: u64,
    ops: u64,
    zipfian: bool,
    sync_every: u64,
    /// `--cadence`: the adapter's batch cadence, with its boundary sync thread.
    cadence: Option<SyncCadence>,
}

fn sync_error(e: heed::Error) -> sylva::Error {
    sylva::Error::io_at("lmdb", std::io::Error::other(e.to_string()))
}

/// What one run measured.
#[derive(Default, Clone, Copy)]
struct Measured {
    ops_per_sec: f64,
    updates: u64,
    write_bytes: u64,
    cpu: Duration,
    /// Read transactions that lasted over 1 ms, and the longest.
    slow_reads: u64,
    longest_read: Duration,
    syncs: u64,
}

/// Runs `setup.ops` operations of `mix` on `threads` threads.
fn run(env: &Env, db: Database<Bytes, Bytes>, setup: &Setup, threads: u64, mix: Mix) -> Measured {
    let updates_done = AtomicU64::new(0);
    let syncs = AtomicU64::new(0);
    let slow_reads = AtomicU64::new(0);
    let longest_ns = AtomicU64::new(0);
    let zipf = Zipfian::new();
    let due0 = setup.cadence.as_ref().map_or(0, |c| c.due_count());
    let io0 = IoCounters::now();
    let cpu0 = CpuTime::process();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let env = env.clone();
            let (updates_done, syncs, slow_reads, longest_ns, zipf) =
                (&updates_done, &syncs, &slow_reads, &longest_ns, &zipf);
            s.spawn(move || {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ ((t + 1) * 0x1234_5678));
                let value = [t as u8; 56];
                for _ in 0..setup.ops / threads {
                    let k = if setup.zipfian {
                        key(zipf.sample(&mut rng, setup.records))
                    } else {
                        key(rng.next() % setup.records)
                    };
                    let read = match mix {
                        Mix::A => rng.next().is_multiple_of(2),
                        Mix::Split => {
                            (threads == 1 && rng.next().is_multiple_of(2))
                                || (threads > 1 && t == 0)
                        }
                        Mix::Reads => true,
                        Mix::Updates => false,
                    };
                    if read {
                        let began = Instant::now();
                        let rtxn = env.read_txn().expect("read txn");
                        let v = db.get(&rtxn, &k).expect("get");
                        assert!(v.is_some_and(|v| v.len() == 56));
                        drop(rtxn);
                        let took = began.elapsed();
                        if took > Duration::from_millis(1) {
                            slow_reads.fetch_add(1, Ordering::Relaxed);
                            longest_ns.fetch_max(took.as_nanos() as u64, Ordering::Relaxed);
                        }
                    } else {
                        let mut wtxn = env.write_txn().expect("write txn");
                        db.put(&mut wtxn, &k, &value).expect("put");
                        wtxn.commit().expect("commit");
                        let n = updates_done.fetch_add(1, Ordering::Relaxed) + 1;
                        if let Some(cadence) = &setup.cadence {
                            cadence
                                .written(1, |_| env.force_sync().map_err(sync_error))
                                .expect("sync");
                        } else if setup.sync_every > 0 && n.is_multiple_of(setup.sync_every) {
                            env.force_sync().expect("sync");
                            syncs.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let syncs = syncs.into_inner() + setup.cadence.as_ref().map_or(0, |c| c.due_count() - due0);
    let write_bytes = match (io0, IoCounters::now()) {
        (Some(a), Some(b)) => b.since(&a).write_bytes,
        _ => 0,
    };
    let cpu = match (cpu0, CpuTime::process()) {
        (Some(a), Some(b)) => b.since(&a).total(),
        _ => Duration::ZERO,
    };
    Measured {
        ops_per_sec: (setup.ops / threads * threads) as f64 / seconds,
        updates: updates_done.into_inner(),
        write_bytes,
        cpu,
        slow_reads: slow_reads.into_inner(),
        longest_read: Duration::from_nanos(longest_ns.into_inner()),
        syncs,
    }
}

/// Pages of the file outside the data tree and the two meta pages: LMDB's free pages and the
/// pages of its free list.
fn free_pages(env: &Env, db: Database<Bytes, Bytes>) -> usize {
    let rtxn = env.read_txn().expect("read txn");
    let stat = db.stat(&rtxn).expect("stat");
    let in_tree = stat.branch_pages + stat.leaf_pages + stat.overflow_pages;
    (env.info().last_page_number + 1).saturating_sub(in_tree + 2)
}

/// Holds a read transaction on another thread while `txns` single updates commit, then ends it.
fn pin(env: &Env, db: Database<Bytes, Bytes>, records: u64, txns: u64) {
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let env2 = env.clone();
        s.spawn(move || {
            let rtxn = env2.read_txn().expect("read txn");
            ready_tx.send(()).expect("ready");
            hold_rx.recv().expect("hold");
            drop(rtxn);
        });
        ready_rx.recv().expect("ready");
        let mut rng = Rng(0x9E37_79B9);
        for _ in 0..txns {
            let mut wtxn = env.write_txn().expect("write txn");
            db.put(&mut wtxn, &key(rng.next() % records), &[9u8; 56])
                .expect("put");
            wtxn.commit().expect("commit");
        }
        hold_tx.send(()).expect("release");
    });
    env.force_sync().expect("sync");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut positional = Vec::new();
    let mut zipfian = false;
    let mut sync_every = 0u64;
    let mut thread_counts = vec![1u64, 2];
    let mut steps = "a,split,reads,updates".to_string();
    let mut pin_txns = 2000u64;
    let mut cadence = None;
    let mut single_load = false;
    for arg in std::env::args().skip(1) {
        if arg == "--zipfian" {
            zipfian = true;
        } else if arg == "--single-load" {
            single_load = true;
        } else if let Some(v) = arg.strip_prefix("--sync-every=") {
            sync_every = v.parse().expect("--sync-every=N");
        } else if let Some(v) = arg.strip_prefix("--threads=") {
            thread_counts = v
                .split(',')
                .map(|t| t.parse().expect("--threads=1,2"))
                .collect();
        } else if let Some(v) = arg.strip_prefix("--steps=") {
            steps = v.to_string();
        } else if let Some(v) = arg.strip_prefix("--cadence=") {
            let (ops, ms) = v.split_once(',').expect("--cadence=OPS,MS");
            cadence = Some((
                ops.parse::<u64>().expect("--cadence=OPS,MS"),
                ms.parse::<u64>().expect("--cadence=OPS,MS"),
            ));
        } else if let Some(v) = arg.strip_prefix("--pin-txns=") {
            pin_txns = v.parse().expect("--pin-txns=N");
        } else if arg.starts_with("--") {
            panic!("unknown option {arg}");
        } else {
            positional.push(arg);
        }
    }
    let dir = Path::new(
        positional
            .first()
            .map_or("/tmp/lmdb-threads", |s| s.as_str()),
    );
    let records: u64 = positional
        .get(1)
        .map_or(1_000_000, |s| s.parse().expect("RECORDS"));
    let ops: u64 = positional
        .get(2)
        .map_or(500_000, |s| s.parse().expect("OPS"));
    let rounds: u64 = positional.get(3).map_or(3, |s| s.parse().expect("ROUNDS"));
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let mut options = EnvOpenOptions::new();
    options.map_size(64 << 30).max_readers(512);
    // SAFETY: both flags only drop the fsync at commit and advise the kernel; the directory is
    // this program's alone.
    let env = unsafe {
        options.flags(EnvFlags::NO_SYNC | EnvFlags::NO_READ_AHEAD);
        options.open(dir)
    }
    .expect("open");
    let wtxn = env.write_txn().expect("txn");
    let db: Database<Bytes, Bytes> = env
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            opener
                .create_database::<Bytes, Bytes>(wtxn, None)
                .map(CommitOrAbort::<_, ()>::Commit)
        })
        .expect("create")
        .commit()
        .expect("committed");
    let value = [7u8; 56];
    if single_load {
        for i in 0..records {
            let mut wtxn = env.write_txn().expect("txn");
            db.put(&mut wtxn, &key(i), &value).expect("put");
            wtxn.commit().expect("commit");
        }
    } else {
        // In key order: loading in random order in large transactions leaves LMDB a free list
        // of tens of thousands of pages in records of thousands each, which every later commit
        // loads and writes back (at 5M records, 500 KB written per update).
        let mut keys: Vec<[u8; 8]> = (0..records).map(key).collect();
        keys.sort_unstable();
        for chunk in keys.chunks(10_000) {
            let mut wtxn = env.write_txn().expect("txn");
            for k in chunk {
                db.put(&mut wtxn, k, &value).expect("put");
            }
            wtxn.commit().expect("commit");
        }
    }
    env.force_sync().expect("sync");
    let setup = Setup {
        records,
        ops,
        zipfian,
        sync_every,
        cadence: cadence.map(|(ops, ms)| {
            let env = env.clone();
            let mode = SyncMode::Batch {
                ops,
                interval: Duration::from_millis(ms),
            };
            SyncCadence::with_thread(mode, "lmdb-boundary-sync", move || {
                env.force_sync().map_err(sync_error)
            })
            .expect("sync thread")
        }),
    };
    let pages = |env: &Env| env.info().last_page_number;
    let loaded = pages(&env);
    println!(
        "loaded {records} records: {loaded} pages, {} free; keys {}, sync every {}",
        free_pages(&env, db),
        if zipfian { "zipfian" } else { "uniform" },
        match cadence {
            Some((ops, ms)) => format!("{ops} updates or {ms} ms (the adapter's cadence)"),
            None if sync_every == 0 => "never".to_string(),
            None => format!("{sync_every} updates"),
        }
    );
    println!(
        "step     threads  ops/s  KB/update  grew  free after  CPU µs/op  reads >1ms (longest)  syncs"
    );
    for step in steps.split(',') {
        let mix = match step {
            "a" => Mix::A,
            "split" => Mix::Split,
            "reads" => Mix::Reads,
            "updates" => Mix::Updates,
            "pin" => {
                let before = pages(&env);
                pin(&env, db, records, pin_txns);
                println!(
                    "pin      {pin_txns} updates under one read transaction: grew {} pages, {} free",
                    pages(&env) - before,
                    free_pages(&env, db)
                );
                continue;
            }
            other => panic!("unknown step {other}"),
        };
        let mut by: Vec<Vec<f64>> = vec![Vec::new(); thread_counts.len()];
        for round in 0..rounds {
            let mut order: Vec<usize> = (0..thread_counts.len()).collect();
            if !round.is_multiple_of(2) {
                order.reverse();
            }
            for i in order {
                let threads = thread_counts[i];
                let before = pages(&env);
                let m = run(&env, db, &setup, threads, mix);
                let grew = pages(&env) - before;
                by[i].push(m.ops_per_sec);
                println!(
                    "{:<8} {:>7} {:>5.0}K {:>10.1} {:>5} {:>11} {:>10.2} {:>11} ({:>5.1} ms) {:>6}",
                    step,
                    threads,
                    m.ops_per_sec / 1e3,
                    m.write_bytes as f64 / m.updates.max(1) as f64 / 1024.0,
                    grew,
                    free_pages(&env, db),
                    m.cpu.as_secs_f64() * 1e6 / ops as f64,
                    m.slow_reads,
                    m.longest_read.as_secs_f64() * 1e3,
                    m.syncs
                );
            }
        }
        let med: Vec<f64> = by.into_iter().map(median).collect();
        let summary: Vec<String> = thread_counts
            .iter()
            .zip(&med)
            .map(|(t, m)| format!("{t} threads {:.0}K", m / 1e3))
            .collect();
        let ratio = if med.len() == 2 {
            format!(
                ", {}/{}: {:.2}",
                thread_counts[1],
                thread_counts[0],
                med[1] / med[0]
            )
        } else {
            String::new()
        };
        println!("{step}: medians {}{ratio}", summary.join(", "));
    }
    println!(
        "file: {} pages after every step ({loaded} after the load)",
        pages(&env)
    );
}
