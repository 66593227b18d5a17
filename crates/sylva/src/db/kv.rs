//! `Db` as a [`KvStore`], the contract every engine keeps (what `sylva bench` and the
//! conformance suite drive).

use std::borrow::Cow;

use super::buckets::Buckets;
use super::store::PoolStore;
use super::{overflow, Db};
use crate::btree::BTree;
use crate::error::Result;
use crate::kv::{KvStore, Limits, Stats, Visitor};

impl Db {
    /// Runs a walk of the tree with `visitor` seeing values, not their stored forms
    /// ([`super::overflow`]): an out-of-line value is read when its record is visited.
    /// (`walk` may also show records gathered elsewhere: the PA-Tree worker's scans.)
    pub(super) fn resolving(
        &self,
        visitor: &mut Visitor<'_>,
        walk: impl FnOnce(&BTree<PoolStore>, &mut Visitor<'_>) -> Result<usize>,
    ) -> Result<usize> {
        if !self.tree().store.escaped {
            let r = walk(self.tree(), visitor);
            return self.guard_read(r);
        }
        let mut buf = Vec::new();
        let mut failed = None;
        let tags = self.tags();
        let mut resolved = |k: &[u8], v: &[u8]| -> bool {
            if !overflow::is_tagged(v, tags) {
                return visitor(k, v);
            }
            match self.scan_value(k, v, &mut buf) {
                Ok(Some(v)) => visitor(k, v),
                Ok(None) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        };
        let r = walk(self.tree(), &mut resolved);
        let r = match failed {
            Some(e) => Err(e),
            None => r,
        };
        self.guard_read(r)
    }
}

/// How a walk over the tree is run: from a key, before an optional end key, up to a number of
/// records, showing each record's tree key and stored value to the visitor; returns the records
/// shown. `Db`'s own walks run [`BTree::walk`]; the PA-Tree worker's gather leaves in chunks.
pub(super) type TreeWalk<'w> =
    dyn FnMut(&[u8], Option<&[u8]>, usize, &mut Visitor<'_>) -> Result<usize> + 'w;

/// A tree walk's start key, end key (if any) and limit ([`Db::tree_walk_bounds`]).
pub(super) type TreeBounds<'k> = (Cow<'k, [u8]>, Option<Cow<'k, [u8]>>, usize);

impl Db {
    /// A scan (`end` `None`, up to `limit` keys) or range map (`[start, end)`) run by `walk`:
    /// its records' values resolved ([`super::overflow`]) and, in a database with buckets,
    /// each bucket expanded ([`Db::walk_buckets`]); returns the keys shown.
    pub(super) fn walk_by(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
        walk: &mut TreeWalk<'_>,
    ) -> Result<usize> {
        self.check_open()?;
        let Some((s, e, l)) = self.tree_walk_bounds(start, end, limit) else {
            return Ok(0);
        };
        let mut tree_walk = |v: &mut Visitor<'_>| walk(&s, e.as_deref(), l, v);
        match self.buckets() {
            Some(b) => self.walk_buckets(b, start, end, limit, visitor, tree_walk),
            None => self.resolving(visitor, |_, v| tree_walk(v)),
        }
    }

    /// The tree walk behind [`Db::walk_by`]'s arguments: in a database with buckets it starts
    /// at `start`'s bucket, ends after `end`'s and takes one record more than `limit` (the first
    /// bucket may show none); `None` for a walk that shows nothing.
    pub(super) fn tree_walk_bounds<'k>(
        &self,
        start: &'k [u8],
        end: Option<&'k [u8]>,
        limit: usize,
    ) -> Option<TreeBounds<'k>> {
        if limit == 0 || end.is_some_and(|e| start >= e) {
            return None;
        }
        let Some(b) = self.buckets() else {
            return Some((Cow::Borrowed(start), end.map(Cow::Borrowed), limit));
        };
        let tree_end = end.map(|e| {
            if b.holds(e) {
                let mut k = b.tree_key(e);
                k.push(0);
                Cow::Owned(k)
            } else {
                Cow::Borrowed(e)
            }
        });
        Some((b.position(start), tree_end, limit.saturating_add(1)))
    }

    /// A scan or range map of a database with buckets: `walk` walks the tree from `start`'s
    /// position to after `end`'s ([`Db::tree_walk_bounds`]), each bucket is expanded in suffix
    /// order and its keys outside `[start, end)` dropped (module docs of [`super::buckets`],
    /// "Order"); returns the keys shown.
    fn walk_buckets(
        &self,
        b: Buckets,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
        walk: impl FnOnce(&mut Visitor<'_>) -> Result<usize>,
    ) -> Result<usize> {
        let tags = self.tags();
        let (mut n, mut failed) = (0usize, None);
        let (mut buf, mut full) = (Vec::new(), Vec::new());
        let mut each = |k: &[u8], v: &[u8]| -> bool {
            let value = if overflow::is_tagged(v, tags) || b.is_bucket_key(k) {
                match self.scan_value(k, v, &mut buf) {
                    Ok(Some(v)) => v,
                    Ok(None) => return true,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                }
            } else {
                v
            };
            if !b.is_bucket_key(k) {
                n += 1;
                return visitor(k, value) && n < limit;
            }
            let entries = match b.decode(k, value) {
                Ok(e) => e,
                Err(e) => {
                    failed = Some(e);
                    return false;
                }
            };
            for (suffix, v) in entries {
                b.full_key(k, suffix, &mut full);
                if full.as_slice() < start {
                    continue;
                }
                if end.is_some_and(|e| full.as_slice() >= e) {
                    return false;
                }
                n += 1;
                if !visitor(&full, v) || n >= limit {
                    return false;
                }
            }
            true
        };
        let r = walk(&mut each);
        let r = match failed {
            Some(e) => Err(e),
            None => r.map(|_| n),
        };
        self.guard_read(r)
    }

    /// [`BTree::walk`], as a [`TreeWalk`].
    fn tree_walk(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> Result<usize> {
        self.tree().walk(start, end, limit, visitor)
    }
}

impl KvStore for Db {
    fn limits(&self) -> Limits {
        Db::limits(self)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Db::get_into(self, key, out)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Db::put(self, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        Db::delete(self, key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        self.walk_by(start, None, limit, visitor, &mut |s, e, l, v| {
            self.tree_walk(s, e, l, v)
        })
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        self.walk_by(start, Some(end), usize::MAX, visitor, &mut |s, e, l, v| {
            self.tree_walk(s, e, l, v)
        })
    }

    fn sync(&self) -> Result<()> {
        Db::sync(self)
    }

    /// The log synced, then a checkpoint: the dirty pages written back, so recovery would redo
    /// nothing.
    fn finish_deferred(&self) -> Result<()> {
        Db::sync(self)?;
        self.checkpoint()
    }

    fn stats(&self) -> Stats {
        let s = self.quick_stats();
        let mut counters = vec![
            ("tree_pages", s.tree_pages),
            ("free_pages", s.free_pages),
            ("cache_hits", s.cache_hits),
            ("cache_misses", s.cache_misses),
            ("page_writes", s.page_writes),
            ("wal_bytes", s.wal_bytes),
            ("wal_written", s.wal_written),
            ("wal_fpw_written", s.wal_fpw_written),
            ("checkpoints", s.checkpoints),
            ("syncs_due", self.durable.syncs_due()),
        ];
        // The tree's structure changes since open (splits, merges, redistributions, ...).
        counters.extend(
            self.tree()
                .stats()
                .counters
                .into_iter()
                .filter(|(name, _)| *name != "pages"),
        );
        Stats {
            records: s.records,
            bytes_used: Some(s.file_pages * s.page_size as u64),
            counters,
        }
    }
}
