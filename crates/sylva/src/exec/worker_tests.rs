//! The worker loop over the buffer pool: tasks that read pages, run by one thread with many
//! in flight.

use std::time::Duration;

use super::sched::{PriorityPolicy, ProbePolicy};
use super::worker::{Step, Task, Worker, WorkerOptions, SUBMIT_BATCH};
use super::{Backend, Inline, Uring};
use crate::buffer::{BufferPool, PoolOptions, Resident};
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::PageFile;

/// A pool of `budget` pages over `pages` pages whose first word is `i * 7`: most evicted.
pub(super) fn pool(dir: &std::path::Path, pages: u64, budget: u64) -> (BufferPool, Vec<u64>) {
    let file = PageFile::create(&dir.join("pages"), 4096, true).expect("create");
    let options = PoolOptions {
        budget_bytes: budget * 4096,
        reserve_bytes: 1 << 32,
    };
    let p = BufferPool::new(file, None, options).expect("pool");
    let ids = (0..pages)
        .map(|i| {
            let id = p.allocate(PageKind::BTreeLeaf).expect("allocate");
            // SAFETY: (test) we hold the new page's exclusive lock.
            unsafe { std::ptr::write_unaligned(p.data(id).as_ptr().cast::<u64>(), i * 7) };
            p.unlock(id, true);
            id
        })
        .collect();
    p.flush_all().expect("flush");
    (p, ids)
}

/// Sums the first words of its pages, reading each optimistically; a page not in memory stops
/// the attempt (the sum so far is kept: each page is read once, and a restart rereads only the
/// page it stopped at).
pub(super) struct SumPages {
    pub(super) pages: Vec<u64>,
    pub(super) next: usize,
    pub(super) sum: u64,
}

impl Task for SumPages {
    type Ctx = BufferPool;
    type Output = u64;

    fn attempt(&mut self, pool: &BufferPool) -> Result<Step<u64>> {
        while let Some(&id) = self.pages.get(self.next) {
            let version = match pool.read_lock_resident(id)? {
                Resident::Version(v) => v,
                Resident::Evicted => return Ok(Step::Miss(id)),
                Resident::Busy | Resident::Freed => return Ok(Step::Restart),
            };
            // SAFETY: (test) an optimistic read of the pool's mapping, validated below.
            let word = unsafe { std::ptr::read_unaligned(pool.data(id).as_ptr().cast::<u64>()) };
            if !pool.validate(id, version) {
                return Ok(Step::Restart);
            }
            self.sum += word;
            self.next += 1;
        }
        Ok(Step::Done(self.sum))
    }
}

/// Runs 300 tasks and checks their sums; `overlap`: more than one read was in flight on
/// average (not with `Inline` probed every turn, whose reads complete when submitted).
fn run_tasks(
    backend: &mut dyn Backend,
    options: WorkerOptions,
    overlap: bool,
) -> super::worker::WorkerCounters {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 200, 16);
    // 300 tasks of 5 pages each, scattered; each page's word is its index times 7.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let tasks: Vec<Vec<usize>> = (0..300)
        .map(|_| {
            (0..5)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 200) as usize
                })
                .collect()
        })
        .collect();
    let source = tasks.iter().map(|idx| SumPages {
        pages: idx.iter().map(|&i| ids[i]).collect(),
        next: 0,
        sum: 0,
    });
    let mut want = Vec::new();
    let mut got = Vec::new();
    let mut worker = Worker::new(&p, Box::new(backend), options).expect("worker");
    worker
        .run_all(source, |task, result| {
            got.push((task.pages.clone(), result.expect("task")))
        })
        .expect("run");
    let c = worker.counters();
    for (pages, sum) in &got {
        let expected: u64 = pages
            .iter()
            .map(|id| ids.iter().position(|x| x == id).expect("page") as u64 * 7)
            .sum();
        want.push(expected);
        assert_eq!(*sum, expected, "task over {pages:?}");
    }
    assert_eq!(got.len(), 300);
    assert_eq!(c.finished, 300);
    assert!(c.misses > 0 && c.reads > 0, "{c:?}");
    assert!(c.reads <= c.misses, "{c:?}");
    assert!(
        !overlap || c.outstanding_sum > c.turns,
        "more than one read in flight on average: {c:?}"
    );
    c
}

pub(super) fn options() -> WorkerOptions {
    WorkerOptions {
        inflight: 32,
        probe: ProbePolicy::Every,
        priority: PriorityPolicy::Holders,
        yield_for: Some(Duration::from_micros(100)),
    }
}

#[test]
fn tasks_run_over_inline() {
    run_tasks(&mut Inline::new(), options(), false);
    // Probed rarely, the reads of many tasks are outstanding together even inline.
    let rarely = WorkerOptions {
        probe: ProbePolicy::Fixed(Duration::from_secs(1)),
        ..options()
    };
    run_tasks(&mut Inline::new(), rarely, true);
}

#[test]
fn tasks_run_over_io_uring_with_each_probe_policy() {
    for probe in [
        ProbePolicy::Every,
        ProbePolicy::Fixed(Duration::from_micros(20)),
        ProbePolicy::Avg,
    ] {
        match Uring::new(64) {
            Ok(mut ring) => {
                run_tasks(&mut ring, WorkerOptions { probe, ..options() }, true);
            }
            Err(e) => return eprintln!("skipped: io_uring unavailable here: {e}"),
        }
    }
    if let Ok(mut ring) = Uring::new(64) {
        let spin = WorkerOptions {
            yield_for: None,
            ..options()
        };
        run_tasks(&mut ring, spin, true);
    }
}

#[test]
fn the_reads_of_a_burst_go_out_together_over_io_uring() {
    let mut ring = match Uring::new(64) {
        Ok(ring) => ring,
        Err(e) => return eprintln!("skipped: io_uring unavailable here: {e}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 256, 64);
    // Probed after every attempt, and a wait lasts until a completion comes (not 100 µs), so
    // the enters until the first task finishes are the submissions and one wait.
    let every = WorkerOptions {
        probe: ProbePolicy::Every,
        yield_for: Some(Duration::from_secs(5)),
        ..options()
    };
    let mut worker = Worker::new(&p, Box::new(&mut ring), every).expect("worker");
    // 32 tasks, each on a page of its own that the pool evicted: all ready at once, all miss.
    for &id in &ids[..32] {
        let task = SumPages {
            pages: vec![id],
            next: 0,
            sum: 0,
        };
        assert!(worker.try_admit(task).is_ok(), "room for 32");
    }
    let mut sums = Vec::new();
    worker
        .run_until_finished(|_, r| sums.push(r.expect("task")))
        .expect("run");
    let first = worker.counters();
    // A probe after every attempt submitted the one read queued: 32 enters before the wait.
    // Now the misses go out in batches of `SUBMIT_BATCH` (4 enters and the wait), and a probe
    // enters besides only when completions may be waiting. How many tasks missed before the
    // first finished depends on the disk: completions that come during the burst put their
    // waiters, which hold a pinned page, ahead of the tasks not yet run.
    assert!(first.reads >= SUBMIT_BATCH as u64, "{first:?}");
    let batches = first.reads.div_ceil(SUBMIT_BATCH as u64);
    assert!(
        first.enters <= batches + first.probes + first.waits + 1,
        "{first:?}"
    );
    while worker.in_flight() > 0 {
        worker
            .run_until_finished(|_, r| sums.push(r.expect("task")))
            .expect("run");
    }
    sums.sort_unstable();
    assert_eq!(sums, (0..32).map(|i| i * 7).collect::<Vec<u64>>());
    let c = worker.counters();
    // Where the tasks' time went: reads in flight, queued behind each other (32 admitted at
    // once), and the worker waiting for completions; no slot was filled twice yet.
    assert!(c.read_ns > 0 && c.ready_ns > 0, "{c:?}");
    assert_eq!(c.wait_ns > 0, c.waits > 0, "{c:?}");
    assert_eq!(c.free_ns, 0, "{c:?}");
    // A slot emptied by a finish and filled again counts the time it stood empty.
    std::thread::sleep(Duration::from_millis(2));
    let again = SumPages {
        pages: vec![ids[0]],
        next: 0,
        sum: 0,
    };
    assert!(worker.try_admit(again).is_ok(), "room");
    assert!(
        worker.counters().free_ns >= 2_000_000,
        "{:?}",
        worker.counters()
    );
    while worker.in_flight() > 0 {
        worker
            .run_until_finished(|_, r| {
                r.expect("task");
            })
            .expect("run");
    }
}

#[test]
fn two_misses_on_one_page_cost_one_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 64, 8);
    // The last page is evicted (the pool holds 8): every task wants it.
    let page = ids[0];
    assert_eq!(
        p.read_lock_resident(page).expect("state"),
        Resident::Evicted,
        "page 0 was evicted by the later ones"
    );
    let mut inline = Inline::new();
    // Probed rarely: the four tasks all run (and miss) before the read is collected.
    let rarely = WorkerOptions {
        probe: ProbePolicy::Fixed(Duration::from_secs(1)),
        ..options()
    };
    let mut worker = Worker::new(&p, Box::new(&mut inline), rarely).expect("worker");
    let mut sums = Vec::new();
    let tasks = (0..4).map(|_| SumPages {
        pages: vec![page],
        next: 0,
        sum: 0,
    });
    worker
        .run_all(tasks, |_, r| sums.push(r.expect("task")))
        .expect("run");
    assert_eq!(sums, [0, 0, 0, 0]);
    let c = worker.counters();
    assert_eq!((c.misses, c.reads), (4, 1), "{c:?}");
}

#[test]
fn inflight_out_of_range_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = pool(dir.path(), 4, 8);
    let mut inline = Inline::new();
    for inflight in [0, 4097] {
        let options = WorkerOptions {
            inflight,
            ..options()
        };
        assert!(Worker::<SumPages>::new(&p, Box::new(&mut inline), options).is_err());
    }
}

/// Blocks on a future (the tests' stand-in for an async runtime).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => return out,
            std::task::Poll::Pending => std::thread::park(),
        }
    }
}

fn executor_serves_threads(backend: super::BackendKind) {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 200, 16);
    let (p, ids) = (Arc::new(p), Arc::new(ids));
    let ex = Arc::new(super::Executor::start(p, backend, options()).expect("start"));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (ex, ids) = (ex.clone(), ids.clone());
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let pick = |k: u64| ((t * 50 + i) * 13 + k * 71) % 200;
                    let task = SumPages {
                        pages: (0..3).map(|k| ids[pick(k) as usize]).collect(),
                        next: 0,
                        sum: 0,
                    };
                    let want: u64 = (0..3).map(|k| pick(k) * 7).sum();
                    // Half blocking, half as a future; now and then one dropped unawaited.
                    let op = ex.submit(task);
                    let got = if i % 2 == 0 {
                        op.wait().expect("task")
                    } else {
                        block_on(op).expect("task")
                    };
                    assert_eq!(got, want, "thread {t}, task {i}");
                    if i % 10 == 0 {
                        drop(ex.submit(SumPages {
                            pages: vec![ids[0]],
                            next: 0,
                            sum: 0,
                        }));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("submitter");
    }
    let ex = Arc::try_unwrap(ex).ok().expect("the only handle left");
    let c = ex.shutdown().expect("shutdown");
    assert_eq!(c.finished, 4 * 50 + 4 * 5, "{c:?}");
}

#[test]
fn an_executor_serves_many_threads_over_inline() {
    executor_serves_threads(super::BackendKind::Inline);
}

#[test]
fn an_executor_serves_many_threads_over_io_uring() {
    if Uring::new(8).is_err() {
        return eprintln!("skipped: io_uring unavailable here");
    }
    executor_serves_threads(super::BackendKind::Uring);
}

/// Adds one to the first word of each of its pages, under the page's exclusive lock (taken by
/// upgrading an optimistic read); a page not in memory, or held, stops the attempt (pages
/// already changed stay changed: `next` remembers them).
struct AddToPages {
    pages: Vec<u64>,
    next: usize,
}

impl Task for AddToPages {
    type Ctx = BufferPool;
    type Output = ();

    fn attempt(&mut self, pool: &BufferPool) -> Result<Step<()>> {
        while let Some(&id) = self.pages.get(self.next) {
            let version = match pool.read_lock_resident(id)? {
                Resident::Version(v) => v,
                Resident::Evicted | Resident::Busy => return Ok(Step::Miss(id)),
                Resident::Freed => return Ok(Step::Restart),
            };
            if !pool.try_upgrade(id, version) {
                return Ok(Step::Restart);
            }
            let p = pool.data(id).as_ptr().cast::<u64>();
            // SAFETY: (test) we hold the page's exclusive lock.
            unsafe { std::ptr::write_unaligned(p, std::ptr::read_unaligned(p) + 1) };
            pool.unlock(id, true);
            self.next += 1;
        }
        Ok(Step::Done(()))
    }
}

/// Writes on the worker dirty most pages of a pool a tenth of the data: making room hands the
/// dirty victims to the worker, which writes them through its backend (none is written back
/// synchronously), and every page read back later holds every increment.
fn deferred_write_backs(backend: &mut dyn Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, ids) = pool(dir.path(), 160, 16);
    let writebacks_before = p.stats().writebacks;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut adds = vec![0u64; ids.len()];
    let tasks: Vec<AddToPages> = (0..400)
        .map(|_| {
            let idx: Vec<usize> = (0..3)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % ids.len() as u64) as usize
                })
                .collect();
            for &i in &idx {
                adds[i] += 1;
            }
            AddToPages {
                pages: idx.iter().map(|&i| ids[i]).collect(),
                next: 0,
            }
        })
        .collect();
    let mut worker = Worker::new(&p, Box::new(&mut *backend), options()).expect("worker");
    let mut done = 0;
    worker
        .run_all(tasks, |_, r| {
            r.expect("task");
            done += 1;
        })
        .expect("run");
    assert_eq!(done, 400);
    let c = worker.counters();
    assert!(
        c.writebacks > 0,
        "dirty victims were written by the worker: {c:?}"
    );
    assert_eq!(
        worker.writes_in_flight(),
        0,
        "run waits for its write-backs"
    );
    assert_eq!(
        p.stats().writebacks - writebacks_before,
        c.writebacks,
        "every write-back went through the worker's backend: {c:?}"
    );
    drop(worker);
    // Read every page back, most of them from the file.
    let mut worker = Worker::new(&p, Box::new(&mut *backend), options()).expect("worker");
    let mut sums = vec![0u64; ids.len()];
    let tasks = ids.iter().map(|&id| SumPages {
        pages: vec![id],
        next: 0,
        sum: 0,
    });
    worker
        .run_all(tasks, |t, r| {
            let i = ids.iter().position(|&id| id == t.pages[0]).expect("page");
            sums[i] = r.expect("read");
        })
        .expect("read back");
    for (i, sum) in sums.iter().enumerate() {
        assert_eq!(*sum, i as u64 * 7 + adds[i], "page {i}");
    }
}

#[test]
fn dirty_victims_are_written_back_by_the_worker_inline() {
    deferred_write_backs(&mut Inline::new());
}

#[test]
fn dirty_victims_are_written_back_by_the_worker_over_io_uring() {
    match Uring::new(64) {
        Ok(mut ring) => deferred_write_backs(&mut ring),
        Err(e) => eprintln!("skipped: io_uring unavailable here: {e}"),
    }
}

/// `Inline` whose completions arrive some time after submission, as a device's would: 100 µs
/// and 900 µs in turn (a mean of 500, and half the reads late by it); counts the calls that
/// found nothing due.
struct Delayed {
    inner: Inline,
    submitted: u64,
    pending: std::collections::VecDeque<(std::time::Instant, super::Completion)>,
    empty_calls: u64,
}

impl Backend for Delayed {
    fn register(&mut self, io: std::sync::Arc<dyn crate::io::Io>) -> Result<super::FileId> {
        self.inner.register(io)
    }

    unsafe fn submit(&mut self, tag: u64, request: super::Request) -> Result<()> {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.submit(tag, request) }?;
        let mut out = Vec::new();
        self.inner.complete(0, None, &mut out)?;
        self.submitted += 1;
        let delay = if self.submitted.is_multiple_of(2) {
            100
        } else {
            900
        };
        let due = std::time::Instant::now() + Duration::from_micros(delay);
        self.pending.extend(out.into_iter().map(|c| (due, c)));
        Ok(())
    }

    fn complete(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        out: &mut Vec<super::Completion>,
    ) -> Result<usize> {
        let start = std::time::Instant::now();
        let mut n = 0;
        loop {
            let now = std::time::Instant::now();
            let mut i = 0;
            while i < self.pending.len() {
                if self.pending[i].0 <= now {
                    out.extend(self.pending.remove(i).map(|(_, c)| c));
                    n += 1;
                } else {
                    i += 1;
                }
            }
            if n >= min || self.pending.is_empty() {
                break;
            }
            match timeout {
                Some(t) if now >= start + t => break,
                _ => std::thread::sleep(Duration::from_micros(20)),
            }
        }
        if n == 0 {
            self.empty_calls += 1;
        }
        Ok(n)
    }

    fn outstanding(&self) -> usize {
        self.pending.len()
    }

    fn waker(&self) -> super::Waker {
        self.inner.waker()
    }

    fn enters(&self) -> u64 {
        0
    }
}

/// Yielding, a worker with nothing ready waits for the first completion instead of probing in
/// a loop: reads late by the mean latency cost a few calls that find nothing, where a spinning
/// worker, or one probing each turn while a read is overdue, makes many (one system call each
/// on the ring).
#[test]
fn a_yielding_worker_waits_instead_of_probing_in_a_loop() {
    let empty_calls = |yield_for| {
        let mut backend = Delayed {
            inner: Inline::new(),
            submitted: 0,
            pending: Default::default(),
            empty_calls: 0,
        };
        // One task at a time, so that nothing else is ready while a read is out.
        let options = WorkerOptions {
            inflight: 1,
            probe: ProbePolicy::Avg,
            yield_for,
            ..options()
        };
        let c = run_tasks(&mut backend, options, false);
        (backend.empty_calls, c.reads)
    };
    let (yielding, reads) = empty_calls(Some(Duration::from_micros(100)));
    let (spinning, _) = empty_calls(None);
    eprintln!("calls that found nothing: yielding {yielding}, spinning {spinning}; {reads} reads");
    // A wait ends at a completion or after 100 µs: a read of 900 µs costs at most nine.
    assert!(
        yielding <= 10 * reads,
        "a yielding worker called its backend {yielding} times for nothing over {reads} reads"
    );
    assert!(
        spinning > 10 * yielding,
        "spinning ({spinning} calls for nothing) should probe far more than yielding ({yielding})"
    );
}

/// A task that restarts until another thread has seen what the caller's own request wrote: in
/// small, a session's puts restarting while a checkpoint holds the write gate until the
/// session's log flush lands. Done(false) if a deadline passes first.
struct UntilSeen {
    seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    deadline: std::time::Instant,
}

impl Task for UntilSeen {
    type Output = bool;
    type Ctx = BufferPool;

    fn attempt(&mut self, _: &BufferPool) -> Result<Step<bool>> {
        if self.seen.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(Step::Done(true));
        }
        if std::time::Instant::now() > self.deadline {
            return Ok(Step::Done(false));
        }
        Ok(Step::Restart)
    }
}

#[test]
fn a_callers_request_goes_out_while_tasks_restart() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut ring = match Uring::new(64) {
        Ok(ring) => ring,
        Err(e) => return eprintln!("skipped: io_uring unavailable here: {e}"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, _) = pool(dir.path(), 16, 8);
    let path = dir.path().join("flush");
    std::fs::write(&path, [0u8; 4096]).expect("create");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let avg = WorkerOptions {
        probe: ProbePolicy::Avg,
        ..options()
    };
    let mut worker = Worker::new(&p, Box::new(&mut ring), avg).expect("worker");
    let id = worker
        .register(Arc::new(crate::io::FileIo::from_file(file, &path)))
        .expect("register");
    let bytes = vec![7u8; 4096];
    let request = super::Request::Write {
        file: id,
        buf: bytes.as_ptr(),
        len: 4096,
        offset: 0,
        sync: false,
    };
    // SAFETY: `bytes` outlives the request: the loop below runs until its completion is taken.
    unsafe { worker.submit_other(super::worker::OTHER_TAG | 1, request) }.expect("submit");
    let seen = Arc::new(AtomicBool::new(false));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let task = UntilSeen {
        seen: seen.clone(),
        deadline,
    };
    assert!(worker.try_admit(task).is_ok());
    let mut results = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            while std::time::Instant::now() < deadline && !seen.load(Ordering::Acquire) {
                if std::fs::read(&path).expect("read")[0] == 7 {
                    seen.store(true, Ordering::Release);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        while worker.in_flight() > 0 || worker.others_in_flight() > 0 {
            worker
                .run_until_finished(|_, r| results.push(r.expect("task")))
                .expect("run");
        }
    });
    // Before session 34 the write stayed queued for the next batch of reads, none came while
    // the task restarted, and the task gave up at the deadline (a session and a checkpoint
    // waited for each other so in `patree_crash`).
    assert_eq!(results, [true]);
    assert_eq!(worker.take_others().len(), 1);
}
