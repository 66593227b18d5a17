//! `sylva bench --suite patree`: the PA-Tree mode's benchmark (issue 20, "Benchmark"; the
//! paper is `../shared/seeds/pa-tree.txt`, V), written up as `patree-suite.md` and
//! `patree-suite.json` in `--out`.
//!
//! Every configuration is one `sylva bench` measurement (`crate::bench::measure`) with the
//! arguments the report prints, so each row can be rerun alone. As the issue asks, the
//! records ([`RECORDS`] at `--scale 1`, 4M sparse 8-byte keys with 8-byte values) are loaded
//! once, by `db`, into a store every run copies (`--from`, `crate::from`), and each run warms
//! its pool with [`OPS`] uniform reads (`--warm`, the phase `warm`) before its measured
//! phases. (Until session 33 every engine of every set loaded its own store of 300K records,
//! a tenth of the issue's: the loads took most of the suite's time.) The pool is an eighth of
//! the tree, requests uniform (the paper's α = 0.3 is near uniform). The tree's size is
//! measured, not estimated ([`measure_tree`]): the loaded store's pages are counted. (An
//! estimate of 110 bytes a record, taken before `db`'s adaptive leaves, made the pool 43% of
//! the tree until session 32.)
//!
//! Sets (numbered as in the report; `--set N` runs only some):
//! 1. **Devices**: `fio` 4 KiB random reads (`io_uring`, `O_DIRECT`) at QD 1, 32 and 64 on a
//!    file the tree's size in the engines' directory, where `fio` is installed, run again before
//!    every later set of every repetition and at the end (the disk drifts, so the figures
//!    alternate with the engines); then `sylva calibrate`'s measurement and fit
//!    (`sylva::exec::calibrate`), whose model file the probe set's `probe=model:FILE` reads.
//! 2. **Table I** (the paper's Table I and Figs. 7–8): YCSB C, B (95/5), A on one store each
//!    (`--workload c,b,a`): `db` and the paper's synchronous baselines (`patree:mode=dedicated`,
//!    `mode=shared`) at 1, 32 and 128 threads; `patree` on one thread with 32, 64 and 128
//!    operations in flight (the 32 and 64, and as many as the baselines' most threads;
//!    a window above the default 64 task slots raises them, `crate::engines::fit_window`),
//!    `probe=every` and the default (`avg`).
//! 3. **Probe policies** (Figs. 10–11): C, inflight 64, `every`, `avg`, `fixed:0|50|100|200`
//!    and `model:FILE` (where set 1 calibrated).
//! 4. **Priority** (Fig. 12): `priority=holders|fifo` × uniform and zipfian requests, C.
//! 5. **Yielding at offered rates** (Fig. 13): a closed-loop `patree` run on C gives the maximum
//!    rate; then `yield=on` and `off` side by side at [`RATE_FRACTIONS`] of it (`--rate`, the
//!    open-loop client), each with the operations of [`OPS`] times its fraction, so every rate
//!    runs about as long.
//! 6. **Persistence and cache size** (Fig. 14): YCSB A, `persist=strong` and `weak` with the
//!    pool at [`CACHE_FRACTIONS`] of the tree (at least [`MIN_CACHE_BYTES`]); and
//!    `db:sync=always` at 32 threads with the pool an eighth, the target's baseline.
//!
//! The report's rows are medians over `--repeat`, whose repetitions are interleaved (see
//! [`run`]); set 1's `fio` is measured before every set of every repetition. The report
//! claims nothing: ratios against the targets need a quiet machine and are drawn in
//! `docs/results/patree.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ycsb::report::RunRecord;

use crate::bench::{measure, parse_args, BenchArgs};
use crate::suite_devices::{calibrate_table, fio_row, fio_table, FioRow};

/// Records loaded into every store at `--scale 1`.
pub(crate) const RECORDS: f64 = 4e6;
/// Operations of a run phase at `--scale 1`.
pub(crate) const OPS: f64 = 1.5e5;
/// The pool sizes of set 6, as fractions of the tree. The issue asks 0.1–100%; below 1% the
/// loads through a pool of a few hundred frames took more than half the suite's time (and at
/// `--scale 1`, 0.1% is under [`MIN_CACHE_BYTES`]), so the smallest is 1%.
pub(crate) const CACHE_FRACTIONS: &[f64] = &[0.01, 0.125, 1.0];
/// The smallest pool any run gets (64 pages): below it a tiny `--scale` would starve the pool.
pub(crate) const MIN_CACHE_BYTES: u64 = 64 * 4096;
/// Set 5's offered rates, as fractions of the closed-loop maximum (the 10–100%).
pub(crate) const RATE_FRACTIONS: &[f64] = &[0.1, 0.25, 0.5, 1.0];
/// Seconds of each fio point at `--scale 1`.
const FIO_SECONDS: f64 = 5.0;

/// One measurement: `sylva bench` arguments (before `--seed`, `--repeat`, `--dir`).
pub(crate) type Run = Vec<String>;

/// A set of the suite.
pub(crate) struct Set {
    pub title: &'static str,
    pub note: String,
    pub runs: Vec<Run>,
    /// Set 5: the first run is closed-loop and measures the maximum rate; every later run is
    /// run once per fraction of it, with `--rate` and its operations scaled by the fraction.
    pub rate_fractions: &'static [f64],
    /// Set 1: fio and calibration, no engine.
    pub devices: bool,
}

/// The sizes every set derives from, at a scale.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub records: u64,
    pub ops: u64,
    /// Bytes of the loaded tree (its pages).
    pub tree_bytes: u64,
    /// An eighth of the tree (at least [`MIN_CACHE_BYTES`]).
    pub pool: u64,
}

impl Sizes {
    /// The sizes at `scale`, for a tree of `tree_bytes` (see [`Sizes::records_at`]).
    pub fn at(scale: f64, tree_bytes: u64) -> Sizes {
        let records = Sizes::records_at(scale);
        let ops = ((OPS * scale).round() as u64).max(100);
        Sizes {
            records,
            ops,
            tree_bytes,
            pool: (tree_bytes / 8).max(MIN_CACHE_BYTES),
        }
    }

    /// The records every store holds at `scale`.
    pub fn records_at(scale: f64) -> u64 {
        ((RECORDS * scale).round() as u64).max(1000)
    }

    fn cache(&self, fraction: f64) -> u64 {
        ((self.tree_bytes as f64 * fraction) as u64).max(MIN_CACHE_BYTES)
    }
}

fn strings(args: &[&str]) -> Run {
    args.iter().map(|s| s.to_string()).collect()
}

/// The common arguments of a run: workload, distribution, keys, sizes.
fn common(sizes: &Sizes, workload: &str, dist: &str) -> Run {
    strings(&[
        "--workload",
        workload,
        "--dist",
        dist,
        "--keys",
        "sparse",
        "--value-size",
        "8",
        "--records",
        &sizes.records.to_string(),
        "--ops",
        &sizes.ops.to_string(),
        "--warm",
        &sizes.ops.to_string(),
    ])
}

fn with(mut run: Run, more: &[&str]) -> Run {
    run.extend(more.iter().map(|s| s.to_string()));
    run
}

/// `--engine NAME:OPTS,cache_bytes=N` for each spec.
fn engines(run: Run, specs: &[&str], cache: u64) -> Run {
    let mut run = run;
    for s in specs {
        run.push("--engine".into());
        run.push(if s.contains(':') {
            format!("{s},cache_bytes={cache}")
        } else {
            format!("{s}:cache_bytes={cache}")
        });
    }
    run
}

/// The suite's sets at sizes `z`; `model` is the calibrated model file, if there is one.
pub(crate) fn sets(z: Sizes, model: Option<&Path>) -> Vec<Set> {
    let pool = z.pool;
    let mut table = Vec::new();
    for threads in ["1", "32", "128"] {
        table.push(engines(
            with(common(&z, "c,b,a", "uniform"), &["--threads", threads]),
            &["db", "patree:mode=dedicated", "patree:mode=shared"],
            pool,
        ));
    }
    for inflight in ["32", "64", "128"] {
        table.push(engines(
            with(
                common(&z, "c,b,a", "uniform"),
                &["--threads", "1", "--inflight", inflight],
            ),
            &["patree:probe=every", "patree"],
            pool,
        ));
    }
    let mut probes: Vec<String> = [
        "every",
        "avg",
        "fixed:0",
        "fixed:50",
        "fixed:100",
        "fixed:200",
    ]
    .iter()
    .map(|p| format!("patree:probe={p}"))
    .collect();
    if let Some(m) = model {
        probes.push(format!("patree:probe=model:{}", m.display()));
    }
    let probe_specs: Vec<&str> = probes.iter().map(String::as_str).collect();
    let probe = vec![engines(
        with(common(&z, "c", "uniform"), &["--inflight", "64"]),
        &probe_specs,
        pool,
    )];
    let priority = ["uniform", "zipfian"]
        .iter()
        .map(|d| {
            engines(
                with(common(&z, "c", d), &["--inflight", "64"]),
                &["patree:priority=holders", "patree:priority=fifo"],
                pool,
            )
        })
        .collect();
    let yielding = vec![
        engines(
            with(common(&z, "c", "uniform"), &["--inflight", "64"]),
            &["patree:yield=on"],
            pool,
        ),
        engines(
            with(common(&z, "c", "uniform"), &["--inflight", "64"]),
            &["patree:yield=on", "patree:yield=off"],
            pool,
        ),
    ];
    let mut persist = Vec::new();
    for &f in CACHE_FRACTIONS {
        persist.push(engines(
            with(common(&z, "a", "uniform"), &["--inflight", "64"]),
            &["patree:persist=strong", "patree:persist=weak"],
            z.cache(f),
        ));
    }
    persist.push(engines(
        with(common(&z, "a", "uniform"), &["--threads", "32"]),
        &["db:sync=always"],
        pool,
    ));
    let sizes = format!(
        "{} records of 8-byte sparse keys and 8-byte values loaded once by `db` ({:.1} MB of tree pages), each run on a copy (`--from`) warmed by {} uniform reads (`--warm`), then {} operations a run phase, the pool {} bytes (an eighth) unless said",
        z.records,
        z.tree_bytes as f64 / 1e6,
        z.ops,
        z.ops,
        pool
    );
    vec![
        Set {
            title: "Devices: fio and the calibration",
            note: format!(
                "fio 4 KiB random reads, io_uring, O_DIRECT, on a {} MB file beside the engines' (again before every later set of every repetition, and at the end); `sylva calibrate` on a file that size, in the first repetition",
                z.tree_bytes.max(16 << 20) / 1_000_000
            ),
            runs: Vec::new(),
            rate_fractions: &[],
            devices: true,
        },
        Set {
            title: "Table I: `patree` beside `db` and the synchronous baselines, YCSB C, B, A",
            note: format!("{sizes}; each store loaded once and run C, then B, then A"),
            runs: table,
            rate_fractions: &[],
            devices: false,
        },
        Set {
            title: "Probe policies",
            note: format!("{sizes}; YCSB C, one thread, 64 in flight"),
            runs: probe,
            rate_fractions: &[],
            devices: false,
        },
        Set {
            title: "Priority: holders first, or admission order",
            note: format!("{sizes}; YCSB C, one thread, 64 in flight"),
            runs: priority,
            rate_fractions: &[],
            devices: false,
        },
        Set {
            title: "Yielding at offered rates",
            note: format!(
                "{sizes}; YCSB C, one thread, 64 in flight; the first run (closed loop) gives the maximum rate, then `yield=on` and `off` are offered {} of it, each with that fraction of the operations",
                RATE_FRACTIONS
                    .iter()
                    .map(|f| format!("{:.0}%", f * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            runs: yielding,
            rate_fractions: RATE_FRACTIONS,
            devices: false,
        },
        Set {
            title: "Persistence and cache size, YCSB A",
            note: format!(
                "{sizes}; `patree` one thread, 64 in flight, the pool {} of the tree; `db:sync=always` at 32 threads with an eighth",
                CACHE_FRACTIONS
                    .iter()
                    .map(|f| format!("{}%", f * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            runs: persist,
            rate_fractions: &[],
            devices: false,
        },
    ]
}

/// One configuration of a set (a command, or one offered rate of it) and what it measured in
/// every repetition.
struct Slot {
    /// The set's number and the configuration's within it, as the report numbers them.
    set: usize,
    number: usize,
    /// The command of the first repetition that ran it.
    argv: Option<Run>,
    records: Vec<RunRecord>,
    errors: Vec<String>,
}

/// Runs the suite with the common options of `base`.
///
/// The repetitions are interleaved: each runs every wanted set's commands once, in order, and
/// the next starts over, so drift in the disk over a run falls on every configuration alike
/// rather than on the commands that come last. (Until session 33 each command ran all its
/// repetitions before the next began: `patree` came after the synchronous baselines and alone
/// met a slowing disk.) The second, fourth, … repetitions list a command's engines in reverse
/// order (A B, B A).
pub(crate) fn run(base: &BenchArgs) -> Result<(), String> {
    if base.scale.is_nan() || base.scale <= 0.0 {
        return Err("--scale must be positive".into());
    }
    if base.recovery || base.memory_limit.is_some() || base.aged {
        return Err(
            "--recovery, --memory-limit and --aged are not available with --suite patree".into(),
        );
    }
    if !base.engines.is_empty() {
        return Err("--suite patree runs its own engines: leave out --engine".into());
    }
    if base.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    // How many sets there are does not depend on the sizes.
    let count = sets(Sizes::at(base.scale, 0), None).len();
    if let Some(bad) = base.sets.iter().find(|&&n| n == 0 || n > count) {
        return Err(format!("--set {bad}: the suite has sets 1 to {count}"));
    }
    let wanted = |n: usize| base.sets.is_empty() || base.sets.contains(&n);
    std::fs::create_dir_all(&base.out)
        .map_err(|e| format!("cannot create {}: {e}", base.out.display()))?;
    let scratch = match &base.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir(),
    };
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    // The store every run copies, loaded once by the tree's measurement; removed at the end.
    let source = scratch.join(format!("sylva-patree-load-{}", std::process::id()));
    let measured = measure_tree(base, &scratch, &source);
    if measured.is_err() {
        let _ = std::fs::remove_dir_all(&source);
    }
    let sizes = Sizes::at(base.scale, measured?);
    let fio_file = scratch.join(format!("sylva-patree-fio-{}.dat", std::process::id()));
    let fio_seconds = (FIO_SECONDS * base.scale).ceil().max(1.0) as u64;
    let fio_now = |label: String| (label, fio_row(&fio_file, sizes.tree_bytes, fio_seconds));

    let mut fio_rows: Vec<(String, FioRow)> = Vec::new();
    let mut calibration = String::new();
    // (set, why its rate runs were skipped in a repetition)
    let mut skipped: Vec<(usize, String)> = Vec::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut all: Vec<RunRecord> = Vec::new();
    let mut model: Option<PathBuf> = None;
    for rep in 0..base.repeat {
        for (index, set) in sets(sizes, model.as_deref()).into_iter().enumerate() {
            let number = index + 1;
            if !wanted(number) {
                continue;
            }
            if set.devices {
                fio_rows.push(fio_now(format!("repetition {}: first", rep + 1)));
                if rep == 0 {
                    model =
                        calibrate_table(&mut calibration, &scratch, &base.out, sizes, base.scale);
                }
                continue;
            }
            if wanted(1) {
                fio_rows.push(fio_now(format!(
                    "repetition {}: before set {number}",
                    rep + 1
                )));
            }
            // The probe set's runs name the model file, known only after set 1.
            let runs = sets(sizes, model.as_deref())
                .into_iter()
                .nth(index)
                .map(|s| s.runs)
                .unwrap_or_default();
            let mut max_rate = None;
            let mut k = 0;
            for (i, run) in runs.iter().enumerate() {
                let variants: Vec<Run> = if set.rate_fractions.is_empty() || i == 0 {
                    vec![run.clone()]
                } else if let Some(max) = max_rate {
                    set.rate_fractions
                        .iter()
                        .map(|f| at_rate(run, max * f, *f))
                        .collect()
                } else {
                    skipped.push((
                        number,
                        format!(
                            "repetition {}: no maximum rate measured, the rate runs were skipped",
                            rep + 1
                        ),
                    ));
                    k += set.rate_fractions.len();
                    continue;
                };
                for argv in variants {
                    k += 1;
                    let argv = if rep % 2 == 1 {
                        reverse_engines(&argv)
                    } else {
                        argv
                    };
                    let slot = match slots
                        .iter_mut()
                        .position(|s| (s.set, s.number) == (number, k))
                    {
                        Some(at) => &mut slots[at],
                        None => {
                            slots.push(Slot {
                                set: number,
                                number: k,
                                argv: None,
                                records: Vec::new(),
                                errors: Vec::new(),
                            });
                            slots.last_mut().expect("pushed")
                        }
                    };
                    match measure_once(base, &source, &argv, rep) {
                        Ok(records) => {
                            if !set.rate_fractions.is_empty() && i == 0 {
                                max_rate = records
                                    .iter()
                                    .filter(|r| r.phase == "run")
                                    .map(|r| r.ops_per_sec)
                                    .reduce(f64::max);
                            }
                            all.extend(records.iter().cloned().map(|mut r| {
                                r.workload = format!("set {number}.{k}: {}", r.workload);
                                r
                            }));
                            slot.records.extend(records);
                        }
                        Err(e) => slot.errors.push(format!("repetition {}: {e}", rep + 1)),
                    }
                    slot.argv.get_or_insert(argv);
                }
            }
        }
    }
    if wanted(1) {
        fio_rows.push(fio_now("at the end".into()));
    }
    let _ = std::fs::remove_file(&fio_file);
    let _ = std::fs::remove_dir_all(&source);

    let mut md = String::new();
    let command: Vec<String> = std::env::args().collect();
    let _ = writeln!(md, "# `patree` benchmark suite (issue 20)\n");
    let _ = writeln!(
        md,
        "Produced by `{}` (scale {}), seed {}, {} repetition(s), interleaved: each repetition ran every set's commands once, in order, with a command's engines reversed in even-numbered repetitions. Each command below is one repetition's (the first that ran it; the rate runs' `--rate` is that repetition's fraction of its own maximum). Rows are medians over the repetitions, the next column each repetition's ops/s in order; `other load` is the load average from outside this process during the phase (more than 0.5: a busy machine, whose figures are not evidence). Records in `patree-suite.json` are labelled `set S.C: workload`, S.C as numbered here.\n",
        command.join(" "),
        base.scale,
        base.seed,
        base.repeat
    );
    for (index, set) in sets(sizes, model.as_deref()).into_iter().enumerate() {
        let number = index + 1;
        if !wanted(number) {
            continue;
        }
        let _ = writeln!(md, "## {number}. {}\n\n{}.\n", set.title, set.note);
        if set.devices {
            md.push_str(&fio_table(&fio_rows, fio_seconds));
            md.push_str(&calibration);
        }
        for (_, why) in skipped.iter().filter(|(set, _)| *set == number) {
            let _ = writeln!(md, "- {why}.\n");
        }
        for slot in slots.iter().filter(|s| s.set == number) {
            if let Some(argv) = &slot.argv {
                let _ = writeln!(
                    md,
                    "**{number}.{}** `sylva bench {}`\n",
                    slot.number,
                    command_line(base, &source, argv)
                );
            }
            if !slot.records.is_empty() {
                md.push_str(&table(&slot.records));
            }
            for e in &slot.errors {
                let _ = writeln!(md, "No result, {e}.\n");
            }
        }
    }
    if !wanted(1) {
        let _ = writeln!(md, "No fio figures: set 1 was not run.\n");
    }
    crate::suite::write_report(base, "patree-suite", &md, &all)
}

/// `run` with its `--engine` values in reverse order.
fn reverse_engines(run: &Run) -> Run {
    let at: Vec<usize> = (0..run.len().saturating_sub(1))
        .filter(|&i| run[i] == "--engine")
        .map(|i| i + 1)
        .collect();
    let mut out = run.clone();
    for (&to, &from) in at.iter().zip(at.iter().rev()) {
        out[to] = run[from].clone();
    }
    out
}

/// The bytes of the tree a `db` builds from the suite's records (its pages, counted after the
/// load), which the pool sizes are fractions of: a `sylva bench` of `db` on the suite's
/// records (its seed, keys and values, and 100 operations of C) `--from source` in `scratch`,
/// which loads `source` (the store every later run copies) if it is not loaded yet.
fn measure_tree(base: &BenchArgs, scratch: &Path, source: &Path) -> Result<u64, String> {
    let records = Sizes::records_at(base.scale).to_string();
    let seed = base.seed.to_string();
    let dir = scratch.display().to_string();
    let argv = strings(&[
        "--workload",
        "c",
        "--keys",
        "sparse",
        "--value-size",
        "8",
        "--records",
        &records,
        "--ops",
        "100",
        "--engine",
        "db",
        "--seed",
        &seed,
        "--dir",
        &dir,
        "--from",
        &source.display().to_string(),
    ]);
    eprintln!(
        "suite patree: the tree's size: sylva bench {}",
        argv.join(" ")
    );
    let m = parse_args(&argv).and_then(|args| measure(&args))?;
    // The loading run's record if this loaded `source`, else the copy's.
    let pages = m
        .runs
        .iter()
        .find_map(|r| r.counters.get("tree_pages"))
        .ok_or("the tree's size: `db` reported no tree_pages")?;
    let page_size = sylva::DbOptions::default().page_size as u64;
    Ok(pages * page_size)
}

/// `run` offered `rate` operations a second, with its operations scaled by `fraction`.
pub(crate) fn at_rate(run: &Run, rate: f64, fraction: f64) -> Run {
    let mut argv = run.clone();
    if let Some(i) = argv.iter().position(|a| a == "--ops") {
        if let Some(ops) = argv.get(i + 1).and_then(|o| o.parse::<f64>().ok()) {
            argv[i + 1] = ((ops * fraction).round() as u64).max(100).to_string();
        }
    }
    argv.extend(["--rate".into(), format!("{:.0}", rate.max(1.0))]);
    argv
}

/// The arguments of one repetition of `run`: once, with the suite's seed and directory, on
/// copies of `source`.
fn command_line(base: &BenchArgs, source: &Path, run: &Run) -> String {
    once(base, source, run).join(" ")
}

fn once(base: &BenchArgs, source: &Path, run: &Run) -> Run {
    let mut argv = run.clone();
    argv.extend([
        "--seed".into(),
        base.seed.to_string(),
        "--repeat".into(),
        "1".into(),
        "--from".into(),
        source.display().to_string(),
    ]);
    if let Some(d) = &base.dir {
        argv.extend(["--dir".into(), d.display().to_string()]);
    }
    argv
}

/// Measures one configuration once, as repetition `rep` of the suite.
fn measure_once(
    base: &BenchArgs,
    source: &Path,
    run: &Run,
    rep: usize,
) -> Result<Vec<RunRecord>, String> {
    let argv = once(base, source, run);
    eprintln!(
        "suite patree, repetition {}: sylva bench {}",
        rep + 1,
        argv.join(" ")
    );
    let mut runs = parse_args(&argv).and_then(|args| measure(&args))?.runs;
    for r in &mut runs {
        r.repeat = rep;
    }
    Ok(runs)
}

/// The mean, over the phase of `records[at]`, of what the engine's nanosecond counter `name`
/// sums (`worker_read_ns`: page reads in flight; `worker_ready_ns`: tasks ready;
/// `worker_free_ns`: empty task slots; `worker_wait_ns`: the worker waiting, a share of its
/// time): the counter, summed since the engine opened, grew by this phase's share, taken out
/// of the phase before it (same engine and repetition), if any, and divided by the phase's
/// length (Little's law). Until session 32 the reads column was the mean per loop turn, which
/// turns in bursts after completions pulled far below this.
fn phase_mean(records: &[RunRecord], at: usize, name: &str) -> Option<f64> {
    let r = &records[at];
    let of = |p: &RunRecord| p.counters.get(name).map(|&ns| ns as f64);
    let ns = of(r)?;
    let ns0 = records[..at]
        .iter()
        .rev()
        .find(|p| p.engine == r.engine && p.repeat == r.repeat)
        .and_then(of)
        .unwrap_or(0.0);
    (r.seconds > 0.0).then(|| (ns - ns0).max(0.0) / (r.seconds * 1e9))
}

/// The median of the finite values of `v` (of an even count, the mean of the middle two).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// One row per engine and run phase: medians over the repetitions.
fn table(records: &[RunRecord]) -> String {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in records.iter().filter(|r| r.phase == "run") {
        let k = (r.engine.clone(), r.workload.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = String::from(
        "| engine | workload | threads | inflight | offered ops/s | ops/s | ops/s each repetition | p50 | p99 | CPU µs/op | cores | ctx switches/op | reads/op | device reads/s | outstanding reads | tasks ready | slots empty | worker waiting | other load |\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (engine, workload) in keys {
        let rows: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.phase == "run" && r.engine == engine && r.workload == workload)
            .map(|(i, _)| i)
            .collect();
        let m = |f: &dyn Fn(usize, &RunRecord) -> Option<f64>| {
            median(rows.iter().filter_map(|&i| f(i, &records[i])).collect())
        };
        let cpu = |r: &RunRecord| Some(r.cpu_user_seconds? + r.cpu_system_seconds?);
        let reads = |r: &RunRecord| r.io_read_bytes.map(|b| b as f64 / 4096.0);
        let first = &records[rows[0]];
        let fmt = |v: Option<f64>, digits: usize| {
            v.map_or("–".to_string(), |v| format!("{v:.digits$}"))
        };
        let mean = |name: &str| m(&|i, _| phase_mean(records, i, name));
        let each = rows
            .iter()
            .map(|&i| format!("{:.1}K", records[i].ops_per_sec / 1e3))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "| {engine} | {workload} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            first.threads,
            first.inflight,
            fmt(m(&|_, r| r.offered_rate), 0),
            fmt(m(&|_, r| Some(r.ops_per_sec)), 0),
            each,
            fmt(m(&|_, r| Some(r.latency_ns.p50 as f64 / 1e3)), 1) + " µs",
            fmt(m(&|_, r| Some(r.latency_ns.p99 as f64 / 1e3)), 1) + " µs",
            fmt(m(&|_, r| Some(cpu(r)? / r.ops.max(1) as f64 * 1e6)), 1),
            fmt(m(&|_, r| Some(cpu(r)? / r.seconds.max(1e-9))), 2),
            fmt(m(&|_, r| Some(r.context_switches? as f64 / r.ops.max(1) as f64)), 3),
            fmt(m(&|_, r| Some(reads(r)? / r.ops.max(1) as f64)), 2),
            fmt(m(&|_, r| Some(reads(r)? / r.seconds.max(1e-9))), 0),
            fmt(mean("worker_read_ns"), 1),
            fmt(mean("worker_ready_ns"), 1),
            fmt(mean("worker_free_ns"), 1),
            mean("worker_wait_ns").map_or("–".into(), |w| format!("{:.0}%", w * 100.0)),
            fmt(m(&|_, r| r.other_load), 1),
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg<'a>(run: &'a Run, name: &str) -> Option<&'a str> {
        let i = run.iter().position(|a| a == name)?;
        run.get(i + 1).map(String::as_str)
    }

    #[test]
    fn every_run_parses_and_names_the_configuration_it_is_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = dir.path().join("model.txt");
        let fitted = sylva::exec::sched::LatencyModel {
            beta: vec![[0.1, 0.1]; sylva::exec::sched::FEATURES],
        };
        std::fs::write(&model, fitted.to_text()).expect("model");
        let all = sets(Sizes::at(1.0, 33_000_000), Some(&model));
        let model_spec = format!("patree:probe=model:{}", model.display());
        let mut specs: Vec<String> = Vec::new();
        for set in &all {
            for run in &set.runs {
                let args = parse_args(run).unwrap_or_else(|e| panic!("{run:?}: {e}"));
                assert_eq!(args.records, 4_000_000, "{run:?}");
                assert_eq!(args.warm, args.ops, "{run:?}");
                assert_eq!(args.keys, "sparse");
                assert!(!args.engines.is_empty(), "{run:?}");
                for e in &args.engines {
                    if let Err(err) = crate::engines::EngineSpec::parse(e)
                        .and_then(|s| crate::engines::opener(&s))
                    {
                        panic!("{e}: {err}");
                    }
                    specs.push(format!("{e} --threads {}", args.threads));
                }
            }
        }
        let has = |needle: &str| specs.iter().any(|s| s.contains(needle));
        for needle in [
            "db:cache_bytes=4125000 --threads 1",
            "db:cache_bytes=4125000 --threads 128",
            "patree:mode=dedicated,cache_bytes=4125000 --threads 32",
            "patree:mode=shared,cache_bytes=4125000 --threads 128",
            "patree:probe=fixed:200",
            model_spec.as_str(),
            "patree:priority=fifo",
            "patree:yield=off",
            "patree:persist=strong,cache_bytes=33000000",
            "patree:persist=weak,cache_bytes=330000 ",
            "db:sync=always,cache_bytes=4125000 --threads 32",
        ] {
            assert!(has(needle), "no run of {needle}: {specs:#?}");
        }
        // Table I runs C, B and A on each store; priority runs both distributions.
        assert!(all[1]
            .runs
            .iter()
            .all(|r| arg(r, "--workload") == Some("c,b,a")));
        let dists: Vec<_> = all[3]
            .runs
            .iter()
            .filter_map(|r| arg(r, "--dist"))
            .collect();
        assert_eq!(dists, ["uniform", "zipfian"]);
        assert!(all[0].devices && all[0].runs.is_empty());
        assert!(!sets(Sizes::at(1.0, 33_000_000), None)
            .iter()
            .flat_map(|s| &s.runs)
            .any(|r| r.iter().any(|a| a.contains("model:"))));
    }

    #[test]
    fn rate_runs_are_offered_their_fraction_with_that_share_of_the_operations() {
        let set = &sets(Sizes::at(1.0, 33_000_000), None)[4];
        assert_eq!(set.rate_fractions, RATE_FRACTIONS);
        assert!(
            arg(&set.runs[0], "--rate").is_none(),
            "the first is closed-loop"
        );
        let run = at_rate(&set.runs[1], 12_345.4, 0.1);
        let args = parse_args(&run).expect("parses");
        assert_eq!(args.rate, Some(12_345.0));
        assert_eq!(args.ops, 15_000);
        assert_eq!(args.inflight, 64);
    }

    #[test]
    fn a_phase_gets_its_own_share_of_the_reads_time_in_flight() {
        let rec = |phase: &str, read_ns: u64, seconds: f64| RunRecord {
            engine: "patree".into(),
            phase: phase.into(),
            seconds,
            counters: [("worker_read_ns".to_string(), read_ns)]
                .into_iter()
                .collect(),
            ..RunRecord::default()
        };
        // Load: 2 s of reads in 1 s, two in flight; then 24 s more in 4 s, six.
        let records = [
            rec("load", 2_000_000_000, 1.0),
            rec("run", 26_000_000_000, 4.0),
        ];
        assert_eq!(phase_mean(&records, 0, "worker_read_ns"), Some(2.0));
        assert_eq!(phase_mean(&records, 1, "worker_read_ns"), Some(6.0));
        assert_eq!(phase_mean(&records, 1, "worker_ready_ns"), None);
    }

    #[test]
    fn a_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, f64::NAN, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::INFINITY]), None);
    }

    #[test]
    fn odd_repetitions_run_a_commands_engines_in_reverse_order() {
        let run = strings(&[
            "--engine",
            "a",
            "--threads",
            "1",
            "--engine",
            "b",
            "--engine",
            "c",
        ]);
        assert_eq!(
            reverse_engines(&run),
            strings(&[
                "--engine",
                "c",
                "--threads",
                "1",
                "--engine",
                "b",
                "--engine",
                "a"
            ])
        );
        let one = strings(&["--engine", "a", "--ops", "5"]);
        assert_eq!(reverse_engines(&one), one);
    }

    #[test]
    fn tiny_scales_keep_a_usable_pool() {
        let z = Sizes::at(1e-6, 100 << 10);
        assert_eq!(z.records, 1000);
        assert_eq!(z.pool, MIN_CACHE_BYTES);
        assert_eq!(z.cache(0.001), MIN_CACHE_BYTES);
        let z = Sizes::at(1.0, 9_498_624);
        assert_eq!(z.records, 4_000_000);
        assert_eq!(z.pool, 9_498_624 / 8);
    }

    #[test]
    fn the_tree_is_measured_by_a_db_load_of_the_suites_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = parse_args(&strings(&["--suite", "patree", "--scale", "0.01"])).expect("args");
        let source = dir.path().join("loaded");
        let bytes = measure_tree(&base, dir.path(), &source).expect("measured");
        // 40,000 records of 16 bytes: more than their bytes.
        assert!(bytes >= 40_000 * 16, "{bytes}");
        assert!(
            source.join("load.txt").exists(),
            "the runs' store is loaded"
        );
        // Measured again on the loaded store, which is not loaded again.
        let again = measure_tree(&base, dir.path(), &source).expect("measured again");
        assert_eq!(again, bytes);
        assert_eq!(
            Sizes::at(0.01, bytes).pool,
            (bytes / 8).max(MIN_CACHE_BYTES)
        );
    }
}
