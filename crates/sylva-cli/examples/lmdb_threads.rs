//! LMDB with one and two threads, straight through heed, without sylva's adapter (no group
//! commit, no sync thread, no `KvStore`): does LMDB itself lose throughput when two threads
//! mix reads and updates (issue 24, part 3; `docs/benchmarking.md`, "Concurrent writers")?
//!
//! ```text
//! cargo run --release -p sylva-cli --features peers-no-rocksdb --example lmdb_threads -- DIR [RECORDS] [OPS] [ROUNDS]
//! ```
//!
//! Loads RECORDS records (8-byte keys, 56-byte values; `MDB_NOSYNC`, `MDB_NORDAHEAD`, as the
//! adapter opens LMDB), then per round runs, alternating the order, OPS operations of each mix
//! with one thread and with two (the OPS split between them), each operation its own
//! transaction (a read transaction per read, a write transaction committed per update, as
//! LMDB's documentation describes use from many threads). Mixes: `A` (half reads, half
//! updates, every thread), `split` (the same half and half, but one thread only reads and the
//! other only updates), `reads`, `updates`. Prints ops/s per mix and thread count, the
//! two-thread/one-thread ratio of the medians, and how far the file grew.

use std::path::Path;
use std::time::Instant;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};

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
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mix {
    A,
    Split,
    Reads,
    Updates,
}

/// Runs `ops` operations of `mix` on `threads` threads; ops/s.
fn run(
    env: &Env,
    db: Database<Bytes, Bytes>,
    records: u64,
    ops: u64,
    threads: u64,
    mix: Mix,
) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let env = env.clone();
            s.spawn(move || {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ ((t + 1) * 0x1234_5678));
                let value = [t as u8; 56];
                for _ in 0..ops / threads {
                    let k = key(rng.next() % records);
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
                        let rtxn = env.read_txn().expect("read txn");
                        let v = db.get(&rtxn, &k).expect("get");
                        assert!(v.is_some_and(|v| v.len() == 56));
                    } else {
                        let mut wtxn = env.write_txn().expect("write txn");
                        db.put(&mut wtxn, &k, &value).expect("put");
                        wtxn.commit().expect("commit");
                    }
                }
            });
        }
    });
    ops as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(args.first().map_or("/tmp/lmdb-threads", |s| s.as_str()));
    let records: u64 = args
        .get(1)
        .map_or(1_000_000, |s| s.parse().expect("RECORDS"));
    let ops: u64 = args.get(2).map_or(500_000, |s| s.parse().expect("OPS"));
    let rounds: u64 = args.get(3).map_or(3, |s| s.parse().expect("ROUNDS"));
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
    for chunk in (0..records).collect::<Vec<_>>().chunks(10_000) {
        let mut wtxn = env.write_txn().expect("txn");
        for &i in chunk {
            db.put(&mut wtxn, &key(i), &value).expect("put");
        }
        wtxn.commit().expect("commit");
    }
    env.force_sync().expect("sync");
    let pages = |env: &Env| env.info().last_page_number;
    let loaded = pages(&env);
    println!("loaded {records} records: {loaded} pages");
    println!("mix      threads  rounds (ops/s)                    median    2/1");
    for mix in [Mix::A, Mix::Split, Mix::Reads, Mix::Updates] {
        let mut by = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            let order: [u64; 2] = if round.is_multiple_of(2) {
                [1, 2]
            } else {
                [2, 1]
            };
            for threads in order {
                let before = pages(&env);
                let r = run(&env, db, records, ops, threads, mix);
                let grew = pages(&env) - before;
                by[threads as usize - 1].push((r, grew));
            }
        }
        let med: Vec<f64> = by
            .iter()
            .map(|v| median(v.iter().map(|x| x.0).collect()))
            .collect();
        for (i, v) in by.iter().enumerate() {
            let runs: Vec<String> = v
                .iter()
                .map(|(r, g)| format!("{:.0}K (+{g} pages)", r / 1e3))
                .collect();
            let ratio = if i == 1 {
                format!("{:.2}", med[1] / med[0])
            } else {
                String::new()
            };
            println!(
                "{:<8} {:>7}  {:<34} {:>6.0}K  {ratio}",
                format!("{mix:?}"),
                i + 1,
                runs.join(", "),
                med[i] / 1e3
            );
        }
    }
    println!(
        "file: {} pages after every round ({loaded} after the load)",
        pages(&env)
    );
}
