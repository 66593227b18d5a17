//! Write batches: puts and deletes applied all or nothing across a crash ([`super::Db::write`]).

use super::buckets::{self, Buckets};
use super::log;
use super::overflow;
use super::store::PoolStore;
use crate::btree::BTree;
use crate::error::Result;

/// An atomic group of puts and deletes for [`Db::write`](super::Db::write): after a crash either all of them
/// happened or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(super) ops: Vec<BatchOp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push(BatchOp::Put(key.to_vec(), value.to_vec()));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.ops.push(BatchOp::Delete(key.to_vec()));
        self
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Encodes the batch's BATCH log record into `out` (cleared first).
    pub(super) fn log_record(&self, out: &mut Vec<u8>) {
        log::batch(
            out,
            self.ops.iter().map(|op| match op {
                BatchOp::Put(k, v) => (k.as_slice(), Some(v.as_slice())),
                BatchOp::Delete(k) => (k.as_slice(), None),
            }),
        );
    }
}

/// A batch's put of `key` (a live batch's or one recovery applies again), into its bucket when
/// it lives in one.
pub(super) fn apply_put(
    tree: &BTree<PoolStore>,
    buckets: Option<Buckets>,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    match buckets.filter(|b| b.holds(key)) {
        Some(b) => buckets::put(tree, b, key, value).map(drop),
        None => overflow::put(tree, key, value).map(drop),
    }
}

/// A batch's delete of `key`, as [`apply_put`].
pub(super) fn apply_delete(
    tree: &BTree<PoolStore>,
    buckets: Option<Buckets>,
    key: &[u8],
) -> Result<()> {
    match buckets.filter(|b| b.holds(key)) {
        Some(b) => buckets::delete(tree, b, key).map(drop),
        None => tree.delete(key).map(drop),
    }
}
