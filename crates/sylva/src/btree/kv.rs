//! [`KvStore`] for [`BTree`].

use super::store::NodeStore;
use super::tree::BTree;
use crate::error::Result;
use crate::kv::{KvStore, Limits, Stats, Visitor};

impl<S: NodeStore> KvStore for BTree<S> {
    fn limits(&self) -> Limits {
        BTree::limits(self)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        BTree::get_into(self, key, out)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        BTree::put(self, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        BTree::delete(self, key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        if limit == 0 {
            return Ok(0);
        }
        self.walk(start, None, limit, visitor)
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        if start >= end {
            return Ok(0);
        }
        self.walk(start, Some(end), usize::MAX, visitor)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn stats(&self) -> Stats {
        BTree::stats(self)
    }
}
