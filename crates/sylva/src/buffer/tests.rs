use std::sync::Arc;

use super::*;
use crate::io::page_header::PAGE_HEADER_LEN;
use crate::io::FileIo;
use crate::wal::Wal;

fn pool(dir: &std::path::Path, budget_pages: u64, log: Option<Arc<dyn LogFlush>>) -> BufferPool {
    let file = PageFile::create(&dir.join("pages"), 4096, true).expect("create");
    BufferPool::new(
        file,
        log,
        PoolOptions {
            budget_bytes: budget_pages * 4096,
            reserve_bytes: 1 << 32,
        },
    )
    .expect("pool")
}

/// A pool of `budget_pages` over an already opened page file.
fn pool_over(file: PageFile, budget_pages: u64) -> BufferPool {
    let options = PoolOptions {
        budget_bytes: budget_pages * 4096,
        reserve_bytes: 1 << 32,
    };
    BufferPool::new(file, None, options).expect("pool")
}

fn write_pattern(p: &BufferPool, id: u64, seed: u64) {
    // SAFETY: (test) the caller holds page `id`'s exclusive lock.
    let data = unsafe { std::slice::from_raw_parts_mut(p.data(id).as_ptr(), p.usable_size()) };
    for (i, chunk) in data.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ i as u64).to_le_bytes());
    }
}

/// Reads page `id` optimistically and returns its first word, retrying until validated.
fn read_first_word(p: &BufferPool, id: u64) -> u64 {
    loop {
        let v = p.read_lock(id).expect("read_lock").expect("not freed");
        let mut w = [0u8; 8];
        // SAFETY: (test) an optimistic read of our own mapping, validated below.
        unsafe { std::ptr::copy_nonoverlapping(p.data(id).as_ptr(), w.as_mut_ptr(), 8) };
        if p.validate(id, v) {
            return u64::from_le_bytes(w);
        }
    }
}

#[test]
fn pages_survive_eviction_within_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 32, None);
    let ids: Vec<u64> = (0..500u64)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(&p, id, i * 1000);
            p.unlock(id, true);
            assert!(
                p.stats().resident <= 32,
                "resident {} over a budget of 32 pages",
                p.stats().resident
            );
            id
        })
        .collect();
    for (i, &id) in ids.iter().enumerate().rev() {
        assert_eq!(read_first_word(&p, id), i as u64 * 1000, "page {id}");
        assert!(p.stats().resident <= 32);
    }
    let s = p.stats();
    assert!(
        s.evictions >= 468 && s.misses > 0 && s.writebacks >= 468,
        "{s:?}"
    );
}

#[test]
fn a_checkpointed_pool_reopens_with_every_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids: Vec<u64> = {
        let p = pool(dir.path(), 16, None);
        let ids = (0..100u64)
            .map(|i| {
                let id = p.allocate(PageKind::BTreeInner).expect("allocate");
                write_pattern(&p, id, i + 7);
                p.unlock(id, true);
                id
            })
            .collect();
        p.checkpoint(b"meta").expect("checkpoint");
        ids
    };
    let (file, meta) = PageFile::open(&dir.path().join("pages"), true).expect("open");
    assert_eq!(meta.user, b"meta");
    let p = pool_over(file, 16);
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(read_first_word(&p, id), i as u64 + 7);
    }
}

#[test]
fn a_corrupt_page_is_an_error_every_time_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = {
        let p = pool(dir.path(), 16, None);
        let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
        write_pattern(&p, id, 1);
        p.unlock(id, true);
        p.checkpoint(&[]).expect("checkpoint");
        id
    };
    let path = dir.path().join("pages");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[id as usize * 4096 + 200] ^= 4;
    std::fs::write(&path, bytes).expect("write");
    let (file, _) = PageFile::open(&path, false).expect("open");
    let p = pool_over(file, 16);
    for _ in 0..2 {
        assert!(matches!(
            p.read_lock(id),
            Err(Error::ChecksumMismatch { .. })
        ));
        assert!(matches!(p.lock(id), Err(Error::ChecksumMismatch { .. })));
    }
    assert!(p.read_lock(id + 100).is_err(), "a page beyond the file");
}

#[test]
fn dirty_pages_reach_disk_only_after_their_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let io = FileIo::open(&dir.path().join("wal"), true).expect("wal file");
    let (wal, _) = Wal::open(Box::new(io), 1).expect("wal");
    let wal = Arc::new(wal);
    let p = pool(dir.path(), 16, Some(wal.clone()));
    let mut last = 0;
    let mut pages = Vec::new();
    for i in 0..64u64 {
        let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
        last = wal
            .append(format!("change {i}").as_bytes())
            .expect("append");
        p.set_lsn(id, last);
        p.unlock(id, true);
        pages.push((id, last));
        // Every page written back (now evicted) must have had its log record made durable first.
        let durable = wal.durable_below();
        for &(id, lsn) in &pages {
            if is_evicted(p.state(id).expect("state").load()) {
                assert!(
                    durable > lsn,
                    "page {id} (LSN {lsn}) reached disk before its log (durable below {durable})"
                );
            }
        }
    }
    assert!(p.stats().writebacks > 0, "the budget forced write-backs");
    p.flush_all().expect("flush");
    assert!(
        wal.durable_below() > last,
        "flushing the last page synced the log past its LSN"
    );
}

#[test]
fn readers_and_writers_on_two_threads_with_a_tiny_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 16, None);
    let ids: Vec<u64> = (0..200u64)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(&p, id, i << 32);
            p.unlock(id, true);
            id
        })
        .collect();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (p, ids) = (&p, &ids);
            s.spawn(move || {
                let mut x = t + 1;
                for _ in 0..20_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = (x % ids.len() as u64) as usize;
                    let id = ids[i];
                    if x % 10 == 0 {
                        p.lock(id).expect("lock");
                        // Writers keep the page's identity in the high half, a counter below.
                        // SAFETY: (test) exclusive lock held.
                        let w = unsafe { &mut *(p.data(id).as_ptr() as *mut [u8; 8]) };
                        let v = u64::from_le_bytes(*w) + 1;
                        *w = v.to_le_bytes();
                        p.unlock(id, true);
                    } else {
                        let v = read_first_word(p, id);
                        assert_eq!(v >> 32, i as u64, "page {id} holds another page's bytes");
                    }
                }
            });
        }
    });
    assert!(
        p.stats().resident <= 16 + 2,
        "resident {}",
        p.stats().resident
    );
}

#[test]
fn a_write_back_leaves_readers_valid_and_a_change_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 64, None);
    let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
    write_pattern(&p, id, 7);
    p.unlock(id, true);
    let v = p.read_lock(id).expect("read_lock").expect("not freed");
    p.flush_all().expect("flush");
    assert_eq!(p.stats().writebacks, 1, "the dirty page was written back");
    assert!(
        p.validate(id, v),
        "writing a page back does not change its bytes"
    );
    assert!(p.try_upgrade(id, v), "nor does it spoil an upgrade");
    write_pattern(&p, id, 8);
    p.unlock(id, true);
    assert!(
        !p.validate(id, v),
        "a writer's change invalidates the old version"
    );
    p.flush_all().expect("flush");
    assert_eq!(p.stats().writebacks, 2, "the page was dirty again");
    p.flush_all().expect("flush");
    assert_eq!(p.stats().writebacks, 2, "a clean page is not written");
}

#[test]
fn flushes_racing_writers_and_readers_lose_no_update() {
    race_writers_flushes_and_readers(256, 1);
}

/// The same with a budget of a third of the pages and two writers: pages are evicted all the
/// while, dirty ones written back by the thread that needs room while writers, readers and
/// flushes go on.
#[test]
fn evictions_racing_writers_flushes_and_readers_lose_no_update() {
    race_writers_flushes_and_readers(24, 2);
}

/// Over 64 pages in a pool of `budget_pages`: `writers` threads each increment the counter that
/// fills every word of its own pages 20,000 times, one thread flushes all the while, one checks
/// that no validated read sees a torn page; then every update must be in the file.
fn race_writers_flushes_and_readers(budget_pages: u64, writers: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    const WRITES: u64 = 20_000;
    let ids: Vec<u64> = {
        let p = pool(dir.path(), budget_pages, None);
        let ids: Vec<u64> = (0..64)
            .map(|_| {
                let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
                p.unlock(id, true);
                id
            })
            .collect();
        let done = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            let (p, ids, done) = (&p, &ids, &done);
            let running = move || done.load(Ordering::Relaxed) < writers;
            s.spawn(move || {
                while running() {
                    p.flush_all().expect("flush");
                }
            });
            for w in 0..writers {
                s.spawn(move || {
                    // Counts this writer done even if it panics, so the others stop and the
                    // test fails instead of hanging.
                    struct Finished<'a>(&'a std::sync::atomic::AtomicUsize);
                    impl Drop for Finished<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let _finished = Finished(done);
                    let own = ids.len() / writers;
                    for n in 0..WRITES {
                        let id = ids[(n as usize * 7) % own * writers + w];
                        p.lock(id).expect("lock");
                        // SAFETY: (test) the exclusive lock is held.
                        let data = unsafe {
                            std::slice::from_raw_parts_mut(p.data(id).as_ptr(), p.usable_size())
                        };
                        let c = u64::from_le_bytes(data[..8].try_into().expect("8 bytes")) + 1;
                        for chunk in data.chunks_exact_mut(8) {
                            chunk.copy_from_slice(&c.to_le_bytes());
                        }
                        p.unlock(id, true);
                    }
                });
            }
            s.spawn(move || {
                let mut x = 99u64;
                while running() {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let id = ids[(x >> 33) as usize % ids.len()];
                    let v = p.read_lock(id).expect("read_lock").expect("not freed");
                    let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
                    // SAFETY: (test) an optimistic read of our own mapping, validated below.
                    unsafe {
                        let base = p.data(id).as_ptr();
                        std::ptr::copy_nonoverlapping(base, a.as_mut_ptr(), 8);
                        let last = base.add(p.usable_size() - 8);
                        std::ptr::copy_nonoverlapping(last, b.as_mut_ptr(), 8);
                    }
                    if p.validate(id, v) {
                        assert_eq!(a, b, "a validated read of page {id} saw a torn page");
                    }
                }
            });
        });
        if budget_pages < 64 {
            assert!(p.stats().evictions > WRITES / 10, "{:?}", p.stats());
        }
        p.checkpoint(b"").expect("checkpoint");
        ids
    };
    // Every update reached the file: reread the counters through a fresh pool.
    let (file, _) = PageFile::open(&dir.path().join("pages"), true).expect("open");
    let p = pool_over(file, 256);
    let total: u64 = ids.iter().map(|&id| read_first_word(&p, id)).sum();
    assert_eq!(total, WRITES * writers as u64, "an update was lost");
}

#[test]
fn a_page_held_for_writing_excludes_writers_but_not_readers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 64, None);
    let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
    write_pattern(&p, id, 3);
    p.unlock(id, true);
    let st = p.state(id).expect("state");
    assert!(
        st.try_lock_writing(st.load()),
        "a write-back holds the page"
    );
    assert!(!st.try_lock_writing(st.load()), "a second write-back waits");
    let v = p.read_lock(id).expect("read_lock").expect("not freed");
    assert_eq!(read_first_word(&p, id), 3, "readers go on");
    assert!(p.validate(id, v));
    assert!(!p.try_upgrade(id, v), "a writer cannot take it");
    let locked = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            p.lock(id).expect("lock");
            locked.store(true, Ordering::SeqCst);
            p.unlock(id, true);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !locked.load(Ordering::SeqCst),
            "a writer waits for the write-back"
        );
        st.unlock_writing();
    });
    assert!(locked.load(Ordering::SeqCst));
    assert!(
        !p.validate(id, v),
        "the writer's unlock moved the version on"
    );
    assert!(st.load() & DIRTY != 0, "the writer's change is dirty again");
}

/// A gate a [`Gated`] file's writes stop at: once armed, the next write announces itself and
/// waits until the gate is opened, so a test can act while a checkpoint's write is in flight.
#[derive(Default)]
struct Gate {
    state: parking_lot::Mutex<GateState>,
    cv: parking_lot::Condvar,
}

#[derive(Default)]
struct GateState {
    armed: bool,
    /// Bytes of the write waiting at the gate (0: none).
    waiting: usize,
    open: bool,
}

impl Gate {
    fn arm(&self) {
        let mut g = self.state.lock();
        *g = GateState {
            armed: true,
            ..GateState::default()
        };
    }

    /// Waits (up to 10 s) until a write is held at the gate; returns its length in bytes.
    fn wait_for_write(&self) -> usize {
        let mut g = self.state.lock();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while g.waiting == 0 {
            assert!(
                !self.cv.wait_until(&mut g, deadline).timed_out(),
                "no write reached the gate"
            );
        }
        g.waiting
    }

    fn open(&self) {
        self.state.lock().open = true;
        self.cv.notify_all();
    }
}

/// Opens the gate when dropped, so a failed assertion while a write waits at it fails the test
/// instead of leaving the writing thread (and the test) waiting forever.
struct OpenOnDrop<'a>(&'a Gate);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

struct Gated {
    inner: FileIo,
    gate: Arc<Gate>,
}

impl crate::io::Io for Gated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut g = self.gate.state.lock();
        if g.armed {
            g.armed = false;
            g.waiting = buf.len();
            self.gate.cv.notify_all();
            while !g.open {
                self.gate.cv.wait(&mut g);
            }
        }
        drop(g);
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &std::path::Path {
        self.inner.path()
    }
}

/// A pool of `budget_pages` (frames plus copy buffer) over a new page file whose writes stop at
/// the returned gate when it is armed.
fn gated_pool(dir: &std::path::Path, budget_pages: u64) -> (BufferPool, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let io = Gated {
        inner: FileIo::open(&dir.join("pages"), true).expect("open"),
        gate: gate.clone(),
    };
    let file = PageFile::create_io(Box::new(io), 4096, false).expect("create");
    (pool_over(file, budget_pages), gate)
}

/// Flushes `p`, running `during` while the flush's first write waits at `gate` (with that
/// write's length in bytes); returns the flush's result.
fn while_flush_in_flight(p: &BufferPool, gate: &Gate, during: impl FnOnce(usize)) -> Result<()> {
    gate.arm();
    std::thread::scope(|s| {
        let _open = OpenOnDrop(gate);
        let flush = s.spawn(|| p.flush_all());
        during(gate.wait_for_write());
        gate.open();
        flush.join().expect("flush thread")
    })
}

/// Asserts that page `id`'s state has every bit of `set` and none of `clear`.
fn assert_state(p: &BufferPool, id: u64, set: u64, clear: u64, why: &str) {
    let st = p.state(id).expect("state").load();
    assert!(
        st & set == set && st & clear == 0,
        "page {id} (state {st:#x}): {why}"
    );
}

/// `n` new pages, each filled with `seed ^ i`, unlocked dirty.
fn dirty_pages(p: &BufferPool, n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(p, id, 100 + i);
            p.unlock(id, true);
            id
        })
        .collect()
}

/// The first data word of page `id` as the file holds it (not the pool).
fn first_word_on_disk(p: &BufferPool, id: u64) -> u64 {
    let mut buf = p.file().buffer(1);
    p.file()
        .read_page(id, &mut buf, PageKind::BTreeLeaf)
        .expect("read page");
    u64::from_le_bytes(
        buf[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 8]
            .try_into()
            .expect("8 bytes"),
    )
}

#[test]
fn a_failed_run_write_leaves_its_pages_dirty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let io = FileIo::open(&dir.path().join("pages"), true).expect("open");
    let (io, faults) = crate::io::FaultyIo::new(io);
    let file = PageFile::create_io(Box::new(io), 4096, false).expect("create");
    let ids = {
        let p = pool_over(file, 256);
        let ids = dirty_pages(&p, 5);
        faults.arm(crate::io::Fault::FailWrite);
        let err = p.flush_all().expect_err("the write fails");
        assert!(err.to_string().contains("injected fault"), "{err}");
        for &id in &ids {
            assert_state(
                &p,
                id,
                DIRTY,
                IN_FLIGHT,
                "dirty again after the failed write",
            );
        }
        assert_eq!(p.stats().writebacks, 0);
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(read_first_word(&p, id), 100 + i as u64, "still in memory");
        }
        p.checkpoint(b"").expect("the next checkpoint writes them");
        assert_eq!(p.stats().writebacks, 5);
        ids
    };
    let (file, _) = PageFile::open(&dir.path().join("pages"), false).expect("reopen");
    let p = pool_over(file, 64);
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            read_first_word(&p, id),
            100 + i as u64,
            "page {id} after reopen"
        );
    }
}

#[test]
fn a_writer_changes_a_page_while_its_run_is_being_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = {
        let (p, gate) = gated_pool(dir.path(), 256);
        let ids = dirty_pages(&p, 8);
        let target = ids[3];
        while_flush_in_flight(&p, &gate, |bytes| {
            assert_eq!(bytes, 8 * 4096, "the run goes in one write");
            // A writer (the tree's way: read, then upgrade) takes the page at once.
            let v = p.read_lock(target).expect("read_lock").expect("not freed");
            assert!(
                p.try_upgrade(target, v),
                "a writer waits for the checkpoint's write"
            );
            write_pattern(&p, target, 999);
            p.unlock(target, true);
            let why = "changed in flight: dirty again and still in flight";
            assert_state(&p, target, IN_FLIGHT | DIRTY, 0, why);
        })
        .expect("flush");
        let why = "the write ended; the change after the copy is still to write";
        assert_state(&p, target, DIRTY, IN_FLIGHT, why);
        assert_eq!(first_word_on_disk(&p, target), 103, "the copy went to disk");
        assert_eq!(read_first_word(&p, target), 999, "the frame has the change");
        assert_eq!(p.stats().writebacks, 8);
        p.flush_all().expect("second flush");
        assert_eq!(
            p.stats().writebacks,
            9,
            "only the changed page is written again"
        );
        assert_eq!(first_word_on_disk(&p, target), 999);
        p.checkpoint(b"").expect("checkpoint");
        ids
    };
    let (file, _) = PageFile::open(&dir.path().join("pages"), false).expect("reopen");
    let p = pool_over(file, 64);
    for (i, &id) in ids.iter().enumerate() {
        let want = if i == 3 { 999 } else { 100 + i as u64 };
        assert_eq!(read_first_word(&p, id), want, "page {id} after reopen");
    }
}

#[test]
fn eviction_leaves_a_page_in_flight_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 34);
    assert_eq!(
        p.stats().budget_pages,
        32,
        "two pages of the budget copy runs"
    );
    let inflight = dirty_pages(&p, 2);
    // Fill the rest of the budget, so the allocations below evict.
    let others = dirty_pages(&p, 30);
    while_flush_in_flight(&p, &gate, |bytes| {
        assert_eq!(bytes, 2 * 4096, "the first run is the two pages");
        for &id in &inflight {
            assert_state(&p, id, IN_FLIGHT, DIRTY, "copied: clean and in flight");
        }
        // Each allocation evicts one page; 64 of them cycle the clock through every other
        // page (each marked on one pass, evicted on the next).
        let evictions = p.stats().evictions;
        for i in 0..64u64 {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(&p, id, 5000 + i);
            p.unlock(id, true);
        }
        assert!(p.stats().evictions >= evictions + 60, "{:?}", p.stats());
        for &id in &inflight {
            assert_state(&p, id, 0, EVICTED, "evicted while its copy was in flight");
        }
        for &id in &others {
            assert!(
                is_evicted(p.state(id).expect("state").load()),
                "page {id} not evicted: the test's budget did not force evictions"
            );
        }
    })
    .expect("flush");
    for (i, &id) in inflight.iter().enumerate() {
        assert_eq!(first_word_on_disk(&p, id), 100 + i as u64);
    }
    // Out of flight, they are evicted like any page.
    for _ in 0..64 {
        let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
        p.unlock(id, true);
    }
    for &id in &inflight {
        assert!(is_evicted(p.state(id).expect("state").load()));
    }
}

#[test]
fn a_page_freed_and_reused_in_flight_waits_for_the_old_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 256);
    let ids = dirty_pages(&p, 3);
    let victim = ids[1];
    while_flush_in_flight(&p, &gate, |_| {
        p.lock(victim).expect("lock");
        p.free(victim).expect("free");
        let again = p.allocate(PageKind::BTreeLeaf).expect("allocate");
        assert_eq!(again, victim, "the free page is reused");
        write_pattern(&p, again, 777);
        p.unlock(again, true);
        let why = "the new incarnation waits for the old copy's write";
        assert_state(&p, again, IN_FLIGHT | DIRTY, 0, why);
    })
    .expect("flush");
    assert_state(&p, victim, DIRTY, IN_FLIGHT, "the old write ended");
    assert_eq!(first_word_on_disk(&p, victim), 101, "the old copy landed");
    p.flush_all().expect("flush");
    assert_eq!(first_word_on_disk(&p, victim), 777, "then the new page");
}

/// The pages of `ids` someone holds locked.
fn locked_pages(p: &BufferPool, ids: &[u64]) -> Vec<u64> {
    ids.iter()
        .copied()
        .filter(|&id| p.state(id).expect("state").load() & LOCKED != 0)
        .collect()
}

/// Reads page `ids[i]` for each `i` of `order` on another thread of `s` (each holds the word
/// `100 + i`) and asserts that it finishes within 10 s, or fails with `why`.
fn read_within_10s<'s, 'e>(
    s: &'s std::thread::Scope<'s, 'e>,
    p: &'e BufferPool,
    ids: &'e [u64],
    order: Vec<usize>,
    why: &str,
) {
    let (done, finished) = std::sync::mpsc::channel();
    s.spawn(move || {
        for i in order {
            assert_eq!(
                read_first_word(p, ids[i]),
                100 + i as u64,
                "page {}",
                ids[i]
            );
        }
        let _ = done.send(());
    });
    let waited = finished.recv_timeout(std::time::Duration::from_secs(10));
    assert!(waited.is_ok(), "{why}");
}

/// Eviction writes its victim back without holding the clock: while that write is stalled,
/// other threads still load pages (each load runs the clock), and a flush waits for the victim.
#[test]
fn readers_keep_loading_pages_while_an_eviction_write_back_is_stalled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 34);
    // Every page resident at the end is dirty: the next allocation's victim must be written.
    let ids = dirty_pages(&p, 100);
    let word = |id: u64| 100 + ids.iter().position(|&i| i == id).expect("ours") as u64;
    gate.arm();
    std::thread::scope(|s| {
        let _open = OpenOnDrop(&gate);
        let evictor = s.spawn(|| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            p.unlock(id, true);
        });
        gate.wait_for_write();
        let locked = locked_pages(&p, &ids);
        assert_eq!(locked.len(), 1, "one victim, held for its write");
        let victim = locked[0];
        assert_state(&p, victim, DIRTY, EVICTED, "written back, not yet evicted");

        // Another thread reads every other page: most miss, and each load makes room by
        // running the clock (their victims' writes pass the gate, which holds one write).
        let misses = p.stats().misses;
        let (p, ids) = (&p, &ids);
        let order = (0..ids.len()).filter(|&i| ids[i] != victim).collect();
        read_within_10s(
            s,
            p,
            ids,
            order,
            "the reads waited for the stalled write-back",
        );
        assert!(p.stats().misses >= misses + 60, "{:?}", p.stats());
        assert_state(p, victim, LOCKED, EVICTED, "its write is still stalled");

        // A flush that meets the victim waits for its write: the page was dirty when the
        // flush began, so it must be in the file when the flush ends.
        let flush = s.spawn(|| p.flush_all());
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            !flush.is_finished(),
            "the flush ended before the victim's write"
        );
        gate.open();
        flush.join().expect("flush thread").expect("flush");
        evictor.join().expect("evictor");
        assert_state(
            p,
            victim,
            EVICTED,
            LOCKED | DIRTY,
            "evicted after its write",
        );
        assert_eq!(first_word_on_disk(p, victim), word(victim));
        assert_eq!(read_first_word(p, victim), word(victim), "and loads again");
    });
}

/// Writes pages `first..first + n` straight to the file (past the pool), the data of page
/// `first + i` starting with the word `seed + i`.
fn write_run_directly(p: &BufferPool, first: u64, n: usize, seed: u64) {
    let mut buf = p.file().buffer(n);
    for (i, page) in buf.chunks_exact_mut(4096).enumerate() {
        page[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 8]
            .copy_from_slice(&(seed + i as u64).to_le_bytes());
    }
    p.file()
        .write_run(first, &mut buf, &vec![(PageKind::BTreeLeaf, 0); n])
        .expect("write run");
}

/// `n` pages allocated as one run of consecutive ids, written with `seed ^ i` and checkpointed,
/// so they are resident, clean and in the file.
fn resident_run(p: &BufferPool, n: u64) -> Vec<u64> {
    let ids = dirty_pages(p, n);
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "a new file hands out consecutive ids: {ids:?}"
    );
    p.checkpoint(b"").expect("checkpoint");
    ids
}

#[test]
fn a_reused_run_is_read_from_the_file_after_forget_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 256, None);
    let before = dirty_pages(&p, 3); // the run does not start at the first data page
    let ids = resident_run(&p, 4);
    let first = ids[0];
    let stale_version = p.read_lock(ids[1]).expect("read_lock").expect("not freed");
    // The engine frees the run and allocates it again at the file's level, as a new engine
    // writing whole runs does.
    for &id in &ids {
        p.file().free(id).expect("free in the file");
    }
    assert_eq!(p.file().allocate_run(4), first, "the run is reused");
    // Nothing of the run is in flight, so its new contents may go to the file before the pool
    // forgets it; until then, the pool serves its old frames.
    write_run_directly(&p, first, 4, 9000);
    assert_eq!(read_first_word(&p, ids[0]), 100, "the pool's old frame");
    let resident = p.stats().resident;
    p.forget_run(first, 4).expect("forget_run");
    assert_eq!(
        p.stats().resident,
        resident - 4,
        "its frames are given back"
    );
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            read_first_word(&p, id),
            9000 + i as u64,
            "page {id} read again"
        );
    }
    assert!(
        !p.validate(ids[1], stale_version),
        "a read begun before the run was forgotten validates"
    );
    assert_eq!(
        read_first_word(&p, before[2]),
        102,
        "a page before the run is untouched"
    );
}

#[test]
fn pages_freed_through_the_pool_are_readable_again_after_forget_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 256, None);
    let ids = resident_run(&p, 3);
    for &id in &ids {
        p.lock(id).expect("lock");
        p.free(id).expect("free");
        assert_eq!(p.read_lock(id).expect("read_lock"), None, "freed: restart");
    }
    assert_eq!(p.file().allocate_run(3), ids[0], "the run is reused");
    p.forget_run(ids[0], 3).expect("forget_run");
    write_run_directly(&p, ids[0], 3, 500);
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(read_first_word(&p, id), 500 + i as u64, "page {id}");
    }
}

#[test]
fn forget_run_of_pages_beyond_the_reservation_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pool(dir.path(), 64, None);
    let cap = p.capacity();
    assert!(p.forget_run(cap - 1, 2).is_err());
    assert!(p.forget_run(u64::MAX, 2).is_err());
    p.forget_run(cap - 2, 2).expect("the last pages are fine");
}

/// A page freed while a checkpoint writes its older copy: `forget_run` returns only after that
/// write, so the run written next lands last.
#[test]
fn forget_run_waits_for_an_older_copy_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 256);
    let ids = dirty_pages(&p, 2);
    gate.arm();
    std::thread::scope(|s| {
        let _open = OpenOnDrop(&gate);
        let flush = s.spawn(|| p.flush_all());
        gate.wait_for_write();
        for &id in &ids {
            assert_state(&p, id, IN_FLIGHT, 0, "its copy is being written");
            p.lock(id).expect("lock");
            p.free(id).expect("free");
        }
        assert_eq!(p.file().allocate_run(2), ids[0], "the run is reused");
        let forget = s.spawn(|| p.forget_run(ids[0], 2));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            !forget.is_finished(),
            "forget_run returned while an older copy was in flight"
        );
        gate.open();
        forget.join().expect("forget thread").expect("forget_run");
        flush.join().expect("flush thread").expect("flush");
    });
    write_run_directly(&p, ids[0], 2, 4000);
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            first_word_on_disk(&p, id),
            4000 + i as u64,
            "the new run landed last"
        );
        assert_eq!(read_first_word(&p, id), 4000 + i as u64);
    }
}

/// While an eviction's write-back is stalled, other threads' hits and their misses whose
/// victims are clean go on without any write: nothing they do waits for the stalled I/O.
#[test]
fn hits_and_clean_misses_go_on_while_an_eviction_write_back_is_stalled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 34);
    let ids = dirty_pages(&p, 100);
    p.flush_all()
        .expect("flush: every page clean and in the file");
    // The one dirty page: the last allocated, resident.
    let dirty = ids[99];
    p.lock(dirty).expect("lock");
    write_pattern(&p, dirty, 7777);
    p.unlock(dirty, true);
    gate.arm();
    std::thread::scope(|s| {
        let _open = OpenOnDrop(&gate);
        // Loads old pages until the clock picks the dirty page, whose write stops at the gate.
        let evictor = s.spawn(|| {
            for &id in ids.iter().take(90).cycle().take(1000) {
                read_first_word(&p, id);
                if gate.state.lock().waiting != 0 {
                    return;
                }
            }
        });
        gate.wait_for_write();
        assert_state(&p, dirty, LOCKED | DIRTY, EVICTED, "the stalled victim");
        // Held until the write ends: the victim, and the page whose load is making room.
        let held = locked_pages(&p, &ids);
        assert_eq!(held.len(), 2, "the victim and the evictor's page: {held:?}");
        let before = p.stats();
        // Down the pages and up again: the second pass begins with the pages the first loaded
        // last, which it finds resident (a hit without a load).
        let free = |i: &usize| !held.contains(&ids[*i]);
        let order = (0..ids.len())
            .rev()
            .chain(0..ids.len())
            .filter(free)
            .collect();
        let (p, ids) = (&p, &ids);
        let why = "hits or clean misses waited for the stalled write-back";
        read_within_10s(s, p, ids, order, why);
        let after = p.stats();
        let misses = after.misses - before.misses;
        assert!(misses >= 60, "{before:?} {after:?}");
        // Every read counts a hit, a load's read too, once its page is loaded.
        assert!(
            after.hits - before.hits >= misses + 20,
            "{before:?} {after:?}"
        );
        assert_eq!(
            after.writebacks, before.writebacks,
            "every victim was clean"
        );
        assert_state(p, dirty, LOCKED, EVICTED, "its write is still stalled");
        gate.open();
        evictor.join().expect("evictor");
    });
    assert_eq!(first_word_on_disk(&p, dirty), 7777);
    assert_eq!(read_first_word(&p, dirty), 7777);
}
