//! fjall (an LSM-tree in Rust) as a [`KvStore`] peer.
//!
//! Settings and why (see `docs/benchmarking.md`, "Peers and fair settings"):
//! - **Memory budget:** fjall cannot charge memtables to its cache, so the budget
//!   [`PeerSettings::cache_bytes`] is split as RocksDB's is: memtables of a sixth of it
//!   ([`lsm_memtable_bytes`]; one active and one being flushed make a third) and `cache_size` =
//!   the remaining two thirds (fjall's one cache, for data, index and filter blocks).
//! - **Blocks:** 4 KiB data blocks (fjall's default, set explicitly).
//! - **Filters:** fjall's default Bloom filters (10 bits per key below level 0, which gets a
//!   0.01% false-positive rate); the 10 bits per key is what fjall already does.
//! - **Compression:** none for data blocks, index blocks and the journal (the crate is built
//!   without its `lz4` feature, and the policies are set to disabled too).
//! - **Checksums:** fjall's normal ones (XXH3 on blocks and journal entries, always verified).
//! - **Write-ahead log:** fjall's journal, on. Every write reaches the operating system before
//!   it returns (fjall's default `PersistMode::Buffer`); under [`PeerSync::Always`] each write is
//!   followed by `persist(SyncData)` (fdatasync, as RocksDB's sync); under [`PeerSync::Batch`]
//!   the writer crossing a boundary persists with `SyncData`; `sync()` does the same.
//!
//! `delete` answers whether the key was present, so it reads before it writes the tombstone,
//! under a per-key stripe lock ([`DeleteStripes`]). `stats().records` is fjall's exact `len()`,
//! which scans: O(records).
//!
//! Limits: fjall's keys are at most 65,535 bytes (a `u16` length; fjall's docs say 65,536, which
//! fails an assertion inside fjall), values up to 4 GiB, capped by the adapter at
//! [`super::ADAPTER_MAX_VALUE`].

use std::io;
use std::path::{Path, PathBuf};

use fjall::config::{BlockSizePolicy, CompressionPolicy};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use sylva::{KvStore, Limits, Stats, SyncCadence, Visitor};

use super::{
    cadence, copy_value, create_dir, dir_bytes, empty_range, lsm_memtable_bytes, peer_error,
    syncs_due, visit_entries, DeleteStripes, PeerSettings, ADAPTER_MAX_VALUE,
};

const PEER: &str = "fjall";

/// fjall's real key limit: a key's length is stored in a `u16`.
pub const FJALL_MAX_KEY: usize = u16::MAX as usize;

const LIMITS: Limits = Limits::variable(FJALL_MAX_KEY, ADAPTER_MAX_VALUE);

/// fjall opened on a directory, with the fair settings.
pub struct FjallPeer {
    /// The sync cadence, with `Batch`'s boundary sync thread (first, so it stops before the
    /// database closes).
    cadence: SyncCadence,
    db: Database,
    keyspace: Keyspace,
    dir: PathBuf,
    deletes: DeleteStripes,
}

impl FjallPeer {
    /// Opens (or creates) the fjall database in `dir`, with one keyspace.
    pub fn open(dir: &Path, settings: &PeerSettings) -> sylva::Result<Self> {
        create_dir(PEER, dir)?;
        let memtable = lsm_memtable_bytes(settings.cache_bytes);
        let cache = settings
            .cache_bytes
            .saturating_sub(2 * memtable)
            .max(1 << 20);
        let db = Database::builder(dir)
            .cache_size(cache)
            .journal_compression(CompressionType::None)
            .open()
            .map_err(|e| error(dir, e))?;
        let keyspace = db
            .keyspace("sylva", || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable)
                    .data_block_size_policy(BlockSizePolicy::all(4096))
                    .data_block_compression_policy(CompressionPolicy::disabled())
                    .index_block_compression_policy(CompressionPolicy::disabled())
            })
            .map_err(|e| error(dir, e))?;
        let cadence = {
            let db = db.clone();
            cadence(settings.sync, PEER, dir, move |dir| {
                db.persist(PersistMode::SyncData).map_err(|e| error(dir, e))
            })?
        };
        Ok(FjallPeer {
            cadence,
            db,
            keyspace,
            dir: dir.to_path_buf(),
            deletes: DeleteStripes::new(),
        })
    }

    fn err(&self, e: fjall::Error) -> sylva::Error {
        error(&self.dir, e)
    }

    /// Counts a completed write towards the sync policy, persisting the journal when due.
    fn written(&self) -> sylva::Result<()> {
        self.cadence.written(1, |_| {
            self.db
                .persist(PersistMode::SyncData)
                .map_err(|e| self.err(e))
        })
    }

    fn visit(
        &self,
        iter: fjall::Iter,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        visit_entries(iter.map(fjall::Guard::into_inner), limit, visitor, |e| {
            self.err(e)
        })
    }
}

/// Maps a fjall error to a sylva error naming fjall.
fn error(dir: &Path, e: fjall::Error) -> sylva::Error {
    match e {
        fjall::Error::Io(io) => peer_error(PEER, dir, io.kind(), io),
        fjall::Error::Locked => peer_error(
            PEER,
            dir,
            io::ErrorKind::WouldBlock,
            "the database is locked by another handle or process",
        ),
        other => peer_error(PEER, dir, io::ErrorKind::Other, format_args!("{other:?}")),
    }
}

impl KvStore for FjallPeer {
    fn limits(&self) -> Limits {
        LIMITS
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        LIMITS.check_key(key)?;
        let value = self.keyspace.get(key).map_err(|e| self.err(e))?;
        Ok(copy_value(value, out))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        LIMITS.check_key(key)?;
        LIMITS.check_value(value)?;
        self.keyspace.insert(key, value).map_err(|e| self.err(e))?;
        self.written()
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        LIMITS.check_key(key)?;
        let _stripe = self.deletes.lock(key);
        if !self.keyspace.contains_key(key).map_err(|e| self.err(e))? {
            return Ok(false);
        }
        self.keyspace.remove(key).map_err(|e| self.err(e))?;
        self.written()?;
        Ok(true)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.visit(self.keyspace.range(start..), limit, visitor)
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
        self.visit(self.keyspace.range(start..end), usize::MAX, visitor)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.db
            .persist(PersistMode::SyncData)
            .map_err(|e| self.err(e))?;
        self.cadence.synced();
        Ok(())
    }

    /// The journal persisted, the active memtable flushed to a table (so reopening replays no
    /// journal), then a wait until no flush or compaction is running. fjall documents no call
    /// for the flush: `rotate_memtable_and_wait` is public but hidden from its docs ("used in
    /// tests"); the wait polls its documented `outstanding_flushes` and `active_compactions`.
    fn finish_deferred(&self) -> sylva::Result<()> {
        self.sync()?;
        self.keyspace
            .rotate_memtable_and_wait()
            .map_err(|e| self.err(e))?;
        while self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        Stats {
            records: self.keyspace.len().unwrap_or(0) as u64,
            bytes_used: dir_bytes(&self.dir),
            counters: vec![
                ("tables", self.keyspace.table_count() as u64),
                ("l0_tables", self.keyspace.l0_table_count() as u64),
                syncs_due(&self.cadence),
            ],
        }
    }
}
