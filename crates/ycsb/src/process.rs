//! What the process and the machine did during a phase, from Linux's `/proc`: physical I/O,
//! CPU time per thread, the load average, and the size of an engine's files. Every reader returns
//! `None` (or an empty list) where `/proc` is missing or unreadable, so a report says "not
//! measured" rather than a wrong zero.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::report::RunRecord;
use crate::runner::PhaseResult;

/// The process's I/O counters (`/proc/self/io`), cumulative since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounters {
    /// Bytes the process caused to be read from storage (page-cache hits are not counted;
    /// O_DIRECT reads are).
    pub read_bytes: u64,
    /// Bytes the process caused to be written to storage, counted when a page is dirtied or
    /// written with O_DIRECT (a dirty page written again before write-back counts again).
    pub write_bytes: u64,
}

impl IoCounters {
    /// Reads `/proc/self/io`.
    pub fn now() -> Option<Self> {
        parse_io(&std::fs::read_to_string("/proc/self/io").ok()?)
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &IoCounters) -> IoCounters {
        IoCounters {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

fn parse_io(text: &str) -> Option<IoCounters> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(IoCounters {
        read_bytes: field("read_bytes")?,
        write_bytes: field("write_bytes")?,
    })
}

/// User and system CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTime {
    /// In user mode.
    pub user: Duration,
    /// In the kernel on the process's behalf.
    pub system: Duration,
}

impl CpuTime {
    /// User plus system.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// What was spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }

    /// The whole process's, threads that have exited included (`getrusage(RUSAGE_SELF)`,
    /// microsecond resolution).
    pub fn process() -> Option<CpuTime> {
        rusage(libc::RUSAGE_SELF)
    }

    /// The calling thread's (`getrusage(RUSAGE_THREAD)`).
    pub fn this_thread() -> Option<CpuTime> {
        rusage(libc::RUSAGE_THREAD)
    }
}

fn rusage(who: libc::c_int) -> Option<CpuTime> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes into it.
    let rc = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and it was zeroed before).
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some(CpuTime {
        user: time(usage.ru_utime),
        system: time(usage.ru_stime),
    })
}

/// Every live thread of the process: its id, its name (`comm`, at most 15 bytes) and its CPU time
/// (`/proc/self/task/*/stat`).
pub fn threads() -> Vec<(u32, String, CpuTime)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let (name, cpu) = parse_stat(&text)?;
        Some((tid, name, cpu))
    })
    .collect()
}

/// CPU time per thread name spent between two [`threads`] snapshots, by threads alive at the
/// second (a thread that started in between counts from zero; one that exited is missing, so the
/// sum can fall short of the process's). Names with less than `min` are left out.
pub fn thread_cpu_between(
    before: &[(u32, String, CpuTime)],
    after: &[(u32, String, CpuTime)],
    min: Duration,
) -> BTreeMap<String, f64> {
    let mut by_name: BTreeMap<String, Duration> = BTreeMap::new();
    for (tid, name, cpu) in after {
        let start = before
            .iter()
            .find(|(t, n, _)| t == tid && n == name)
            .map_or(CpuTime::default(), |(_, _, c)| *c);
        *by_name.entry(name.clone()).or_default() += cpu.since(&start).total();
    }
    by_name
        .into_iter()
        .filter(|(_, d)| *d >= min && !d.is_zero())
        .map(|(n, d)| (n, d.as_secs_f64()))
        .collect()
}

/// `(comm, utime + stime)` of a `/proc/.../stat` line. The name sits in parentheses and may
/// itself hold spaces and parentheses, so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<(String, CpuTime)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // Fields 14 and 15 of proc(5) (utime, stime); the first after the name is field 3.
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let per_sec = clock_ticks_per_second();
    let time = |t: u64| Duration::from_secs_f64(t as f64 / per_sec as f64);
    Some((
        name,
        CpuTime {
            user: time(ticks(11)?),
            system: time(ticks(12)?),
        },
    ))
}

fn clock_ticks_per_second() -> u64 {
    crate::memory::sysconf_or(libc::_SC_CLK_TCK, 100)
}

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`): runnable and uninterruptible
/// tasks of the whole machine, this process's threads included.
pub fn load_average() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Online CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Bytes the files under `dir` occupy (their lengths, recursively); `None` if it cannot be read.
pub fn dir_bytes(dir: &Path) -> Option<u64> {
    let mut total = 0u64;
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).ok()? {
            let entry = entry.ok()?;
            let meta = entry.metadata().ok()?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Some(total)
}

/// The process's I/O, CPU time and threads at one moment; two of them, taken around a phase,
/// give the phase's figures ([`ProcessSnapshot::record_since`]).
#[derive(Debug, Clone)]
pub struct ProcessSnapshot {
    at: Instant,
    io: Option<IoCounters>,
    switches: Option<u64>,
    cpu: Option<CpuTime>,
    threads: Vec<(u32, String, CpuTime)>,
}

impl ProcessSnapshot {
    /// Reads `/proc` now.
    pub fn take() -> Self {
        ProcessSnapshot {
            at: Instant::now(),
            io: IoCounters::now(),
            switches: context_switches(),
            cpu: CpuTime::process(),
            threads: threads(),
        }
    }

    /// Fills `record`'s I/O, CPU and load fields with what happened between `before` and this
    /// snapshot, around the phase that produced `result`.
    pub fn record_since(
        &self,
        before: &ProcessSnapshot,
        result: &PhaseResult,
        record: &mut RunRecord,
    ) {
        if let (Some(a), Some(b)) = (before.io, self.io) {
            let io = b.since(&a);
            record.io_read_bytes = Some(io.read_bytes);
            record.io_write_bytes = Some(io.write_bytes);
        }
        if let (Some(a), Some(b)) = (before.switches, self.switches) {
            record.context_switches = Some(b.saturating_sub(a));
        }
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        if let (Some(a), Some(b)) = (before.cpu, self.cpu) {
            let cpu = b.since(&a);
            record.cpu_user_seconds = Some(cpu.user.as_secs_f64());
            record.cpu_system_seconds = Some(cpu.system.as_secs_f64());
            record.cpu_worker_seconds = Some(result.worker_cpu.as_secs_f64());
            record.ops_per_cpu_second =
                Some(result.ops as f64 / cpu.total().as_secs_f64().max(1e-9));
            record.cpu_other_seconds =
                Some(cpu.total().saturating_sub(result.worker_cpu).as_secs_f64());
            if let Some(load) = load_average() {
                record.load_average = Some(load);
                record.other_load = Some(load[0] - cpu.total().as_secs_f64() / wall);
            }
        } else {
            record.load_average = load_average();
        }
        record.cpu_threads =
            thread_cpu_between(&before.threads, &self.threads, Duration::from_millis(1));
    }
}

/// Context switches of the whole process so far, voluntary and involuntary, every thread's
/// (live or ended) included: `getrusage(RUSAGE_SELF)`.
fn context_switches() -> Option<u64> {
    // SAFETY: `getrusage` fills the zeroed struct it is given and reads nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `usage` is a valid, writable `rusage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    Some(usage.ru_nvcsw as u64 + usage.ru_nivcsw as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_awkward_names_parse() {
        let ticks = clock_ticks_per_second() as f64;
        let line = "4242 (db log (sync) 1) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0";
        let (name, cpu) = parse_stat(line).expect("parses");
        assert_eq!(name, "db log (sync) 1");
        assert!((cpu.user.as_secs_f64() - 250.0 / ticks).abs() < 1e-9);
        assert!((cpu.system.as_secs_f64() - 50.0 / ticks).abs() < 1e-9);
        assert!(parse_stat("4242 (cut short) S 1 2").is_none());
        assert!(parse_stat("no parentheses").is_none());
    }

    #[test]
    fn io_and_loadavg_parse_and_refuse_garbage() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(
            parse_io(io),
            Some(IoCounters {
                read_bytes: 4096,
                write_bytes: 8192
            })
        );
        assert_eq!(parse_io("rchar: 10\n"), None);
        assert_eq!(
            parse_loadavg("0.50 1.25 2.00 3/400 1234\n"),
            Some([0.5, 1.25, 2.0])
        );
        assert_eq!(parse_loadavg("x y z"), None);
    }

    #[test]
    fn this_process_is_measured_where_proc_exists() {
        if !Path::new("/proc/self/stat").exists() {
            return;
        }
        let before = CpuTime::process().expect("process cpu");
        let mut x = 0u64;
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = CpuTime::process().expect("process cpu").since(&before);
        assert!(spent.total() >= Duration::from_millis(20), "{spent:?}");
        let named = threads();
        assert!(!named.is_empty());
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("a"), [0u8; 100]).expect("write");
        std::fs::write(dir.path().join("sub/b"), [0u8; 23]).expect("write");
        assert_eq!(dir_bytes(dir.path()), Some(123));
        assert_eq!(dir_bytes(&dir.path().join("missing")), None);
    }
}
