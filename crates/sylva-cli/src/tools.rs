//! The database tools: `sylva put`, `get`, `delete`, `scan`, `stats`, `check`, `backup` and
//! `compact` over a database directory (issue 5, "CLI"; issue 23 for `backup` and `compact`).
//!
//! Every command opens the database, does its one thing and closes it again (`Db::close`
//! checkpoints), so a second command in another process sees the result. Behaviour the tests and
//! the README rely on:
//! - Writes are durable before the command exits: `put` and `delete` open with
//!   [`SyncMode::Always`] and close with a checkpoint, checking both results.
//! - `get` prints the value and a newline on stdout; `delete` prints `deleted`. A missing key
//!   prints `not found` on stderr and exits with code 1.
//! - `scan` prints one `key<TAB>value` line per record: `--from` is inclusive, `--to` exclusive,
//!   `--reverse` walks down from the top of the range, `--limit` stops after so many records.
//! - Keys and values are UTF-8 text, or hex with `--hex` (see [`crate::encoding`]).
//! - Any error (locked, not a database, corruption, bad input) prints one line `error: ...` on
//!   stderr and exits with code 2.
//! - Only `put` creates a database; every other command on a directory without a `data.sylva`
//!   fails with `no database at DIR` (a mistyped path must not leave an empty database behind).

use std::io::{self, IsTerminal, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sylva::{BackupOptions, Db, DbOptions, DbStats, SyncMode};

use crate::encoding::Encoding;

/// The page file every sylva database directory holds (see `crates/sylva/src/db/mod.rs`).
const DATA_FILE: &str = "data.sylva";

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did what was asked: exit code 0.
    Done,
    /// The key was absent: `not found` on stderr, exit code 1.
    NotFound,
}

/// The database directory and how keys and values are written.
#[derive(Debug, Args)]
pub struct At {
    /// The database directory.
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    /// Keys and values are hex digits, in arguments and in output (for binary keys).
    #[arg(long)]
    hex: bool,
}

impl At {
    pub fn encoding(&self) -> Encoding {
        Encoding::from_flag(self.hex)
    }
}

/// Arguments of `sylva put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    at: At,
    /// The key.
    #[arg(allow_hyphen_values = true)]
    key: String,
    /// The value (may be empty); or give `--value-file`.
    #[arg(allow_hyphen_values = true, required_unless_present = "value_file")]
    value: Option<String>,
    /// Read the value's bytes from FILE (`-`: standard input), as they are (not hex, not
    /// text): for values too long for an argument (the kernel refuses arguments over 128 KiB).
    #[arg(long, value_name = "FILE", conflicts_with = "value")]
    value_file: Option<PathBuf>,
}

/// Arguments of `sylva get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Write the value's bytes to FILE (`-`: standard output) as they are, without a newline
    /// and without hex, instead of printing it.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Arguments of `sylva get` and `sylva delete`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    at: At,
    /// The key.
    #[arg(allow_hyphen_values = true)]
    key: String,
}

/// Arguments of `sylva scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    at: At,
    /// First key of the range (inclusive; default: the smallest key).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    from: Option<String>,
    /// End of the range (exclusive; default: past the largest key).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    to: Option<String>,
    /// Print at most this many records.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Walk the range in descending order, from its top.
    #[arg(long)]
    reverse: bool,
}

/// Arguments of `sylva backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The database directory.
    #[arg(long, value_name = "DIR")]
    db: PathBuf,
    /// Where the copy goes: a directory that does not exist yet, or an empty one.
    #[arg(long, value_name = "DIR2")]
    to: PathBuf,
}

/// Arguments of `sylva stats`, `sylva check` and `sylva compact`.
#[derive(Debug, Args)]
pub struct DirArgs {
    /// The database directory.
    #[arg(long, value_name = "DIR")]
    db: PathBuf,
}

/// `sylva put`: inserts or overwrites one record, durably.
pub fn put(args: PutArgs) -> Result<Outcome, String> {
    let enc = args.at.encoding();
    let key = enc.decode("key", &args.key)?;
    let value = match (&args.value, &args.value_file) {
        (_, Some(file)) => read_value_file(file)?,
        (Some(v), None) => enc.decode("value", v)?,
        (None, None) => return Err("give a value or --value-file FILE".into()),
    };
    let db = open_for_writing(&args.at.db)?;
    let put = db.put(&key, &value).map_err(|e| e.to_string());
    close(db, put)?;
    Ok(Outcome::Done)
}

/// The bytes of `file`, or of standard input for `-`.
fn read_value_file(file: &Path) -> Result<Vec<u8>, String> {
    if file == Path::new("-") {
        let mut v = Vec::new();
        io::Read::read_to_end(&mut io::stdin().lock(), &mut v)
            .map_err(|e| format!("cannot read the value from standard input: {e}"))?;
        return Ok(v);
    }
    std::fs::read(file).map_err(|e| format!("cannot read the value from {}: {e}", file.display()))
}

/// `sylva get`: prints one value, or writes it to `--out`.
pub fn get(args: GetArgs) -> Result<Outcome, String> {
    let (out, args) = (args.out, args.key);
    let enc = args.at.encoding();
    let key = enc.decode("key", &args.key)?;
    let db = open_existing(&args.at.db, DbOptions::default())?;
    let found = db.get(&key).map_err(|e| e.to_string());
    let Some(value) = close(db, found)? else {
        return Ok(Outcome::NotFound);
    };
    if let Some(file) = out {
        if file == Path::new("-") {
            write_out(&value)?;
        } else {
            std::fs::write(&file, &value)
                .map_err(|e| format!("cannot write the value to {}: {e}", file.display()))?;
        }
        return Ok(Outcome::Done);
    }
    let mut line = Vec::with_capacity(value.len() * 2 + 1);
    enc.encode_into(&value, &mut line);
    line.push(b'\n');
    write_out(&line)?;
    Ok(Outcome::Done)
}

/// `sylva delete`: removes one record, durably; `deleted` if it was there.
pub fn delete(args: KeyArgs) -> Result<Outcome, String> {
    let key = args.at.encoding().decode("key", &args.key)?;
    let db = open_existing(&args.at.db, durable())?;
    let deleted = db.delete(&key).map_err(|e| e.to_string());
    if !close(db, deleted)? {
        return Ok(Outcome::NotFound);
    }
    write_out(b"deleted\n")?;
    Ok(Outcome::Done)
}

/// `sylva scan`: prints a key range, one `key<TAB>value` line per record.
pub fn scan(args: ScanArgs) -> Result<Outcome, String> {
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
    let db = open_existing(&args.at.db, DbOptions::default())?;
    let printed = print_range(&db, enc, from.as_deref(), to.as_deref(), &args);
    close(db, printed)?;
    Ok(Outcome::Done)
}

fn print_range(
    db: &Db,
    enc: Encoding,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
    args: &ScanArgs,
) -> Result<(), String> {
    if let (Some(f), Some(t)) = (from, to) {
        if f >= t {
            return Ok(());
        }
    }
    let lower = from.map_or(Bound::Unbounded, Bound::Included);
    let upper = to.map_or(Bound::Unbounded, Bound::Excluded);
    let mut cursor = db.range(lower, upper);
    if args.reverse {
        cursor = cursor.rev();
    }
    let limit = args.limit.unwrap_or(u64::MAX);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut line = Vec::new();
    for record in cursor.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        let (key, value) = record.map_err(|e| e.to_string())?;
        line.clear();
        enc.encode_into(&key, &mut line);
        line.push(b'\t');
        enc.encode_into(&value, &mut line);
        line.push(b'\n');
        if !write_or_closed(&mut out, &line)? {
            return Ok(());
        }
    }
    out.flush()
        .or_else(ignore_broken_pipe)
        .map_err(|e| format!("cannot write to stdout: {e}"))
}

/// `sylva stats`: the database's counts and cache figures, one `name: value` per line.
pub fn stats(args: DirArgs) -> Result<Outcome, String> {
    let db = open_existing(&args.db, DbOptions::default())?;
    let stats = db.stats();
    close(db, Ok(()))?;
    write_out(format_stats(&stats).as_bytes())?;
    Ok(Outcome::Done)
}

fn format_stats(s: &DbStats) -> String {
    let accesses = s.cache_hits + s.cache_misses;
    let hit_rate = if accesses == 0 {
        "- (no page accesses since open)".to_owned()
    } else {
        format!("{:.4}", s.cache_hits as f64 / accesses as f64)
    };
    let rows: [(&str, String); 25] = [
        ("records", s.records.to_string()),
        ("page_size", s.page_size.to_string()),
        ("file_pages", s.file_pages.to_string()),
        ("tree_pages", s.tree_pages.to_string()),
        ("free_pages", s.free_pages.to_string()),
        ("height", s.height.to_string()),
        ("fill_factor", format!("{:.4}", s.fill_factor)),
        ("cache_hit_rate", hit_rate),
        ("cache_hits", s.cache_hits.to_string()),
        ("cache_misses", s.cache_misses.to_string()),
        ("resident_pages", s.resident_pages.to_string()),
        ("budget_pages", s.budget_pages.to_string()),
        ("page_writes", s.page_writes.to_string()),
        ("wal_bytes", s.wal_bytes.to_string()),
        ("checkpoints", s.checkpoints.to_string()),
        ("overflow_values", s.overflow_values.to_string()),
        ("overflow_pages", s.overflow_pages.to_string()),
        ("overflow_bytes", s.overflow_bytes.to_string()),
        // Issue 23, "Space": appended, so the lines above keep their places.
        ("overflow_run_bytes", s.overflow_run_bytes().to_string()),
        ("file_bytes", s.file_bytes.to_string()),
        ("free_bytes", s.free_bytes().to_string()),
        ("free_extents", s.free_extents.to_string()),
        (
            "largest_free_extent_pages",
            s.largest_free_extent.to_string(),
        ),
        ("free_pages_at_end", s.free_pages_at_end.to_string()),
        ("free_space_pages", s.free_space_pages.to_string()),
    ];
    rows.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
}

/// `sylva backup`: `Db::backup_to` (the copy durable when the command returns), then one line
/// `backed up DIR to DIR2: ...` with what was copied; on a terminal a progress bar on stderr
/// counts the bytes copied meanwhile. The command opens the database itself, so a database
/// another process has open is refused (`locked`): that process takes its online backups with
/// `Db::backup_to`.
pub fn backup(args: BackupArgs) -> Result<Outcome, String> {
    let db = open_existing(&args.db, DbOptions::default())?;
    let bar = io::stderr().is_terminal().then(|| {
        let style = ProgressStyle::with_template(
            "backup [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        ProgressBar::new(0).with_style(style)
    });
    let done = db
        .backup_watched(&args.to, BackupOptions::default(), &mut |p| {
            if let Some(bar) = &bar {
                bar.set_length(p.total);
                bar.set_position(p.copied);
            }
        })
        .map_err(|e| format!("backup failed: {e}"));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let r = close(db, done)?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let line = format!(
        "backed up {} to {}: {:.1} MiB of pages, {:.1} MiB of log, in {:.2} s\n",
        args.db.display(),
        args.to.display(),
        mib(r.page_bytes + r.recopied_bytes),
        mib(r.log_bytes),
        r.duration.as_secs_f64()
    );
    write_out(line.as_bytes())?;
    Ok(Outcome::Done)
}

/// `sylva compact`: `Db::compact`, then one line `compacted DIR: ...` with the file's length
/// before and after and the free pages left inside it (holes compaction does not move).
pub fn compact(args: DirArgs) -> Result<Outcome, String> {
    let db = open_existing(&args.db, DbOptions::default())?;
    let done = db.compact().map_err(|e| format!("compact failed: {e}"));
    let r = close(db, done)?;
    let line = format!(
        "compacted {}: {} bytes before, {} after ({} pages of {} bytes given back; free pages \
         left inside: {})\n",
        args.db.display(),
        r.bytes_before,
        r.bytes_after,
        r.bytes_returned() / r.page_size as u64,
        r.page_size,
        r.free_pages_left
    );
    write_out(line.as_bytes())?;
    Ok(Outcome::Done)
}

/// `sylva check`: every page checksum and the tree's structure; any problem is an error. A
/// damaged older meta page (found at open) is reported on a `warning:` line.
pub fn check(args: DirArgs) -> Result<Outcome, String> {
    let db = open_existing(&args.db, DbOptions::default())?;
    let older_meta = db.recovery().older_meta_damage.clone();
    let checked = db.check().map_err(|e| format!("check failed: {e}"));
    let report = close(db, checked)?;
    let mut line = format!(
        "ok: {} records; {} leaf and {} inner pages; height {}; page checksums and tree structure verified\n",
        report.records, report.leaves, report.inner, report.height
    );
    if let Some(damage) = older_meta {
        // Not an error: the database never reads that page again (this check's checkpoint
        // rewrote it), and a crash during a checkpoint leaves it so. But it may be damage.
        line.push_str(&format!(
            "warning: {damage}; harmless now (rewritten by this check's checkpoint), but unless \
             the last process crashed during a checkpoint, the disk damaged it\n"
        ));
    }
    write_out(line.as_bytes())?;
    Ok(Outcome::Done)
}

/// Options of the writing commands: every write durable before it returns.
fn durable() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        ..DbOptions::default()
    }
}

/// Opens (creating if needed) for `put`.
fn open_for_writing(dir: &Path) -> Result<Db, String> {
    Db::open(dir, durable()).map_err(|e| e.to_string())
}

/// Opens a database that must already exist; never creates one.
pub fn open_existing(dir: &Path, options: DbOptions) -> Result<Db, String> {
    if !dir.join(DATA_FILE).exists() {
        return Err(format!("no database at {}", dir.display()));
    }
    Db::open(dir, options).map_err(|e| e.to_string())
}

/// Closes `db` (a checkpoint), then returns `result`; the first error wins.
pub fn close<T>(db: Db, result: Result<T, String>) -> Result<T, String> {
    let closed = db.close().map_err(|e| format!("closing the database: {e}"));
    let value = result?;
    closed?;
    Ok(value)
}

fn write_out(bytes: &[u8]) -> Result<(), String> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if write_or_closed(&mut out, bytes)? {
        out.flush()
            .or_else(ignore_broken_pipe)
            .map_err(|e| format!("cannot write to stdout: {e}"))?;
    }
    Ok(())
}

/// Writes `bytes`; `Ok(false)` when the reader has gone (`sylva scan | head`), which is not an
/// error.
fn write_or_closed(out: &mut impl Write, bytes: &[u8]) -> Result<bool, String> {
    match out.write_all(bytes) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(format!("cannot write to stdout: {e}")),
    }
}

fn ignore_broken_pipe(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_print_every_field_by_name() {
        let s = DbStats {
            records: 7,
            cache_hits: 3,
            cache_misses: 1,
            ..DbStats::default()
        };
        let text = format_stats(&s);
        assert!(text.starts_with("records: 7\n"), "{text}");
        assert!(text.contains("cache_hit_rate: 0.7500\n"), "{text}");
        for name in [
            "free_extents",
            "free_pages_at_end",
            "overflow_run_bytes",
            "fill_factor",
            "height",
            "wal_bytes",
            "free_pages",
            "file_pages",
        ] {
            assert!(text.contains(&format!("\n{name}: ")), "{name} in {text}");
        }
        let idle = format_stats(&DbStats::default());
        assert!(
            idle.contains("cache_hit_rate: - (no page accesses"),
            "{idle}"
        );
    }
}
