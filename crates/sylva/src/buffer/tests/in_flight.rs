//! Pages in flight: write-backs held at a gate while readers, writers, evictions and
//! `forget_run` go on.

use super::*;

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

/// Dirties every other page of `ids` again (one-page runs for the next flush), each with
/// `seed ^ i`; returns the pages changed.
fn dirty_every_other(p: &BufferPool, ids: &[u64], seed: u64) -> Vec<u64> {
    let changed: Vec<u64> = ids.iter().copied().step_by(2).collect();
    for (i, &id) in changed.iter().enumerate() {
        let v = p.read_lock(id).expect("read_lock").expect("not freed");
        assert!(p.try_upgrade(id, v), "nobody else holds page {id}");
        write_pattern(p, id, seed + i as u64);
        p.unlock(id, true);
    }
    changed
}

/// Reopens the page file in `dir` and checks every page of `ids`: `seed + j` for the j-th of
/// `changed`, `100 + i` (as `dirty_pages` wrote it) for the others.
fn assert_reopened(dir: &std::path::Path, ids: &[u64], changed: &[u64], seed: u64) {
    let (file, _) = PageFile::open(&dir.join("pages"), false).expect("reopen");
    let p = pool_over(file, 64);
    for (i, &id) in ids.iter().enumerate() {
        let want = match changed.iter().position(|&c| c == id) {
            Some(j) => seed + j as u64,
            None => 100 + i as u64,
        };
        assert_eq!(read_first_word(&p, id), want, "page {id} after reopen");
    }
}

/// Several writes in flight (`flush`'s module docs, "Writes in flight"): a run of 300 pages
/// leaves in slices, then 150 scattered one-page runs; every page reaches the file once per
/// flush, none is left dirty or in flight, and the file holds the last contents.
#[test]
fn a_flush_with_writers_writes_every_page_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ids, changed) = {
        // 1,024 pages of budget: a 64-page copy buffer, 16 pages a writer.
        let p = pool(dir.path(), 1024, None);
        p.set_flush_writers(4);
        let ids = dirty_pages(&p, 300);
        p.flush_all().expect("flush");
        assert_eq!(p.stats().writebacks, 300);
        let changed = dirty_every_other(&p, &ids, 5000);
        p.flush_all().expect("flush of scattered pages");
        assert_eq!(p.stats().writebacks, 450, "each changed page once");
        for &id in &ids {
            assert_state(&p, id, 0, DIRTY | IN_FLIGHT, "written and out of flight");
        }
        p.flush_all().expect("a flush with nothing dirty");
        assert_eq!(p.stats().writebacks, 450);
        p.checkpoint(b"").expect("checkpoint");
        (ids, changed)
    };
    assert_reopened(dir.path(), &ids, &changed, 5000);
}

/// A write failing while others are in flight: the flush reports it once every write handed
/// out has ended, the failed run's page is dirty again, no page stays in flight, and the next
/// flush writes what is left.
#[test]
fn a_failed_write_among_writers_leaves_its_pages_dirty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let io = FileIo::open(&dir.path().join("pages"), true).expect("open");
    let (io, faults) = crate::io::FaultyIo::new(io);
    let file = PageFile::create_io(Box::new(io), 4096, false).expect("create");
    let (ids, changed) = {
        let p = pool_over(file, 1024);
        p.set_flush_writers(4);
        let ids = dirty_pages(&p, 40);
        p.flush_all().expect("flush");
        let changed = dirty_every_other(&p, &ids, 7000);
        faults.arm(crate::io::Fault::FailWrite);
        let err = p.flush_all().expect_err("a write fails");
        assert!(err.to_string().contains("injected fault"), "{err}");
        let mut dirty = 0;
        for &id in &ids {
            assert_state(&p, id, 0, IN_FLIGHT, "no page stays in flight");
            if p.state(id).expect("state").load() & DIRTY != 0 {
                dirty += 1;
            }
        }
        assert!(dirty >= 1, "the failed run's page is dirty again");
        assert_eq!(p.stats().writebacks, 40 + 20 - dirty);
        p.flush_all().expect("the next flush writes the rest");
        assert_eq!(p.stats().writebacks, 60);
        p.checkpoint(b"").expect("checkpoint");
        (ids, changed)
    };
    assert_reopened(dir.path(), &ids, &changed, 7000);
}

/// With writers, the flush goes on while one write is held: the other runs reach the file
/// before the held one ends (one writer would wait behind it).
#[test]
fn a_flush_with_writers_keeps_writing_past_a_slow_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, gate) = gated_pool(dir.path(), 1024);
    p.set_flush_writers(4);
    let ids = dirty_pages(&p, 40);
    p.flush_all().expect("flush");
    let changed = dirty_every_other(&p, &ids, 9000);
    while_flush_in_flight(&p, &gate, |bytes| {
        assert_eq!(bytes, 4096, "one-page runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.stats().writebacks < 40 + 19 {
            assert!(
                std::time::Instant::now() < deadline,
                "the other runs wait behind the held write ({} written)",
                p.stats().writebacks - 40
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    })
    .expect("flush");
    assert_eq!(p.stats().writebacks, 60);
    for (j, &id) in changed.iter().enumerate() {
        assert_eq!(first_word_on_disk(&p, id), 9000 + j as u64);
    }
}
