//! redb as a [`KvStore`] peer.
//!
//! Settings and why (see `docs/benchmarking.md`, "Peers and fair settings"):
//! - **Memory budget:** `Builder::set_cache_size` = [`PeerSettings::cache_bytes`]; redb's cache
//!   holds both read pages and the dirty pages of uncommitted-to-disk transactions.
//! - **Pages:** redb's pages are 4 KiB (its default; the size is not configurable in release
//!   builds of redb).
//! - **Compression:** redb has none. **Checksums:** redb's normal ones (XXH3 of child pages,
//!   kept in their parents and verified when a crashed database is repaired on open).
//! - **Durability:** redb has no separate log; a commit is either `Durability::Immediate`
//!   (fsynced before `commit` returns) or `Durability::None` (visible, not yet on disk).
//!   Under [`PeerSync::Always`] every commit is Immediate. Under [`PeerSync::Batch`] commits are
//!   `None` except the one crossing a batch boundary, which is Immediate and so makes every
//!   earlier commit durable too. This matters beyond durability: redb cannot reuse pages freed
//!   by `None` commits until a durable commit, so a store that never commits durably grows
//!   without bound (issue 6). For the same reason, under [`PeerSync::Never`] the adapter still
//!   commits durably every [`NEVER_RECLAIM_OPS`] writes: without it a long write-heavy run
//!   measures a file that only grows, not redb.
//! - **Transactions:** writes go through [`GroupCommit`]: a write transaction per group of
//!   concurrent writes (one per write for a single writer), committed before `put` returns.
//!   Reads open a read transaction each.
//!
//! Limits: redb takes values up to 3 GiB; the adapter caps keys and values at
//! [`super::ADAPTER_MAX_KEY`] / [`super::ADAPTER_MAX_VALUE`].

use std::io;
use std::path::{Path, PathBuf};

use redb::{
    AccessGuard, Builder, Database, Durability, ReadableDatabase, ReadableTableMetadata,
    TableDefinition,
};
use sylva::{KvStore, Limits, Stats, SyncCadence, Visitor};

use super::group::{GroupCommit, WriteOp};
use super::{
    copy_value, create_dir, dir_bytes, empty_range, peer_error, syncs_due, visit_entries,
    PeerSettings, PeerSync, CAPPED_LIMITS,
};

const PEER: &str = "redb";

/// The one table the adapter keeps its records in.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sylva");

/// Under [`PeerSync::Never`], writes between the durable commits that let redb reuse freed
/// pages.
pub const NEVER_RECLAIM_OPS: u64 = 100_000;

/// The database file's name inside the directory.
const FILE: &str = "redb.db";

/// redb opened on a directory, with the fair settings.
pub struct RedbPeer {
    db: Database,
    dir: PathBuf,
    group: GroupCommit,
    cadence: SyncCadence,
}

impl RedbPeer {
    /// Opens (or creates) the redb database `redb.db` in `dir`.
    pub fn open(dir: &Path, settings: &PeerSettings) -> sylva::Result<Self> {
        create_dir(PEER, dir)?;
        let cache = usize::try_from(settings.cache_bytes).unwrap_or(usize::MAX);
        let db = Builder::new()
            .set_cache_size(cache)
            .create(dir.join(FILE))
            .map_err(|e| error(dir, e))?;
        let cadence = SyncCadence::new(match settings.sync {
            PeerSync::Never => PeerSync::Batch {
                ops: NEVER_RECLAIM_OPS,
                interval: std::time::Duration::MAX,
            },
            other => other,
        });
        let peer = RedbPeer {
            db,
            dir: dir.to_path_buf(),
            group: GroupCommit::default(),
            cadence,
        };
        // Create the table, durably, so readers always find it.
        let mut txn = peer.db.begin_write().map_err(|e| peer.err(e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| peer.err(e))?;
        txn.open_table(TABLE).map_err(|e| peer.err(e))?;
        txn.commit().map_err(|e| peer.err(e))?;
        Ok(peer)
    }

    fn err(&self, e: impl Into<redb::Error>) -> sylva::Error {
        error(&self.dir, e)
    }

    fn commit_durably(&self, txn: redb::WriteTransaction) -> sylva::Result<()> {
        let mut txn = txn;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.err(e))?;
        txn.commit().map_err(|e| self.err(e))?;
        self.cadence.synced();
        Ok(())
    }

    fn visit(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        if limit == 0 {
            return Ok(0);
        }
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(TABLE).map_err(|e| self.err(e))?;
        let iter = match end {
            Some(end) => table.range::<&[u8]>(start..end),
            None => table.range::<&[u8]>(start..),
        }
        .map_err(|e| self.err(e))?;
        let entries = iter.map(|entry| entry.map(|(k, v)| (Bytes(k), Bytes(v))));
        visit_entries(entries, limit, visitor, |e| self.err(e))
    }

    fn write(&self, op: WriteOp<'_>) -> sylva::Result<bool> {
        self.group.write(op, |ops| {
            let mut txn = self.db.begin_write().map_err(|e| self.err(e))?;
            let durable = self.cadence.note(ops.len() as u64);
            let durability = if durable {
                Durability::Immediate
            } else {
                Durability::None
            };
            txn.set_durability(durability).map_err(|e| self.err(e))?;
            let mut answers = Vec::with_capacity(ops.len());
            {
                let mut table = txn.open_table(TABLE).map_err(|e| self.err(e))?;
                for op in ops {
                    answers.push(match *op {
                        WriteOp::Put(k, v) => {
                            table.insert(k, v).map_err(|e| self.err(e))?;
                            false
                        }
                        WriteOp::Delete(k) => table.remove(k).map_err(|e| self.err(e))?.is_some(),
                    });
                }
            }
            txn.commit().map_err(|e| self.err(e))?;
            if durable {
                self.cadence.synced();
            }
            Ok(answers)
        })
    }
}

/// A redb value guard seen as the bytes it holds.
struct Bytes<'a>(AccessGuard<'a, &'static [u8]>);

impl AsRef<[u8]> for Bytes<'_> {
    fn as_ref(&self) -> &[u8] {
        self.0.value()
    }
}

/// Maps a redb error to a sylva error naming redb.
fn error(dir: &Path, e: impl Into<redb::Error>) -> sylva::Error {
    match e.into() {
        redb::Error::Io(io) => peer_error(PEER, dir, io.kind(), io),
        other => peer_error(PEER, dir, io::ErrorKind::Other, other),
    }
}

impl KvStore for RedbPeer {
    fn limits(&self) -> Limits {
        CAPPED_LIMITS
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(TABLE).map_err(|e| self.err(e))?;
        let value = table.get(key).map_err(|e| self.err(e))?;
        Ok(copy_value(value.map(Bytes), out))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        CAPPED_LIMITS.check_key(key)?;
        CAPPED_LIMITS.check_value(value)?;
        self.write(WriteOp::Put(key, value)).map(|_| ())
    }

    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        CAPPED_LIMITS.check_key(key)?;
        self.write(WriteOp::Delete(key))
    }

    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.visit(start, None, limit, visitor)
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
        self.visit(start, Some(end), usize::MAX, visitor)
    }

    fn sync(&self) -> sylva::Result<()> {
        // An empty durable commit makes every earlier non-durable commit durable. It waits for
        // the write transaction of a group in progress, so it covers every acknowledged write.
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        self.commit_durably(txn)
    }

    fn stats(&self) -> Stats {
        let records = self
            .db
            .begin_read()
            .map_err(redb::Error::from)
            .and_then(|txn| txn.open_table(TABLE).map_err(redb::Error::from))
            .and_then(|table| table.len().map_err(redb::Error::from))
            .unwrap_or(0);
        let cache = self.db.cache_stats();
        let (groups, writes) = self.group.counts();
        Stats {
            records,
            bytes_used: dir_bytes(&self.dir),
            counters: vec![
                ("cache_evictions", cache.evictions()),
                ("cache_read_hits", cache.read_hits()),
                ("cache_read_misses", cache.read_misses()),
                ("write_txns", groups),
                ("writes", writes),
                syncs_due(&self.cadence),
            ],
        }
    }
}
