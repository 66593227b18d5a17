//! YCSB for sylva: workloads, trace files, a multi-threaded runner and reports.
//!
//! Depends on sylva's `KvStore` trait only; engines (sylva's and peers') are plugged in by the
//! `sylva` command.
//!
//! - [`keys`]: the key sets (`dense`, `sparse`, `urls`, `wiki`, `file:PATH`).
//! - [`dist`]: uniform, scrambled zipfian (θ = 0.99) and latest request distributions, as the YCSB
//!   client generates them.
//! - [`workload`]: the core workloads A–F and the BP-tree paper's X and Y; generation of both phases.
//! - [`trace`]: the index-microbench / RECIPE trace format, read and written.
//! - [`runner`]: replays a phase from N threads, timing every operation, consuming every result.
//! - [`report`]: per-run records, the summary table and the JSON file.
//! - [`process`]: physical I/O, CPU time per thread, load average and file sizes, from `/proc`.
#![warn(missing_docs)]

pub mod dist;
pub mod keys;
pub mod memory;
pub mod process;
pub mod report;
pub mod runner;
pub mod trace;
pub mod workload;

use std::path::PathBuf;

/// A workload that cannot be built: bad parameters, an unreadable or malformed file.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A parameter is out of range or unknown.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a file is malformed.
    #[error("{}:{line}: {detail}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0: the file as a whole).
        line: usize,
        /// What is wrong.
        detail: String,
    },
}
