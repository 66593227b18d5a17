//! Options of a [`crate::Db`] and their string form (`sylva bench --engine db:sync=batch,...`).

use crate::wal::parse_number as number;
use std::time::Duration;

use crate::btree::options::parse_bool;
use crate::btree::Layout;
use crate::buffer::default_budget;
use crate::wal::SyncMode;

/// How a [`crate::Db`] opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbOptions {
    /// When writes become durable. Default: `Batch { ops: 1000, interval: 10 ms }` (the PA-Tree
    /// paper's weak persistence with its batch of 1,000 updates). Under `Batch` a background
    /// thread runs each boundary's fsync; the batch is durable when it completes.
    pub sync: SyncMode,
    /// Memory for cached pages and out-of-line values in bytes: the buffer pool's budget, of
    /// which the run cache may take up to three quarters while it holds values (`db::runcache`).
    /// Default: min(1 GiB, 25% of RAM).
    pub cache_bytes: u64,
    /// Keep out-of-line values in memory and write their runs back later (the default, `true`),
    /// or write each run at its put and read every get of one from the file (`false`: as before
    /// the run cache, kept to measure the difference side by side).
    pub run_cache: bool,
    /// Out-of-line values up to this many bytes are carried whole by their log record and
    /// their runs written later; longer ones are not logged, and the run is written before the
    /// log's sync that makes its record durable (with the run cache: by that sync, several
    /// runs and one page-file fsync at a time; without it, or for a value over a sixteenth of
    /// the cache: at the put, fsynced). Logging a value writes it twice, but leaves a
    /// `SyncMode::Always` commit one fsync, not two. Default 64 KiB (`db::overflow`); at most
    /// 32 MiB (a larger setting is taken as that; `logged_value_max=N` refuses it).
    pub logged_value_max: usize,
    /// Bytes the log buffers before handing them to the OS without an fsync (1 MiB; tests
    /// lower it to put unsynced records on disk, as a long log does). Not a tuning option.
    #[doc(hidden)]
    pub log_write_behind: usize,
    /// Page size of a new database (4096..=65536, a power of two). An existing database keeps the
    /// size it was created with. Default 4096.
    pub page_size: usize,
    /// Node layout of the tree. Default: `adaptive`.
    pub layout: Layout,
    /// Checkpoint once the log exceeds this many bytes. Default 1 GiB (PostgreSQL's default
    /// `max_wal_size`, for the same reason: the first change to each page after a checkpoint
    /// logs the page's whole image). Larger means fewer checkpoints, so fewer page writes and
    /// images, and a longer recovery after a crash: at 5M records, redoing a full 1 GiB log took
    /// 13 s, a 256 MiB one 3 s, while 256 MiB was reached after only 130K uniform updates, 98% of
    /// it page images, and halved write throughput (`docs/results/db.md`).
    pub checkpoint_bytes: u64,
    /// Checkpoints while writers go on (the default, `true`), or quiet ones that hold writers
    /// back while the pages dirtied during their first pass are written again (`false`,
    /// kept to measure the difference side by side).
    pub fuzzy_checkpoints: bool,
    /// Open the page file with `O_DIRECT` where the filesystem allows. Default true.
    pub direct_io: bool,
    /// Deferred splits: a full leaf first moves records into a neighbour with room
    /// ([`crate::btree::Options::redistribute`]). Default true, unlike the in-memory tree's
    /// default: the database's space target (`tests/space_random_inserts.rs`) relies on it.
    pub redistribute: bool,
    /// Run checkpoints and `Batch`'s boundary fsyncs on background threads (the default,
    /// `true`; with out-of-line values also the run cache's write-behind and the prefaulting of
    /// long values' memory, `db/runcache.rs`), or in the writer that triggers them (`false`):
    /// no threads, and the same calls
    /// then make the same file operations in the same order, which the power-loss simulation
    /// relies on to replay a crash from its seed.
    pub background: bool,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            sync: SyncMode::Batch {
                ops: 1000,
                interval: Duration::from_millis(10),
            },
            cache_bytes: default_budget(),
            run_cache: true,
            logged_value_max: 64 << 10,
            log_write_behind: 1 << 20,
            page_size: 4096,
            layout: Layout::Adaptive,
            checkpoint_bytes: 1 << 30,
            fuzzy_checkpoints: true,
            direct_io: true,
            redistribute: true,
            background: true,
        }
    }
}

/// The largest [`DbOptions::logged_value_max`]: a log record holds at most 64 MiB.
pub const MAX_LOGGED_VALUE: u64 = 32 << 20;

/// The option keys [`DbOptions::set`] accepts.
pub const OPTION_KEYS: [&str; 13] = [
    "sync",
    "batch_ops",
    "batch_ms",
    "cache_bytes",
    "run_cache",
    "logged_value_max",
    "page_size",
    "layout",
    "checkpoint_bytes",
    "checkpoint",
    "direct_io",
    "redistribute",
    "background",
];

impl DbOptions {
    /// Sets one option from its string form: `sync=always|batch|never`, `batch_ops=N`,
    /// `batch_ms=N`, `cache_bytes=N`, `run_cache=true|false`, `logged_value_max=N`, `page_size=N`, `layout=NAME`, `checkpoint_bytes=N`,
    /// `checkpoint=fuzzy|quiet`, `direct_io=true|false`, `redistribute=true|false`,
    /// `background=true|false`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        if let Some(done) = self.sync.set_option(key, value) {
            return done;
        }
        match key {
            "cache_bytes" => self.cache_bytes = number(key, value)?,
            "run_cache" => self.run_cache = parse_bool(key, value)?,
            "logged_value_max" => {
                let n = number(key, value)?;
                if n > MAX_LOGGED_VALUE {
                    return Err(format!(
                        "logged_value_max {n} is over {MAX_LOGGED_VALUE} (a log record holds at most 64 MiB)"
                    ));
                }
                self.logged_value_max = n as usize;
            }
            "page_size" => {
                let n = number(key, value)? as usize;
                if !(4096..=65536).contains(&n) || !n.is_power_of_two() {
                    return Err(format!(
                        "page_size {n} is not a power of two in 4096..=65536"
                    ));
                }
                self.page_size = n;
            }
            "layout" => self.layout = Layout::parse(value)?,
            "checkpoint_bytes" => self.checkpoint_bytes = number(key, value)?.max(1 << 20),
            "checkpoint" => {
                self.fuzzy_checkpoints = match value {
                    "fuzzy" => true,
                    "quiet" => false,
                    _ => return Err(format!("checkpoint '{value}' is not fuzzy or quiet")),
                }
            }
            "direct_io" => self.direct_io = parse_bool(key, value)?,
            "redistribute" => self.redistribute = parse_bool(key, value)?,
            "background" => self.background = parse_bool(key, value)?,
            _ => {
                return Err(format!(
                    "unknown db option '{key}'; valid options: {}",
                    OPTION_KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let mut o = DbOptions::default();
        o.set("sync", "always").unwrap();
        assert_eq!(o.sync, SyncMode::Always);
        o.set("batch_ops", "10").unwrap();
        o.set("batch_ms", "5").unwrap();
        assert_eq!(
            o.sync,
            SyncMode::Batch {
                ops: 10,
                interval: Duration::from_millis(5)
            }
        );
        o.set("cache_bytes", "1048576").unwrap();
        assert_eq!(o.cache_bytes, 1 << 20);
        o.set("run_cache", "false").unwrap();
        assert!(!o.run_cache);
        assert!(o.set("page_size", "5000").is_err());
        assert!(o.set("sync", "sometimes").is_err());
        assert!(o.set("colour", "blue").is_err());
        o.set("layout", "hints").unwrap();
        assert_eq!(o.layout, Layout::Hints);
        o.set("redistribute", "no").unwrap();
        assert!(!o.redistribute);
        assert!(o.set("direct_io", "perhaps").is_err());
        o.set("checkpoint", "quiet").unwrap();
        assert!(!o.fuzzy_checkpoints);
        assert!(o.set("checkpoint", "sometimes").is_err());
    }
}
