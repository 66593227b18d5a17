//! `MemMap`: std `BTreeMap<Vec<u8>, Vec<u8>>` under a reader-writer lock.
//!
//! It is the model the conformance suite compares every engine against, and the floor every
//! benchmark is measured from. It is deliberately the obvious implementation: one global lock,
//! owned keys and values, no tuning.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;

use crate::error::Result;
use crate::kv::{KvStore, Limits, Stats, Visitor};

/// Largest key `MemMap` accepts: 64 KiB, chosen to match what the paged engines can ever hold
/// in one record, so tests do not exercise sizes no real engine accepts.
pub const MEMMAP_MAX_KEY: usize = 64 * 1024;
/// Largest value `MemMap` accepts: 16 MiB.
pub const MEMMAP_MAX_VALUE: usize = 16 * 1024 * 1024;

/// std `BTreeMap` under a `parking_lot::RwLock`.
#[derive(Debug, Default)]
pub struct MemMap {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    limits: Option<Limits>,
}

impl MemMap {
    /// An empty map with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map enforcing `limits` instead of the defaults, so it can model an engine with
    /// tighter limits (for example fixed-size u64 keys).
    pub fn with_limits(limits: Limits) -> Self {
        MemMap {
            map: RwLock::default(),
            limits: Some(limits),
        }
    }

    /// A sorted copy of every record (for tests).
    pub fn to_vec(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.map
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl KvStore for MemMap {
    fn limits(&self) -> Limits {
        self.limits
            .unwrap_or(Limits::variable(MEMMAP_MAX_KEY, MEMMAP_MAX_VALUE))
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.limits().check_key(key)?;
        match self.map.read().get(key) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let limits = self.limits();
        limits.check_key(key)?;
        limits.check_value(value)?;
        let mut map = self.map.write();
        match map.get_mut(key) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            None => {
                map.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.limits().check_key(key)?;
        Ok(self.map.write().remove(key).is_some())
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        let map = self.map.read();
        let mut n = 0;
        for (k, v) in map.range::<[u8], _>((Bound::Included(start), Bound::Unbounded)) {
            if n == limit {
                break;
            }
            n += 1;
            if !visitor(k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        if start >= end {
            return Ok(0);
        }
        let map = self.map.read();
        let mut n = 0;
        for (k, v) in map.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end))) {
            n += 1;
            if !visitor(k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn stats(&self) -> Stats {
        let map = self.map.read();
        Stats {
            records: map.len() as u64,
            bytes_used: None,
            counters: Vec::new(),
        }
    }
}
