//! Writers' latency during an online backup (`Db::backup_to`, issue 23), against the same
//! writers without one, alternated; and the backup's speed against `cp` of the same files.
//!
//! ```text
//! cargo run --release -p sylva --example backup_latency -- DIR [RECORDS] [THREADS] [always|batch] [ROUNDS] [VALUE]
//! ```
//!
//! Loads RECORDS records (8-byte keys, VALUE-byte values, 56 unless given) into `DIR/db` in key
//! order, then per round: a window of THREADS writers overwriting random keys without a backup,
//! as long as the backup before took (at least 2 s), and a window with the same writers during
//! which `backup_to` copies the database to `DIR/copy`; then, with the writers idle, a
//! checkpoint (the one the backup held off), `backup_to` again and `cp` of the database's files
//! to `DIR/cp`, each made durable (`cp` reads through the page cache, so the source's cached
//! pages are dropped first: both copies read the disk). Prints per window the writes per
//! second, p50, p99, p99.9 and max latency.
//!
//! Environment: `CACHE=BYTES` (the pool's size), `CHECKPOINT=BYTES` (`checkpoint_bytes`),
//! `WARM=SECONDS` (writers before the first round, not counted), `WINDOW=SECONDS` (the first
//! window without a backup; 2 s unless given), `TICK=SECONDS` (writes per second of each such
//! interval, as a window goes), `SHARE=F` (the backup's `BackupOptions::device_share`),
//! `KEEP=1` (reuse `DIR/db` from an earlier run instead of loading, and keep it),
//! `ALTERNATE=SECONDS` (the backup, through `Db::backup_watched`, pauses for that long after
//! each such stretch of copying; the writers' speed in each stretch is printed against the
//! pauses beside it, each phase's first second left out, with the median of those ratios:
//! both sides then meet the same disk, whose speed drifts over minutes, and the same held-off
//! checkpoints).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sylva::{BackupOptions, Db, DbOptions, SyncMode, DEFAULT_DEVICE_SHARE};

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Latencies (ns) of the writes of one window, all threads.
struct Window {
    latencies: Vec<u64>,
    seconds: f64,
}

impl Window {
    fn print(&mut self, what: &str) {
        self.latencies.sort_unstable();
        let n = self.latencies.len();
        let at = |q: f64| self.latencies[((n as f64 * q) as usize).min(n - 1)] as f64 / 1e3;
        println!(
            "{what:<16} {:>9.0} writes/s  p50 {:>8.1} us  p99 {:>8.1} us  p99.9 {:>9.1} us  max {:>9.1} us  ({n} writes, {:.2} s)",
            n as f64 / self.seconds,
            at(0.5),
            at(0.99),
            at(0.999),
            self.latencies[n - 1] as f64 / 1e3,
            self.seconds
        );
    }
}

/// Runs `threads` writers until `during` returns (after at least `min`); `during` sees the
/// count of their writes so far.
fn window(
    db: &Db,
    value_len: usize,
    threads: u64,
    records: u64,
    seed: u64,
    min: Duration,
    during: impl FnOnce(&AtomicU64),
) -> Window {
    let stop = AtomicBool::new(false);
    let all = Mutex::new(Vec::new());
    let done = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        // `TICK=SECONDS`: the writes per second of each such interval, as the window goes.
        if let Some(tick) = std::env::var("TICK")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
        {
            let (stop, done) = (&stop, &done);
            s.spawn(move || {
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs_f64(tick));
                    let now = done.load(Ordering::Relaxed);
                    let at = started.elapsed().as_secs_f64();
                    println!("  {at:>7.1} s {:>9.0} writes/s", (now - last) as f64 / tick);
                    last = now;
                }
            });
        }
        for t in 0..threads {
            let (stop, all, done) = (&stop, &all, &done);
            s.spawn(move || {
                let mut mine = Vec::with_capacity(1 << 20);
                let mut n = 0u64;
                let value = vec![t as u8; value_len];
                while !stop.load(Ordering::Relaxed) {
                    let k = splitmix(seed ^ (t << 48) ^ n) % records;
                    let at = Instant::now();
                    db.put(&key(k), &value).expect("put");
                    mine.push(at.elapsed().as_nanos() as u64);
                    done.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                all.lock().expect("lock").extend(mine);
            });
        }
        during(&done);
        let left = min.saturating_sub(started.elapsed());
        std::thread::sleep(left);
        stop.store(true, Ordering::Relaxed);
    });
    let seconds = started.elapsed().as_secs_f64();
    Window {
        latencies: all.into_inner().expect("lock"),
        seconds,
    }
}

/// `ALTERNATE`: a backup's watcher that lets it copy for `phase`, then holds it paused for as
/// long, and so on, noting the writers' speed in each phase after its first [`SETTLE`]: the
/// writers with and without the copy in alternate stretches of a few seconds, so that a disk
/// whose speed drifts over minutes affects both alike.
struct Alternate<'a> {
    done: &'a AtomicU64,
    phase: Duration,
    /// When the present stretch of copying began, and the writes counted once it had settled.
    began: Instant,
    mark: Option<(Instant, u64)>,
    copying: Vec<f64>,
    paused: Vec<f64>,
}

/// The part of each phase not counted: the copy's pieces read ahead still land after a pause
/// begins, and the writers' queue drains after it ends.
const SETTLE: Duration = Duration::from_secs(1);

impl<'a> Alternate<'a> {
    fn new(done: &'a AtomicU64, phase: Duration) -> Self {
        Alternate {
            done,
            phase,
            began: Instant::now(),
            mark: None,
            copying: Vec::new(),
            paused: Vec::new(),
        }
    }

    fn writes_since(&self, (at, n): (Instant, u64)) -> f64 {
        (self.done.load(Ordering::Relaxed) - n) as f64 / at.elapsed().as_secs_f64()
    }

    fn now(&self) -> (Instant, u64) {
        (Instant::now(), self.done.load(Ordering::Relaxed))
    }

    /// After each piece of the copy.
    fn watch(&mut self) {
        let copied = self.began.elapsed();
        if self.mark.is_none() && copied >= SETTLE {
            self.mark = Some(self.now());
        }
        if copied < self.phase {
            return;
        }
        if let Some(mark) = self.mark {
            self.copying.push(self.writes_since(mark));
        }
        std::thread::sleep(SETTLE);
        let mark = self.now();
        std::thread::sleep(self.phase.saturating_sub(SETTLE));
        self.paused.push(self.writes_since(mark));
        self.began = Instant::now();
        self.mark = None;
    }

    /// Each stretch of copying against the pauses on either side of it, and their median.
    fn print(&self) {
        let mut ratios = Vec::new();
        for (i, &c) in self.copying.iter().enumerate() {
            let before = i.checked_sub(1).and_then(|j| self.paused.get(j));
            let around: Vec<f64> = before
                .into_iter()
                .chain(self.paused.get(i))
                .copied()
                .collect();
            if around.is_empty() {
                continue;
            }
            let without = around.iter().sum::<f64>() / around.len() as f64;
            println!(
                "  copying {c:>9.0} writes/s   paused around it {without:>9.0}   ratio {:.2}",
                c / without
            );
            ratios.push(c / without);
        }
        ratios.sort_by(f64::total_cmp);
        if let Some(median) = ratios.get(ratios.len() / 2) {
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            println!(
                "alternating: {} stretches, median ratio {median:.2} (means: copying {:.0}, paused {:.0} writes/s)",
                ratios.len(),
                mean(&self.copying),
                mean(&self.paused)
            );
        }
    }
}

/// Drops `path`'s pages from the OS page cache (they are durable: the database is idle).
fn drop_cache(path: &Path) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).expect("open");
    // SAFETY: a plain syscall on a descriptor we own; it reads no memory of ours.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let base =
        PathBuf::from(args.first().expect(
            "usage: backup_latency DIR [RECORDS] [THREADS] [always|batch] [ROUNDS] [VALUE]",
        ));
    let records: u64 = args
        .get(1)
        .map_or(2_000_000, |s| s.parse().expect("RECORDS"));
    let threads: u64 = args.get(2).map_or(2, |s| s.parse().expect("THREADS"));
    let sync = match args.get(3).map_or("batch", String::as_str) {
        "always" => SyncMode::Always,
        "batch" => DbOptions::default().sync,
        other => panic!("sync {other} is not always or batch"),
    };
    let rounds: u64 = args.get(4).map_or(2, |s| s.parse().expect("ROUNDS"));
    let value_len: usize = args.get(5).map_or(56, |s| s.parse().expect("VALUE"));
    let src = base.join("db");
    // `KEEP=1`: the database `DIR/db` of an earlier run is opened as it is (not loaded again,
    // and kept at the end), so variants can be compared on one database without its load.
    let keep = std::env::var("KEEP").is_ok_and(|v| v == "1") && src.join("data.sylva").exists();
    if !keep {
        let _ = std::fs::remove_dir_all(&base);
    }
    // `CACHE=BYTES`: the buffer pool's size (a pool smaller than the database keeps the
    // writers reading the disk); `WARM=SECONDS`: a window of writers before the first round,
    // not counted, so the rounds start from a pool in its steady state.
    let env_number = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.parse::<u64>().expect(name))
    };
    let defaults = DbOptions::default();
    let options = DbOptions {
        sync,
        cache_bytes: env_number("CACHE").unwrap_or(defaults.cache_bytes),
        // `CHECKPOINT=BYTES`: the log that calls for a checkpoint (none runs during a backup:
        // a high figure takes that difference out of the comparison).
        checkpoint_bytes: env_number("CHECKPOINT").unwrap_or(defaults.checkpoint_bytes),
        ..defaults
    };
    if !keep {
        let db = Db::open(
            &src,
            DbOptions {
                sync: SyncMode::Never,
                ..options
            },
        )
        .expect("open");
        let t = Instant::now();
        // In key order: a database of gigabytes loads in minutes, not hours, on a shared
        // machine; the writers then change random keys all over it.
        let value = vec![1u8; value_len];
        for i in 0..records {
            db.put(&key(i), &value).expect("load");
        }
        db.close().expect("close");
        println!(
            "loaded {records} records in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let db = Db::open(&src, options).expect("open");
    // `WINDOW=SECONDS`: the first window without a backup (later ones last as long as the
    // backup before them).
    let mut last = Duration::from_secs(env_number("WINDOW").unwrap_or(2));
    // `SHARE=F`: the backup's share of the device while the writers read (`BackupOptions`).
    let backup = BackupOptions {
        device_share: std::env::var("SHARE")
            .map_or(DEFAULT_DEVICE_SHARE, |v| v.parse().expect("SHARE")),
    };
    // `ALTERNATE=SECONDS`: the backup pauses for that long after each such stretch of copying.
    let alternate = env_number("ALTERNATE").map(Duration::from_secs);
    if let Some(warm) = env_number("WARM") {
        window(
            &db,
            value_len,
            threads,
            records,
            u64::MAX,
            Duration::from_secs(warm),
            |_| {},
        )
        .print("warming");
    }
    for round in 0..rounds {
        let mut base_w = window(&db, value_len, threads, records, round * 2, last, |_| {});
        base_w.print("without backup");
        let copy = base.join(format!("copy{round}"));
        let mut report = None;
        let mut with = window(
            &db,
            value_len,
            threads,
            records,
            round * 2 + 1,
            Duration::ZERO,
            |done| {
                report = Some(
                    match alternate {
                        Some(phase) => {
                            let mut alt = Alternate::new(done, phase);
                            let r = db.backup_watched(&copy, backup, &mut |_| alt.watch());
                            alt.print();
                            r
                        }
                        None => db.backup_with(&copy, backup),
                    }
                    .expect("backup"),
                );
            },
        );
        with.print("during backup");
        let report = report.expect("report");
        last = report.duration.max(Duration::from_secs(2));
        let bytes = report.page_bytes + report.recopied_bytes + report.log_bytes;
        println!(
            "backup: {:.1} MiB in {:.2} s = {:.1} MiB/s (writers held {:.1} ms at the log's end; {:.1} MiB of log; yielded {:.2} s)",
            bytes as f64 / 1048576.0,
            report.duration.as_secs_f64(),
            bytes as f64 / 1048576.0 / report.duration.as_secs_f64(),
            report.writers_held.as_secs_f64() * 1e3,
            report.log_bytes as f64 / 1048576.0,
            report.yielded.as_secs_f64(),
        );
        // The same backup with the writers idle, beside `cp` of the same files (the database
        // open and idle), made durable as the backup is. First the checkpoint the backup held
        // off, which the idle one would otherwise wait for.
        db.checkpoint().expect("checkpoint");
        let idle = base.join(format!("idle{round}"));
        let r = db.backup_to(&idle).expect("backup");
        let bytes = r.page_bytes + r.recopied_bytes + r.log_bytes;
        println!(
            "backup, writers idle: {:.1} MiB in {:.2} s = {:.1} MiB/s ({:.1} MiB of log)",
            bytes as f64 / 1048576.0,
            r.duration.as_secs_f64(),
            bytes as f64 / 1048576.0 / r.duration.as_secs_f64(),
            r.log_bytes as f64 / 1048576.0,
        );
        let _ = std::fs::remove_dir_all(&idle);
        let cp = base.join(format!("cp{round}"));
        std::fs::create_dir_all(&cp).expect("mkdir");
        for name in ["data.sylva", "wal.log", "wal.2.log"] {
            drop_cache(&src.join(name));
        }
        let t = Instant::now();
        let status = std::process::Command::new("cp")
            .arg(src.join("data.sylva"))
            .arg(src.join("wal.log"))
            .arg(src.join("wal.2.log"))
            .arg(&cp)
            .status()
            .expect("cp");
        assert!(status.success());
        let status = std::process::Command::new("sync")
            .arg("-f")
            .arg(cp.join("data.sylva"))
            .status()
            .expect("sync");
        assert!(status.success());
        let secs = t.elapsed().as_secs_f64();
        let cp_bytes = dir_bytes(&cp);
        println!(
            "cp + sync: {:.1} MiB in {:.2} s = {:.1} MiB/s",
            cp_bytes as f64 / 1048576.0,
            secs,
            cp_bytes as f64 / 1048576.0 / secs
        );
        let t = Instant::now();
        let check = Db::open(&copy, DbOptions::default()).expect("open the copy");
        println!(
            "the copy's first open (its recovery): {:.2} s",
            t.elapsed().as_secs_f64()
        );
        // Not `stats()`: it walks the whole tree.
        assert!(check.get(&key(0)).expect("get").is_some());
        check.close().expect("close the copy");
        let _ = std::fs::remove_dir_all(&copy);
        let _ = std::fs::remove_dir_all(&cp);
    }
    db.close().expect("close");
    if std::env::var("KEEP").is_err() {
        let _ = std::fs::remove_dir_all(&base);
    }
}
