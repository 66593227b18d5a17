use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fit::{fit, Sample};
use super::sched::{
    IoKind, LatencyModel, PriorityPolicy, ProbePolicy, Prober, ReadyQueue, FEATURES, SLICES,
    SLICE_NS,
};
use super::*;
use crate::io::{FileIo, MemIo};

const PAGE: usize = 4096;

/// A page whose bytes say which page it is.
fn page_of(n: u64) -> Vec<u8> {
    (0..PAGE).map(|i| (n as usize * 31 + i) as u8).collect()
}

/// Collects completions until `n` arrived (or a minute passed: a hang fails the test).
fn collect(backend: &mut dyn Backend, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let start = Instant::now();
    while out.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "completions stopped"
        );
        let want = n - out.len();
        backend
            .complete(want, Some(Duration::from_millis(100)), &mut out)
            .expect("complete");
    }
    out
}

/// Writes 64 pages, reads them back out of order, checks them; then a read past the end and a
/// linked write and sync.
fn round_trip(backend: &mut dyn Backend, io: Arc<dyn Io>) {
    let file = backend.register(io).expect("register");
    let pages: Vec<Vec<u8>> = (0..64).map(page_of).collect();
    for (n, p) in pages.iter().enumerate() {
        let request = Request::Write {
            file,
            buf: p.as_ptr(),
            len: PAGE as u32,
            offset: (n * PAGE) as u64,
            sync: n == 63,
        };
        // SAFETY: `pages` outlives the completions collected below.
        unsafe { backend.submit(n as u64, request) }.expect("submit write");
    }
    let done = collect(backend, 64);
    for c in &done {
        assert_eq!(
            *c.result.as_ref().expect("write"),
            PAGE as u32,
            "tag {}",
            c.tag
        );
    }
    assert_eq!(backend.outstanding(), 0);
    let mut bufs = vec![vec![0u8; PAGE]; 64];
    for (i, b) in bufs.iter_mut().enumerate() {
        // Pages in a scattered order.
        let n = (i * 37) % 64;
        let request = Request::Read {
            file,
            buf: b.as_mut_ptr(),
            len: PAGE as u32,
            offset: (n * PAGE) as u64,
        };
        // SAFETY: `bufs` outlives the completions, and nothing else touches it meanwhile.
        unsafe { backend.submit(1000 + n as u64, request) }.expect("submit read");
    }
    let done = collect(backend, 64);
    let mut tags: Vec<u64> = done.iter().map(|c| c.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, (1000..1064).collect::<Vec<_>>());
    for (i, b) in bufs.iter().enumerate() {
        assert_eq!(b, &pages[(i * 37) % 64], "read {i}");
    }
    // Past the end: a short read, not an error.
    let mut tail = vec![0u8; PAGE];
    let request = Request::Read {
        file,
        buf: tail.as_mut_ptr(),
        len: PAGE as u32,
        offset: (64 * PAGE - 100) as u64,
    };
    // SAFETY: as above.
    unsafe { backend.submit(7, request) }.expect("submit");
    let done = collect(backend, 1);
    assert_eq!(*done[0].result.as_ref().expect("short read"), 100);
    assert_eq!(&tail[..100], &pages[63][PAGE - 100..]);
    // A sync alone.
    // SAFETY: a sync names no buffer.
    unsafe { backend.submit(8, Request::Sync { file }) }.expect("submit sync");
    let done = collect(backend, 1);
    assert_eq!(
        (done[0].tag, *done[0].result.as_ref().expect("sync")),
        (8, 0)
    );
}

#[test]
fn inline_round_trip() {
    let mut inline = Inline::new();
    round_trip(&mut inline, Arc::new(MemIo::new(Vec::new())));
}

/// A ring, or `None` with the reason printed (a kernel or sandbox that refuses io_uring).
fn ring() -> Option<Uring> {
    match Uring::new(64) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            None
        }
    }
}

#[test]
fn uring_round_trip() {
    let Some(mut ring) = ring() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let io = FileIo::open(&dir.path().join("f"), true).expect("open");
    round_trip(&mut ring, Arc::new(io));
    assert!(ring.enters() > 0);
}

#[test]
fn uring_refuses_a_file_without_a_descriptor() {
    let Some(mut ring) = ring() else { return };
    let err = ring
        .register(Arc::new(MemIo::new(Vec::new())))
        .expect_err("MemIo has no descriptor");
    assert!(err.to_string().contains("backend=inline"), "{err}");
}

#[test]
fn uring_write_errors_name_the_file_and_cancel_the_linked_sync() {
    let Some(mut ring) = ring() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("read-only");
    std::fs::write(&path, [0u8; PAGE]).expect("create");
    // Opened read-only: every write fails (EBADF).
    let file = std::fs::File::open(&path).expect("open");
    let id = ring
        .register(Arc::new(FileIo::from_file(file, &path)))
        .expect("register");
    let page = page_of(1);
    for (tag, sync) in [(1u64, false), (2, true)] {
        let request = Request::Write {
            file: id,
            buf: page.as_ptr(),
            len: PAGE as u32,
            offset: 0,
            sync,
        };
        // SAFETY: `page` outlives the completions.
        unsafe { ring.submit(tag, request) }.expect("submit");
    }
    let done = collect(&mut ring, 2);
    assert_eq!(done.len(), 2, "a linked pair completes once");
    for c in &done {
        let err = c.result.as_ref().expect_err("write to a read-only file");
        assert!(
            err.to_string().contains("read-only"),
            "tag {}: {err}",
            c.tag
        );
    }
    assert_eq!(ring.outstanding(), 0);
}

#[test]
fn tags_above_the_limit_are_refused() {
    let mut inline = Inline::new();
    let file = inline
        .register(Arc::new(MemIo::new(Vec::new())))
        .expect("register");
    // SAFETY: a sync names no buffer.
    let err = unsafe { inline.submit(MAX_TAG + 1, Request::Sync { file }) };
    assert!(err.is_err());
}

/// A wait with nothing to complete ends at a wake from another thread, or at its timeout.
fn wakes(backend: &mut dyn Backend) {
    let mut out = Vec::new();
    let start = Instant::now();
    backend
        .complete(1, Some(Duration::from_millis(50)), &mut out)
        .expect("timed wait");
    assert!(
        start.elapsed() >= Duration::from_millis(40),
        "returned before its timeout"
    );
    let waker = backend.waker();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        waker.wake();
    });
    let start = Instant::now();
    backend
        .complete(1, Some(Duration::from_secs(30)), &mut out)
        .expect("wait");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the wake did not end the wait"
    );
    t.join().expect("waker thread");
    assert!(out.is_empty());
    // A wake with nobody waiting makes the next wait return at once.
    backend.waker().wake();
    let start = Instant::now();
    backend
        .complete(1, Some(Duration::from_secs(30)), &mut out)
        .expect("wait");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn inline_wakes() {
    wakes(&mut Inline::new());
}

#[test]
fn uring_wakes() {
    let Some(mut ring) = ring() else { return };
    wakes(&mut ring);
}

#[test]
fn backends_parse_and_open() {
    assert_eq!(BackendKind::parse("auto").expect("auto"), BackendKind::Auto);
    let err = BackendKind::parse("spdk").expect_err("unknown");
    assert!(err.to_string().contains("auto, uring, inline"), "{err}");
    let b = open_backend(BackendKind::Inline, 8).expect("inline");
    assert_eq!(b.outstanding(), 0);
    open_backend(BackendKind::Auto, 8).expect("auto always opens");
}

#[test]
fn holders_run_first_then_older_operations() {
    let mut q = ReadyQueue::default();
    let p = PriorityPolicy::Holders;
    q.push(p.key(false, 1), 10);
    q.push(p.key(true, 5), 50);
    q.push(p.key(false, 0), 0);
    q.push(p.key(true, 3), 30);
    let order: Vec<u32> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(order, [30, 50, 0, 10]);
    let f = PriorityPolicy::Fifo;
    q.push(f.key(false, 1), 10);
    q.push(f.key(true, 5), 50);
    q.push(f.key(false, 0), 0);
    let order: Vec<u32> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(order, [0, 10, 50]);
    assert!(PriorityPolicy::parse("lifo").is_err());
}

const US: u64 = 1000;

#[test]
fn every_and_fixed_probe_on_a_fake_clock() {
    let mut every = Prober::new(ProbePolicy::Every);
    assert!(
        !every.should_probe(0),
        "nothing outstanding: nothing to probe"
    );
    every.submitted(10 * US, IoKind::Read);
    assert!(every.should_probe(10 * US));
    every.completed(10 * US, 90 * US, IoKind::Read);
    assert_eq!(every.outstanding(), 0);

    let mut fixed = Prober::new(ProbePolicy::Fixed(Duration::from_micros(50)));
    fixed.submitted(1000 * US, IoKind::Write);
    fixed.probed(1000 * US);
    assert!(!fixed.should_probe(1040 * US));
    assert!(fixed.should_probe(1050 * US));
}

#[test]
fn avg_probes_when_the_oldest_io_reaches_the_mean_latency() {
    let mut p = Prober::new(ProbePolicy::Avg);
    // Ten reads of 100 µs each teach it the mean.
    for i in 0..10 {
        let t = 10_000 * US + i * 200 * US;
        p.submitted(t, IoKind::Read);
        p.completed(t, t + 100 * US, IoKind::Read);
    }
    assert_eq!(p.mean_latency(), Some(100 * US));
    let t = 20_000 * US;
    p.submitted(t, IoKind::Read);
    assert!(!p.should_probe(t + 20 * US));
    assert!(p.should_probe(t + 120 * US));
}

/// A model in which every read completes 4 slices (200 µs) after its submission and every write
/// 10 slices after: the weight of read slice `i` for `r0` is 1 from the fourth slice on.
fn step_model() -> LatencyModel {
    let mut beta = vec![[0.0, 0.0]; FEATURES];
    for (age, b) in beta.iter_mut().enumerate().take(SLICES) {
        if age >= 10 {
            b[0] = 1.0;
        }
    }
    for age in 0..SLICES {
        if age >= 4 {
            beta[SLICES + age][1] = 1.0;
        }
    }
    LatencyModel { beta }
}

#[test]
fn the_model_probes_by_its_estimate() {
    let mut p = Prober::new(ProbePolicy::Model(step_model()));
    let t = 5_000 * US;
    p.submitted(t, IoKind::Read);
    assert!(!p.should_probe(t), "a read just submitted is not done");
    assert!(!p.should_probe(t + SLICE_NS * 3));
    assert!(p.should_probe(t + SLICE_NS * 4), "four slices old: due");
    p.completed(t, t + SLICE_NS * 4, IoKind::Read);
    assert!(!p.should_probe(t + SLICE_NS * 5));
    // A write is due after ten slices; long after the window it still counts (oldest slice).
    let w = 9_000 * US;
    p.submitted(w, IoKind::Write);
    assert!(!p.should_probe(w + SLICE_NS * 9));
    assert!(p.should_probe(w + SLICE_NS * 10));
    assert!(p.should_probe(w + SLICE_NS * 500));
    assert_eq!(p.outstanding(), 1);
}

#[test]
fn models_round_trip_through_text_and_bad_files_name_the_line() {
    let m = step_model();
    let path = Path::new("model.txt");
    assert_eq!(LatencyModel::parse(&m.to_text(), path).expect("parse"), m);
    let text = m.to_text().replace("r3 0 0", "r3 zero 0");
    let err = LatencyModel::parse(&text, path).expect_err("bad number");
    assert!(err.to_string().contains("model.txt, line 24"), "{err}");
    let short: String = m
        .to_text()
        .lines()
        .take(30)
        .map(|l| format!("{l}\n"))
        .collect();
    let err = LatencyModel::parse(&short, path).expect_err("too few lines");
    assert!(err.to_string().contains("29 weight lines"), "{err}");
    let swapped = m.to_text().replace("w2 ", "w9 ");
    assert!(LatencyModel::parse(&swapped, path).is_err());
}

#[test]
fn the_fit_recovers_a_known_beta() {
    let truth = step_model();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let samples: Vec<Sample> = (0..2000)
        .map(|_| {
            let mut t = [0.0; FEATURES];
            for f in t.iter_mut() {
                *f = (rand() % 5) as f64;
            }
            let (w, r) = truth.estimate(&t);
            (t, [w, r])
        })
        .collect();
    let got = fit(&samples).expect("fit");
    for (j, (g, want)) in got.beta.iter().zip(&truth.beta).enumerate() {
        for k in 0..2 {
            assert!(
                (g[k] - want[k]).abs() < 1e-6,
                "beta[{j}][{k}] = {}, want {}",
                g[k],
                want[k]
            );
        }
    }
    assert!(fit(&[]).is_err());
}
