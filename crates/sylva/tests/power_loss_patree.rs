//! The PA-Tree mode (`PaDb`, issue 20) under the power-loss simulation (`power_loss_common`):
//! point writes, write batches and reads go through the worker (the `Inline` backend: the
//! simulated file system's files have no OS descriptor for io_uring), checks through its `Db`,
//! with the same seeded workloads, crashes and model as `Db`'s own test, under `strong`
//! (`sync=always`) and `weak`/`none` persistence as the seed picks the sync mode.
//! `sync()` is the worker's too (its own log flush). The `Sessions` subject sends its single
//! puts, deletes, batches, gets and syncs through a `PaSession` instead (the polled mode): under `strong` the session makes its writes durable
//! with a log flush it submits itself, and in every mode its worker writes the dirty pages it
//! evicts.
//! `SYLVA_SIM_CRASHES=<n>` sets the crashes per test (a fifth of `Db`'s default each: the
//! worker is the same tree, log and pool), and
//! `SYLVA_SIM_SEED=<seed> cargo test --release -p sylva --test power_loss_patree replay -- --nocapture`
//! replays one case.

mod power_loss_common;

use std::path::Path;

use power_loss_common::{
    crashes_per_test, db_contents, db_options, kv_scan, replay_seed, simulate, write_op, Config,
    Map, Op, Subject,
};
use sylva::io::SimFs;
use sylva::{BackendKind, PaDb, PaOptions, PaResult};

fn open_pa(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<PaDb> {
    let options = PaOptions {
        db: db_options(c),
        backend: BackendKind::Inline,
        // Half the configurations (those the seed gives deferred splits) with the worker's
        // own log flush for strong writes and syncs.
        worker_flush: c.redistribute,
        ..PaOptions::default()
    };
    PaDb::open_in(fs, dir, options)
}

impl Subject for PaDb {
    fn open(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<Self> {
        open_pa(fs, dir, c)
    }

    fn write(&self, op: &Op) -> sylva::Result<()> {
        write_op(
            op,
            |k, v| match v {
                Some(v) => self.put(k, v),
                None => self.delete(k).map(drop),
            },
            |b| PaDb::write(self, b),
        )
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

/// `PaDb` with its single operations run through a `PaSession` each (the module docs).
struct Sessions(PaDb);

impl Sessions {
    /// Runs one operation on a fresh session and takes its result.
    fn one(&self, submit: impl FnOnce(&mut sylva::PaSession<'_>)) -> sylva::Result<PaResult> {
        let mut session = self.0.session()?;
        submit(&mut session);
        match session.wait_any() {
            Some((_, r)) => r,
            None => Err(sylva::Error::InvalidArgument {
                what: "a session that finished nothing".into(),
                limit: 0,
            }),
        }
    }
}

impl Subject for Sessions {
    fn open(fs: &SimFs, dir: &Path, c: &Config) -> sylva::Result<Self> {
        open_pa(fs, dir, c).map(Sessions)
    }

    fn write(&self, op: &Op) -> sylva::Result<()> {
        write_op(
            op,
            |k, v| {
                self.one(|s| match v {
                    Some(v) => s.submit_put(0, k, v),
                    None => s.submit_delete(0, k),
                })
                .map(drop)
            },
            |b| self.one(|s| s.submit_write(0, b)).map(drop),
        )
    }

    fn get(&self, key: &[u8]) -> sylva::Result<Option<Vec<u8>>> {
        match self.one(|s| s.submit_get(0, key))? {
            PaResult::Got(v) => Ok(v),
            other => Err(sylva::Error::InvalidArgument {
                what: format!("a get that came back as {other:?}"),
                limit: 0,
            }),
        }
    }

    fn contents(&self, reverse: bool) -> Result<Map, String> {
        self.0.contents(reverse)
    }

    fn scan(&self, start: &[u8], limit: usize) -> sylva::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.scan(start, limit)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.one(|s| s.submit_sync(0)).map(drop)
    }

    fn checkpoint(&self) -> sylva::Result<()> {
        self.0.checkpoint()
    }

    fn check(&self) -> sylva::Result<u64> {
        self.0.check()
    }

    fn close(self) -> sylva::Result<()> {
        Subject::close(self.0)
    }

    fn recovery(&self) -> String {
        self.0.recovery()
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

#[test]
fn power_loss_through_sessions() {
    simulate::<Sessions>(6 << 32, crashes_per_test() / 5);
}

#[test]
fn power_loss_through_sessions_with_background_threads() {
    simulate::<Sessions>((4 << 32) + (1 << 31), crashes_per_test() / 10);
}

/// Replays one case (`SYLVA_SIM_SEED`), printing each life; `SYLVA_SIM_SESSIONS=1` replays it
/// through sessions.
#[test]
fn replay() {
    if std::env::var_os("SYLVA_SIM_SESSIONS").is_some() {
        replay_seed::<Sessions>();
    } else {
        replay_seed::<PaDb>();
    }
}
