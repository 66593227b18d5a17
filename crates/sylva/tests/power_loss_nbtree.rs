//! The NB-tree under the power-loss simulation (`power_loss_common`): a seeded random workload
//! over a simulated file system that loses, keeps or tears unsynced writes and names at a random
//! change, then recovery checked against a model (every acknowledged write kept, `check()`
//! clean).
//!
//! σ is a few pages (the seed's checkpoint threshold, 8–64 KiB, below the options' minimum by
//! `unchecked_sigma`), so the simulation's few hundred keys fill roots and crashes land in
//! cascades (flushes, splits), commits (d-trees, manifest, meta page) and the log's rotation.
//! The store runs without background threads (`deamortize=off`) except in
//! `power_loss_with_background_threads`. Replay:
//! `SYLVA_SIM_SEED=<seed> cargo test --release -p sylva --test power_loss_nbtree replay -- --nocapture`.
//! `SYLVA_SIM_CRASHES=<n>` sets the crashes per test (default 25,000; a fifth with threads).

mod power_loss_common;

use std::path::Path;

use power_loss_common::{crashes_per_test, replay_seed, show, simulate, Config, Map, Op, Subject};
use sylva::io::SimFs;
use sylva::{NbTree, NbTreeOptions};

impl Subject for NbTree {
    fn open(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<Self> {
        let options = NbTreeOptions {
            sync: c.sync,
            sigma: Some(c.checkpoint_bytes),
            unchecked_sigma: true,
            fanout: 3,
            deamortize: c.background,
            page_size: c.page_size,
            ..NbTreeOptions::default()
        };
        NbTree::open_in(fs, dir, options)
    }

    fn write(&self, op: &Op) -> sylva::Result<()> {
        match op.as_slice() {
            [(k, Some(v))] => self.put(k, v),
            [(k, None)] => self.delete(k).map(drop),
            ops => {
                let ops: Vec<(&[u8], Option<&[u8]>)> = ops
                    .iter()
                    .map(|(k, v)| (k.as_slice(), v.as_deref()))
                    .collect();
                self.write_batch(&ops)
            }
        }
    }

    fn get(&self, key: &[u8]) -> sylva::Result<Option<Vec<u8>>> {
        NbTree::get(self, key)
    }

    /// The NB-tree has no reverse cursor: both directions read its forward scan.
    fn contents(&self, _reverse: bool) -> Result<Map, String> {
        let mut out = Map::new();
        let mut prev: Option<Vec<u8>> = None;
        let mut order = Ok(());
        NbTree::scan(self, &[], usize::MAX, &mut |k, v| {
            if prev.as_deref().is_some_and(|p| p >= k) {
                order = Err(format!("scan out of order at {:?}", show(k)));
                return false;
            }
            prev = Some(k.to_vec());
            out.insert(k.to_vec(), v.to_vec());
            true
        })
        .map_err(|e| format!("scan: {e}"))?;
        order.map(|()| out)
    }

    fn scan(&self, start: &[u8], limit: usize) -> sylva::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        NbTree::scan(self, start, limit, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    fn sync(&self) -> sylva::Result<()> {
        NbTree::sync(self)
    }

    fn checkpoint(&self) -> sylva::Result<()> {
        NbTree::checkpoint(self)
    }

    fn check(&self) -> sylva::Result<u64> {
        NbTree::check(self)?;
        Ok(sylva::KvStore::stats(self).records)
    }

    fn close(self) -> sylva::Result<()> {
        NbTree::close(self)
    }

    fn recovery(&self) -> String {
        format!("{:?}", NbTree::recovery(self))
    }

    const FILES: &'static [&'static str] = &["data.sylva", "wal.log", "wal.2.log"];
    const TEST: &'static str = "power_loss_nbtree";
}

#[test]
fn power_loss_strict_posix() {
    simulate::<NbTree>(1, crashes_per_test());
}

#[test]
fn power_loss_names_with_file_sync() {
    simulate::<NbTree>(3 << 32, crashes_per_test());
}

/// With the merger thread (the durability layer's checkpoint thread) and the log sync thread.
#[test]
fn power_loss_with_background_threads() {
    simulate::<NbTree>(4 << 32, crashes_per_test() / 5);
}

#[test]
fn replay() {
    replay_seed::<NbTree>();
}

/// The simulation's workload (a few hundred keys, values up to 160 bytes) cascades at the σ it
/// gets: leaves split and roots flush, and cascades commit inside themselves (commit points),
/// so the crashes above land in cascades and in their inner commits too.
#[test]
fn the_simulated_workload_cascades_at_small_sigmas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut inner_commits = 0;
    for sigma in [8u64 << 10, 32 << 10] {
        let nb = NbTree::open(
            dir.path().join(sigma.to_string()),
            NbTreeOptions {
                sigma: Some(sigma),
                unchecked_sigma: true,
                deamortize: false,
                ..NbTreeOptions::default()
            },
        )
        .expect("open");
        for i in 0..3000u64 {
            let k = format!("k{:03}", (i * 7919) % 400).into_bytes();
            nb.put(&k, &vec![i as u8; (i % 160) as usize]).expect("put");
        }
        nb.check().expect("check");
        let c = nb.counters();
        let get = |n: &str| c.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
        assert!(
            get("splits") > 0 && get("flushes") + get("splits") > 2,
            "σ {sigma}: {c:?}"
        );
        inner_commits += get("inner_commits");
    }
    assert!(inner_commits > 0, "no cascade committed inside itself");
}
