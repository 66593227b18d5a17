//! `Db` and any other store (the peers' adapters in `sylva bench` are such stores) run on the
//! one `SyncMode` cadence, `sylva::SyncCadence`: given the same writes and the same explicit
//! `sync()`, `Db` fsyncs its log exactly where a store driven by a `SyncCadence` of the same
//! mode makes itself durable, and both report the same count of durable points asked for.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sylva::io::{Io, MemIo};
use sylva::{Db, DbOptions, Due, KvStore, Result, SyncCadence, SyncMode};

/// A log file that counts its syncs.
struct Counted {
    inner: MemIo,
    syncs: Arc<AtomicU64>,
}

impl Io for Counted {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// A store in the manner of a peer adapter: a map, made durable by a counted "fsync" whenever
/// its cadence says so.
struct Toy {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    cadence: SyncCadence,
    syncs: AtomicU64,
}

impl Toy {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map.lock().insert(key.to_vec(), value.to_vec());
        self.cadence.written(1, |due| {
            assert_eq!(
                due,
                Due::Boundary,
                "no thread: the writer syncs each boundary"
            );
            self.syncs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    fn sync(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.cadence.synced();
    }
}

fn counter(db: &Db, name: &str) -> Option<u64> {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|c| c.1)
}

#[test]
fn db_and_a_store_on_the_same_cadence_sync_at_the_same_writes() {
    let mode = SyncMode::Batch {
        ops: 10,
        interval: Duration::from_secs(3600),
    };
    let syncs = Arc::new(AtomicU64::new(0));
    let log = || -> Box<dyn Io> {
        Box::new(Counted {
            inner: MemIo::new(Vec::new()),
            syncs: syncs.clone(),
        })
    };
    // No background threads: the writer at a boundary syncs the log itself, as the toy does.
    let db = Db::open_io(
        Box::new(MemIo::new(Vec::new())),
        [log(), log()],
        DbOptions {
            sync: mode,
            background: false,
            cache_bytes: 4 << 20,
            ..DbOptions::default()
        },
    )
    .expect("open");
    let toy = Toy {
        map: Mutex::new(BTreeMap::new()),
        cadence: SyncCadence::new(mode),
        syncs: AtomicU64::new(0),
    };
    let db_syncs = || syncs.load(Ordering::Relaxed);
    let opened = db_syncs();
    let mut trace = Vec::new();
    for phase in 0..2u32 {
        for i in 0..[95u32, 25][phase as usize] {
            let key = (phase * 1000 + i).to_be_bytes();
            db.put(&key, b"v").expect("db put");
            toy.put(&key, b"v").expect("toy put");
            trace.push((db_syncs() - opened, toy.syncs.load(Ordering::Relaxed)));
        }
        if phase == 0 {
            db.sync().expect("db sync");
            toy.sync();
        }
    }
    for (i, (db_n, toy_n)) in trace.iter().enumerate() {
        assert_eq!(
            db_n, toy_n,
            "after write {i}: the log's fsyncs and the toy's"
        );
    }
    // 95 writes: 9 boundaries; sync(); 25 writes: 2 more.
    assert_eq!(toy.syncs.load(Ordering::Relaxed), 12);
    assert_eq!(db_syncs() - opened, 12);
    assert_eq!(toy.cadence.due_count(), 11);
    assert_eq!(counter(&db, "syncs_due"), Some(11));
    db.close().expect("close");
}
