//! `sylva dump` and `sylva load`: a database's records as a portable, checksummed stream
//! (`docs/format.md`, "Dump stream"; `sylva::DumpWriter`, `sylva::DumpReader`).
//!
//! - `dump --db DIR [--from K] [--to K] [--hex] [--out FILE]` writes the records of the range
//!   (`--from` inclusive, `--to` exclusive; with `--hex` both are hex, as in `scan`) to FILE or
//!   standard output, and prints `dumped N records` on stderr when writing to a file.
//! - `load --db DIR [FILE]` (`-` or nothing: standard input) loads a stream into the database
//!   (creating it; an existing key is overwritten), in atomic write batches, durable when the
//!   command returns. A file is verified whole first, so a damaged or truncated dump loads
//!   nothing; from standard input the batches before the damage stay loaded and the error says
//!   how many records they held. Either way the error names the byte offset. On a terminal a
//!   progress line on stderr counts records and bytes.

use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::ops::Bound;
use std::path::PathBuf;

use clap::Args;
use sylva::{Db, DbOptions, LoadReport, SyncMode};

use crate::tools::{At, Outcome};

/// Arguments of `sylva dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    #[command(flatten)]
    at: At,
    /// First key of the range (inclusive; default: the smallest key).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    from: Option<String>,
    /// End of the range (exclusive; default: past the largest key).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    to: Option<String>,
    /// Write the stream to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Arguments of `sylva load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The database directory (created if there is none).
    #[arg(long, value_name = "DIR")]
    db: PathBuf,
    /// The dump stream (`-` or nothing: standard input).
    #[arg(value_name = "FILE")]
    input: Option<PathBuf>,
}

/// `sylva dump`.
pub fn dump(args: DumpArgs) -> Result<Outcome, String> {
    let enc = args.at.encoding();
    let from = args
        .from
        .as_deref()
        .map(|k| enc.decode("--from key", k))
        .transpose()?;
    let to = args
        .to
        .as_deref()
        .map(|k| enc.decode("--to key", k))
        .transpose()?;
    let db = crate::tools::open_existing(&args.at.db, DbOptions::default())?;
    let lower = from.as_deref().map_or(Bound::Unbounded, Bound::Included);
    let upper = to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let empty = matches!((&from, &to), (Some(f), Some(t)) if f >= t);
    let upper = if empty {
        Bound::Excluded(&[][..])
    } else {
        upper
    };
    let dumped = match &args.out {
        Some(file) => std::fs::File::create(file)
            .map_err(|e| format!("cannot create {}: {e}", file.display()))
            .and_then(|f| {
                db.dump(BufWriter::new(f), lower, upper)
                    .map_err(|e| e.to_string())
            }),
        None => {
            let stdout = io::stdout();
            db.dump(BufWriter::new(stdout.lock()), lower, upper)
                .map_err(|e| e.to_string())
        }
    };
    let n = crate::tools::close(db, dumped)?;
    if args.out.is_some() {
        eprintln!("dumped {n} records");
    }
    Ok(Outcome::Done)
}

/// `sylva load`.
pub fn load(args: LoadArgs) -> Result<Outcome, String> {
    let file = args.input.filter(|p| p.as_os_str() != "-");
    if let Some(f) = &file {
        // A file is verified whole before anything is loaded.
        let input =
            std::fs::File::open(f).map_err(|e| format!("cannot open {}: {e}", f.display()))?;
        sylva::verify_dump(BufReader::with_capacity(1 << 20, input))
            .map_err(|e| format!("{}: {e}; nothing was loaded", f.display()))?;
    }
    let db = Db::open(
        &args.db,
        DbOptions {
            sync: SyncMode::Never,
            ..DbOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let terminal = io::stderr().is_terminal();
    let show = |r: &LoadReport| {
        if terminal {
            eprint!(
                "\rloaded {} records, {:.1} MB",
                r.records,
                r.bytes as f64 / 1e6
            );
            let _ = io::stderr().flush();
        }
    };
    let loaded = match &file {
        Some(f) => std::fs::File::open(f)
            .map_err(|e| format!("cannot open {}: {e}", f.display()))
            .and_then(|input| {
                db.load(BufReader::with_capacity(1 << 20, input), show)
                    .map_err(|e| e.to_string())
            }),
        None => db
            .load(BufReader::with_capacity(1 << 20, io::stdin().lock()), show)
            .map_err(|e| e.to_string()),
    };
    if terminal {
        eprintln!();
    }
    // Durable before the command returns: the close's checkpoint syncs everything.
    let report = crate::tools::close(db, loaded)?;
    eprintln!("loaded {} records", report.records);
    Ok(Outcome::Done)
}
