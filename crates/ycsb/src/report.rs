//! Reports: one [`RunRecord`] per engine, phase and repetition; a summary table with medians,
//! min–max and each engine's ratio to the first; and the JSON file of `DESIGN.md`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::runner::PhaseResult;

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// 99.99th percentile.
    pub p9999: u64,
    /// Maximum.
    pub max: u64,
}

/// Quantiles sampled for [`RunRecord::latency_cdf_ns`]: dense in the body, then the tail.
pub const CDF_QUANTILES: [f64; 24] = [
    0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99,
    0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1.0,
];

/// One measured phase of one engine in one repetition. Field names are part of the JSON schema
/// in `DESIGN.md`: they may be added to, never renamed.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct RunRecord {
    /// The engine spec as given on the command line.
    pub engine: String,
    /// The workload letter, or `trace`.
    pub workload: String,
    /// `load` or `run`.
    pub phase: String,
    /// Threads.
    pub threads: usize,
    /// Repetition index (0-based).
    pub repeat: usize,
    /// Operations.
    pub ops: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Latency percentiles.
    pub latency_ns: Latency,
    /// Points `[quantile, nanoseconds]` of the latency distribution, for CDF charts.
    pub latency_cdf_ns: Vec<(f64, u64)>,
    /// Growth of the process's resident memory since before the engine was opened, per live
    /// record (`null` when RSS cannot be read).
    pub bytes_per_record: Option<f64>,
    /// The engine's own count of bytes used, per live record, where it reports one.
    pub engine_bytes_per_record: Option<f64>,
    /// Live records at the end of the phase, as the engine reports.
    pub records: u64,
    /// Wrapping sum of hashes of every value found and record scanned.
    pub checksum: u64,
    /// Point reads (and deletes) that found their key.
    pub found: u64,
    /// Point reads (and deletes) that did not.
    pub missing: u64,
    /// Records visited by scans and maps.
    pub scanned: u64,
    /// The engine's own counters after the phase (cumulative since the engine was opened; for
    /// `db`: cache hits and misses, page writes, log bytes, checkpoints).
    pub counters: std::collections::BTreeMap<String, u64>,
    /// `sylva bench --memory-limit`: the limit the engine ran under (page cache included), or
    /// `null` when unbounded.
    pub memory_limit: Option<u64>,
    /// Under `--memory-limit`: the most memory charged to the engine's cgroup since it was opened
    /// (engine memory and page cache of its files), at the end of the phase.
    pub memory_peak: Option<u64>,
    /// Under `--memory-limit`: anonymous memory charged to the engine's cgroup at the end of the
    /// phase (the engine's own allocations: caches, tables, buffers), from `memory.stat`.
    pub memory_anon: Option<u64>,
    /// Under `--memory-limit`: the kernel's page cache charged to the engine's cgroup at the end
    /// of the phase (its files' pages, its log's included).
    pub memory_page_cache: Option<u64>,
    /// Seconds of the engine's [`finish_deferred`](sylva::KvStore::finish_deferred) call after the
    /// phase (sync, then checkpoint, memtable flush or compaction wait): the work the phase put
    /// off. `null` where it was not run (the last phase of a `--recovery` run, killed instead).
    #[serde(default)]
    pub finish_seconds: Option<f64>,
    /// Throughput with that tail charged: `ops / (seconds + finish_seconds)`.
    #[serde(default)]
    pub ops_per_sec_with_finish: Option<f64>,
    /// Bytes the process read from storage during the phase (`/proc/self/io` `read_bytes`).
    #[serde(default)]
    pub io_read_bytes: Option<u64>,
    /// Bytes the process wrote to storage during the phase (`/proc/self/io` `write_bytes`).
    #[serde(default)]
    pub io_write_bytes: Option<u64>,
    /// Bytes read from storage during the finishing call.
    #[serde(default)]
    pub finish_io_read_bytes: Option<u64>,
    /// Bytes written to storage during the finishing call.
    #[serde(default)]
    pub finish_io_write_bytes: Option<u64>,
    /// Size of the engine's files after the phase and its finishing call (every file under its
    /// directory; `null` for engines without files).
    #[serde(default)]
    pub file_bytes: Option<u64>,
    /// `--recovery`: seconds to reopen the engine's directory after its process was killed with
    /// SIGKILL at the end of this (its last) phase.
    #[serde(default)]
    pub recovery_seconds: Option<f64>,
    /// `--recovery`: live records the reopened engine reports.
    #[serde(default)]
    pub recovered_records: Option<u64>,
    /// User CPU seconds of the whole process during the phase.
    #[serde(default)]
    pub cpu_user_seconds: Option<f64>,
    /// System CPU seconds of the whole process during the phase.
    #[serde(default)]
    pub cpu_system_seconds: Option<f64>,
    /// Operations per CPU-second of the whole process (user and system, background threads
    /// included): less sensitive than `ops_per_sec` to other work taking the CPUs away, since
    /// time spent waiting for a CPU is not counted (time waiting for I/O is not counted either).
    #[serde(default)]
    pub ops_per_cpu_second: Option<f64>,
    /// CPU seconds of the runner's worker threads (user and system).
    #[serde(default)]
    pub cpu_worker_seconds: Option<f64>,
    /// CPU seconds of every other thread of the process: the engine's background threads (and
    /// the harness's main thread, which waits for the workers).
    #[serde(default)]
    pub cpu_other_seconds: Option<f64>,
    /// CPU seconds per thread name of the threads alive at the end of the phase other than the
    /// workers (an engine's checkpoint, log-sync, flush and compaction threads), where at least
    /// a millisecond.
    #[serde(default)]
    pub cpu_threads: std::collections::BTreeMap<String, f64>,
    /// Context switches of the whole process during the phase (voluntary and involuntary,
    /// every thread's: `getrusage`).
    #[serde(default)]
    pub context_switches: Option<u64>,
    /// Operations each thread kept in flight (`--inflight`; 1 for engines without a pipeline).
    #[serde(default = "one")]
    pub inflight: usize,
    /// The operations per second offered over all threads (`--rate`, run phases only); `None`
    /// for a closed loop.
    #[serde(default)]
    pub offered_rate: Option<f64>,
    /// The machine's 1-, 5- and 15-minute load averages at the end of the phase.
    #[serde(default)]
    pub load_average: Option<[f64; 3]>,
    /// The 1-minute load average less the cores this process kept busy during the phase: how
    /// much other work competed for the CPUs (a lagging estimate: the load average is a
    /// one-minute moving average).
    #[serde(default)]
    pub other_load: Option<f64>,
}

impl RunRecord {
    /// A record of `result`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: &str,
        workload: &str,
        phase: &'static str,
        threads: usize,
        repeat: usize,
        result: &PhaseResult,
        rss_growth: Option<u64>,
        stats: &sylva::Stats,
    ) -> Self {
        let per = |bytes: u64| bytes as f64 / stats.records.max(1) as f64;
        let h = &result.latency;
        RunRecord {
            engine: engine.to_owned(),
            workload: workload.to_owned(),
            phase: phase.to_owned(),
            threads,
            repeat,
            ops: result.ops,
            seconds: result.elapsed.as_secs_f64(),
            ops_per_sec: result.ops_per_sec(),
            latency_ns: Latency {
                p50: h.value_at_quantile(0.5),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                p9999: h.value_at_quantile(0.9999),
                max: h.max(),
            },
            latency_cdf_ns: CDF_QUANTILES
                .iter()
                .map(|&q| (q, h.value_at_quantile(q)))
                .collect(),
            bytes_per_record: rss_growth.map(per),
            engine_bytes_per_record: stats.bytes_used.map(per),
            records: stats.records,
            checksum: result.checksum,
            found: result.found,
            missing: result.missing,
            scanned: result.scanned,
            counters: stats
                .counters
                .iter()
                .map(|&(k, v)| (k.to_owned(), v))
                .collect(),
            memory_limit: None,
            memory_peak: None,
            memory_anon: None,
            memory_page_cache: None,
            finish_seconds: None,
            ops_per_sec_with_finish: None,
            io_read_bytes: None,
            io_write_bytes: None,
            finish_io_read_bytes: None,
            finish_io_write_bytes: None,
            file_bytes: None,
            recovery_seconds: None,
            recovered_records: None,
            cpu_user_seconds: None,
            cpu_system_seconds: None,
            ops_per_cpu_second: None,
            cpu_worker_seconds: None,
            cpu_other_seconds: None,
            cpu_threads: Default::default(),
            context_switches: None,
            inflight: 1,
            offered_rate: None,
            load_average: None,
            other_load: None,
        }
    }

    /// Records the finishing call after the phase: its time and I/O, and throughput with it.
    pub fn set_finish(&mut self, seconds: f64, io: Option<crate::process::IoCounters>) {
        self.finish_seconds = Some(seconds);
        self.ops_per_sec_with_finish = Some(self.ops as f64 / (self.seconds + seconds).max(1e-9));
        self.finish_io_read_bytes = io.map(|c| c.read_bytes);
        self.finish_io_write_bytes = io.map(|c| c.write_bytes);
    }

    /// Whether other work competed for the CPUs during the phase: the load average exceeded
    /// this process's own use by more than half a core.
    pub fn machine_busy(&self) -> bool {
        self.other_load.is_some_and(|l| l > BUSY_OTHER_LOAD)
    }
}

/// Load from outside the process above which a phase is flagged as run on a busy machine.
pub const BUSY_OTHER_LOAD: f64 = 0.5;

/// The JSON document: `{"runs": [...]}`.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// Every record.
    pub runs: &'a [RunRecord],
}

/// Reads a JSON report written by [`write_json`].
pub fn read_json(path: &std::path::Path) -> Result<Vec<RunRecord>, String> {
    #[derive(Deserialize)]
    struct Owned {
        runs: Vec<RunRecord>,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str::<Owned>(&text)
        .map(|o| o.runs)
        .map_err(|e| format!("{}: not a sylva bench report: {e}", path.display()))
}

/// Writes the JSON report.
pub fn write_json(path: &std::path::Path, runs: &[RunRecord]) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&Report { runs })?;
    std::fs::write(path, text + "\n")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt_ops(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}K", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2}s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1}µs", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

/// The median of the values present, formatted; `–` when none is.
fn optional(v: Vec<Option<f64>>, fmt: &dyn Fn(f64) -> String) -> String {
    let v: Vec<f64> = v.into_iter().flatten().collect();
    if v.is_empty() {
        "–".into()
    } else {
        fmt(median(v))
    }
}

/// A phase's bytes plus its finishing call's, where the phase's were measured.
fn with_finish(phase: Option<u64>, finish: Option<u64>) -> Option<f64> {
    phase.map(|p| (p + finish.unwrap_or(0)) as f64)
}

fn fmt_mb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e6)
}

/// A warning naming the phases that ran while other work competed for the CPUs, if any did.
pub fn busy_note(runs: &[RunRecord]) -> Option<String> {
    let busy: Vec<&RunRecord> = runs.iter().filter(|r| r.machine_busy()).collect();
    let worst = busy.iter().filter_map(|r| r.other_load).fold(0.0, f64::max);
    (!busy.is_empty()).then(|| {
        format!(
            "warning: the machine was busy during {} of {} phases (load average up to {worst:.1} \
             above what this process used, over {BUSY_OTHER_LOAD}): other work competed for the \
             CPUs, so these figures are noisier than usual (`other_load` in the JSON)\n",
            busy.len(),
            runs.len()
        )
    })
}

/// The summary table: per phase and workload (a `--workload` sequence has several run phases,
/// one per workload), per engine (in the order given), median throughput with min–max
/// over repetitions, the ratio of the median to the first engine's, median latency percentiles,
/// memory per record, the median time of the finishing call after the phase and the throughput
/// with it charged, the megabytes read from and written to storage (phase and finish), the size
/// of the engine's files, and the checksum (marked `*` when it differs from the first engine's:
/// identical operations should give identical answers). Under the tables: a warning when phases
/// ran on a busy machine, and the recovery times of `--recovery`.
pub fn summary_table(runs: &[RunRecord]) -> String {
    let mut out = String::new();
    let mut phases: Vec<(&str, &str)> = Vec::new();
    let mut engines: Vec<&str> = Vec::new();
    for r in runs {
        let key = (r.phase.as_str(), r.workload.as_str());
        if !phases.contains(&key) {
            phases.push(key);
        }
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    let header = [
        "engine",
        "ops/s (median)",
        "min–max",
        "ratio",
        "p50",
        "p99",
        "p99.9",
        "max",
        "B/rec RSS",
        "B/rec engine",
        "finish",
        "ops/s +finish",
        "MB read",
        "MB written",
        "MB files",
        "checksum",
    ];
    for (phase, workload) in phases {
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
        let mut first: Option<(f64, u64)> = None;
        let mut title = String::new();
        for engine in &engines {
            let rs: Vec<&RunRecord> = runs
                .iter()
                .filter(|r| r.phase == phase && r.workload == workload && r.engine == *engine)
                .collect();
            let Some(r0) = rs.first() else { continue };
            if title.is_empty() {
                title = format!(
                    "== {phase} phase · workload {} · {} threads · {} ops · {} repetition(s) ==",
                    r0.workload,
                    r0.threads,
                    r0.ops,
                    rs.len()
                );
            }
            let med = |f: &dyn Fn(&RunRecord) -> f64| median(rs.iter().map(|r| f(r)).collect());
            let tput = med(&|r| r.ops_per_sec);
            let lo = rs
                .iter()
                .map(|r| r.ops_per_sec)
                .fold(f64::INFINITY, f64::min);
            let hi = rs.iter().map(|r| r.ops_per_sec).fold(0.0, f64::max);
            let (base_tput, base_sum) = *first.get_or_insert((tput, r0.checksum));
            let consistent = rs.iter().all(|r| r.checksum == r0.checksum);
            let mark = if r0.checksum != base_sum || !consistent {
                "*"
            } else {
                ""
            };
            let bytes = |v: Vec<Option<f64>>| -> String {
                let v: Vec<f64> = v.into_iter().flatten().collect();
                if v.is_empty() {
                    "–".into()
                } else {
                    format!("{:.1}", median(v))
                }
            };
            rows.push(vec![
                engine.to_string(),
                fmt_ops(tput),
                format!("{}–{}", fmt_ops(lo), fmt_ops(hi)),
                format!("{:.2}×", tput / base_tput.max(1e-9)),
                fmt_ns(med(&|r| r.latency_ns.p50 as f64)),
                fmt_ns(med(&|r| r.latency_ns.p99 as f64)),
                fmt_ns(med(&|r| r.latency_ns.p999 as f64)),
                fmt_ns(med(&|r| r.latency_ns.max as f64)),
                bytes(rs.iter().map(|r| r.bytes_per_record).collect()),
                bytes(rs.iter().map(|r| r.engine_bytes_per_record).collect()),
                optional(rs.iter().map(|r| r.finish_seconds).collect(), &|s| {
                    fmt_ns(s * 1e9)
                }),
                optional(
                    rs.iter().map(|r| r.ops_per_sec_with_finish).collect(),
                    &fmt_ops,
                ),
                optional(
                    rs.iter()
                        .map(|r| with_finish(r.io_read_bytes, r.finish_io_read_bytes))
                        .collect(),
                    &fmt_mb,
                ),
                optional(
                    rs.iter()
                        .map(|r| with_finish(r.io_write_bytes, r.finish_io_write_bytes))
                        .collect(),
                    &fmt_mb,
                ),
                optional(
                    rs.iter().map(|r| r.file_bytes.map(|b| b as f64)).collect(),
                    &fmt_mb,
                ),
                format!("{:016x}{mark}", r0.checksum),
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        out.push_str(&title);
        out.push('\n');
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, s)| {
                    let pad = widths[c] - s.chars().count();
                    if c == 0 {
                        format!("{s}{}", " ".repeat(pad))
                    } else {
                        format!("{}{s}", " ".repeat(pad))
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out.push('\n');
    }
    if let Some(note) = busy_note(runs) {
        out.push_str(&note);
    }
    if runs.iter().any(|r| r.recovery_seconds.is_some()) {
        out.push_str(
            "recovery after kill -9 at the end of the last phase (reopening the directory):\n",
        );
        for r in runs.iter().filter(|r| r.recovery_seconds.is_some()) {
            let _ = writeln!(
                out,
                "  {} #{}: {} to reopen, {} records of {} before the kill",
                r.engine,
                r.repeat + 1,
                fmt_ns(r.recovery_seconds.unwrap_or(0.0) * 1e9),
                r.recovered_records
                    .map_or("?".to_string(), |n| n.to_string()),
                r.records
            );
        }
    }
    if runs.iter().any(|r| r.threads > 1) {
        out.push_str("(with several threads, operations racing on the same keys may give different checksums)\n");
    }
    out
}

/// The serde default of [`RunRecord::inflight`] (records written before the field).
fn one() -> usize {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(engine: &str, ops_per_sec: f64, checksum: u64) -> RunRecord {
        RunRecord {
            engine: engine.into(),
            workload: "c".into(),
            phase: "run".into(),
            threads: 1,
            repeat: 0,
            ops: 100,
            seconds: 100.0 / ops_per_sec,
            ops_per_sec,
            latency_ns: Latency {
                p50: 100,
                p99: 200,
                p999: 300,
                p9999: 350,
                max: 400,
            },
            latency_cdf_ns: vec![(0.5, 100), (1.0, 400)],
            bytes_per_record: Some(50.0),
            engine_bytes_per_record: None,
            records: 10,
            checksum,
            found: 100,
            missing: 0,
            scanned: 0,
            counters: Default::default(),
            ..Default::default()
        }
    }

    #[test]
    fn table_gives_medians_ratios_and_flags_differing_answers() {
        let runs = vec![
            record("memmap", 1000.0, 7),
            record("other", 3000.0, 7),
            record("memmap", 2000.0, 7),
            record("other", 5000.0, 9),
            record("memmap", 3000.0, 7),
            record("other", 4000.0, 7),
        ];
        let t = summary_table(&runs);
        let memmap = t
            .lines()
            .find(|l| l.starts_with("memmap"))
            .expect("memmap row");
        let other = t
            .lines()
            .find(|l| l.starts_with("other"))
            .expect("other row");
        assert!(
            memmap.contains("2.0K") && memmap.contains("1.0K–3.0K") && memmap.contains("1.00×"),
            "{memmap}"
        );
        assert!(other.contains("4.0K") && other.contains("2.00×"), "{other}");
        assert!(
            other.contains('*') && !memmap.contains('*'),
            "differing checksums are flagged: {t}"
        );
    }

    #[test]
    fn json_has_the_design_schema() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("out.json");
        write_json(&p, &[record("memmap", 1000.0, 7)]).expect("write");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
        let run = &v["runs"][0];
        for field in [
            "engine",
            "workload",
            "phase",
            "threads",
            "ops",
            "seconds",
            "ops_per_sec",
            "bytes_per_record",
            "checksum",
        ] {
            assert!(!run[field].is_null(), "missing {field}");
        }
        for p in ["p50", "p99", "p999", "max"] {
            assert!(run["latency_ns"][p].is_u64(), "missing latency_ns.{p}");
        }
    }
}
