//! `NbTree`, the public handle: opening (through [`crate::durable`]), reads, logged writes,
//! stats and the [`crate::KvStore`] contract.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::cascade;
use super::engine::{collect_runs, NbEngine, Params};
use super::log;
use super::options::{check_params, NbTreeOptions};
use super::scan::scan;
use super::stree::{is_put, Found, SNode};
use crate::btree::{max_key_len, max_value_len};
use crate::durable::{self, dir, Durable, RecoveryReport};
use crate::error::Result;
use crate::io::{Io, OsFs, Vfs};
use crate::kv::{KvStore, Limits, Stats, Visitor};

thread_local! {
    /// A writer's log record, kept from one write to the next (as `engine::SCRATCH`).
    static LOG_RECORD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A record at most this long keeps its buffer for the next write; a longer one (a large
/// batch) hands it back.
const KEPT_RECORD: usize = 64 << 10;

/// Appends the log record `encode` writes to the log; returns its position.
fn append_record(e: &NbEngine, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64> {
    LOG_RECORD.with_borrow_mut(|buf| {
        buf.clear();
        encode(buf);
        let lsn = e.wal.append(buf);
        if lsn.is_ok() {
            e.logged(buf.len());
        }
        if buf.capacity() > KEPT_RECORD {
            *buf = Vec::new();
        }
        lsn
    })
}

/// A durable, ordered key-value store organised as a Nested B-tree (the `nbtree` module
/// docs). Share it between threads by reference; every method may be called
/// concurrently.
pub struct NbTree {
    pub(super) durable: Durable<NbEngine>,
    options: NbTreeOptions,
    path: PathBuf,
    recovery: RecoveryReport,
}

impl NbTree {
    /// Opens the store in `dir`, creating it if there is none. Errors as [`crate::Db::open`]'s;
    /// a directory holding a `Db` is [`crate::Error::NotSylva`]; bad options are
    /// [`crate::Error::InvalidArgument`] with the limit.
    pub fn open(dir: impl AsRef<Path>, options: NbTreeOptions) -> Result<NbTree> {
        Self::open_in(&OsFs, dir.as_ref(), options)
    }

    /// [`NbTree::open`] on the file system `vfs` (a simulated one in crash tests).
    pub fn open_in(vfs: &dyn Vfs, dir: &Path, options: NbTreeOptions) -> Result<NbTree> {
        options.validate()?;
        let create = dir::Create {
            page_size: options.page_size,
            direct_io: true,
        };
        Self::start(dir::open_dir(vfs, dir, create)?, options)
    }

    /// Opens a store over the given page-file and log I/O, without a directory or lock file
    /// (fault-injection tests). An empty page file is initialised.
    pub fn open_io(
        page_io: Box<dyn Io>,
        wal_io: [Box<dyn Io>; 2],
        options: NbTreeOptions,
    ) -> Result<NbTree> {
        options.validate()?;
        Self::start(dir::open_io(page_io, wal_io, options.page_size)?, options)
    }

    fn start(files: dir::Files, options: NbTreeOptions) -> Result<NbTree> {
        let path = files.path.clone();
        let page_size = files.file.page_size();
        let mut params = Params {
            fanout: options.fanout,
            sigma: options.sigma_bytes(),
            bloom_bits: options.bloom_bits,
            page_size,
            deamortize: options.deamortize,
            cache_bytes: options.cache_bytes,
        };
        let durable_options = durable::Options {
            sync: options.sync,
            checkpoint_bytes: params.sigma,
            fuzzy_checkpoints: true,
            background: options.deamortize,
        };
        let (durable, recovery) = Durable::start(
            files,
            durable_options,
            |file, wal, state: Option<super::manifest::State>, _lsn| {
                if let Some(s) = &state {
                    // The stored parameters win.
                    params.fanout = s.fanout as usize;
                    params.sigma = s.sigma;
                    params.bloom_bits = s.bloom_bits;
                    let sigma = if options.unchecked_sigma {
                        u64::MAX
                    } else {
                        params.sigma
                    };
                    // Damage or another build's values: refused like bad options.
                    check_params(params.fanout, sigma, params.bloom_bits, page_size)?;
                }
                NbEngine::build(file, wal, state, params, options.step_bytes)
            },
        )?;
        let p = durable.engine().params;
        Ok(NbTree {
            durable,
            options: NbTreeOptions {
                fanout: p.fanout,
                sigma: Some(p.sigma),
                bloom_bits: p.bloom_bits,
                page_size: p.page_size,
                ..options
            },
            path,
            recovery,
        })
    }

    fn engine(&self) -> &NbEngine {
        self.durable.engine()
    }

    /// What recovery did when the store was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The options in force (an existing store keeps its fanout, σ and Bloom bits).
    pub fn options(&self) -> NbTreeOptions {
        self.options
    }

    /// Where the page file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Key and value limits: the in-memory root's (a value carries one more byte, its tag).
    pub fn limits(&self) -> Limits {
        let ps = self.engine().params.page_size;
        Limits::variable(max_key_len(ps), max_value_len(ps) - 1)
    }

    /// Looks `key` up; on a hit copies the value into `out` and returns `true`.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.durable.check_open()?;
        self.limits().check_key(key)?;
        let r = self.get_tagged(key, out);
        let found = self.durable.poison().guard_read(r)?;
        if found && is_put(out) {
            out.remove(0);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn get_tagged(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let e = self.engine();
        e.lookups.fetch_add(1, Ordering::Relaxed);
        let v = e.version();
        Ok(matches!(
            v.get_tagged(key, out, &e.pool, &e.leaf_reads)?,
            Found::Yes
        ))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Inserts or overwrites `key` (a blind write, §3.2.2).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.durable.check_open()?;
        let limits = self.limits();
        limits.check_key(key)?;
        limits.check_value(value)?;
        let e = self.engine();
        let r = (|| {
            let _w = e.writers.lock();
            let lsn = append_record(e, |buf| log::put(buf, key, value))?;
            e.apply(key, Some(value))?;
            let frozen = !e.params.deamortize || e.freeze_if_full()?;
            Ok((lsn, frozen))
        })();
        let (lsn, frozen) = self.durable.poison().guard(r)?;
        self.durable.after_write(1, lsn)?;
        self.pace(frozen, lsn)
    }

    /// Deamortization (module docs of [`super::cascade`]): an insert that finds the running
    /// commit behind its pace waits for one step of it; one that finds the root full while a
    /// commit runs waits for all of it (a stall).
    fn pace(&self, frozen: bool, lsn: u64) -> Result<()> {
        let e = self.engine();
        if !e.params.deamortize {
            return Ok(());
        }
        let sigma = e.params.sigma;
        if !frozen {
            // A stall: the root is full and the root frozen before it is still waiting to be
            // moved down (its commit is running, or the merger has not begun it). Commit here:
            // the checkpoint lock waits for the running one.
            e.stalls.fetch_add(1, Ordering::Relaxed);
            return self.durable.checkpoint();
        }
        let a = e.version().active.bytes();
        let st = e.job.state();
        if st.running {
            let required = cascade::pace(st.w_bound, a, sigma, st.begun);
            // Below half the root an insert behind its pace goes on while the merger is in a
            // commit point's fsyncs (no step comes before they end); the inserts after them
            // make up the pace a step each, and from half the root on every insert behind
            // waits for a step (module docs of `cascade`, "Deamortization").
            let may_pass = a < sigma / 2;
            if st.done < required && st.syncing && may_pass {
                e.sync_passes.fetch_add(1, Ordering::Relaxed);
            } else if st.done < required {
                e.inline_steps.fetch_add(1, Ordering::Relaxed);
                while !e
                    .job
                    .wait_step_for(st.steps, may_pass, std::time::Duration::from_millis(1))
                {
                    self.durable.check_open()?;
                    if !self.commit_running() {
                        // The merger's request may have come while the last commit was
                        // ending, and been dropped: ask again.
                        self.durable.after_write(0, lsn)?;
                    }
                }
            }
        } else if a >= sigma * 3 / 4 && self.commit_running() {
            // The cascade has written everything; the commit's last step (fsyncs and the meta
            // page) is still running and the root is ¾ full.
            e.inline_steps.fetch_add(1, Ordering::Relaxed);
            self.wait_commit();
        }
        Ok(())
    }

    /// Whether a commit has begun and not ended.
    fn commit_running(&self) -> bool {
        self.engine().commits_begun.load(Ordering::Acquire) > self.durable.checkpoints()
    }

    /// Waits for the running commit to end (or the store to be poisoned).
    fn wait_commit(&self) {
        while self.commit_running() && self.durable.check_open().is_ok() {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// Removes `key`; returns whether it was present (it is read first, §3.2.2).
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.durable.check_open()?;
        self.limits().check_key(key)?;
        let e = self.engine();
        let r = (|| {
            let _w = e.writers.lock();
            let mut out = Vec::new();
            if !(self.get_tagged(key, &mut out)? && is_put(&out)) {
                return Ok(None);
            }
            let lsn = append_record(e, |buf| log::delete(buf, key))?;
            e.apply(key, None)?;
            let frozen = !e.params.deamortize || e.freeze_if_full()?;
            Ok(Some((lsn, frozen)))
        })();
        match self.durable.poison().guard(r)? {
            Some((lsn, frozen)) => {
                self.durable.after_write(1, lsn)?;
                self.pace(frozen, lsn)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Applies puts (`Some(value)`) and deletes atomically: one log record, so after a crash
    /// all of them or none. Deletes in a batch are blind (they report nothing).
    pub fn write_batch(&self, ops: &[(&[u8], Option<&[u8]>)]) -> Result<()> {
        self.durable.check_open()?;
        let limits = self.limits();
        for (k, v) in ops {
            limits.check_key(k)?;
            if let Some(v) = v {
                limits.check_value(v)?;
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let e = self.engine();
        let r = (|| {
            let _w = e.writers.lock();
            let lsn = append_record(e, |buf| log::batch(buf, ops))?;
            for (k, v) in ops {
                e.apply(k, *v)?;
            }
            let frozen = !e.params.deamortize || e.freeze_if_full()?;
            Ok((lsn, frozen))
        })();
        let (lsn, frozen) = self.durable.poison().guard(r)?;
        self.durable.after_write(ops.len() as u64, lsn)?;
        self.pace(frozen, lsn)
    }

    /// Visits up to `limit` records from the first key `>= start`, in key order.
    pub fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        self.durable.check_open()?;
        let v = self.engine().version();
        let r = scan(&v, start, &[], limit, visitor);
        self.durable.poison().guard_read(r)
    }

    /// Visits every record with `start <= key < end` (in key order).
    pub fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        self.durable.check_open()?;
        if end.is_empty() || start >= end {
            return Ok(0);
        }
        let v = self.engine().version();
        let r = scan(&v, start, end, usize::MAX, visitor);
        self.durable.poison().guard_read(r)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.durable.sync()
    }

    /// A commit now: the root's records written to disk, a new manifest, the meta page.
    pub fn checkpoint(&self) -> Result<()> {
        self.durable.checkpoint()
    }

    /// Commits and closes. Dropping does the same but cannot report errors.
    pub fn close(self) -> Result<()> {
        self.durable.close()
    }

    /// Drops the store the way a crash would (no commit, the log's buffer lost). For tests.
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.durable.simulate_crash();
    }

    /// Counters of the structure and the cascade (see [`KvStore::stats`]).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let e = self.engine();
        let c = &e.counters;
        let v = e.version();
        let file = &e.file;
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let pool = e.pool.stats();
        let mut out = vec![
            ("height", v.root.height() as u64),
            ("active_bytes", v.active.bytes()),
            ("frozen_roots", v.frozen.len() as u64),
            ("cascades", l(&c.cascades)),
            ("handle_full_calls", l(&c.handle_full_calls)),
            (
                "max_handle_full_per_cascade",
                l(&c.max_handle_full_per_cascade),
            ),
            ("flushes", l(&c.flushes)),
            ("splits", l(&c.splits)),
            ("dtrees_written", l(&c.dtrees_written)),
            ("bytes_written", l(&c.bytes_written)),
            ("max_cascade_bytes", l(&c.max_cascade_bytes)),
            ("inner_commits", l(&c.inner_commits)),
            ("max_uncommitted_bytes", l(&c.max_uncommitted_bytes)),
            ("inline_steps", l(&e.inline_steps)),
            ("stalls", l(&e.stalls)),
            ("max_backlog", l(&e.max_backlog)),
            ("sync_passes", l(&e.sync_passes)),
            ("lookups", l(&e.lookups)),
            ("leaf_reads", l(&e.leaf_reads)),
            // Leaf reads the leaf cache missed (reads from the file), and its size in pages.
            ("leaf_misses", pool.misses),
            ("leaf_cache_pages", pool.resident),
            // Its budget now: what `cache_bytes` leaves beside the roots' pages and the
            // d-trees' inner pages and filters (those two in bytes).
            ("leaf_cache_budget_pages", pool.budget_pages),
            ("roots_memory", v.roots_memory()),
            ("dtree_memory", e.dtree_memory.load(Ordering::Relaxed)),
            ("file_pages", file.page_count()),
            ("free_pages", file.free_pages()),
            ("checkpoints", self.durable.checkpoints()),
        ];
        out.extend(space_counters(e, &v.root));
        out
    }
}

/// Where the file's pages are (issue 22's space target): pages of the live runs (the
/// s-tree's d-trees and the manifest in force), pages freed but waiting for a checkpoint, the
/// free runs by length (under 16 pages, under 256 (1 MiB at 4 KiB), under 4,096, longer: count
/// and pages of each), and the pages the file grew by while the free runs were too short for a
/// request though as many pages were free (`grown_fragmented_pages`) or while fewer were.
fn space_counters(e: &NbEngine, root: &SNode) -> Vec<(&'static str, u64)> {
    let mut runs = e.manifest_runs();
    collect_runs(root, &mut runs);
    let (free, fragmented, short) = e.file.space_report();
    let mut buckets = [(0u64, 0u64); 4];
    for l in free {
        let b = match l {
            0..16 => 0,
            16..256 => 1,
            256..4096 => 2,
            _ => 3,
        };
        buckets[b].0 += 1;
        buckets[b].1 += l;
    }
    vec![
        ("live_run_pages", runs.iter().map(|r| r.1).sum()),
        ("waiting_free_pages", e.file.pages_waiting_for_checkpoint()),
        ("free_runs_lt16", buckets[0].0),
        ("free_pages_lt16", buckets[0].1),
        ("free_runs_lt256", buckets[1].0),
        ("free_pages_lt256", buckets[1].1),
        ("free_runs_lt4096", buckets[2].0),
        ("free_pages_lt4096", buckets[2].1),
        ("free_runs_ge4096", buckets[3].0),
        ("free_pages_ge4096", buckets[3].1),
        ("grown_fragmented_pages", fragmented),
        ("grown_short_pages", short),
    ]
}

impl KvStore for NbTree {
    fn limits(&self) -> Limits {
        NbTree::limits(self)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        NbTree::get_into(self, key, out)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        NbTree::put(self, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        NbTree::delete(self, key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        NbTree::scan(self, start, limit, visitor)
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        NbTree::map_range(self, start, end, visitor)
    }

    fn sync(&self) -> Result<()> {
        NbTree::sync(self)
    }

    /// The log synced, then a commit (the root written out), so recovery would redo nothing.
    fn finish_deferred(&self) -> Result<()> {
        self.sync()?;
        self.checkpoint()
    }

    /// `records` is exact: a merged scan of every level (§ "Deletes" of issue 22).
    fn stats(&self) -> Stats {
        let mut records = 0u64;
        let _ = NbTree::scan(self, &[], usize::MAX, &mut |_, _| {
            records += 1;
            true
        });
        let file = &self.engine().file;
        Stats {
            records,
            bytes_used: Some(file.page_count() * file.page_size() as u64),
            counters: self.counters(),
        }
    }
}
