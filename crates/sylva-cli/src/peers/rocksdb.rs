//! RocksDB (the `rocksdb` crate, RocksDB built from its bundled source) as a [`KvStore`] peer.
//!
//! Settings and why (see `docs/benchmarking.md`, "Peers and fair settings"):
//! - **Memory budget:** an LRU block cache of [`PeerSettings::cache_bytes`] that everything
//!   RocksDB keeps in memory is charged to: index and filter blocks
//!   (`cache_index_and_filter_blocks`, level-0 ones pinned) and the memtables (a
//!   `WriteBufferManager` costing them to the cache). Memtables are a sixth of the budget each,
//!   two at most ([`lsm_memtable_bytes`], TreeLine's split), so RocksDB's whole footprint is the
//!   budget, as a B-tree's buffer pool holds its inner nodes and dirty pages.
//! - **Blocks:** 4 KiB (`block_size`, RocksDB's default too).
//! - **Bloom filters:** 10 bits per key, full (not block-based) filters.
//! - **Compression:** none on every level (`set_compression_type(None)`; the crate is built
//!   without codecs).
//! - **Checksums:** RocksDB's defaults: block checksums written and verified on every read
//!   (`verify_checksums`), `paranoid_checks` on.
//! - **Write-ahead log:** on. Under [`PeerSync::Always`] every write is `sync = true`
//!   (fdatasync before it returns; RocksDB groups concurrent writers' syncs). Otherwise writes
//!   append to the log without syncing, and at each [`PeerSync::Batch`] boundary and on `sync()`
//!   the adapter calls `FlushWAL(sync = true)`.
//!
//! `delete` answers whether the key was present, so it reads before it writes the tombstone,
//! under a per-key stripe lock ([`DeleteStripes`]); `put` stays a blind write. RocksDB keeps no
//! exact record count, so `stats().records` counts keys with an iterator: O(records).
//!
//! Limits: RocksDB takes keys up to 8 MiB and values up to 3 GiB (its documented maxima); the
//! adapter caps both at [`super::ADAPTER_MAX_KEY`] / [`super::ADAPTER_MAX_VALUE`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, ErrorKind, Options, ReadOptions,
    WriteBufferManager, WriteOptions, DB,
};
use sylva::{Due, KvStore, Limits, Stats, SyncCadence, Visitor};

use super::{
    cadence, create_dir, dir_bytes, empty_range, lsm_memtable_bytes, peer_error, syncs_due,
    DeleteStripes, PeerSettings, PeerSync, CAPPED_LIMITS,
};

const PEER: &str = "rocksdb";

/// RocksDB opened on a directory, with the fair settings.
pub struct RocksDbPeer {
    /// The sync cadence, with `Batch`'s boundary sync thread (first, so it stops before the
    /// database closes).
    cadence: SyncCadence,
    db: Arc<DB>,
    cache: Cache,
    dir: PathBuf,
    write_options: WriteOptions,
    deletes: DeleteStripes,
}

impl RocksDbPeer {
    /// Opens (or creates) the RocksDB database in `dir`.
    pub fn open(dir: &Path, settings: &PeerSettings) -> sylva::Result<Self> {
        create_dir(PEER, dir)?;
        let cache =
            Cache::new_lru_cache(usize::try_from(settings.cache_bytes).unwrap_or(usize::MAX));
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_block_size(4096);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);

        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        options.set_compression_type(DBCompressionType::None);
        options.set_bottommost_compression_type(DBCompressionType::None);
        options.set_wal_compression_type(DBCompressionType::None);
        options.set_paranoid_checks(true);
        let memtable =
            usize::try_from(lsm_memtable_bytes(settings.cache_bytes)).unwrap_or(usize::MAX);
        options.set_write_buffer_size(memtable);
        options.set_max_write_buffer_number(2);
        let memtables = WriteBufferManager::new_write_buffer_manager_with_cache(
            memtable.saturating_mul(2),
            false,
            cache.clone(),
        );
        options.set_write_buffer_manager(&memtables);

        let db = Arc::new(DB::open(&options, dir).map_err(|e| error(dir, e))?);
        // `FlushWAL(sync)` may run on another thread while writers append.
        let cadence = {
            let db = db.clone();
            cadence(settings.sync, PEER, dir, move |dir| {
                db.flush_wal(true).map_err(|e| error(dir, e))
            })?
        };
        let mut write_options = WriteOptions::default();
        write_options.set_sync(settings.sync == PeerSync::Always);
        Ok(RocksDbPeer {
            cadence,
            db,
            cache,
            dir: dir.to_path_buf(),
            write_options,
            deletes: DeleteStripes::new(),
        })
    }

    fn err(&self, e: rocksdb::Error) -> sylva::Error {
        error(&self.dir, e)
    }

    /// Counts a completed write towards the batch cadence, syncing the log at a boundary.
    fn written(&self) -> sylva::Result<()> {
        self.cadence.written(1, |due| match due {
            // Under Always the write itself was synced.
            Due::Write => Ok(()),
            Due::Boundary => self.db.flush_wal(true).map_err(|e| self.err(e)),
        })
    }

    fn visit(
        &self,
        read_options: ReadOptions,
        start: &[u8],
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if limit == 0 {
            return Ok(0);
        }
        let mut iter = self.db.raw_iterator_opt(read_options);
        iter.seek(start);
        let mut visited = 0;
        while let Some((k, v)) = iter.item() {
            visited += 1;
            if !visitor(k, v) || visited == limit {
                break;
            }
            iter.next();
        }
        iter.status().map_err(|e| self.err(e))?;
        Ok(visited)
    }
}

/// Maps a RocksDB error to a sylva error naming RocksDB.
fn error(dir: &Path, e: rocksdb::Error) -> sylva::Error {
    let kind = match e.kind() {
        ErrorKind::Corruption => io::ErrorKind::InvalidData,
        ErrorKind::NotFound => io::ErrorKind::NotFound,
        ErrorKind::InvalidArgument => io::ErrorKind::InvalidInput,
        ErrorKind::TimedOut => io::ErrorKind::TimedOut,
        ErrorKind::Busy | ErrorKind::TryAgain => io::ErrorKind::WouldBlock,
        _ => io::ErrorKind::Other,
    };
    peer_error(PEER, dir, kind, e.into_string())
}

impl KvStore for RocksDbPeer {
    fn limits(&self) -> Limits {
        CAPPED_LIMITS
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        match self.db.get_pinned(key).map_err(|e| self.err(e))? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        CAPPED_LIMITS.check_key(key)?;
        CAPPED_LIMITS.check_value(value)?;
        self.db
            .put_opt(key, value, &self.write_options)
            .map_err(|e| self.err(e))?;
        self.written()
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        let _stripe = self.deletes.lock(key);
        if self.db.get_pinned(key).map_err(|e| self.err(e))?.is_none() {
            return Ok(false);
        }
        self.db
            .delete_opt(key, &self.write_options)
            .map_err(|e| self.err(e))?;
        self.written()?;
        Ok(true)
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.visit(ReadOptions::default(), start, limit, visitor)
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
        let mut read_options = ReadOptions::default();
        read_options.set_iterate_upper_bound(end);
        self.visit(read_options, start, usize::MAX, visitor)
    }

    fn sync(&self) -> sylva::Result<()> {
        self.db.flush_wal(true).map_err(|e| self.err(e))?;
        self.cadence.synced();
        Ok(())
    }

    /// The log synced, the memtables flushed to tables (`Flush` with `wait`, so reopening
    /// replays no log), then `WaitForCompact`: every compaction the flushes scheduled finished.
    fn finish_deferred(&self) -> sylva::Result<()> {
        self.sync()?;
        self.db.flush().map_err(|e| self.err(e))?;
        self.db
            .wait_for_compact(&rocksdb::WaitForCompactOptions::default())
            .map_err(|e| self.err(e))
    }

    fn stats(&self) -> Stats {
        let mut records = 0u64;
        let mut iter = self.db.raw_iterator();
        iter.seek_to_first();
        while iter.valid() {
            records += 1;
            iter.next();
        }
        let property = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        Stats {
            records,
            bytes_used: dir_bytes(&self.dir),
            counters: vec![
                ("block_cache_bytes", self.cache.get_usage() as u64),
                (
                    "memtable_bytes",
                    property("rocksdb.cur-size-all-mem-tables"),
                ),
                ("sst_bytes", property("rocksdb.total-sst-files-size")),
                ("l0_files", property("rocksdb.num-files-at-level0")),
                syncs_due(&self.cadence),
            ],
        }
    }
}
