//! TreeLine under the power-loss simulation (`power_loss_common`): a seeded random workload
//! over a simulated file system that loses, keeps or tears unsynced writes and names at a
//! random change (inside a write, a page flush, an overflow allocation, any phase of a
//! reorganization, a checkpoint, recovery itself), then recovery checked against a model.
//!
//! The seed's configuration maps onto TreeLine's options: a cache of the configuration's pool
//! size (so evictions write pages all the time), goal 2–8 and epsilon 1–3 (reorganizations all
//! the time), grouping, prefetch and the record cache switched by the seed, histograms of 16
//! partitions over epochs of 40 inserts (so forecasts shape the reorganizations), fuzzy or quiet
//! checkpoints as the configuration's. Without
//! background threads except in `power_loss_treeline_with_background_threads`, so a failure
//! replays exactly:
//! `SYLVA_SIM_SEED=<seed> cargo test --release -p sylva --test power_loss_treeline replay -- --nocapture`.

mod power_loss_common;

use std::path::Path;

use power_loss_common::{crashes_per_test, replay_seed, show, simulate, Config, Map, Op, Subject};
use sylva::btree::Layout;
use sylva::io::SimFs;
use sylva::{KvStore, TreeLine, TreeLineOptions};

/// The options a case's configuration stands for (module docs).
fn options(c: &Config) -> TreeLineOptions {
    let fixed_part = (8 << 20) + 8192 + (4 << 20) + 2 * 16 * 16 + 2 * 10 * 16 * 8 + 1024;
    TreeLineOptions {
        sync: c.sync,
        cache_bytes: fixed_part + c.cache_pages * 256,
        checkpoint_bytes: c.checkpoint_bytes,
        page_size: c.page_size,
        background: c.background,
        goal: 2 + (c.checkpoint_bytes >> 10) as usize % 7,
        epsilon: 1 + c.cache_pages as usize % 3,
        grouping: c.redistribute,
        prefetch: c.cache_pages.is_multiple_of(2),
        fuzzy_checkpoints: c.fuzzy,
        record_cache: c.layout != Layout::Baseline,
        bins: 16,
        epoch_inserts: 40,
        forecast_epochs: 2,
        ..TreeLineOptions::default()
    }
}

impl Subject for TreeLine {
    fn open(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<Self> {
        TreeLine::open_in(fs, dir, options(c))
    }

    fn write(&self, op: &Op) -> sylva::Result<()> {
        match op.as_slice() {
            [(k, Some(v))] => self.put(k, v),
            [(k, None)] => self.delete(k).map(drop),
            ops => {
                let ops: Vec<(&[u8], Option<&[u8]>)> =
                    ops.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
                TreeLine::write(self, &ops)
            }
        }
    }

    fn get(&self, key: &[u8]) -> sylva::Result<Option<Vec<u8>>> {
        TreeLine::get(self, key)
    }

    /// TreeLine has no reverse cursor: both directions are its forward scan, checked for order.
    fn contents(&self, _reverse: bool) -> Result<Map, String> {
        let mut out = Map::new();
        let mut prev: Option<Vec<u8>> = None;
        let mut err = None;
        KvStore::scan(self, &[], usize::MAX, &mut |k, v| {
            if prev.as_deref().is_some_and(|p| p >= k) {
                err = Some(format!("scan out of order at {:?}", show(k)));
                return false;
            }
            prev = Some(k.to_vec());
            out.insert(k.to_vec(), v.to_vec());
            true
        })
        .map_err(|e| format!("scan: {e}"))?;
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn scan(&self, start: &[u8], limit: usize) -> sylva::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        KvStore::scan(self, start, limit, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    fn sync(&self) -> sylva::Result<()> {
        TreeLine::sync(self)
    }

    fn checkpoint(&self) -> sylva::Result<()> {
        TreeLine::checkpoint(self)
    }

    fn check(&self) -> sylva::Result<u64> {
        TreeLine::check(self).map(|r| r.records)
    }

    fn close(self) -> sylva::Result<()> {
        TreeLine::close(self)
    }

    fn recovery(&self) -> String {
        let s = KvStore::stats(self);
        let checks: Vec<_> = s
            .counters
            .iter()
            .filter(|(n, _)| n.starts_with("check"))
            .collect();
        format!("{:?} {checks:?}", TreeLine::recovery(self))
    }

    const FILES: &'static [&'static str] = &["data.sylva", "wal.log", "wal.2.log"];
    const TEST: &'static str = "power_loss_treeline";
}

#[test]
fn power_loss_treeline_strict_posix() {
    simulate::<TreeLine>(1, crashes_per_test());
}

#[test]
fn power_loss_treeline_strict_posix_more_seeds() {
    simulate::<TreeLine>(1 << 32, crashes_per_test());
}

#[test]
fn power_loss_treeline_names_with_file_sync() {
    simulate::<TreeLine>(3 << 32, crashes_per_test());
}

/// With the checkpoint and log sync threads: fewer crashes, each life waits for threads.
#[test]
fn power_loss_treeline_with_background_threads() {
    simulate::<TreeLine>(4 << 32, crashes_per_test() / 5);
}

/// Replays one case (`SYLVA_SIM_SEED`), printing each life.
#[test]
fn replay() {
    replay_seed::<TreeLine>();
}
