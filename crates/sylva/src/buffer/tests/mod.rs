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

mod in_flight;

mod split_load;

/// `set_budget` (the NB-tree's leaf cache, whose roots share its memory budget): a lower
/// budget evicts at once, without waiting for a load to need room; a higher one lets the pool
/// hold more than the budget it was made with. Pages keep their contents through both.
#[test]
fn a_moved_budget_evicts_at_once_and_lets_the_pool_grow() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 pages of budget: 4 for the copy buffer, 60 for frames.
    let p = pool(dir.path(), 64, None);
    assert_eq!(p.stats().budget_pages, 60);
    let ids: Vec<u64> = (0..200u64)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            write_pattern(&p, id, i * 7);
            p.unlock(id, true);
            id
        })
        .collect();
    p.flush_all().expect("flush");
    assert!(p.stats().resident >= 50, "{:?}", p.stats());
    p.set_budget(20 * 4096).expect("shrink");
    let s = p.stats();
    assert_eq!(s.budget_pages, 16, "{s:?}");
    assert!(
        s.resident <= 16,
        "a lower budget left {} pages resident",
        s.resident
    );
    p.set_budget(300 * 4096).expect("grow");
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(read_first_word(&p, id), i as u64 * 7, "page {id}");
    }
    let s = p.stats();
    assert_eq!(s.budget_pages, 296, "{s:?}");
    assert_eq!(s.resident, 200, "every page fits the higher budget: {s:?}");
}
