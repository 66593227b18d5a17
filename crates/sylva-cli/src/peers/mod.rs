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
//! - Durability follows [`PeerSync`]: no fsync per operation unless [`PeerSync::Always`]; under
//!   [`PeerSync::Batch`] the writer that crosses a batch boundary (so many writes, or so much time
//!   since the last durable point, checked when a write completes) makes everything before it
//!   durable: it hands the peer's sync to a [`BoundarySync`] thread, as sylva's `db` does, except
//!   for redb, whose durability is its commit's; `sync()` always makes every acknowledged write
//!   durable.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sylva::{Error, KvStore, Limits, Visitor};

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

/// When writes become durable: the same policy sylva's durable engine takes (`Sync` in issue 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerSync {
    /// The write-ahead log is written, never fsynced by the adapter (the peer's own background
    /// flushes and compactions still fsync their files). `sync()` still makes writes durable.
    Never,
    /// Durable at the next batch boundary: after `ops` writes or `interval` since the last
    /// durable point, whichever comes first, checked as writes complete; or at `sync()`.
    Batch {
        /// Writes per batch.
        ops: u64,
        /// Longest time between durable points while writes keep coming.
        interval: Duration,
    },
    /// Durable before `put` or `delete` returns (concurrent writers may share one fsync).
    Always,
}

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

/// Counts writes and time towards the next durable point of [`PeerSync::Batch`].
///
/// Writers call [`SyncCadence::note`] after each acknowledged write (or group of writes); exactly
/// one writer is told a boundary was crossed, and it makes the store durable and calls
/// [`SyncCadence::synced`].
pub(crate) struct SyncCadence {
    policy: PeerSync,
    /// Writes since the last durable point.
    pending: AtomicU64,
    /// When the last durable point was, in nanoseconds after `epoch`.
    last_sync_ns: AtomicU64,
    epoch: Instant,
}

impl SyncCadence {
    pub(crate) fn new(policy: PeerSync) -> Self {
        SyncCadence {
            policy,
            pending: AtomicU64::new(0),
            last_sync_ns: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The policy this cadence follows.
    pub(crate) fn policy(&self) -> PeerSync {
        self.policy
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records `n` acknowledged writes; `true` if the caller must now make the store durable.
    /// Under `Always` every write is due; under `Never` none is.
    pub(crate) fn note(&self, n: u64) -> bool {
        match self.policy {
            PeerSync::Never => false,
            PeerSync::Always => true,
            PeerSync::Batch { ops, interval } => {
                let before = self.pending.fetch_add(n, Ordering::Relaxed);
                // Exactly one writer sees the count cross the boundary.
                if before < ops && before + n >= ops {
                    return true;
                }
                let last = self.last_sync_ns.load(Ordering::Relaxed);
                let now = self.now_ns();
                let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
                now.saturating_sub(last) >= interval_ns
                    && self
                        .last_sync_ns
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
            }
        }
    }

    /// Records that everything written so far is durable.
    pub(crate) fn synced(&self) {
        self.pending.store(0, Ordering::Relaxed);
        self.last_sync_ns.store(self.now_ns(), Ordering::Relaxed);
    }
}

/// The boundary sync of [`PeerSync::Batch`] on a thread of its own, the way sylva's `db` runs
/// it (its log sync thread, `sylva::db`): the writer that crosses a boundary hands the peer's
/// sync over and goes on; a writer that crosses the next boundary while that sync still runs
/// syncs itself (the caller does, when [`BoundarySync::hand_over`] says the thread is busy), so
/// at most two batches are ever not durable. The batch is durable once the thread's sync returns.
/// A failed sync is kept and returned by the next hand-over.
pub(crate) struct BoundarySync {
    shared: std::sync::Arc<BoundaryShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct BoundaryShared {
    state: Mutex<BoundaryState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct BoundaryState {
    requested: bool,
    running: bool,
    shutdown: bool,
    failed: Option<Error>,
}

impl BoundarySync {
    /// Starts the thread of `peer`, which runs `sync` once per hand-over.
    pub(crate) fn start(
        peer: &str,
        dir: &Path,
        sync: impl Fn() -> sylva::Result<()> + Send + 'static,
    ) -> sylva::Result<Self> {
        let shared = std::sync::Arc::new(BoundaryShared::default());
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{peer}-boundary-sync"))
            .spawn(move || loop {
                {
                    let mut st = lock(&theirs.state);
                    while !st.requested && !st.shutdown {
                        st = theirs.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    if st.shutdown {
                        return;
                    }
                    st.requested = false;
                    st.running = true;
                }
                let r = sync();
                let mut st = lock(&theirs.state);
                st.running = false;
                if let Err(e) = r {
                    st.failed.get_or_insert(e);
                }
            })
            .map_err(|e| {
                peer_error(
                    peer,
                    dir,
                    e.kind(),
                    format_args!("cannot start the boundary sync thread: {e}"),
                )
            })?;
        Ok(BoundarySync {
            shared,
            thread: Some(thread),
        })
    }

    /// The boundary sync thread of a peer opened on `dir` under `policy`: started under
    /// [`PeerSync::Batch`] (`sync` gets the directory, for its errors), none otherwise.
    pub(crate) fn for_batch(
        policy: PeerSync,
        peer: &str,
        dir: &Path,
        sync: impl Fn(&Path) -> sylva::Result<()> + Send + 'static,
    ) -> sylva::Result<Option<Self>> {
        if !matches!(policy, PeerSync::Batch { .. }) {
            return Ok(None);
        }
        let owned = dir.to_path_buf();
        Self::start(peer, dir, move || sync(&owned)).map(Some)
    }

    /// Hands a boundary's sync to the thread: `Ok(true)` if it took it, `Ok(false)` if it is
    /// still busy with the previous one (the caller then syncs itself), or the error of an
    /// earlier sync of the thread's.
    pub(crate) fn hand_over(&self) -> sylva::Result<bool> {
        let mut st = lock(&self.shared.state);
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        if st.requested || st.running {
            return Ok(false);
        }
        st.requested = true;
        self.shared.cv.notify_one();
        Ok(true)
    }
}

/// Locks `m`; a poisoned lock is still used (the state it guards stays consistent: every change
/// is a few field stores).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for BoundarySync {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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
    fn the_boundary_sync_thread_takes_one_sync_at_a_time_and_reports_a_failure() {
        use std::sync::mpsc;
        let (release, held) = mpsc::channel::<sylva::Result<()>>();
        let (started_tx, started) = mpsc::channel::<()>();
        let held = Mutex::new(held);
        let b = BoundarySync::start("test", Path::new("<test>"), move || {
            started_tx.send(()).unwrap();
            lock(&held).recv().unwrap()
        })
        .unwrap();
        assert!(b.hand_over().unwrap(), "an idle thread takes the sync");
        started.recv().unwrap();
        // While it runs, the next boundary's writer must sync itself.
        assert!(!b.hand_over().unwrap());
        release.send(Ok(())).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let took = loop {
            match b.hand_over().unwrap() {
                true => break true,
                false if Instant::now() < deadline => std::thread::yield_now(),
                false => break false,
            }
        };
        assert!(
            took,
            "the thread takes the next sync once the first returned"
        );
        started.recv().unwrap();
        release
            .send(Err(Error::io_at(
                Path::new("<test>"),
                io::Error::other("injected"),
            )))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match b.hand_over() {
                Err(e) => break Some(e),
                Ok(_) if Instant::now() < deadline => std::thread::yield_now(),
                Ok(_) => break None,
            }
        };
        assert!(
            err.is_some_and(|e| e.to_string().contains("injected")),
            "a failed sync surfaces at the next hand-over"
        );
        release.send(Ok(())).unwrap();
        drop(b);
    }

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

    #[test]
    fn unknown_peer_lists_the_names() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_peer("leveldb", dir.path(), &PeerSettings::default())
            .err()
            .unwrap();
        assert!(err.contains("leveldb") && err.contains(&PEER_NAMES.join(", ")));
    }
}
