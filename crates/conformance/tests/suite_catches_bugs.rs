//! The suite must fail on engines that break the contract; otherwise passing it means nothing.
//! Each wrapper below breaks one promise of `KvStore` and the suite must panic on it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sylva::{KvStore, Limits, MemMap, Stats, Visitor};
use sylva_conformance::{edge_cases, model_test_with_cases, stress, Fresh, StressConfig};

#[derive(Clone, Copy)]
enum Bug {
    /// Scans skip every 97th record.
    ScanSkips,
    /// Overwrites are ignored once the store holds more than 500 records.
    LostOverwrite,
    /// Range maps visit one record past the end.
    MapPastEnd,
    /// An oversized key is accepted.
    NoKeyLimit,
    /// Every 5000th put is dropped silently, and so is every later put of the same key (so a
    /// later overwrite cannot hide the loss).
    DropsPuts,
}

struct Buggy {
    inner: MemMap,
    bug: Bug,
    puts: AtomicU64,
    lost: Mutex<HashSet<Vec<u8>>>,
}

impl Buggy {
    fn new(bug: Bug) -> Self {
        Buggy {
            inner: MemMap::with_limits(Limits::variable(64, 1000)),
            bug,
            puts: AtomicU64::new(0),
            lost: Mutex::default(),
        }
    }
}

impl KvStore for Buggy {
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        self.inner.get_into(key, out)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        let n = self.puts.fetch_add(1, Ordering::Relaxed);
        match self.bug {
            Bug::LostOverwrite
                if self.inner.stats().records > 500 && self.inner.get(key)?.is_some() =>
            {
                Ok(())
            }
            Bug::NoKeyLimit if key.len() > 64 => Ok(()),
            Bug::DropsPuts
                if n % 5000 == 4999
                    || self.lost.lock().map(|l| l.contains(key)).unwrap_or(false) =>
            {
                self.lost
                    .lock()
                    .map(|mut l| l.insert(key.to_vec()))
                    .unwrap_or(false);
                Ok(())
            }
            _ => self.inner.put(key, value),
        }
    }
    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        self.inner.delete(key)
    }
    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        if let Bug::ScanSkips = self.bug {
            let mut i = 0u64;
            let mut n = 0;
            self.inner.scan(start, usize::MAX, &mut |k, v| {
                i += 1;
                if i.is_multiple_of(97) {
                    return true;
                }
                if n == limit {
                    return false;
                }
                n += 1;
                visitor(k, v)
            })?;
            return Ok(n);
        }
        self.inner.scan(start, limit, visitor)
    }
    fn map_range(
        &self,
        start: &[u8],
        end: &[u8],
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if let Bug::MapPastEnd = self.bug {
            let mut n = 0;
            let mut past = false;
            self.inner.scan(start, usize::MAX, &mut |k, v| {
                if k >= end {
                    if past || start >= end {
                        return false;
                    }
                    past = true;
                }
                n += 1;
                visitor(k, v)
            })?;
            return Ok(n);
        }
        self.inner.map_range(start, end, visitor)
    }
    fn sync(&self) -> sylva::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
}

fn fails(f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
    std::panic::catch_unwind(f).is_err()
}

#[test]
fn model_test_catches_broken_engines() {
    for bug in [
        Bug::ScanSkips,
        Bug::LostOverwrite,
        Bug::MapPastEnd,
        Bug::DropsPuts,
    ] {
        assert!(
            fails(move || model_test_with_cases(&mut Fresh(move || Buggy::new(bug)), 64)),
            "the model test passed an engine whose {} is broken",
            match bug {
                Bug::ScanSkips => "scan",
                Bug::LostOverwrite => "overwrite",
                Bug::MapPastEnd => "map_range",
                Bug::NoKeyLimit => "key limit",
                Bug::DropsPuts => "put",
            }
        );
    }
}

#[test]
fn edge_cases_catch_a_missing_size_limit() {
    assert!(fails(|| edge_cases(&mut Fresh(|| Buggy::new(
        Bug::NoKeyLimit
    )))));
    assert!(fails(|| edge_cases(&mut Fresh(|| Buggy::new(
        Bug::MapPastEnd
    )))));
}

#[test]
fn stress_catches_scans_that_skip_and_lost_writes() {
    let small = StressConfig {
        ops_per_writer: 10_000,
        ..StressConfig::default()
    };
    assert!(fails(move || stress(
        &mut Fresh(|| Buggy::new(Bug::ScanSkips)),
        small
    )));
    assert!(fails(move || stress(
        &mut Fresh(|| Buggy::new(Bug::DropsPuts)),
        small
    )));
}

#[test]
fn a_correct_engine_passes() {
    model_test_with_cases(
        &mut Fresh(|| MemMap::with_limits(Limits::variable(64, 1000))),
        16,
    );
}
