//! Options of an [`super::NbTree`] and their string form (`sylva bench --engine
//! nbtree:sigma=BYTES,fanout=N,...`).

use crate::wal::parse_number as number;
use std::time::Duration;

use crate::btree::options::parse_bool;
use crate::buffer::default_budget;
use crate::error::{Error, Result};
use crate::wal::SyncMode;

/// How an [`super::NbTree`] opens. An existing store keeps its own fanout, σ and Bloom bits
/// (the stored values win).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NbTreeOptions {
    /// When writes become durable (as in [`crate::DbOptions::sync`]).
    pub sync: SyncMode,
    /// The memory budget; σ defaults to an eighth of it (§6.2's σ against its 8 GB of RAM is
    /// 2 GB, a quarter; an eighth leaves room for the frozen root and the merges' buffers).
    pub cache_bytes: u64,
    /// σ, the d-tree size in record bytes (`None`: `cache_bytes / 8`). At least
    /// max(16, 4f) pages.
    pub sigma: Option<u64>,
    /// f, the s-tree fanout (at least 3; §6.2 uses 3).
    pub fanout: usize,
    /// Bloom filter bits per key (0: no filters; at most 32). §5.2 uses 10.
    pub bloom_bits: u32,
    /// Run the cascade on a background thread (`true`) or inside the insert that fills the
    /// root (`false`: no background threads at all, which the power-loss simulation needs).
    pub deamortize: bool,
    /// Bytes a deamortized cascade writes per step (at most 1 MiB counts; `super::cascade`).
    pub step_bytes: u64,
    /// Page size of a new store (4096..=65536, a power of two).
    pub page_size: usize,
    /// Tests only: accept σ below max(16, 4f) pages (the power-loss simulation writes a few
    /// hundred keys, which cascade only with a σ of a few pages).
    #[doc(hidden)]
    pub unchecked_sigma: bool,
}

impl Default for NbTreeOptions {
    fn default() -> Self {
        NbTreeOptions {
            sync: SyncMode::Batch {
                ops: 1000,
                interval: Duration::from_millis(10),
            },
            cache_bytes: default_budget(),
            sigma: None,
            fanout: 3,
            bloom_bits: 10,
            deamortize: true,
            step_bytes: 256 << 10,
            page_size: 4096,
            unchecked_sigma: false,
        }
    }
}

/// The option keys [`NbTreeOptions::set`] accepts.
pub const OPTION_KEYS: [&str; 10] = [
    "sync",
    "batch_ops",
    "batch_ms",
    "cache_bytes",
    "page_size",
    "sigma",
    "fanout",
    "bloom_bits",
    "deamortize",
    "step_bytes",
];

impl NbTreeOptions {
    /// σ in force for a new store.
    pub fn sigma_bytes(&self) -> u64 {
        self.sigma.unwrap_or(self.cache_bytes / 8)
    }

    /// Checks fanout, σ and Bloom bits (issue 22's limits).
    pub fn validate(&self) -> Result<()> {
        let sigma = if self.unchecked_sigma {
            u64::MAX
        } else {
            self.sigma_bytes()
        };
        check_params(self.fanout, sigma, self.bloom_bits, self.page_size)
    }

    /// Sets one option from its string form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        if let Some(done) = self.sync.set_option(key, value) {
            return done;
        }
        match key {
            "cache_bytes" => self.cache_bytes = number(key, value)?,
            "page_size" => {
                let n = number(key, value)? as usize;
                if !(4096..=65536).contains(&n) || !n.is_power_of_two() {
                    return Err(format!(
                        "page_size {n} is not a power of two in 4096..=65536"
                    ));
                }
                self.page_size = n;
            }
            "sigma" => self.sigma = Some(number(key, value)?),
            "fanout" => self.fanout = number(key, value)? as usize,
            "bloom_bits" => self.bloom_bits = number(key, value)? as u32,
            "deamortize" => {
                self.deamortize = match value {
                    "on" => true,
                    "off" => false,
                    _ => parse_bool(key, value)?,
                }
            }
            "step_bytes" => self.step_bytes = number(key, value)?.max(4096),
            _ => {
                return Err(format!(
                    "unknown nbtree option '{key}'; valid options: {}",
                    OPTION_KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }
}

/// `InvalidArgument` unless fanout ≥ 3, σ ≥ max(16, 4f) pages and Bloom bits ≤ 32.
pub(crate) fn check_params(
    fanout: usize,
    sigma: u64,
    bloom_bits: u32,
    page_size: usize,
) -> Result<()> {
    if fanout < 3 {
        return Err(Error::InvalidArgument {
            what: format!("fanout {fanout} is below the minimum"),
            limit: 3,
        });
    }
    let min_sigma = 16usize
        .max(fanout.saturating_mul(4))
        .saturating_mul(page_size);
    if sigma < min_sigma as u64 {
        return Err(Error::InvalidArgument {
            what: format!("sigma of {sigma} bytes is below max(16, 4 × fanout) pages"),
            limit: min_sigma,
        });
    }
    if bloom_bits > 32 {
        return Err(Error::InvalidArgument {
            what: format!("bloom_bits {bloom_bits} is above the maximum"),
            limit: 32,
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_bad_values_are_refused() {
        let mut o = NbTreeOptions::default();
        o.set("sigma", "1048576").unwrap();
        o.set("fanout", "15").unwrap();
        o.set("bloom_bits", "0").unwrap();
        o.set("deamortize", "off").unwrap();
        assert_eq!(
            (o.sigma_bytes(), o.fanout, o.bloom_bits, o.deamortize),
            (1 << 20, 15, 0, false)
        );
        assert!(o.set("colour", "blue").unwrap_err().contains("sigma"));
        assert!(o.set("deamortize", "perhaps").is_err());
        o.validate().unwrap();
        let bad = |f: usize, s: u64, b: u32| check_params(f, s, b, 4096).unwrap_err().to_string();
        assert!(
            bad(2, 1 << 20, 10).contains("limit: 3 "),
            "{}",
            bad(2, 1 << 20, 10)
        );
        assert!(bad(3, 60_000, 10).contains("limit: 65536 "));
        assert!(bad(8, 65536, 10).contains("limit: 131072 "));
        assert!(bad(3, 1 << 20, 33).contains("limit: 32 "));
    }
}
