//! `sylva calibrate`: measures raw 4 KiB random I/O on this machine's disk through io_uring at
//! several read shares and queue depths, and fits the PA-Tree mode's probe model to it
//! (`sylva::exec::calibrate`); the model file is what `probe=model:FILE` reads.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sylva::exec::calibrate::{calibrate, CalibrateOptions};

use crate::tools::Outcome;

/// Arguments of `sylva calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A directory on the disk to measure (a scratch file is written there and removed).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Where to write the fitted model.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The scratch file's size in MiB.
    #[arg(long, default_value_t = 256)]
    file_mib: u64,
    /// How long each point runs, in milliseconds.
    #[arg(long, default_value_t = 500)]
    ms_per_point: u64,
    /// Queue depths, comma-separated.
    #[arg(long, default_value = "1,2,4,8,16,32,64", value_delimiter = ',')]
    depths: Vec<u32>,
    /// Read shares in percent, comma-separated.
    #[arg(long, default_value = "100,90,50", value_delimiter = ',')]
    reads: Vec<u32>,
    /// The longest random pause before each probe, in µs (the samples then see completions
    /// of every age); 0 probes right after each submission, a bare io_uring loop to set
    /// against `fio` at the same depth.
    #[arg(long, default_value_t = 200)]
    max_pause_us: u64,
}

/// Runs the calibration, prints each point and writes the model.
pub fn run(args: CalibrateArgs) -> Result<Outcome, String> {
    let options = CalibrateOptions {
        file_bytes: args.file_mib << 20,
        per_point: Duration::from_millis(args.ms_per_point),
        read_percents: args.reads,
        depths: args.depths,
        max_pause: Duration::from_micros(args.max_pause_us),
    };
    let c = calibrate(&args.dir, &options).map_err(|e| e.to_string())?;
    println!("reads%  depth       IOPS  latency µs  CPU µs/IO");
    for p in &c.points {
        println!(
            "{:>6}  {:>5}  {:>9.0}  {:>10.1}  {:>9.2}",
            p.read_percent, p.depth, p.iops, p.mean_latency_us, p.cpu_us_per_io
        );
    }
    std::fs::write(&args.out, c.model.to_text())
        .map_err(|e| format!("{}: {e}", args.out.display()))?;
    println!(
        "model fitted to {} probes written to {}",
        c.samples,
        args.out.display()
    );
    Ok(Outcome::Done)
}
