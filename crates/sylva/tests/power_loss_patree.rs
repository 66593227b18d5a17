//! The PA-Tree mode (`PaDb`, issue 20) under the power-loss simulation (`power_loss_common`):
//! point writes and reads go through the worker (the `Inline` backend: the simulated file
//! system's files have no OS descriptor for io_uring), batches, scans and checks through its
//! `Db`, with the same seeded workloads, crashes and model as `Db`'s own test, under `strong`
//! (`sync=always`) and `weak`/`none` persistence as the seed picks the sync mode.
//! `SYLVA_SIM_CRASHES=<n>` sets the crashes per test (a fifth of `Db`'s default each: the
//! worker is the same tree, log and pool), and
//! `SYLVA_SIM_SEED=<seed> cargo test --release -p sylva --test power_loss_patree replay -- --nocapture`
//! replays one case.

mod power_loss_common;

use std::path::Path;

use power_loss_common::{
    crashes_per_test, db_contents, kv_scan, replay_seed, simulate, Config, Map, Op, Subject,
};
use sylva::io::SimFs;
use sylva::{BackendKind, DbOptions, PaDb, PaOptions, WriteBatch};

impl Subject for PaDb {
    fn open(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<Self> {
        let options = PaOptions {
            db: DbOptions {
                sync: c.sync,
                cache_bytes: c.cache_pages * c.page_size as u64,
                checkpoint_bytes: c.checkpoint_bytes,
                fuzzy_checkpoints: c.fuzzy,
                layout: c.layout,
                page_size: c.page_size,
                redistribute: c.redistribute,
                background: c.background,
                ..DbOptions::default()
            },
            backend: BackendKind::Inline,
            ..PaOptions::default()
        };
        PaDb::open_in(fs, dir, options)
    }

    fn write(&self, op: &Op) -> sylva::Result<()> {
        match op.as_slice() {
            [(k, Some(v))] => self.put(k, v),
            [(k, None)] => self.delete(k).map(drop),
            ops => {
                let mut batch = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                self.db().write(&batch)
            }
        }
    }

    fn get(&self, key: &[u8]) -> sylva::Result<Option<Vec<u8>>> {
        PaDb::get(self, key)
    }

    fn contents(&self, reverse: bool) -> Result<Map, String> {
        db_contents(self.db(), reverse)
    }

    fn scan(&self, start: &[u8], limit: usize) -> sylva::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        kv_scan(self, start, limit)
    }

    fn sync(&self) -> sylva::Result<()> {
        PaDb::sync(self)
    }

    fn checkpoint(&self) -> sylva::Result<()> {
        self.db().checkpoint()
    }

    fn check(&self) -> sylva::Result<u64> {
        self.db().check().map(|r| r.records)
    }

    fn close(self) -> sylva::Result<()> {
        PaDb::close(self).map(drop)
    }

    fn recovery(&self) -> String {
        format!("{:?}", self.db().recovery())
    }

    const FILES: &'static [&'static str] = &["data.sylva", "wal.log", "wal.2.log"];
    const TEST: &'static str = "power_loss_patree";
}

#[test]
fn power_loss_strict_posix() {
    simulate::<PaDb>(1, crashes_per_test() / 5);
}

#[test]
fn power_loss_names_with_file_sync() {
    simulate::<PaDb>(3 << 32, crashes_per_test() / 5);
}

#[test]
fn power_loss_with_background_threads() {
    simulate::<PaDb>(4 << 32, crashes_per_test() / 10);
}

#[test]
fn power_loss_with_large_values() {
    simulate::<PaDb>(5 << 32, crashes_per_test() / 10);
}

/// Replays one case (`SYLVA_SIM_SEED`), printing each life.
#[test]
fn replay() {
    replay_seed::<PaDb>();
}
