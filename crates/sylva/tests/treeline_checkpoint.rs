//! A checkpoint's page writes wait for the log in groups: it syncs the log once for up to 256
//! pages, not once for every page whose image it logs (the bug this pins: a checkpoint of
//! 10,000 pages spent 17–26 s in one log fsync a page, `docs/results/treeline.md`), and it
//! reads a segment of several dirty pages with one I/O. The store's contents survive the
//! checkpoint and a reopen, and evictions' pages that wait in the group are read back right,
//! and lost in a crash without losing a write.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sylva::io::{Io, MemIo};
use sylva::{KvStore, SyncMode, TreeLine, TreeLineOptions};

/// A file in memory that counts its fsyncs and writes; shared so a store can be reopened.
#[derive(Clone)]
struct Counted {
    inner: Arc<MemIo>,
    syncs: Arc<AtomicU64>,
    writes: Arc<AtomicU64>,
    reads: Arc<AtomicU64>,
}

impl Counted {
    fn new() -> Self {
        Counted {
            inner: Arc::new(MemIo::new(Vec::new())),
            syncs: Arc::new(AtomicU64::new(0)),
            writes: Arc::new(AtomicU64::new(0)),
            reads: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Io for Counted {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> sylva::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> sylva::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> sylva::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }
    fn file_len(&self) -> sylva::Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> sylva::Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

struct Files {
    page: Counted,
    log: [Counted; 2],
}

impl Files {
    fn open(&self, o: TreeLineOptions) -> TreeLine {
        TreeLine::open_io(
            Box::new(self.page.clone()),
            [
                Box::new(self.log[0].clone()) as Box<dyn Io>,
                Box::new(self.log[1].clone()),
            ],
            o,
        )
        .unwrap()
    }

    fn log_syncs(&self) -> u64 {
        self.log
            .iter()
            .map(|l| l.syncs.load(Ordering::Relaxed))
            .sum()
    }
}

fn options(cache_bytes: u64) -> TreeLineOptions {
    TreeLineOptions {
        // Only the store syncs the log: every fsync counted is a checkpoint's or a flush's.
        sync: SyncMode::Never,
        background: false,
        forecast: false,
        cache_bytes,
        checkpoint_bytes: 1 << 40,
        ..TreeLineOptions::default()
    }
}

fn counter(db: &TreeLine, name: &str) -> u64 {
    KvStore::stats(db)
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|c| c.1)
        .unwrap()
}

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn value(i: u64, round: u8) -> Vec<u8> {
    let mut v = vec![round; 56];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

const N: u64 = 30_000;

#[test]
fn a_checkpoint_syncs_the_log_once_a_group_of_pages_not_once_a_page() {
    let files = Files {
        page: Counted::new(),
        log: [Counted::new(), Counted::new()],
    };
    let o = options(256 << 20);
    let db = files.open(o);
    for i in 0..N {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    db.checkpoint().unwrap();
    // Every page gets a dirty entry: the next checkpoint writes each page once, its image
    // logged first (its first write since the last checkpoint).
    for i in 0..N {
        db.put(&key(i), &value(i, 2)).unwrap();
    }
    assert_eq!(counter(&db, "cache_dirty"), N);
    let reads = || files.page.reads.load(Ordering::Relaxed);
    let (images, writes, syncs, read_ios) = (
        counter(&db, "page_images"),
        counter(&db, "page_writes"),
        files.log_syncs(),
        reads(),
    );
    db.checkpoint().unwrap();
    let images = counter(&db, "page_images") - images;
    let writes = counter(&db, "page_writes") - writes;
    let syncs = files.log_syncs() - syncs;
    let read_ios = reads() - read_ios;
    assert!(
        images >= 500,
        "{images} page images logged (the test needs many pages)"
    );
    assert!(writes >= images, "{writes} page writes for {images} images");
    // One sync a group of 256 pages, and the checkpoint's own few (the log before the state
    // is recorded, the log's truncation). One a page was the bug.
    assert!(
        syncs <= images.div_ceil(256) + 8,
        "{syncs} log syncs for a checkpoint that wrote {writes} pages ({images} images)"
    );
    // Each page written is read first; a segment of several dirty pages with one I/O. (One
    // read a page, as before the segments were read whole, makes as many reads as writes: the
    // values keep their size, so no page gains an overflow page.)
    let grouped: u64 = ["segments_2", "segments_4", "segments_8", "segments_16"]
        .iter()
        .map(|c| counter(&db, c))
        .sum();
    assert!(grouped > 0, "the test needs segments of several pages");
    assert!(
        read_ios < writes,
        "{read_ios} reads for {writes} page writes in {grouped} multi-page segments"
    );
    assert_eq!(counter(&db, "cache_dirty"), 0);
    db.close().unwrap();
    let db = files.open(o);
    for i in (0..N).step_by(7) {
        assert_eq!(db.get(&key(i)).unwrap().unwrap(), value(i, 2), "key {i}");
    }
    assert_eq!(db.check().unwrap().records, N);
    db.close().unwrap();
}

#[test]
fn pages_waiting_for_the_log_are_read_back_and_survive_a_crash() {
    let files = Files {
        page: Counted::new(),
        log: [Counted::new(), Counted::new()],
    };
    // A cache of a few thousand records: evictions write pages, which wait in the group (the
    // log is never synced but by the store), and read misses meet them.
    let mut o = options(0);
    o.set("cache_records", "2000").unwrap();
    o.cache_bytes += 7 << 20;
    let db = files.open(o);
    for round in 1..=3u8 {
        for i in 0..N / 3 {
            db.put(&key(i), &value(i, round)).unwrap();
            if i % 5 == 0 {
                // Written this round, long enough ago to have been evicted.
                let j = i / 2;
                assert_eq!(
                    db.get(&key(j)).unwrap().unwrap(),
                    value(j, round),
                    "round {round}, key {j}"
                );
            }
        }
    }
    assert!(counter(&db, "page_images") > 0);
    db.sync().unwrap();
    // A crash: pages still waiting in the group are lost, the log has every write.
    db.simulate_crash();
    let db = files.open(o);
    for i in 0..N / 3 {
        assert_eq!(db.get(&key(i)).unwrap().unwrap(), value(i, 3), "key {i}");
    }
    assert_eq!(db.check().unwrap().records, N / 3);
    db.close().unwrap();
}
