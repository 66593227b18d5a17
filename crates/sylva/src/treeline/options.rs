//! Options of a [`crate::TreeLine`] and their string form (`sylva bench --engine
//! treeline:goal=45,epsilon=5,...`).

use crate::wal::parse_number as number;
use std::time::Duration;

use crate::btree::options::parse_bool;
use crate::buffer::default_budget;
use crate::error::{Error, Result};
use crate::wal::SyncMode;

/// How a [`crate::TreeLine`] opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLineOptions {
    /// When writes become durable (as [`crate::DbOptions::sync`]; the same default).
    pub sync: SyncMode,
    /// Memory for everything the store keeps: the record cache's entries and its tree, the
    /// segment index, the insert histograms and the page buffers. Default: as `db`'s pool.
    pub cache_bytes: u64,
    /// Page size of a new store (4096..=65536, a power of two). Default 4096.
    pub page_size: usize,
    /// Checkpoint once this many bytes were logged since the last one. Default 64 MiB:
    /// recovery replays the log's records into the record cache, which grows with it.
    pub checkpoint_bytes: u64,
    /// Open the page file with `O_DIRECT` where the file system allows. Default true.
    pub direct_io: bool,
    /// Checkpoints and `Batch` boundary fsyncs on background threads (default true), or in
    /// the writer that triggers them (deterministic, for the power-loss simulation).
    pub background: bool,
    /// Records a page is built with at a reorganization (§3.2's goal; default 45).
    pub goal: usize,
    /// The models' error bound (§3.2's epsilon; default 5): at most `goal + 2·epsilon − 1`
    /// records land on a page at a reorganization.
    pub epsilon: usize,
    /// Page grouping (§3.2): reorganizations build segments of up to 16 pages with linear
    /// models. `false`: every segment is one page (Table 5.3's ablation).
    pub grouping: bool,
    /// The record cache (§3.1). `false`: write-through, every write goes to its page at once
    /// and reads are not cached (Table 5.3's "Base").
    pub record_cache: bool,
    /// Insert forecasting (§3.3): reorganizations leave room where inserts are forecast.
    pub forecast: bool,
    /// Partitions of the insert histogram (§4.6.2's b). Default 20,000.
    pub bins: usize,
    /// Epochs ahead a forecast covers (§4.6.3's f). Default 100.
    pub forecast_epochs: u64,
    /// The fewest records, in percent of `goal`, a reorganization builds a page with however
    /// many inserts are forecast (1..=100). Default 50: as a B-tree's split, no page starts
    /// less than half full. Without a floor a forecast over many epochs (a load forecasts its
    /// own size into every range) builds pages of one or two records.
    pub fill_floor: u8,
    /// Inserts an epoch counts (§4.6.2). Default 100,000.
    pub epoch_inserts: u64,
    /// Segments examined on each side of a full segment (§4.5.3's r). Default 5.
    pub radius: usize,
    /// A read miss also caches the page's other records at priority 1 (§4.2.1). Default true.
    pub prefetch: bool,
    /// Fuzzy checkpoints (`checkpoint=fuzzy`): writers are held back only while the log
    /// rotates, and the dirty entries are written while they go on. Default `false`: quiet
    /// ones, which hold writers back while the entries dirtied during their first pass are
    /// written (`super` module docs say why).
    pub fuzzy_checkpoints: bool,
}

impl Default for TreeLineOptions {
    fn default() -> Self {
        TreeLineOptions {
            sync: SyncMode::Batch {
                ops: 1000,
                interval: Duration::from_millis(10),
            },
            cache_bytes: default_budget(),
            page_size: 4096,
            checkpoint_bytes: 64 << 20,
            direct_io: true,
            background: true,
            goal: 45,
            epsilon: 5,
            grouping: true,
            record_cache: true,
            forecast: true,
            bins: 20_000,
            forecast_epochs: 100,
            fill_floor: 50,
            epoch_inserts: 100_000,
            radius: 5,
            prefetch: true,
            fuzzy_checkpoints: false,
        }
    }
}

/// The option keys [`TreeLineOptions::set`] accepts.
pub const OPTION_KEYS: [&str; 22] = [
    "sync",
    "batch_ops",
    "batch_ms",
    "cache_bytes",
    "page_size",
    "checkpoint_bytes",
    "direct_io",
    "background",
    "goal",
    "epsilon",
    "grouping",
    "record_cache",
    "forecast",
    "bins",
    "forecast_epochs",
    "fill_floor",
    "epoch_inserts",
    "radius",
    "prefetch",
    "reorg_radius",
    "cache_records",
    "checkpoint",
];

impl TreeLineOptions {
    /// Sets one option from its string form (the keys of [`OPTION_KEYS`]; `reorg_radius` is
    /// `radius`, and `cache_records=N` sets `cache_bytes` to what N records of 64 bytes take).
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        if let Some(done) = self.sync.set_option(key, value) {
            return done;
        }
        match key {
            "cache_bytes" => self.cache_bytes = number(key, value)?,
            "cache_records" => self.cache_bytes = number(key, value)? * ENTRY_BYTES_64,
            "page_size" => self.page_size = number(key, value)? as usize,
            "checkpoint_bytes" => self.checkpoint_bytes = number(key, value)?.max(1 << 20),
            "direct_io" => self.direct_io = parse_bool(key, value)?,
            "background" => self.background = parse_bool(key, value)?,
            "goal" => self.goal = number(key, value)? as usize,
            "epsilon" => self.epsilon = number(key, value)? as usize,
            "grouping" => self.grouping = parse_bool(key, value)?,
            "record_cache" => self.record_cache = parse_bool(key, value)?,
            "forecast" => self.forecast = parse_bool(key, value)?,
            "bins" => self.bins = number(key, value)? as usize,
            "forecast_epochs" => self.forecast_epochs = number(key, value)?,
            "fill_floor" => self.fill_floor = number(key, value)?.min(255) as u8,
            "epoch_inserts" => self.epoch_inserts = number(key, value)?,
            "radius" | "reorg_radius" => self.radius = number(key, value)? as usize,
            "prefetch" => self.prefetch = parse_bool(key, value)?,
            "checkpoint" => {
                self.fuzzy_checkpoints = match value {
                    "fuzzy" => true,
                    "quiet" => false,
                    _ => return Err(format!("checkpoint '{value}' is not fuzzy or quiet")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown treeline option '{key}'; valid options: {}",
                    OPTION_KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// `InvalidArgument` for options no store can run with.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: String, limit: usize| Err(Error::InvalidArgument { what, limit });
        if self.goal == 0 {
            return bad(
                "treeline goal 0: a page must be built with at least one record".into(),
                1,
            );
        }
        if self.epsilon == 0 {
            return bad(
                "treeline epsilon 0: the models' error bound must be at least 1".into(),
                1,
            );
        }
        if !(4096..=65536).contains(&self.page_size) || !self.page_size.is_power_of_two() {
            return bad(
                format!(
                    "treeline page_size {} is not a power of two in 4096..=65536",
                    self.page_size
                ),
                65536,
            );
        }
        if !(1..=100).contains(&self.fill_floor) {
            return bad(
                format!(
                    "treeline fill_floor {}: a percentage of goal in 1..=100",
                    self.fill_floor
                ),
                100,
            );
        }
        if self.bins == 0 {
            return bad("treeline bins 0: the histogram needs a partition".into(), 1);
        }
        Ok(())
    }
}

/// What one cached record of an 8-byte key and a 56-byte value costs, for `cache_records`.
pub(crate) const ENTRY_BYTES_64: u64 = super::cache::RecordCache::entry_cost(8, 56) as u64;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_bad_ones_are_refused() {
        let mut o = TreeLineOptions::default();
        o.set("goal", "4").unwrap();
        o.set("epsilon", "2").unwrap();
        o.set("grouping", "false").unwrap();
        o.set("record_cache", "no").unwrap();
        o.set("sync", "always").unwrap();
        assert_eq!(
            (o.goal, o.epsilon, o.grouping, o.record_cache),
            (4, 2, false, false)
        );
        assert_eq!(o.sync, SyncMode::Always);
        assert!(o
            .set("colour", "red")
            .unwrap_err()
            .contains("valid options"));
        assert!(o.set("goal", "many").is_err());
        o.validate().unwrap();
        o.set("goal", "0").unwrap();
        assert!(matches!(o.validate(), Err(Error::InvalidArgument { .. })));
        let mut o = TreeLineOptions::default();
        o.set("epsilon", "0").unwrap();
        assert!(matches!(o.validate(), Err(Error::InvalidArgument { .. })));
    }
}
