//! The contract every engine keeps: the object-safe [`KvStore`] trait.
//!
//! Keys and values are byte strings ordered bytewise (so a u64 travels as 8 big-endian bytes and
//! byte order is numeric order). Each engine states its size [`Limits`]; anything outside them is
//! [`Error::InvalidArgument`], never a panic. Empty keys are invalid everywhere; empty values are
//! valid wherever the engine's minimum value size is 0.
//!
//! Reads hand results to a caller-supplied buffer or visitor rather than returning owned
//! collections, so a benchmark measures the engine and not the allocator.

use crate::error::{Error, Result};

/// A visitor over `(key, value)` records. Return `true` to continue, `false` to stop early.
pub type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// Size limits of an engine's keys and values, in bytes, inclusive on both ends.
///
/// An engine with fixed-size keys (the BP-tree's u64 adapter) has `min_key == max_key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Shortest accepted key (at least 1: empty keys are never valid).
    pub min_key: usize,
    /// Longest accepted key.
    pub max_key: usize,
    /// Shortest accepted value (0 where empty values are valid).
    pub min_value: usize,
    /// Longest accepted value.
    pub max_value: usize,
}

impl Limits {
    /// Limits of an engine with variable-size keys and values.
    pub const fn variable(max_key: usize, max_value: usize) -> Self {
        Limits {
            min_key: 1,
            max_key,
            min_value: 0,
            max_value,
        }
    }

    /// Limits of an engine with fixed-size keys and values.
    pub const fn fixed(key: usize, value: usize) -> Self {
        Limits {
            min_key: key,
            max_key: key,
            min_value: value,
            max_value: value,
        }
    }

    /// `Ok` if `key` is within the key limits.
    #[inline]
    pub fn check_key(&self, key: &[u8]) -> Result<()> {
        check_len("key", key.len(), self.min_key.max(1), self.max_key)
    }

    /// `Ok` if `value` is within the value limits.
    #[inline]
    pub fn check_value(&self, value: &[u8]) -> Result<()> {
        check_len("value", value.len(), self.min_value, self.max_value)
    }
}

#[inline]
fn check_len(what: &str, len: usize, min: usize, max: usize) -> Result<()> {
    if len < min {
        return Err(Error::InvalidArgument {
            what: if len == 0 {
                format!("{what} is empty")
            } else {
                format!("{what} of {len} bytes is shorter than the minimum")
            },
            limit: min,
        });
    }
    if len > max {
        return Err(Error::InvalidArgument {
            what: format!("{what} of {len} bytes is longer than the maximum"),
            limit: max,
        });
    }
    Ok(())
}

/// What an engine reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Live records.
    pub records: u64,
    /// Bytes the engine has allocated (memory engines) or occupies on disk (durable engines),
    /// when it keeps count; `None` when it does not.
    pub bytes_used: Option<u64>,
    /// Engine-specific counters, by name (for example `leaves`, `splits`, `cache_hits`).
    pub counters: Vec<(&'static str, u64)>,
}

/// An ordered key-value store. Object-safe; shared between threads by `&` or `Arc`.
pub trait KvStore: Send + Sync {
    /// The engine's key and value size limits.
    fn limits(&self) -> Limits;

    /// Looks `key` up. On a hit, replaces the contents of `out` with the value and returns `true`;
    /// on a miss returns `false` and leaves `out` in an unspecified state.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;

    /// Looks `key` up and returns an owned copy of its value.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Inserts `key` with `value`, or overwrites the value of an existing key.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Removes `key`; returns whether it was present.
    fn delete(&self, key: &[u8]) -> Result<bool>;

    /// Visits up to `limit` records in ascending key order, starting at the first key `>= start`
    /// (an empty `start` means the first key). Stops early when the visitor returns `false`.
    /// Returns the number of records visited.
    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize>;

    /// Visits every record with `start <= key < end`, in any order (the BP-tree paper's range
    /// map). Stops early when the visitor returns `false`. Returns the number visited.
    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize>;

    /// Makes every acknowledged write durable. A no-op for in-memory engines.
    fn sync(&self) -> Result<()>;

    /// Finishes the work the engine deferred past the writes it acknowledged: makes them durable
    /// (as [`sync`](KvStore::sync)) and then does what a crash would leave to recovery or what the
    /// engine's background threads would still be doing (a B-tree with a log writes its dirty
    /// pages back and checkpoints; an LSM tree flushes its memtables and waits for compactions).
    /// A benchmark times it after each phase, so work an engine puts off is charged to the phase
    /// that caused it. The default is [`sync`](KvStore::sync), right for engines that defer nothing
    /// beyond it.
    fn finish_deferred(&self) -> Result<()> {
        self.sync()
    }

    /// Counts and engine-specific counters.
    fn stats(&self) -> Stats;
}
