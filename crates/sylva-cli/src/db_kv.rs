//! A [`KvStore`] view of [`Db`] for `sylva bench`, written against `Db`'s inherent methods.
//!
//! Temporary: the library is getting `impl KvStore for Db` (issue 5); once it has it, this file
//! goes and the `db` engine hands the `Db` itself to the runner.

use std::ops::Bound;

use sylva::{Db, KvStore, Limits, Stats, Visitor};

/// A `Db` behind the engine contract.
pub struct DbKv(pub Db);

impl KvStore for DbKv {
    fn limits(&self) -> Limits {
        let page = self.0.stats().page_size;
        Limits::variable(
            sylva::btree::max_key_len(page),
            sylva::btree::max_value_len(page),
        )
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        match self.0.get(key)? {
            Some(v) => {
                *out = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        self.0.put(key, value)
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        self.0.delete(key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        let mut n = 0;
        for record in self
            .0
            .range(Bound::Included(start), Bound::Unbounded)
            .take(limit)
        {
            let (k, v) = record?;
            n += 1;
            if !visitor(&k, &v) {
                break;
            }
        }
        Ok(n)
    }

    fn map_range(
        &self,
        start: &[u8],
        end: &[u8],
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if start >= end {
            return Ok(0);
        }
        let mut n = 0;
        for record in self.0.range(Bound::Included(start), Bound::Excluded(end)) {
            let (k, v) = record?;
            n += 1;
            if !visitor(&k, &v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.0.sync()
    }

    fn stats(&self) -> Stats {
        let s = self.0.stats();
        Stats {
            records: s.records,
            bytes_used: Some(s.file_pages * s.page_size as u64 + s.wal_bytes),
            counters: vec![
                ("height", u64::from(s.height)),
                ("tree_pages", s.tree_pages),
                ("free_pages", s.free_pages),
                ("cache_hits", s.cache_hits),
                ("cache_misses", s.cache_misses),
                ("page_writes", s.page_writes),
                ("wal_bytes", s.wal_bytes),
                ("checkpoints", s.checkpoints),
            ],
        }
    }
}
