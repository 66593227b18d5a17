//! TreeLine (`../shared/seeds/treeline.txt`, the MIT thesis): an update-in-place store for
//! NVMe SSDs with a record cache (§3.1, §4.2), page grouping by linear models (§3.2, §4.4–4.5)
//! and insert forecasting (§3.3, §4.6), on sylva's durability layer ([`crate::durable`]).
//!
//! ```
//! use sylva::{KvStore, TreeLine, TreeLineOptions};
//! # let tmp = tempfile::tempdir()?;
//! let db = TreeLine::open(tmp.path().join("tl"), TreeLineOptions::default())?;
//! db.put(&7u64.to_be_bytes(), b"seven")?;
//! assert_eq!(db.get(&7u64.to_be_bytes())?.as_deref(), Some(&b"seven"[..]));
//! db.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! **Two parts** (Figure 4-1): the *Tree*, in memory — the record cache and the segment index,
//! each a [`crate::btree::BTree`] —, and the *Line*, on disk — segments of 1, 2, 4, 8 or 16
//! contiguous 4 KiB pages of the page file ([`crate::io::PageFile`], kinds 16 and 17), read
//! and written directly (`O_DIRECT`), never through the buffer pool.
//!
//! **Record cache** ([`cache`]): every write goes to the log and then to the cache, dirty;
//! reads look there first. Entries carry a clock priority; the clock evicts, and a dirty victim
//! first has its page written with every dirty entry of that page (one read, one write, the
//! entries stay cached and clean). `cache_bytes` bounds the cache's entries, its hash table
//! and its ordered map of dirty entries, the index, the histograms and the buffers together.
//!
//! **Segments and models** ([`index`], [`page`], [`model`]): the index maps each segment's
//! lower bound to its first page, page count, model and production ID; a key's segment is the
//! floor of the lower bounds. Within a segment the model computes the page: `clamp(⌊model(x) /
//! goal⌋, 0, n − 1)` with `x` the key's 8 bytes after a prefix, for placing and for lookup
//! alike, so there is no search. A page is the common header, a TreeLine header and a slotted
//! leaf ([`crate::page::slotted`]) whose fences are the segment's range (keys stored without
//! the range's shared prefix).
//!
//! **Overflow and reorganization** ([`reorg`]): a base page that cannot take a flush's records
//! gets one overflow page. When both are full the
//! segment and its neighbours with overflow pages are rebuilt into new segments by GreedyPLR
//! ([`crate::util::plr`]), each as large as the model allows at `goal` records a page (at most
//! `goal + 2·epsilon − 1` land on a page), with the goal lowered where inserts are forecast
//! ([`crate::util::histogram`], epochs counted at flush time, when an insert is known to be
//! one).
//!
//! **Scans** ([`scan`], §4.1.3): a segment at a time, its pages merged with the cache's entries
//! of the range (they win; delete markers hide). Where the segment's model keeps key order
//! across its pages, a scan reads from its start key's page on, first only the pages its limit
//! needs at the goal's fill, with one I/O; else the whole segment.
//!
//! **Log and recovery** ([`log`], [`recovery`], [`engine`]): PUT and DELETE are logged before
//! a write is acknowledged (the `sync` cadence as `Db`'s). A page reaches disk only after the
//! log covering its entries (the WAL rule), and its first write after a checkpoint logs its
//! image first (repairing a torn write; the thesis assumes atomic 4 KiB writes). Pages wait in
//! a group for the log ([`group`]): one log sync for up to 256 pages, none when the `sync`
//! cadence has made the log durable meanwhile.
//! Reorganizations log REORG_START (durable before any new page is written) and REORG_END.
//! A checkpoint writes every dirty entry to its page and syncs the file; recovery replays the
//! log's images and reorganizations, scans the pages to rebuild the index (Checks I and II of
//! §4.7.2), then replays PUT and DELETE into the cache.
//!
//! # Departures from the thesis, and why
//!
//! - **Durable.** The thesis ran without a log (§5.1.1); here every write is logged as `Db`'s,
//!   and recovery, a sketch there, is built, with torn-write repair by page images.
//! - **Checkpoints are quiet by default** ([`checkpoint`]): most dirty entries are written
//!   while writers go on (in key order, a segment's base pages read with one I/O when several
//!   are dirty, the lock taken for 256 pages at a time), then writers wait while the rest are
//!   written, the page file is synced and the log emptied. Between checkpoints, the log holds
//!   every change not yet on its page.
//! - **Fuzzy checkpoints** (`checkpoint=fuzzy`, [`crate::durable`]'s protocol): writers are held
//!   back only while the log rotates and the checkpoint's LSN `l` is taken; then every dirty
//!   entry is written while they go on, the page file and the log are synced, the meta page
//!   records `l`, and the log before `l` is dropped. Redo starts at `l`. A page written after
//!   `l` logs its image at its first write since (recovery installs it over a torn write), and
//!   that write holds every entry of the page dirtied before `l`: a flush writes all of its
//!   page's dirty entries, and one that cannot place them all reorganizes the segment, whose
//!   new pages are written and synced before the index takes them. So a later write of the
//!   page, torn, loses only entries from `l` on, which redo brings back. Not the default: the
//!   checkpoint's own flush then logs an image of nearly every page it writes, and no gain
//!   was shown for the extra bytes (`docs/results/treeline.md`, session 20).
//! - **Locks** (§4.8, [`locks`]): the segment locks IR/IW/O/OX and the page locks S/X of
//!   Table 4.1, beside a state lock over the cache and the index ([`store::Store::inner`],
//!   a reader-writer lock; writers also hold a gate shared, which a checkpoint takes
//!   exclusively). The thesis's record cache is a concurrent structure; here the cache, the
//!   index and the clock are under the state lock, which cache hits and scans' merges take
//!   shared and writes exclusively, and which page I/O lets go where the locks of §4.8 keep
//!   the pages as they are:
//!   - a read miss reads its page under IR and S with no state lock, and admits its record
//!     under the exclusive lock only if its segment and page are unchanged
//!     ([`store::WriteStripes`]; else it reads them again under it, `miss_rereads`);
//!   - a flush (an eviction's, a write-through's) takes IW and X under the state lock, lets
//!     it go while it reads and merges the page, and takes it again to write ([`flush`]); an
//!     eviction passes over a victim whose page is locked. A checkpoint's flush keeps the
//!     state lock for its reads and reorganizations, a group of pages at a time
//!     ([`checkpoint`]);
//!   - a reorganization takes O on its pre segments (a neighbour only if no flush is in it),
//!     lets the state lock go for Phases II and III (reading, planning, writing, syncing),
//!     upgrades to OX once the readers have left (under the state lock if none reads, else
//!     with it let go), and installs Phase IV under the state lock ([`reorg`]);
//!   - a scan takes a segment's IR lock and its pages' S locks, reads the pages with no state
//!     lock and merges the cache's dirty entries over them under the shared one ([`scan`]);
//!     it needs no lock coupling between segments (§4.8.3): each is looked up again by the
//!     key the last one ended at.
//!
//!   A flush's page write joins the group under the state lock, and a group's write-out
//!   (a log sync and the writes) runs under it ([`group`]).
//! - **Model input** (§6.2 models 8-byte integer keys): the 8 key bytes after the prefix the
//!   reorganized records share (not the segment range's: the range is only known once the
//!   model has chosen where the segment ends). Keys inserted later that do not share it still
//!   land on and are found on the page the same function names; only the page bound is lost.
//! - **Overflow pages** are rebuilt with the base page at each flush; a record already on disk
//!   never moves between the two (a crash between their writes could lose it), records being
//!   flushed go to the base page when they fit. The two are written in either order (page
//!   order, in a group): Check I repairs a crash between them either way, and the records
//!   concerned are in the log.
//! - **Page writes wait for the log in groups** ([`group`]): the thesis ran without a log; with
//!   one, a page written alone waits for a log fsync whenever it logs its image (its first
//!   write after a checkpoint), which made a checkpoint cost a log fsync per page.
//! - **Forecast goal** from the records actually read (the thesis assumes full pages before
//!   reading them), and never below `fill_floor` (default half of `goal`): the thesis's
//!   defaults (100 epochs of 100,000 inserts) forecast a load's own size into every range;
//!   histograms are not persisted (a reopened store forecasts after an epoch).
//! - **Recovery** scans every page of the file (one read a page); redo keeps the replayed
//!   writes in the cache beyond its budget until the log is read (hence the smaller default
//!   `checkpoint_bytes`, 64 MiB).
//!
//! - **Limits**: keys up to 256 bytes, values up to a quarter page less 8 bytes (1,016 at
//!   4 KiB), any key with any value (the [`Limits`] contract the conformance suite holds every
//!   engine to), instead of refusing a key and value longer than a quarter page together: a
//!   page holds two of the largest records besides its two largest fences.
//! - **Memory**: `cache_bytes` is charged with the record cache's exact size (the arena chunks
//!   of its entries, 12-byte slots, the hash table, the ordered map of dirty entries: about 85
//!   bytes for a clean 64-byte record, [`cache`]; the map's freed pages too until they are
//!   given back), the
//!   index's entries (an estimate above what its tree takes), the log's buffers as allocated
//!   (at least 4 MiB; more while a long fsync holds one), a checkpoint's list of dirty entries
//!   while it exists, the set of pages imaged since the checkpoint, the histograms with the
//!   sample's sorted copy, plus a fixed 8 MiB (a reorganization's records and buffers, and a
//!   checkpoint's flush beside it) (`tests/treeline_memory.rs`).
//!
//! # Status against issue 21
//!
//! Built: the record cache, index, pages and models, overflow pages, the four-phase
//! reorganization with GreedyPLR and 1/2/4/8/16-page segments, insert forecasting, the log
//! (PUT, DELETE, BATCH, PAGE_IMAGE, REORG_START/END) and recovery with Checks I and II, fuzzy
//! and quiet checkpoints, page writes in groups with one log sync ([`group`]), `check()`,
//! counters, the `sylva bench` engine `treeline` with its options.
//! Built with a departure: the locks of §4.8, beside one state lock over the cache and the
//! index (not concurrent structures; page I/O runs without it, above).
//! Not built: dropping an open REORG_START at a checkpoint (none can be open when a
//! checkpoint drops the log: a reorganization runs within a writer, which holds the gate
//! shared, or within the checkpoint's own flush).
//!
//! # Invariants (checked by [`TreeLine::check`])
//!
//! Segments cover the key space without gaps or overlaps, the first from the empty key; every
//! record lies in its segment's range on the page its model names (or that page's overflow
//! page); no page is used twice, and none in use is free in the page file; the record count is
//! exact.

mod cache;
mod checkpoint;
mod engine;
mod flush;
mod group;
mod index;
mod locks;
pub(crate) mod log;
#[cfg(test)]
mod miss_tests;
mod model;
mod options;
pub mod page;
mod recovery;
pub mod reorg;
mod scan;
mod store;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::durable::{self, dir, Durable, RecoveryReport};
use crate::error::{Error, Result};
use crate::io::{Io, OsFs, Vfs};
use crate::kv::{KvStore, Limits, Stats, Visitor};
use store::Store;

pub use options::{TreeLineOptions, OPTION_KEYS};
pub use page::SegmentPage;

/// The longest key: the index's limit.
pub const MAX_KEY: usize = 256;

/// What [`TreeLine::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeLineCheck {
    /// Segments.
    pub segments: u64,
    /// Base pages.
    pub pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Records on the pages.
    pub records: u64,
}

/// TreeLine: a durable, ordered key-value store in a directory (module docs). Share it
/// between threads by reference; every method may be called concurrently.
pub struct TreeLine {
    durable: Durable<Store>,
    path: PathBuf,
    recovery: RecoveryReport,
}

impl TreeLine {
    /// Opens the store in `dir`, creating it if there is none. Errors as [`crate::Db::open`]:
    /// `Locked`, `NotSylva` (a `Db` or foreign directory), `UnsupportedVersion`, damage;
    /// `InvalidArgument` for bad options.
    pub fn open(dir: impl AsRef<Path>, options: TreeLineOptions) -> Result<TreeLine> {
        Self::open_in(&OsFs, dir.as_ref(), options)
    }

    /// [`TreeLine::open`] on the file system `vfs` (a simulated one in crash tests).
    pub fn open_in(vfs: &dyn Vfs, dir: &Path, options: TreeLineOptions) -> Result<TreeLine> {
        options.validate()?;
        let create = dir::Create {
            page_size: options.page_size,
            direct_io: options.direct_io,
        };
        Self::start(dir::open_dir(vfs, dir, create)?, options)
    }

    /// Opens a store over the given page-file and log I/O, without a directory or lock file
    /// (fault-injection tests). An empty page file is initialised.
    pub fn open_io(
        page_io: Box<dyn Io>,
        wal_io: [Box<dyn Io>; 2],
        options: TreeLineOptions,
    ) -> Result<TreeLine> {
        options.validate()?;
        Self::start(dir::open_io(page_io, wal_io, options.page_size)?, options)
    }

    fn start(files: dir::Files, options: TreeLineOptions) -> Result<TreeLine> {
        let path = files.path.clone();
        let durable_options = durable::Options {
            sync: options.sync,
            checkpoint_bytes: options.checkpoint_bytes,
            fuzzy_checkpoints: options.fuzzy_checkpoints,
            background: options.background,
        };
        let (durable, recovery) =
            Durable::start(files, durable_options, |file, wal, state, lsn| {
                recovery::open_store(file, wal, state, lsn, options)
            })?;
        Ok(TreeLine {
            durable,
            path,
            recovery,
        })
    }

    fn store(&self) -> &Store {
        self.durable.engine()
    }

    /// What recovery did at open.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Where the page file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Key and value limits: keys of 1..=256 bytes (the index's limit), values up to a
    /// quarter page less 8 bytes (1,016 bytes at 4 KiB: an 8-byte key and its value make a
    /// quarter page). Any key with any value is accepted (the contract of [`Limits`]): a page
    /// holds two of the largest records besides its two largest fences.
    pub fn limits(&self) -> Limits {
        Limits::variable(MAX_KEY, self.store().page_size() / 4 - 8)
    }

    fn check_record(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let limits = self.limits();
        limits.check_key(key)?;
        limits.check_value(value)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(key, &mut out)?.then_some(out))
    }

    /// Looks `key` up; on a hit copies the value into `out` and returns `true`.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.durable.check_open()?;
        self.limits().check_key(key)?;
        let store = self.store();
        // A hit needs only the shared lock: readers of cached records go side by side. A miss
        // notes its page under it and reads with no lock held.
        let r = (|| {
            let inner = store.inner.read();
            if let Some(found) = store.get_cached(&inner, key, out)? {
                return Ok(ControlFlow::Break(found));
            }
            store.plan_miss(&inner, key).map(ControlFlow::Continue)
        })();
        let plan = match self.durable.poison().guard_read(r)? {
            ControlFlow::Break(found) => return Ok(found),
            ControlFlow::Continue(plan) => plan,
        };
        let read = store.read_miss(plan, key);
        // Caching the record may evict a dirty entry, which writes a page and logs: as a
        // writer, under the gate (a checkpoint empties the log), and a failure poisons.
        let _gate = store.gate.read();
        let r = store.admit_miss(&mut store.inner.write(), key, read, out);
        self.durable.poison().guard(r)
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.durable.check_open()?;
        self.check_record(key, value)?;
        let store = self.store();
        let r = (|| {
            let _gate = store.gate.read();
            let mut inner = store.inner.write();
            log::put(&mut inner.log_buf, key, value);
            let lsn = store.wal.append(&inner.log_buf)?;
            store.add_log_bytes(inner.log_buf.len());
            store.cache_write(&mut inner, key, Some(value), lsn, None)?;
            Ok(lsn)
        })();
        let lsn = self.durable.poison().guard(r)?;
        self.durable.after_write(1, lsn)
    }

    /// Removes `key`; returns whether it was present (read from its page if not cached).
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.durable.check_open()?;
        self.limits().check_key(key)?;
        let store = self.store();
        let r = (|| {
            let _gate = store.gate.read();
            let mut inner = store.inner.write();
            let present = match inner.cache.get(key) {
                Some(e) => e.value.is_some(),
                None => store.lookup_disk(&inner, key)?.is_some(),
            };
            if !present {
                return Ok(None);
            }
            log::delete(&mut inner.log_buf, key);
            let lsn = store.wal.append(&inner.log_buf)?;
            store.add_log_bytes(inner.log_buf.len());
            store.cache_write(&mut inner, key, None, lsn, None)?;
            Ok(Some(lsn))
        })();
        match self.durable.poison().guard(r)? {
            Some(lsn) => {
                self.durable.after_write(1, lsn)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Applies puts (`Some` value) and deletes atomically: one log record, so after a crash all
    /// of them or none (durable per the sync mode).
    pub fn write(&self, ops: &[(&[u8], Option<&[u8]>)]) -> Result<()> {
        self.durable.check_open()?;
        for (k, v) in ops {
            match v {
                Some(v) => self.check_record(k, v)?,
                None => self.limits().check_key(k)?,
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let store = self.store();
        let r = (|| {
            let _gate = store.gate.read();
            let mut inner = store.inner.write();
            log::batch(&mut inner.log_buf, ops.iter().copied());
            if inner.log_buf.len() > crate::wal::record::MAX_PAYLOAD {
                return Err(Error::InvalidArgument {
                    what: format!("a batch of {} bytes", inner.log_buf.len()),
                    limit: crate::wal::record::MAX_PAYLOAD,
                });
            }
            let lsn = store.wal.append(&inner.log_buf)?;
            store.add_log_bytes(inner.log_buf.len());
            for (k, v) in ops {
                store.cache_write(&mut inner, k, *v, lsn, None)?;
            }
            Ok(lsn)
        })();
        let lsn = self.durable.poison().guard(r)?;
        self.durable.after_write(ops.len() as u64, lsn)
    }

    /// Visits records from the first key `>= start` (and `< end`), in key order, up to
    /// `limit`: a segment at a time, each read with one I/O and merged with the cache.
    fn walk(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> Result<usize> {
        self.durable.check_open()?;
        let store = self.store();
        let mut from = start.to_vec();
        let mut n = 0;
        while n < limit {
            let r = store.scan_segment(&from, end, limit - n);
            let (batch, upper) = self.durable.poison().guard_read(r)?;
            for (k, v) in &batch {
                n += 1;
                if !visitor(k, v) {
                    return Ok(n);
                }
            }
            match upper {
                Some(u) if end.is_none_or(|e| u.as_slice() < e) => from = u,
                _ => break,
            }
        }
        Ok(n)
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.durable.sync()
    }

    /// Writes every dirty entry to its page and records a checkpoint; the log is emptied.
    pub fn checkpoint(&self) -> Result<()> {
        self.durable.checkpoint()
    }

    /// Checkpoints, then verifies the invariants of the module docs over every page. Run it on
    /// a quiet store.
    pub fn check(&self) -> Result<TreeLineCheck> {
        self.checkpoint()?;
        let store = self.store();
        let inner = store.inner.read();
        let segments = inner.index.all()?;
        let mut report = TreeLineCheck::default();
        let mut seen_pages = std::collections::HashSet::new();
        let bad = |page: u64, detail: String| Error::Corruption { page, detail };
        if segments.first().is_none_or(|s| !s.lower.is_empty()) {
            return Err(bad(
                0,
                "the first segment does not start at the empty key".into(),
            ));
        }
        for (j, seg) in segments.iter().enumerate() {
            if seg.production == 0 {
                return Err(bad(seg.first, "a live segment with production ID 0".into()));
            }
            let upper = segments.get(j + 1).map(|s| s.lower.as_slice());
            report.segments += 1;
            for k in 0..seg.pages as usize {
                let pair = store.read_pair(&inner, seg, k)?;
                report.pages += 1;
                let mut pages = vec![(pair.base_id, &pair.base)];
                if let Some((id, buf)) = &pair.overflow {
                    report.overflow_pages += 1;
                    pages.push((*id, buf));
                }
                for (id, buf) in pages {
                    if !seen_pages.insert(id) {
                        return Err(bad(id, "a page used twice".into()));
                    }
                    if store.file.is_free(id) {
                        return Err(bad(id, "a page in use is free in the page file".into()));
                    }
                    let p = SegmentPage::new(id, buf)?;
                    let (lo, up) = p.range()?;
                    if lo != seg.lower.as_slice() || up != upper {
                        return Err(bad(
                            id,
                            "the page's fences are not its segment's range".into(),
                        ));
                    }
                    if k == 0 && id == pair.base_id && p.header.model != seg.model {
                        return Err(bad(id, "the first page's model is not the index's".into()));
                    }
                    let mut recs = Vec::new();
                    p.records_into(&mut recs)?;
                    for (key, _) in &recs {
                        if key < &seg.lower || upper.is_some_and(|u| key.as_slice() >= u) {
                            return Err(bad(id, "a record outside its segment's range".into()));
                        }
                        if seg.page_of(key) != k {
                            return Err(bad(
                                id,
                                format!(
                                    "a record on page {k}, its model says {}",
                                    seg.page_of(key)
                                ),
                            ));
                        }
                    }
                }
                report.records += store.pair_distinct(&pair)?;
            }
        }
        if report.records != inner.disk_records {
            return Err(bad(
                0,
                format!(
                    "{} records on the pages, {} counted",
                    report.records, inner.disk_records
                ),
            ));
        }
        Ok(report)
    }

    /// Counts and counters (the record count may read pages for keys written since they were
    /// last cached).
    pub fn stats(&self) -> Stats {
        let store = self.store();
        let mut inner = store.inner.write();
        let records = store.records(&mut inner).unwrap_or(inner.disk_records);
        let c = &store.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let file = &store.file;
        let sizes = inner.segment_sizes;
        let parts = inner.cache.part_bytes();
        Stats {
            records,
            bytes_used: Some((file.page_count() - file.free_pages()) * file.page_size() as u64),
            counters: vec![
                ("page_reads", load(&c.page_reads)),
                ("overflow_reads", load(&c.overflow_reads)),
                ("page_writes", load(&c.page_writes)),
                ("page_images", load(&c.page_images)),
                ("reorganizations", load(&c.reorganizations)),
                ("overflow_pages", load(&c.overflow_pages)),
                ("index_entries", inner.index.len() as u64),
                ("segments_1", sizes[0]),
                ("segments_2", sizes[1]),
                ("segments_4", sizes[2]),
                ("segments_8", sizes[3]),
                ("segments_16", sizes[4]),
                ("cache_entries", inner.cache.len() as u64),
                ("cache_dirty", inner.cache.dirty() as u64),
                ("cache_bytes", store.memory(&inner) as u64),
                ("cache_arena_bytes", inner.cache.arena_bytes() as u64),
                ("cache_slot_bytes", parts[0] as u64),
                ("cache_table_bytes", parts[1] as u64),
                ("cache_ordered_bytes", parts[2] as u64),
                ("index_bytes", inner.index.memory_bytes() as u64),
                ("cache_hits", load(&c.cache_hits)),
                ("cache_misses", load(&c.cache_misses)),
                ("miss_rereads", load(&c.miss_rereads)),
                ("forecast_epochs_done", inner.tracker.epochs()),
                ("checkpoints", self.durable.checkpoints()),
                ("check1_relinked", load(&c.check1_relinked)),
                ("check2_done", load(&c.check2_done)),
                ("check2_voided", load(&c.check2_voided)),
                ("check2_reinvalidated", load(&c.check2_reinvalidated)),
                ("file_pages", file.page_count()),
                ("free_pages", file.free_pages()),
            ],
        }
    }

    /// Checkpoints and closes; a poisoned store closes without one and returns `Poisoned`.
    pub fn close(self) -> Result<()> {
        self.durable.close()
    }

    /// Drops the store the way a crash would (tests of recovery).
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.durable.simulate_crash();
    }
}

impl KvStore for TreeLine {
    fn limits(&self) -> Limits {
        TreeLine::limits(self)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        TreeLine::get_into(self, key, out)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        TreeLine::put(self, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        TreeLine::delete(self, key)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> Result<usize> {
        self.walk(start, None, limit, visitor)
    }

    fn map_range(&self, start: &[u8], end: &[u8], visitor: &mut Visitor<'_>) -> Result<usize> {
        if end <= start {
            return Ok(0);
        }
        self.walk(start, Some(end), usize::MAX, visitor)
    }

    fn sync(&self) -> Result<()> {
        TreeLine::sync(self)
    }

    /// The log synced, then a checkpoint: every dirty entry written to its page.
    fn finish_deferred(&self) -> Result<()> {
        TreeLine::sync(self)?;
        self.checkpoint()
    }

    fn stats(&self) -> Stats {
        TreeLine::stats(self)
    }
}
