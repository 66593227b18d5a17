//! The `sylva` command: benchmarks (`sylva bench`), tools over a database directory (`put`,
//! `get`, `delete`, `scan`, `stats`, `check`, `backup`, `compact`, `dump`, `load`), and `calibrate` (the PA-Tree
//! mode's disk model).
//!
//! Exit codes: 0 success; 1 the key was not found (`get`, `delete`; `not found` on stderr);
//! 2 an error, printed as one line `error: ...` on stderr. Nothing panics on bad input.

mod bench;
mod bound;
#[cfg(target_os = "linux")]
mod calibrate;
mod charts;
mod children;
mod dump;
mod encoding;
mod engines;
mod from;
mod patree;
#[cfg(feature = "peers-no-rocksdb")]
mod peers;
mod suite;
mod suite_devices;
mod suite_patree;
mod tools;

use clap::{Parser, Subcommand};

use tools::Outcome;

#[derive(Debug, Parser)]
#[command(
    name = "sylva",
    version,
    about = "sylva: an embedded ordered key-value store built from five B-tree designs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a YCSB workload (or replay traces) on one or more engines side by side.
    Bench(Box<bench::BenchArgs>),
    /// Insert or overwrite a record (durable when the command returns); `--value-file FILE`
    /// (`-`: stdin) for values of any size.
    Put(tools::PutArgs),
    /// Print a record's value (or write it to `--out FILE`); exit code 1 if the key is absent.
    Get(tools::GetArgs),
    /// Delete a record (durable when the command returns); exit code 1 if the key was absent.
    Delete(tools::KeyArgs),
    /// Print the records of a key range, one `key<TAB>value` line each.
    Scan(tools::ScanArgs),
    /// Print the database's page, cache and log figures.
    Stats(tools::DirArgs),
    /// Verify every page checksum and the tree's structure; non-zero exit on any problem.
    Check(tools::DirArgs),
    /// Give the free pages at the end of the database's file back to the file system.
    Compact(tools::DirArgs),
    /// Copy the database into a new or empty directory (a copy that opens as the database).
    Backup(tools::BackupArgs),
    /// Write a key range's records as a portable, checksummed stream (docs/format.md).
    Dump(dump::DumpArgs),
    /// Load a dump stream into a database (created if there is none), in atomic batches.
    Load(dump::LoadArgs),
    /// Measure the disk's random I/O through io_uring and fit the PA-Tree mode's probe model.
    #[cfg(target_os = "linux")]
    Calibrate(calibrate::CalibrateArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(mut args) => {
            // What follows `bench`, for the child processes of `--memory-limit`.
            args.argv = std::env::args()
                .skip_while(|a| a != "bench")
                .skip(1)
                .collect();
            // `--suite` runs a predefined comparison (which measures through `bench`),
            // otherwise one benchmark.
            match &args.suite {
                Some(suite) => suite::run(suite, &args),
                None => bench::run(*args),
            }
            .map(|()| Outcome::Done)
        }
        Command::Put(args) => tools::put(args),
        Command::Get(args) => tools::get(args),
        Command::Delete(args) => tools::delete(args),
        Command::Scan(args) => tools::scan(args),
        Command::Stats(args) => tools::stats(args),
        Command::Check(args) => tools::check(args),
        Command::Backup(args) => tools::backup(args),
        Command::Compact(args) => tools::compact(args),
        Command::Dump(args) => dump::dump(args),
        Command::Load(args) => dump::load(args),
        #[cfg(target_os = "linux")]
        Command::Calibrate(args) => calibrate::run(args),
    };
    match result {
        Ok(Outcome::Done) => {}
        Ok(Outcome::NotFound) => {
            eprintln!("not found");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
