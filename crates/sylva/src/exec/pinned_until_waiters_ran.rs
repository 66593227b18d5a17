//! Regression (issue 20, buffer part: "a loaded frame is pinned until its waiters ran").
//!
//! The bug: when a read completed, the worker made the page's waiters ready and went on running
//! ready tasks in priority order. Each of those that missed another page made room for it, and
//! the clock could evict the page just loaded before its waiters read it (a fresh page is
//! unmarked: two passes of the hand, which a full pool's eviction makes in one call): the
//! waiters missed again and the page was read again. Now a completed load is pinned for its
//! waiters (the clock passes over it) until each has run an attempt, and the waiters run first
//! (their priority key's top bit is clear: they hold a pinned frame).

use std::time::Duration;

use super::sched::ProbePolicy;
use super::worker::{Worker, WorkerOptions};
use super::worker_tests::{options, pool, SumPages};
use super::{Backend, Inline, Uring};
use crate::buffer::Resident;

/// 32 tasks of two pages each, 64 pages in all, on a pool of 16 frames, 32 in flight, probed
/// rarely: every task misses its first page before any read is collected, so 32 loads complete
/// together and their 32 waiters run in turn, each missing its second page and making room for
/// it. Each page must be read once.
fn each_page_is_read_once(backend: &mut dyn Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 200, 16);
    for &id in &ids[..64] {
        assert_eq!(
            p.read_lock_resident(id).expect("state"),
            Resident::Evicted,
            "the first pages were evicted by the later ones"
        );
    }
    let rarely = WorkerOptions {
        probe: ProbePolicy::Fixed(Duration::from_secs(1)),
        ..options()
    };
    let tasks = (0..32).map(|i| SumPages {
        pages: vec![ids[i], ids[32 + i]],
        next: 0,
        sum: 0,
    });
    let mut sums = Vec::new();
    let mut worker = Worker::new(&p, Box::new(backend), rarely).expect("worker");
    worker
        .run_all(tasks, |task, r| sums.push((task.pages, r.expect("task"))))
        .expect("run");
    let c = worker.counters();
    drop(worker);
    assert_eq!(sums.len(), 32);
    for (pages, sum) in &sums {
        let index = |id: &u64| ids.iter().position(|x| x == id).expect("page") as u64;
        assert_eq!(*sum, pages.iter().map(|id| index(id) * 7).sum::<u64>());
    }
    assert_eq!(
        (c.misses, c.reads),
        (64, 64),
        "a page evicted before its waiters ran was missed and read again: {c:?}"
    );
    assert_eq!(p.pinned_pages(), 0, "every pin was released");
}

#[test]
fn a_loaded_page_stays_until_its_waiters_ran_inline() {
    each_page_is_read_once(&mut Inline::new());
}

#[test]
fn a_loaded_page_stays_until_its_waiters_ran_over_io_uring() {
    let Ok(mut ring) = Uring::new(64) else {
        return eprintln!("skipped: the kernel refuses io_uring");
    };
    each_page_is_read_once(&mut ring);
}
