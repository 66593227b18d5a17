//! Every peer adapter passes the conformance suite: edge cases, the model test against `MemMap`
//! with reopen points (each peer is durable: reopen closes it and opens the same directory), and
//! the multi-threaded stress test.
//!
//! Compiled only with the `peers` feature:
//! `cargo test -p sylva-cli --features peers --release --test peers_conformance`.
//! The adapters live in the `sylva` binary, which integration tests cannot link to, so this file
//! compiles the same module from its source.
#![cfg(feature = "peers-no-rocksdb")]
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
#[path = "../src/peers/mod.rs"]
mod peers;

use std::path::PathBuf;
use std::time::Duration;

use peers::{open_peer, PeerSettings, PeerSync};
use sylva::{KvStore, Limits, Stats, Visitor};
use sylva_conformance::{conformance_tests, Subject};

/// A peer opened on a fresh temporary directory; the directory lives as long as the store.
struct Opened {
    store: Box<dyn KvStore>,
    // Dropped after `store` (fields drop in order), so the peer closes before its files go.
    dir: tempfile::TempDir,
}

impl KvStore for Opened {
    fn limits(&self) -> Limits {
        self.store.limits()
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        self.store.get_into(key, out)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        self.store.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> sylva::Result<bool> {
        self.store.delete(key)
    }
    fn scan(&self, start: &[u8], limit: usize, visitor: &mut Visitor<'_>) -> sylva::Result<usize> {
        self.store.scan(start, limit, visitor)
    }
    fn map_range(
        &self,
        start: &[u8],
        end: &[u8],
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        self.store.map_range(start, end, visitor)
    }
    fn sync(&self) -> sylva::Result<()> {
        self.store.sync()
    }
    fn finish_deferred(&self) -> sylva::Result<()> {
        self.store.finish_deferred()
    }
    fn stats(&self) -> Stats {
        self.store.stats()
    }
}

/// Opens one peer on fresh directories, and reopens it on the same one.
struct Peer {
    name: &'static str,
    settings: PeerSettings,
}

impl Peer {
    /// The fair settings at test size: a small cache so pages are evicted and reread, and a
    /// batch cadence short enough that durable points happen inside every sequence.
    fn new(name: &'static str) -> Self {
        Peer::with_sync(
            name,
            PeerSync::Batch {
                ops: 500,
                interval: Duration::from_millis(50),
            },
        )
    }

    fn with_sync(name: &'static str, sync: PeerSync) -> Self {
        Peer {
            name,
            settings: PeerSettings {
                cache_bytes: 8 << 20,
                sync,
                lmdb_map_size: 1 << 30,
            },
        }
    }

    fn open_in(&self, dir: &std::path::Path) -> Box<dyn KvStore> {
        open_peer(self.name, dir, &self.settings).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Subject for Peer {
    type Store = Opened;

    fn open(&mut self) -> Opened {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = self.open_in(&dir.path().join(self.name));
        Opened { store, dir }
    }

    fn reopen(&mut self, store: Opened) -> Opened {
        let Opened { store, dir } = store;
        drop(store);
        let store = self.open_in(&dir.path().join(self.name));
        Opened { store, dir }
    }

    fn reopens(&self) -> bool {
        true
    }
}

#[cfg(feature = "peers")]
conformance_tests!(rocksdb, Peer::new("rocksdb"));
conformance_tests!(lmdb, Peer::new("lmdb"));
conformance_tests!(redb, Peer::new("redb"));
conformance_tests!(fjall, Peer::new("fjall"));
conformance_tests!(sled, Peer::new("sled"));

/// The peers this build has: RocksDB only with the `peers` feature (`peers-no-rocksdb` leaves
/// its C++ build out).
fn built_peers() -> impl Iterator<Item = &'static str> {
    peers::PEER_NAMES
        .iter()
        .copied()
        .filter(|&name| cfg!(feature = "peers") || name != "rocksdb")
}

/// The edge cases again under the other two sync policies, which take other code paths
/// (LMDB's synced commits, redb's durable commits, RocksDB's synced writes).
mod other_sync_policies {
    use super::*;

    #[test]
    fn edge_cases_with_sync_always() {
        for name in built_peers() {
            sylva_conformance::edge_cases(&mut Peer::with_sync(name, PeerSync::Always));
        }
    }

    #[test]
    fn edge_cases_with_sync_never() {
        for name in built_peers() {
            sylva_conformance::edge_cases(&mut Peer::with_sync(name, PeerSync::Never));
        }
    }
}

/// What survives a close: everything written, once the store is dropped (every peer closes
/// cleanly on drop), and everything `sync()` covered.
#[test]
fn writes_survive_reopen() {
    // `Batch` with small batches: many boundary syncs on the peer's boundary sync thread.
    let batch = PeerSync::Batch {
        ops: 64,
        interval: std::time::Duration::from_millis(5),
    };
    for (name, sync) in built_peers().flat_map(|n| [(n, PeerSync::Never), (n, batch)]) {
        let mut peer = Peer::with_sync(name, sync);
        let store = peer.open();
        for i in 0..1000u64 {
            store.put(&i.to_be_bytes(), &(i * 3).to_le_bytes()).unwrap();
        }
        store.delete(&7u64.to_be_bytes()).unwrap();
        store.sync().unwrap();
        let store = peer.reopen(store);
        assert_eq!(store.stats().records, 999, "{name}: records after reopen");
        assert_eq!(
            store.get(&8u64.to_be_bytes()).unwrap(),
            Some(24u64.to_le_bytes().to_vec()),
            "{name}: value after reopen"
        );
        assert_eq!(
            store.get(&7u64.to_be_bytes()).unwrap(),
            None,
            "{name}: deleted key"
        );
    }
}

/// Opening a path that cannot be a directory fails with a message naming the peer, not a panic.
#[test]
fn open_errors_name_the_peer() {
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("not-a-directory");
    std::fs::write(&file, b"x").unwrap();
    for name in peers::PEER_NAMES {
        let err = open_peer(name, &file.join("db"), &PeerSettings::default())
            .err()
            .unwrap_or_else(|| panic!("{name} opened under a file"));
        assert!(
            err.contains(name),
            "{name}: error does not name the peer: {err}"
        );
    }
}

/// LMDB's real key limit is stated and enforced by the adapter, and scans from a start key
/// longer than any stored key still find the right records.
#[test]
fn lmdb_long_bounds() {
    let mut peer = Peer::new("lmdb");
    let store = peer.open();
    let max = store.limits().max_key;
    assert_eq!(max, 511, "LMDB's compiled MDB_MAXKEYSIZE");
    let prefix = vec![b'p'; max];
    store.put(&prefix, b"prefix").unwrap();
    let mut above = prefix.clone();
    *above.last_mut().unwrap() = b'q';
    store.put(&above, b"above").unwrap();
    let mut long = prefix.clone();
    long.push(b'x');
    assert!(matches!(
        store.put(&long, b"v"),
        Err(sylva::Error::InvalidArgument { limit: 511, .. })
    ));
    let mut seen = Vec::new();
    store
        .scan(&long, 10, &mut |k, _| {
            seen.push(k.to_vec());
            true
        })
        .unwrap();
    assert_eq!(seen, vec![above.clone()], "scan from a too-long start key");
    seen.clear();
    store
        .map_range(b"p", &long, &mut |k, _| {
            seen.push(k.to_vec());
            true
        })
        .unwrap();
    assert_eq!(seen, vec![prefix], "map_range to a too-long end key");
}

/// A write past LMDB's map size is an error that names the setting to raise, not a panic, and
/// the store keeps serving what it holds.
#[test]
fn lmdb_map_full_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let settings = PeerSettings {
        lmdb_map_size: 256 << 10,
        ..PeerSettings::default()
    };
    let store = open_peer("lmdb", dir.path(), &settings).unwrap();
    let value = vec![7u8; 4000];
    let err = (0..1000u32)
        .find_map(|i| store.put(&i.to_be_bytes(), &value).err())
        .expect("a 256 KiB map fills up");
    assert!(err.to_string().contains("lmdb_map_size"), "{err}");
    assert_eq!(store.get(&0u32.to_be_bytes()).unwrap(), Some(value));
}
