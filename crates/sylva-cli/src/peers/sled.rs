//! sled 0.34 (the last stable release; 1.0 is still an alpha) as a [`KvStore`] peer.
//!
//! Settings and why (see `docs/benchmarking.md`, "Peers and fair settings"):
//! - **Memory budget:** `cache_capacity` = [`PeerSettings::cache_bytes`] (sled's page cache).
//! - **Pages:** sled's pages are its own log-structured nodes; no block or page size to set.
//! - **Compression:** off (sled's default; the crate is built without its `compression`
//!   feature).
//! - **Checksums:** sled's normal ones (CRC32 on every log message, verified on read and
//!   recovery).
//! - **Write-ahead log:** sled's log is its storage; it is always on. sled's own background
//!   flusher (`flush_every_ms`, 500 ms by default) is turned off so the adapter alone decides
//!   when to fsync: never under [`PeerSync::Never`]; `flush()` (write out and fsync) after every
//!   write under [`PeerSync::Always`]; at each [`PeerSync::Batch`] boundary; and on `sync()`.
//! - **Mode:** sled's default (`LowSpace`): the issue asks for each engine's normal settings.
//!
//! Reopening: sled lets go of its file lock a moment after its handle is dropped (its
//! background threads hold the database until they notice), so `open` retries a held lock for
//! up to five seconds before reporting it.
//!
//! sled's `insert` and `remove` return the previous value atomically, so `delete` needs no extra
//! read, and the adapter keeps an exact record count from those answers (sled's own `len()`
//! scans the whole tree). The count is taken with `len()` once at open.
//!
//! Limits: sled has no documented key or value limit below `u32` lengths; the adapter caps both
//! at [`super::ADAPTER_MAX_KEY`] / [`super::ADAPTER_MAX_VALUE`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sylva::{KvStore, Limits, Stats, SyncCadence, Visitor};

use super::{
    cadence, copy_value, create_dir, dir_bytes, empty_range, peer_error, syncs_due, visit_entries,
    PeerSettings, CAPPED_LIMITS,
};

const PEER: &str = "sled";

/// How long `open` waits for a lock held by a just-dropped handle of the same database.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// sled opened on a directory, with the fair settings.
pub struct SledPeer {
    /// The sync cadence, with `Batch`'s boundary sync thread (first, so it stops before the
    /// database closes).
    cadence: SyncCadence,
    db: sled::Db,
    dir: PathBuf,
    records: AtomicU64,
}

impl SledPeer {
    /// Opens (or creates) the sled database in `dir`.
    pub fn open(dir: &Path, settings: &PeerSettings) -> sylva::Result<Self> {
        create_dir(PEER, dir)?;
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(settings.cache_bytes)
            .use_compression(false)
            .flush_every_ms(None);
        // sled releases its file lock only when its background threads drop their references to
        // the database, a moment after the handle is dropped; reopening at once in the same
        // process would fail, so a held lock is retried for a short while.
        let deadline = Instant::now() + LOCK_WAIT;
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(error(dir, e)),
            }
        };
        let records = AtomicU64::new(db.len() as u64);
        let cadence = {
            let db = db.clone();
            cadence(settings.sync, PEER, dir, move |dir| {
                db.flush().map(drop).map_err(|e| error(dir, e))
            })?
        };
        Ok(SledPeer {
            cadence,
            db,
            dir: dir.to_path_buf(),
            records,
        })
    }

    fn err(&self, e: sled::Error) -> sylva::Error {
        error(&self.dir, e)
    }

    /// Counts a completed write towards the sync policy, flushing when due.
    fn written(&self) -> sylva::Result<()> {
        self.cadence
            .written(1, |_| self.db.flush().map(drop).map_err(|e| self.err(e)))
    }

    fn visit(
        &self,
        iter: sled::Iter,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        visit_entries(iter, limit, visitor, |e| self.err(e))
    }
}

/// Maps a sled error to a sylva error naming sled.
fn error(dir: &Path, e: sled::Error) -> sylva::Error {
    match e {
        sled::Error::Io(io) => peer_error(PEER, dir, io.kind(), io),
        sled::Error::Corruption { .. } => peer_error(PEER, dir, io::ErrorKind::InvalidData, e),
        other => peer_error(PEER, dir, io::ErrorKind::Other, other),
    }
}

impl KvStore for SledPeer {
    fn limits(&self) -> Limits {
        CAPPED_LIMITS
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        let value = self.db.get(key).map_err(|e| self.err(e))?;
        Ok(copy_value(value, out))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        CAPPED_LIMITS.check_key(key)?;
        CAPPED_LIMITS.check_value(value)?;
        if self
            .db
            .insert(key, value)
            .map_err(|e| self.err(e))?
            .is_none()
        {
            self.records.fetch_add(1, Ordering::Relaxed);
        }
        self.written()
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        let present = self.db.remove(key).map_err(|e| self.err(e))?.is_some();
        if present {
            self.records.fetch_sub(1, Ordering::Relaxed);
            self.written()?;
        }
        Ok(present)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.visit(self.db.range(start..), limit, visitor)
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
        self.visit(self.db.range(start..end), usize::MAX, visitor)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.db.flush().map_err(|e| self.err(e))?;
        self.cadence.synced();
        Ok(())
    }

    fn stats(&self) -> Stats {
        Stats {
            records: self.records.load(Ordering::Relaxed),
            bytes_used: dir_bytes(&self.dir),
            counters: vec![
                ("size_on_disk", self.db.size_on_disk().unwrap_or(0)),
                syncs_due(&self.cadence),
            ],
        }
    }
}
