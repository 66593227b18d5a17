//! Key and record size limits, and the condition every split relies on.
//!
//! **The condition.** A node holds its header (at most [`HEADER_LEN_HINTS`], 96 bytes), its two
//! fence keys stored whole (each a separator, so no longer than the longest key) and its records
//! (a leaf's `key ++ value` or an inner node's `separator ++ child`, each with a slot of at most
//! [`SLOT_LEN_HEADS`], 10 bytes). The limits are chosen so that
//!
//! ```text
//! header + 2 × max_key + 3 × (max_record + slot) ≤ node size
//! ```
//!
//! where `max_record` bounds `key ++ value` of a leaf record and `separator ++ child` of an inner
//! one. Then a node that cannot take one more record holds at least three, a median split gives
//! each half at least one record and fences no longer than the node had, and a node of at most
//! two records always has room for a third: splits converge, and every inner node keeps at least
//! two children.
//!
//! **The default limits** ([`max_key_len`], [`max_value_len`]; every in-memory `btree`, the
//! `nbtree` and `Db` databases of state version 4 and before): keys up to 1/16 of the node,
//! values up to what is left of a quarter node after the longest key and a slot, so
//! `max_record` = node/4 − slot. 254-byte keys and 752-byte values with a 4 KiB page's 4,064-byte
//! node; 256 and 758 in memory at 4 KiB.
//!
//! **Long keys** ([`long_max_key_len`], [`long_max_record_len`]; `Db` databases of state versions
//! 5 and 6, `crate::db::state`): the longest key such that the condition holds for records of a
//! longest key and a 17-byte out-of-line value reference (`crate::db::overflow`), and
//! `max_record` as large as the condition then allows:
//!
//! ```text
//! max_key    = ⌊(node − 96 − 3 × (10 + 17)) / 5⌋
//! max_record = ⌊(node − 96 − 2 × max_key) / 3⌋ − 10      (≥ max_key + 17)
//! ```
//!
//! A value is stored inline only when it is within the default value limit *and* `key ++ value`
//! within `max_record`; `Db` moves any other value out of line. With keys of up to
//! `max_record − max_value_len` bytes (42 with 4 KiB pages) nothing changes for values: the
//! small-value path stores them exactly as before. The key limits per page size (page − 32 bytes
//! of node): 777 bytes (4 KiB pages), 1,596 (8 KiB), 3,235 (16 KiB), 6,511 (32 KiB), 13,065
//! (64 KiB). With 4 KiB pages the two whole fences are what stops at 777. These are the tree's
//! limits: a `Db` of state version 6 takes keys up to 16 KiB at every page size by keeping every
//! key longer than `max_key − 1` bytes (776 with 4 KiB pages) in a *bucket*, a record under its
//! first `max_key − 1` bytes whose value holds the keys sharing them (`crate::db::buckets`), so
//! the tree never sees a key past this limit and the condition above is untouched.

use super::store::NodeStore;
use super::tree::BTree;
use crate::error::Error;
use crate::page::slotted::{HEADER_LEN_HINTS, SLOT_LEN_HEADS};

/// Bytes of an out-of-line value's reference in a leaf (`crate::db::overflow::REF_LEN`).
const VALUE_REF_LEN: usize = 17;

/// The largest key a tree with `page_size`-byte nodes accepts by default: 1/16 of the node.
pub fn max_key_len(page_size: usize) -> usize {
    page_size / 16
}

/// The largest value by default: what is left of a quarter node after the largest key and a
/// slot.
pub fn max_value_len(page_size: usize) -> usize {
    page_size / 4 - page_size / 16 - SLOT_LEN_HEADS
}

/// The largest `key ++ value` of a record under the default limits.
pub(crate) fn max_record_len(page_size: usize) -> usize {
    max_key_len(page_size) + max_value_len(page_size)
}

/// The largest key of a tree with long keys and `page_size`-byte nodes (module docs).
pub fn long_max_key_len(page_size: usize) -> usize {
    page_size.saturating_sub(HEADER_LEN_HINTS + 3 * (SLOT_LEN_HEADS + VALUE_REF_LEN)) / 5
}

/// The largest `key ++ value` of a record in a tree with long keys (module docs).
pub fn long_max_record_len(page_size: usize) -> usize {
    let k = long_max_key_len(page_size);
    (page_size.saturating_sub(HEADER_LEN_HINTS + 2 * k) / 3).saturating_sub(SLOT_LEN_HEADS)
}

impl<S: NodeStore> BTree<S> {
    /// Switches to the long-key limits of [`super::limits`] (a `Db` of state version 5 or 6),
    /// before any record is put.
    pub(crate) fn use_long_keys(&mut self) {
        let ps = self.options.page_size;
        self.limits.max_key = long_max_key_len(ps);
        self.max_record = long_max_record_len(ps);
    }

    /// The longest value a record with a `key_len`-byte key holds (a longer one is refused by
    /// [`BTree::put`]; `Db` stores it out of line).
    #[inline]
    pub(crate) fn max_inline_value(&self, key_len: usize) -> usize {
        self.limits
            .max_value
            .min(self.max_record.saturating_sub(key_len))
    }
}

#[cold]
pub(super) fn record_too_long(key: usize, value: usize, limit: usize) -> Error {
    Error::InvalidArgument {
        what: format!(
            "a key of {key} bytes and a value of {value} bytes are together longer than a \
             record holds"
        ),
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split condition of the module docs, for both kinds of limits at every page size a
    /// `Db` takes (nodes are the page less its 32-byte header) and in memory.
    #[test]
    fn limits_keep_the_split_condition() {
        for shift in 12..=16 {
            let page = 1usize << shift;
            for node in [page - 32, page] {
                let fits = |key: usize, record: usize| {
                    HEADER_LEN_HINTS + 2 * key + 3 * (record + SLOT_LEN_HEADS) <= node
                };
                assert!(fits(max_key_len(node), max_record_len(node)), "{node}");
                let (k, r) = (long_max_key_len(node), long_max_record_len(node));
                assert!(fits(k, r), "{node}");
                assert!(
                    !fits(k + 1, k + 1 + VALUE_REF_LEN),
                    "{node}: the longest key"
                );
                assert!(
                    r >= k + VALUE_REF_LEN,
                    "{node}: a longest key takes a reference"
                );
                assert!(r >= max_key_len(node) + 8, "{node}: inner records");
            }
        }
        let keys: Vec<usize> = (12..=16).map(|s| long_max_key_len((1 << s) - 32)).collect();
        assert_eq!(keys, [777, 1596, 3235, 6511, 13065]);
        assert_eq!(long_max_record_len(4064), 794);
        assert_eq!(max_value_len(4064), 752);
    }
}
