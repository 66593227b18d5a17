//! The `sylva` command: benchmarks (`sylva bench`) and, with the durable engine, tools over a
//! database directory.
//!
//! Errors print one line on stderr and exit with code 2; nothing panics on bad input.

mod bench;
mod charts;
mod engines;
#[cfg(feature = "peers")]
mod peers;
mod suite;

use clap::{Parser, Subcommand};

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
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
