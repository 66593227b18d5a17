//! How long recovery takes for a given amount of log: the cost side of `checkpoint_bytes`.
//!
//! ```text
//! cargo run --release --example db_recovery -- crash DIR RECORDS LOG_MIB [CHECKPOINT_MIB]
//! cargo run --release --example db_recovery -- open DIR
//! ```
//!
//! `crash` loads `RECORDS` records (8-byte keys, 56-byte values, `SyncMode::Never`), checkpoints,
//! then updates random records until `LOG_MIB` MiB have been logged with no checkpoint in
//! between (the log a crash just before the next checkpoint leaves when `checkpoint_bytes` is
//! that size), syncs the log and exits without closing, as `kill -9` would. `open` times the
//! recovery of what it left. With `CHECKPOINT_MIB`, the load checkpoints whenever that much log
//! has been written (`checkpoint_bytes`), as a database left at its defaults (1024) does, so
//! recovery reads the two log segments such a database leaves behind.
#![allow(clippy::unwrap_used, missing_docs)]
use std::time::Instant;
use sylva::{Db, DbOptions, KvStore, SyncMode};

fn options(checkpoint_mib: Option<u64>) -> DbOptions {
    DbOptions {
        sync: SyncMode::Never,
        cache_bytes: 4 << 30,
        checkpoint_bytes: checkpoint_mib.map_or(1 << 50, |m| m << 20),
        ..DbOptions::default()
    }
}

/// One of the database's counters, without the full walk of `Db::stats`.
fn counter(db: &Db, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |c| c.1)
}

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::PathBuf::from(&args[1]);
    match args[0].as_str() {
        "crash" => {
            let n: u64 = args[2].parse().unwrap();
            let log_bytes: u64 = args[3].parse::<u64>().unwrap() << 20;
            let checkpoint_mib = args.get(4).map(|m| m.parse::<u64>().unwrap());
            let db = Db::open(&dir, options(checkpoint_mib)).unwrap();
            let value = [7u8; 56];
            for i in 0..n {
                db.put(&key(i), &value).unwrap();
            }
            db.checkpoint().unwrap();
            let start = counter(&db, "wal_written");
            let (mut x, mut updates) = (0x2545_F491_4F6C_DD1Du64, 0u64);
            while counter(&db, "wal_written") - start < log_bytes {
                for _ in 0..10_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    db.put(&key(x % n), &value).unwrap();
                }
                updates += 10_000;
            }
            db.sync().unwrap();
            println!(
                "crash: {n} records, {updates} updates, log {} MiB ({} MiB of full-page writes)",
                (counter(&db, "wal_written") - start) >> 20,
                counter(&db, "wal_fpw_written") >> 20
            );
            std::process::exit(0);
        }
        "open" => {
            let t = Instant::now();
            let db = Db::open(&dir, options(None)).unwrap();
            let took = t.elapsed();
            let r = db.recovery();
            println!(
                "open: {:.2} s, {} records redone, {} records",
                took.as_secs_f64(),
                r.records_redone,
                KvStore::stats(&db).records
            );
        }
        other => panic!("unknown command {other}: crash DIR RECORDS LOG_MIB | open DIR"),
    }
}
