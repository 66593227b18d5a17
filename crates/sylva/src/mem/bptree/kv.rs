//! [`BpTreeStore`]: the BP-tree (or its baseline) as a [`KvStore`] over u64 keys and values.
//!
//! Keys are exactly 8 bytes, big-endian, so byte order is numeric order; every value from 0 to
//! `u64::MAX` is a valid key. Values are exactly 8 bytes (stored as a u64). Anything else is
//! [`Error::InvalidArgument`] from [`Limits::fixed`]`(8, 8)`. Scan and map bounds may be any byte
//! string: they are rounded to the first 8-byte key at or after them in byte order.

use std::ops::Bound;

use crate::error::{Error, Result};
use crate::kv::{KvStore, Limits, Stats, Visitor};

use super::bpa::Bpa;
use super::options::{BaselineOptions, BpTreeOptions};
use super::sorted_leaf::SortedLeaf;
use super::tree::{BpTree, TreeStats};

/// Key and value sizes of [`BpTreeStore`]: exactly 8 bytes each.
pub const BPTREE_LIMITS: Limits = Limits::fixed(8, 8);

enum Trees {
    Bpa(BpTree<u64, u64, Bpa<u64, u64>>),
    Baseline(BpTree<u64, u64, SortedLeaf<u64, u64>>),
}

/// A BP-tree (`bptree`) or baseline B+tree (`bptree-baseline`) behind the [`KvStore`] trait.
pub struct BpTreeStore {
    trees: Trees,
}

macro_rules! with_tree {
    ($self:expr, $t:ident => $e:expr) => {
        match &$self.trees {
            Trees::Bpa($t) => $e,
            Trees::Baseline($t) => $e,
        }
    };
}

impl BpTreeStore {
    /// A BP-tree with BPA leaves.
    pub fn new(options: &BpTreeOptions) -> Result<Self> {
        Ok(BpTreeStore {
            trees: Trees::Bpa(BpTree::with_options(options)?),
        })
    }

    /// The baseline: the same tree with sorted-array leaves.
    pub fn baseline(options: &BaselineOptions) -> Result<Self> {
        Ok(BpTreeStore {
            trees: Trees::Baseline(BpTree::baseline(options)?),
        })
    }

    /// The tree's own counts and sizes.
    pub fn tree_stats(&self) -> TreeStats {
        with_tree!(self, t => t.stats())
    }

    /// Structural check of the whole tree (call when no writer runs).
    pub fn check(&self) -> std::result::Result<(), String> {
        with_tree!(self, t => t.check())
    }
}

fn key_of(key: &[u8]) -> Result<u64> {
    BPTREE_LIMITS.check_key(key)?;
    Ok(u64::from_be_bytes(to8(key)?))
}

fn value_of(value: &[u8]) -> Result<u64> {
    BPTREE_LIMITS.check_value(value)?;
    Ok(u64::from_be_bytes(to8(value)?))
}

fn to8(bytes: &[u8]) -> Result<[u8; 8]> {
    bytes.try_into().map_err(|_| Error::InvalidArgument {
        what: format!("{} bytes where 8 are needed", bytes.len()),
        limit: 8,
    })
}

/// The first 8-byte key at or after `bound` in byte order; `None` if there is none.
fn round_up(bound: &[u8]) -> Option<u64> {
    if bound.len() <= 8 {
        let mut k = [0u8; 8];
        k[..bound.len()].copy_from_slice(bound);
        return Some(u64::from_be_bytes(k));
    }
    // The 8-byte prefix is a proper prefix of `bound`, so it sorts before it.
    let mut k = [0u8; 8];
    k.copy_from_slice(&bound[..8]);
    u64::from_be_bytes(k).checked_add(1)
}

impl KvStore for BpTreeStore {
    fn limits(&self) -> Limits {
        BPTREE_LIMITS
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let k = key_of(key)?;
        match with_tree!(self, t => t.find(&k)) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v.to_be_bytes());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let (k, v) = (key_of(key)?, value_of(value)?);
        with_tree!(self, t => t.insert(k, v));
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        let k = key_of(key)?;
        Ok(with_tree!(self, t => t.remove(&k)).is_some())
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        let Some(lo) = round_up(start) else {
            return Ok(0);
        };
        let visit = |k: u64, v: u64| visitor(&k.to_be_bytes(), &v.to_be_bytes());
        Ok(with_tree!(self, t => t.iterate_range(Bound::Included(lo), limit, visit)))
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        if start >= end {
            return Ok(0);
        }
        let Some(lo) = round_up(start) else {
            return Ok(0);
        };
        let hi = round_up(end);
        let visit = |k: u64, v: u64| visitor(&k.to_be_bytes(), &v.to_be_bytes());
        Ok(with_tree!(self, t => t.map_range(lo, hi, visit)))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn stats(&self) -> Stats {
        let s = self.tree_stats();
        Stats {
            records: s.records,
            bytes_used: Some(s.bytes),
            counters: vec![
                ("leaves", s.leaves),
                ("inner_nodes", s.inner_nodes),
                ("num_elts", s.num_elts),
                ("leaf_splits", s.leaf_splits),
                ("sibling_shares", s.sibling_shares),
                ("three_way_splits", s.three_way_splits),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_round_up_in_byte_order() {
        assert_eq!(round_up(&[]), Some(0));
        assert_eq!(round_up(&[1]), Some(1 << 56));
        assert_eq!(round_up(&[0, 0, 0, 0, 0, 0, 0, 5, 0]), Some(6));
        assert_eq!(round_up(&[0xFF; 9]), None);
        assert_eq!(round_up(&5u64.to_be_bytes()), Some(5));
    }
}
