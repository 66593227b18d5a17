//! Peer engines behind [`sylva::KvStore`], so `sylva bench` drives RocksDB, LMDB, redb, fjall
//! and sled with the same runner, on the same operations, as sylva's own engines (issue 6).
//!
//! Compiled only with the cargo feature `peers`. Each peer lives in its own file and is opened on
//! a directory with a [`PeerSettings`], which carries the *fair settings* written down in
//! `docs/benchmarking.md` ("Peers and fair settings"): one memory budget, compression off, the
//! engine's normal checksums, the write-ahead log on with one sync policy ([`PeerSync`]), RocksDB
//! Bloom filters at 10 bits per key, 4 KiB blocks or pages where configurable.
//!
//! What every adapter guarantees, whatever the peer:
//! - `put` and `delete` return once the write is visible to a following read from any thread.
//!   redb and LMDB need a write transaction per commit; their adapters combine concurrent writers
//!   into one transaction ([`group`]), so one writer thread commits one transaction per write and
//!   `n` concurrent writers share commits.
//! - Durability follows [`PeerSync`] (sylva's `SyncMode`) on sylva's own cadence,
//!   [`sylva::SyncCadence`], the one `db` runs on: no fsync per operation unless
//!   [`PeerSync::Always`]; under [`PeerSync::Batch`] the writer that crosses a batch boundary (so
//!   many writes, or so much time since the last durable point, checked when a write completes)
//!   makes everything before it durable: it hands the peer's sync to the cadence's boundary sync
//!   thread, as `db` hands its log's, except for redb, whose durability is its commit's; `sync()`
//!   always makes every acknowledged write durable. Every adapter reports the durable points the
//!   cadence asked for as the counter `syncs_due`, as `db` does.
//! - `limits()` are the peer's real limits, capped at [`ADAPTER_MAX_KEY`] / [`ADAPTER_MAX_VALUE`]
//!   (the limits of sylva's `MemMap`) where the peer allows more; input outside them is
//!   `InvalidArgument` from the adapter before it reaches the peer, so no peer ever panics on it.
//! - Errors from a peer become [`sylva::Error::Io`] carrying the database directory and a message
//!   that starts with the peer's name.

mod fjall;
mod group;
mod lmdb;
mod redb;
#[cfg(feature = "peers")]
mod rocksdb;
mod sled;

use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use sylva::{Error, KvStore, Limits, SyncCadence, Visitor};

pub use self::fjall::FjallPeer;
pub use self::lmdb::LmdbPeer;
pub use self::redb::RedbPeer;
#[cfg(feature = "peers")]
pub use self::rocksdb::RocksDbPeer;
pub use self::sled::SledPeer;

/// Names accepted by [`open_peer`], in the order the benchmark reports them.
pub const PEER_NAMES: &[&str] = &["rocksdb", "lmdb", "redb", "fjall", "sled"];

/// The longest key an adapter accepts where the peer itself allows longer (sylva's `MemMap`
/// limit): keeps the edge cases' largest-key test small, and no benchmark uses more.
pub const ADAPTER_MAX_KEY: usize = sylva::MEMMAP_MAX_KEY;

/// The longest value an adapter accepts where the peer itself allows longer (RocksDB, redb, fjall
/// and LMDB take values of gigabytes); sylva's `MemMap` limit.
pub const ADAPTER_MAX_VALUE: usize = sylva::MEMMAP_MAX_VALUE;

/// When writes become durable: sylva's [`sylva::SyncMode`], the policy its durable engine takes
/// (`Never`: the write-ahead log is written, never fsynced by the adapter, though the peer's own
/// background flushes and compactions still fsync their files; `Batch`: durable at the next batch
/// boundary; `Always`: durable before `put` or `delete` returns, concurrent writers possibly
/// sharing one fsync). `sync()` makes writes durable under every policy.
pub use sylva::SyncMode as PeerSync;

/// The fair settings a peer is opened with.
///
/// `Default` (a 64 MiB budget, `Batch` every 1,024 writes or 10 ms, a 256 GiB LMDB map) is the
/// benchmark's fair setting: the `db` engine starts from the same budget and sync policy
/// (`BENCH_*` in `engines.rs`, which a test keeps equal to these); a spec's options change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSettings {
    /// The memory budget in bytes: RocksDB's block cache, fjall's cache, sled's cache, redb's
    /// cache. LMDB reads through the operating system's page cache, which the process cannot
    /// bound (see `lmdb.rs`).
    pub cache_bytes: u64,
    /// When writes become durable.
    pub sync: PeerSync,
    /// The largest LMDB's data file may grow to (its memory map). Only address space is reserved;
    /// a write past it fails with an error naming this setting.
    pub lmdb_map_size: u64,
}

impl Default for PeerSettings {
    fn default() -> Self {
        PeerSettings {
            cache_bytes: 64 << 20,
            sync: PeerSync::Batch {
                ops: 1024,
                interval: Duration::from_millis(10),
            },
            lmdb_map_size: 256 << 30,
        }
    }
}

/// Opens the peer called `name` (one of [`PEER_NAMES`]) on `dir`, creating the directory and the
/// database when missing. The error names the peer and what is missing.
pub fn open_peer(
    name: &str,
    dir: &Path,
    settings: &PeerSettings,
) -> Result<Box<dyn KvStore>, String> {
    let opened: sylva::Result<Box<dyn KvStore>> = match name {
        #[cfg(feature = "peers")]
        "rocksdb" => RocksDbPeer::open(dir, settings).map(|s| Box::new(s) as _),
        #[cfg(not(feature = "peers"))]
        "rocksdb" => {
            return Err(
                "rocksdb is not in this build: build with --features peers (RocksDB's bundled \
                 C++ build), not peers-no-rocksdb"
                    .into(),
            )
        }
        "lmdb" => LmdbPeer::open(dir, settings).map(|s| Box::new(s) as _),
        "redb" => RedbPeer::open(dir, settings).map(|s| Box::new(s) as _),
        "fjall" => FjallPeer::open(dir, settings).map(|s| Box::new(s) as _),
        "sled" => SledPeer::open(dir, settings).map(|s| Box::new(s) as _),
        _ => {
            return Err(format!(
                "unknown peer `{name}`; the peers are {}",
                PEER_NAMES.join(", ")
            ))
        }
    };
    opened.map_err(|e| format!("cannot open peer `{name}` on {}: {e}", dir.display()))
}

/// Limits of a peer whose own limits are at least the adapter's caps.
pub(crate) const CAPPED_LIMITS: Limits = Limits::variable(ADAPTER_MAX_KEY, ADAPTER_MAX_VALUE);

/// The memtable size of the LSM peers (RocksDB, fjall) for a memory budget: two memtables (the
/// active one and one being flushed) take a third of the budget, the block cache the rest, as
/// in TreeLine's comparison with RocksDB (its Table 5.1: 2 x 107 MiB memtables + 469 MiB block
/// cache = the 683 MiB every engine got). At least 1 MiB.
pub(crate) fn lsm_memtable_bytes(cache_bytes: u64) -> u64 {
    (cache_bytes / 6).max(1 << 20)
}

/// An [`Error::Io`] on `path` whose message starts with the peer's name.
pub(crate) fn peer_error(
    peer: &str,
    path: &Path,
    kind: io::ErrorKind,
    what: impl std::fmt::Display,
) -> Error {
    Error::io_at(path, io::Error::new(kind, format!("{peer}: {what}")))
}

/// Creates `dir` (and its parents) for a peer, with the error naming the peer.
pub(crate) fn create_dir(peer: &str, dir: &Path) -> sylva::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        peer_error(
            peer,
            dir,
            e.kind(),
            format_args!("cannot create the directory: {e}"),
        )
    })
}

/// Bytes the files under `dir` occupy (the benchmark's measure of every engine's files).
pub(crate) use ycsb::process::dir_bytes;

/// Hands `value`, if there is one, to a `get_into` caller's buffer; whether there was one.
pub(crate) fn copy_value(value: Option<impl AsRef<[u8]>>, out: &mut Vec<u8>) -> bool {
    match value {
        Some(v) => {
            out.clear();
            out.extend_from_slice(v.as_ref());
            true
        }
        None => false,
    }
}

/// Feeds a peer's `(key, value)` entries to `visitor`, stopping after `limit` or when the visitor
/// says so; returns how many it visited. `err` maps the peer's error.
pub(crate) fn visit_entries<K, V, E>(
    entries: impl IntoIterator<Item = Result<(K, V), E>>,
    limit: usize,
    visitor: &mut Visitor<'_>,
    err: impl Fn(E) -> Error,
) -> sylva::Result<usize>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    if limit == 0 {
        return Ok(0);
    }
    let mut visited = 0;
    for entry in entries {
        let (k, v) = entry.map_err(&err)?;
        visited += 1;
        if !visitor(k.as_ref(), v.as_ref()) || visited == limit {
            break;
        }
    }
    Ok(visited)
}

/// Whether `[start, end)` is empty, which several peers refuse to be asked (a range whose start
/// is past its end panics in redb and `BTreeMap`-like APIs).
pub(crate) fn empty_range(start: &[u8], end: &[u8]) -> bool {
    start >= end
}

/// The cadence of a peer opened on `dir` under `policy`: under [`PeerSync::Batch`] with a boundary
/// sync thread that runs `sync` (which gets the directory, for its errors) once per boundary
/// handed to it.
pub(crate) fn cadence(
    policy: PeerSync,
    peer: &str,
    dir: &Path,
    sync: impl Fn(&Path) -> sylva::Result<()> + Send + 'static,
) -> sylva::Result<SyncCadence> {
    let owned = dir.to_path_buf();
    SyncCadence::with_thread(policy, &format!("{peer}-boundary-sync"), move || {
        sync(&owned)
    })
    .map_err(|e| {
        peer_error(
            peer,
            dir,
            e.kind(),
            format_args!("cannot start the boundary sync thread: {e}"),
        )
    })
}

/// The counter every adapter (and `db`) reports: the durable points its cadence asked for.
pub(crate) fn syncs_due(cadence: &SyncCadence) -> (&'static str, u64) {
    ("syncs_due", cadence.due_count())
}

/// Striped locks that make an LSM peer's read-then-delete atomic per key.
///
/// RocksDB and fjall delete blindly (a tombstone), but `KvStore::delete` answers whether the key
/// was present, so the adapter reads first. Two deletes of one key must not both answer `true`,
/// so they serialise on the key's stripe. Puts stay blind writes and take no lock: a put landing
/// between a delete's read and its tombstone is ordered before the delete, which then rightly
/// answers `true`.
pub(crate) struct DeleteStripes {
    stripes: Vec<Mutex<()>>,
}

impl DeleteStripes {
    const STRIPES: usize = 64;

    pub(crate) fn new() -> Self {
        DeleteStripes {
            stripes: (0..Self::STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Holds the stripe of `key` (a poisoned stripe is still a valid lock: it guards no data).
    pub(crate) fn lock(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        // FNV-1a: cheap and spreads short numeric keys well.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let stripe = &self.stripes[(h % Self::STRIPES as u64) as usize];
        stripe.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn batch_cadence_fires_once_per_boundary() {
        let c = SyncCadence::new(PeerSync::Batch {
            ops: 3,
            interval: Duration::from_secs(3600),
        });
        assert!(!c.note(1));
        assert!(!c.note(1));
        assert!(c.note(1), "the third write crosses the boundary");
        assert!(!c.note(1), "only the crossing writer is told");
        c.synced();
        assert!(!c.note(2));
        assert!(c.note(5), "a group crossing the boundary is due");
    }

    #[test]
    fn batch_cadence_fires_on_interval() {
        let c = SyncCadence::new(PeerSync::Batch {
            ops: u64::MAX,
            interval: Duration::ZERO,
        });
        assert!(c.note(1));
    }

    #[test]
    fn never_and_always() {
        assert!(!SyncCadence::new(PeerSync::Never).note(1_000_000));
        assert!(SyncCadence::new(PeerSync::Always).note(1));
    }

    /// The peers' adapters and sylva's `db` run on one cadence, `sylva::SyncCadence` (the type
    /// each adapter's `cadence` field has and `db`'s `durable` layer holds): given the same
    /// writes, deletes and explicit `sync()`, every one asks for the same durable points.
    #[test]
    fn the_peers_and_db_ask_for_the_same_durable_points() {
        let batch = PeerSync::Batch {
            ops: 10,
            interval: Duration::from_secs(3600),
        };
        let dir = tempfile::tempdir().unwrap();
        let db = sylva::Db::open(
            dir.path().join("db"),
            sylva::DbOptions {
                sync: batch,
                background: false,
                cache_bytes: 8 << 20,
                ..sylva::DbOptions::default()
            },
        )
        .unwrap();
        let mut stores: Vec<(&str, Box<dyn KvStore>)> = vec![("db", Box::new(db))];
        let settings = PeerSettings {
            sync: batch,
            ..PeerSettings::default()
        };
        for &name in PEER_NAMES {
            if name == "rocksdb" && !cfg!(feature = "peers") {
                continue;
            }
            stores.push((
                name,
                open_peer(name, &dir.path().join(name), &settings).unwrap(),
            ));
        }
        let mut counts = Vec::new();
        for (name, store) in &stores {
            for i in 0..95u32 {
                store.put(&i.to_be_bytes(), b"v").unwrap();
            }
            store.sync().unwrap();
            for i in 0..25u32 {
                store.put(&(1000 + i).to_be_bytes(), b"w").unwrap();
            }
            for i in 0..3u32 {
                assert!(store.delete(&i.to_be_bytes()).unwrap(), "{name}");
            }
            let stats = store.stats();
            let due = stats.counters.iter().find(|(n, _)| *n == "syncs_due");
            counts.push((*name, due.map(|c| c.1)));
        }
        // 95 writes: 9 boundaries; sync() restarts the count; 28 writes: 2 more.
        for (name, due) in &counts {
            assert_eq!(*due, Some(11), "{name}: {counts:?}");
        }
    }

    #[test]
    fn unknown_peer_lists_the_names() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_peer("leveldb", dir.path(), &PeerSettings::default())
            .err()
            .unwrap();
        assert!(err.contains("leveldb") && err.contains(&PEER_NAMES.join(", ")));
    }
}
