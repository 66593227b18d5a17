//! LMDB (through the `heed` crate) as a [`KvStore`] peer.
//!
//! Settings and why (see `docs/benchmarking.md`, "Peers and fair settings"):
//! - **Memory budget: not bounded by LMDB.** LMDB has no cache of its own: it reads through a
//!   read-only memory map, so its cache is the operating system's page cache, shared with every
//!   process and sized by the kernel. No LMDB option bounds it. A run that must hold LMDB to the
//!   budget bounds it from outside: `sylva bench --memory-limit` runs each engine in a memory
//!   cgroup whose limit counts the page cache charged to it (`crate::bound`); otherwise LMDB's
//!   numbers in a larger-than-memory run are with all free RAM as cache, and the report says so.
//! - **No read-ahead** (`MDB_NORDAHEAD`): LMDB's documented setting for random reads when the
//!   database is larger than memory. Without it every page fault in the map reads ahead around
//!   the page; under a memory bound of a third of the data (`--memory-limit`) that evicted as fast
//!   as it read and a 300K-record load read 225 GB from disk in 11 minutes without finishing.
//!   sylva's `db` reads single pages too. Cached runs do not notice it.
//! - **Map size:** [`PeerSettings::lmdb_map_size`] (default 256 GiB). It only reserves address
//!   space and the file grows as data does; a write that would pass it fails with an error naming
//!   the setting, never a panic.
//! - **Pages:** LMDB's page is the OS page, 4 KiB here; not configurable.
//! - **Compression:** LMDB has none. **Checksums:** LMDB keeps none; it relies on copy-on-write
//!   and the two meta pages.
//! - **Write-ahead log / sync:** LMDB has no log: a commit writes the dirty pages and then a meta
//!   page. Under [`PeerSync::Always`] each commit fsyncs (LMDB's default, `fdatasync` on Linux);
//!   otherwise the environment is opened `MDB_NOSYNC` and the adapter calls `mdb_env_sync` at
//!   each batch boundary and on `sync()`. A crash without the sync loses the unsynced commits
//!   but never corrupts the database (LMDB's documented `MDB_NOSYNC` behaviour on a journalling
//!   file system).
//! - **Transactions:** writes go through [`GroupCommit`]: a write transaction per group of
//!   concurrent writes (one per write for a single writer), committed before `put` returns.
//!   Reads open a read-only transaction each (cheap in LMDB: a reader slot per thread, reused).
//!   A `get` from inside a `scan` visitor on the same thread fails, since LMDB allows one read
//!   transaction per thread.
//! - **Counters** (`stats()`): `last_page`; `free_pages`, the pages of the file in neither the
//!   data tree nor the two meta pages (LMDB's free pages and the pages of its free list);
//!   `write_txns` and `writes`; `writer_syncs`, the `Batch` boundaries synced on the writer
//!   because the boundary sync thread was still busy; `syncs_due`. `free_pages` is what explains
//!   LMDB's two-thread figures under `sync=batch` (`docs/benchmarking.md`, "LMDB with two
//!   threads"): LMDB reuses its free pages oldest first and keeps as many as a reader open
//!   during commits ever made it need, so when they outnumber the pages written between two
//!   syncs, each page a commit writes is one the last sync cleaned.
//!
//! Limits: keys up to LMDB's compiled `MDB_MAXKEYSIZE` (511 bytes), read from the environment;
//! values up to [`ADAPTER_MAX_VALUE`]. Scan and range bounds longer than 511 bytes are accepted
//! (no stored key can be that long) and translated to equivalent short bounds.

use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, MdbError};
use sylva::{Due, KvStore, Limits, Stats, SyncCadence, Visitor};

use super::group::{GroupCommit, WriteOp};
use super::{
    cadence, copy_value, create_dir, dir_bytes, empty_range, peer_error, syncs_due, visit_entries,
    PeerSettings, PeerSync, ADAPTER_MAX_VALUE,
};

const PEER: &str = "lmdb";

/// Reader slots: one per thread that reads at once.
const MAX_READERS: u32 = 512;

/// LMDB opened on a directory, with the fair settings.
pub struct LmdbPeer {
    /// The sync cadence, with `Batch`'s boundary sync thread (first, so it stops before the
    /// environment closes).
    cadence: SyncCadence,
    env: Env,
    db: Database<'static, Bytes, Bytes>,
    dir: PathBuf,
    limits: Limits,
    map_size: u64,
    group: GroupCommit,
    /// `Batch` boundaries whose `mdb_env_sync` ran on the writer, because the boundary sync
    /// thread was still syncing the previous one.
    writer_syncs: AtomicU64,
}

impl LmdbPeer {
    /// Opens (or creates) the LMDB environment in `dir`.
    pub fn open(dir: &Path, settings: &PeerSettings) -> sylva::Result<Self> {
        create_dir(PEER, dir)?;
        // LMDB wants the map size a multiple of the OS page size.
        let map_size = settings.lmdb_map_size.div_ceil(4096) * 4096;
        let map_size_usize = usize::try_from(map_size).map_err(|_| {
            peer_error(
                PEER,
                dir,
                io::ErrorKind::InvalidInput,
                format_args!("a map size of {map_size} bytes does not fit this platform"),
            )
        })?;
        let mut options = EnvOpenOptions::new();
        options.map_size(map_size_usize).max_readers(MAX_READERS);
        // SAFETY: MDB_NORDAHEAD only advises the kernel (madvise MADV_RANDOM on the map) not to
        // read around each page fault; it changes no data or durability.
        unsafe {
            options.flags(EnvFlags::NO_READ_AHEAD);
        }
        if settings.sync != PeerSync::Always {
            // SAFETY: MDB_NOSYNC only drops the fsync at commit; the adapter syncs at batch
            // boundaries and on `sync()`, and a crash loses at most the unsynced commits.
            unsafe {
                options.flags(EnvFlags::NO_SYNC);
            }
        }
        // SAFETY: the directory belongs to this adapter for as long as it is open (the benchmark
        // creates it per run), so no one else modifies the memory-mapped file underneath us;
        // heed refuses a second open of the same environment in this process.
        let env = unsafe { options.open(dir) }.map_err(|e| error(dir, map_size, e))?;
        let wtxn = env.write_txn().map_err(|e| error(dir, map_size, e))?;
        let db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener
                    .create_database::<Bytes, Bytes>(wtxn, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })
            .map_err(|e| error(dir, map_size, e))?
            .commit()
            .ok_or_else(|| {
                peer_error(
                    PEER,
                    dir,
                    io::ErrorKind::Other,
                    "creating the database aborted",
                )
            })?;
        let limits = Limits::variable(env.max_key_size(), ADAPTER_MAX_VALUE);
        // `mdb_env_sync` may run on another thread while writers commit (with MDB_NOSYNC the
        // commits only skip their own sync).
        let cadence = {
            let env = env.clone();
            cadence(settings.sync, PEER, dir, move |dir| {
                env.force_sync().map_err(|e| error(dir, map_size, e))
            })?
        };
        Ok(LmdbPeer {
            cadence,
            env,
            db,
            dir: dir.to_path_buf(),
            limits,
            map_size,
            group: GroupCommit::default(),
            writer_syncs: AtomicU64::new(0),
        })
    }

    fn err(&self, e: heed::Error) -> sylva::Error {
        error(&self.dir, self.map_size, e)
    }

    /// The lower bound for keys `>= start`, given that no key is longer than the maximum: a
    /// longer `start` is above its own prefix of maximum length and below everything else
    /// above that prefix.
    fn lower_bound<'a>(&self, start: &'a [u8]) -> Bound<&'a [u8]> {
        if start.is_empty() {
            Bound::Unbounded
        } else if start.len() > self.limits.max_key {
            Bound::Excluded(&start[..self.limits.max_key])
        } else {
            Bound::Included(start)
        }
    }

    /// The upper bound for keys `< end`: a key shorter than a too-long `end` is below it exactly
    /// when it is at most `end`'s prefix of maximum length.
    fn upper_bound<'a>(&self, end: &'a [u8]) -> Bound<&'a [u8]> {
        if end.len() > self.limits.max_key {
            Bound::Included(&end[..self.limits.max_key])
        } else {
            Bound::Excluded(end)
        }
    }

    fn visit(
        &self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if limit == 0 {
            return Ok(0);
        }
        let rtxn = self.env.read_txn().map_err(|e| self.err(e))?;
        let entries = self.db.range(&rtxn, &range).map_err(|e| self.err(e))?;
        visit_entries(entries, limit, visitor, |e| self.err(e))
    }

    fn write(&self, op: WriteOp<'_>) -> sylva::Result<bool> {
        self.group.write(op, |ops| {
            let mut wtxn = self.env.write_txn().map_err(|e| self.err(e))?;
            let mut answers = Vec::with_capacity(ops.len());
            for op in ops {
                answers.push(match *op {
                    WriteOp::Put(k, v) => {
                        self.db.put(&mut wtxn, k, v).map_err(|e| self.err(e))?;
                        false
                    }
                    WriteOp::Delete(k) => self.db.delete(&mut wtxn, k).map_err(|e| self.err(e))?,
                });
            }
            wtxn.commit().map_err(|e| self.err(e))?;
            self.cadence.written(ops.len() as u64, |due| match due {
                // Under Always the commit itself synced.
                Due::Write => Ok(()),
                Due::Boundary => {
                    self.writer_syncs.fetch_add(1, Ordering::Relaxed);
                    self.env.force_sync().map_err(|e| self.err(e))
                }
            })?;
            Ok(answers)
        })
    }
}

/// Maps a heed error to a sylva error naming LMDB, with the map-size case spelt out.
fn error(dir: &Path, map_size: u64, e: heed::Error) -> sylva::Error {
    match e {
        heed::Error::Mdb(MdbError::MapFull) => peer_error(
            PEER,
            dir,
            io::ErrorKind::Other,
            format_args!(
                "the map of {map_size} bytes is full; open with a larger \
                 PeerSettings::lmdb_map_size"
            ),
        ),
        heed::Error::Mdb(MdbError::ReadersFull) => peer_error(
            PEER,
            dir,
            io::ErrorKind::Other,
            format_args!("all {MAX_READERS} reader slots are in use (too many reading threads)"),
        ),
        heed::Error::Io(io) => peer_error(PEER, dir, io.kind(), io),
        other => peer_error(PEER, dir, io::ErrorKind::Other, other),
    }
}

impl KvStore for LmdbPeer {
    fn limits(&self) -> Limits {
        self.limits
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        self.limits.check_key(key)?;
        let rtxn = self.env.read_txn().map_err(|e| self.err(e))?;
        let value = self.db.get(&rtxn, key).map_err(|e| self.err(e))?;
        Ok(copy_value(value, out))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        self.limits.check_key(key)?;
        self.limits.check_value(value)?;
        self.write(WriteOp::Put(key, value)).map(|_| ())
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        self.limits.check_key(key)?;
        self.write(WriteOp::Delete(key))
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.visit((self.lower_bound(start), Bound::Unbounded), limit, visitor)
    }

    fn map_range(
        &self,
        start: &[u8],
        end: &[u8],
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if empty_range(start, end) {
            return Ok(0);
        }
        let range = (self.lower_bound(start), self.upper_bound(end));
        self.visit(range, usize::MAX, visitor)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.env.force_sync().map_err(|e| self.err(e))?;
        self.cadence.synced();
        Ok(())
    }

    fn stats(&self) -> Stats {
        let (records, tree_pages) = self
            .env
            .read_txn()
            .and_then(|rtxn| {
                let stat = self.db.stat(&rtxn)?;
                Ok((
                    stat.entries as u64,
                    stat.branch_pages + stat.leaf_pages + stat.overflow_pages,
                ))
            })
            .unwrap_or((0, 0));
        let info = self.env.info();
        // Pages 0 and 1 are the meta pages; what is in neither them nor the data tree is the
        // free list and the pages that hold it (see `free_pages` in the module docs).
        let free_pages = (info.last_page_number + 1).saturating_sub(tree_pages + 2);
        let (groups, writes) = self.group.counts();
        Stats {
            records,
            bytes_used: dir_bytes(&self.dir),
            counters: vec![
                ("map_size", info.map_size as u64),
                ("last_page", info.last_page_number as u64),
                ("free_pages", free_pages as u64),
                ("write_txns", groups),
                ("writer_syncs", self.writer_syncs.load(Ordering::Relaxed)),
                ("writes", writes),
                syncs_due(&self.cadence),
            ],
        }
    }
}
