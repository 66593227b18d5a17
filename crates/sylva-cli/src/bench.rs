//! `sylva bench`: generate (or read) a workload once, then replay it on every engine named, in one
//! process, alternating engines across repetitions, and report side by side.

use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use ycsb::dist::Distribution;
use ycsb::keys::{KeyGen, KeySet};
use ycsb::memory::{release_free_memory, rss_bytes};
use ycsb::process::{dir_bytes, IoCounters, ProcessSnapshot};
use ycsb::report::{summary_table, write_json, RunRecord};
use ycsb::runner::{run_phase_with, Client};
use ycsb::trace::{ScanEndAs, TraceReader};
use ycsb::workload::{generate, GenerateParams, OpStream, Workload, WorkloadSpec};

use crate::bound::MemoryBound;
use crate::engines::{fit_window, opener, EngineSpec, Opener, DEFAULT_ENGINE};

/// Arguments of `sylva bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Engine to run, with options: NAME[:KEY=VALUE,...]. Repeat to compare engines side by side.
    #[arg(long = "engine", value_name = "SPEC")]
    pub(crate) engines: Vec<String>,
    /// Workload: a, b, c, d, e, f (YCSB core), x (long ordered scans), y (long range maps). A
    /// comma-separated list (`c,b,a,e`) loads each store once and runs the workloads one after
    /// another on it, each reported as its own run phase: for runs whose load is long (a
    /// database larger than its cache). Put a workload that inserts (d, e) last.
    #[arg(long, default_value = "c")]
    pub(crate) workload: String,
    /// Records loaded before the run phase.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) records: u64,
    /// Operations in the run phase.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) ops: u64,
    /// Threads in both phases.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Operations each thread keeps in flight (1..=4096), on engines that take several at once
    /// from one thread (`patree`); others run one at a time whatever this says. A thread
    /// submits gets, puts, deletes, scans and range maps without waiting, up to this many,
    /// completing the oldest before the next; latency runs from submission to completion.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) inflight: u64,
    /// Operations per second offered in the run phases, over all threads (an open-loop
    /// client: each thread issues its i-th operation no earlier than i / (RATE / threads)
    /// seconds after it starts, completing what it has in flight or sleeping meanwhile). The
    /// load phase runs as fast as it can. Default: a closed loop.
    #[arg(long, value_parser = positive_rate)]
    pub(crate) rate: Option<f64>,
    /// Request distribution: uniform, zipfian or latest (default: the workload's own, zipfian for
    /// all but d, which uses latest).
    #[arg(long)]
    pub(crate) dist: Option<String>,
    /// Key set: dense, sparse, urls, wiki or file:PATH.
    #[arg(long, default_value = "dense")]
    pub(crate) keys: String,
    /// Order of the load phase's inserts: `random` (a seeded shuffle, as YCSB scatters its
    /// inserts) or `key` (ascending key order, YCSB's `insertorder=ordered`: a bulk load, for
    /// stores far larger than memory, where a random-order load reads and writes the disk for
    /// nearly every insert of a B-tree). The run phase is the same either way.
    #[arg(long, default_value = "random", value_parser = ["random", "key"])]
    pub(crate) load_order: String,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    pub(crate) value_size: usize,
    /// Longest scan or range map (default: 100 for e, 10000 for x and y).
    #[arg(long)]
    pub(crate) max_scan: Option<u64>,
    /// Directory for durable engines' files (default: a temporary directory, removed afterwards).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Run each `db` or `patree` instance on a copy of the store loaded in DIR instead of
    /// loading its own (no load phase). A missing or empty DIR is loaded first, once, by
    /// `db` (reported as a load phase of its own); DIR keeps the arguments that generated its
    /// load in `load.txt`, and a command whose `--records`, `--keys`, `--value-size`,
    /// `--seed` or `--load-order` differ is refused. Each copy opens from a
    /// checkpoint with an empty pool: see `--warm`.
    #[arg(long, value_name = "DIR")]
    pub(crate) from: Option<PathBuf>,
    /// Before the first measured phase after the load, read OPS loaded keys chosen uniformly
    /// (YCSB C's operations with their own seed), reported as the phase `warm`: fills the
    /// caches of a store opened cold (`--from`). Default 0: no such phase.
    #[arg(long, value_name = "OPS", default_value_t = 0)]
    pub(crate) warm: u64,
    /// Repetitions; engines alternate A B A B and the table reports medians and min–max.
    #[arg(long, default_value_t = 1)]
    pub(crate) repeat: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Replay trace files instead of generating: the first is the load phase, the second the run phase.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Vec<PathBuf>,
    /// Write every measurement to this JSON file.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Run a predefined comparison suite instead of one workload: `papers` (the five seeds'
    /// comparison sets; writes a Markdown report and SVG charts to --out) or `patree` (the
    /// PA-Tree issue's benchmark: fio, calibration, `patree` beside `db` and the synchronous
    /// baselines; writes `patree-suite.md` and `patree-suite.json` to --out).
    #[arg(long)]
    pub(crate) suite: Option<String>,
    /// Where `--suite` writes its report and charts.
    #[arg(long, default_value = "docs/results")]
    pub(crate) out: PathBuf,
    /// Scales every size of `--suite` (records and operations), e.g. 0.01 for a quick check.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Runs only these sets of `--suite` (numbered from 1, as in its report; repeat the option
    /// for several). Default: every set.
    #[arg(long = "set", value_name = "N")]
    pub(crate) sets: Vec<usize>,
    /// Age each store before its run phase: after the load, replay `--ops` operations of YCSB A
    /// (half reads, half updates, zipfian, measured and reported as the phase `age`), then run the
    /// workload on the same store. Standard YCSB starts every run from a freshly loaded store
    /// (the default); an aged LSM store holds several versions of the updated keys, which its
    /// scans must skip. The workload's label gets ` aged`.
    #[arg(long)]
    pub(crate) aged: bool,
    /// Hold each engine to BYTES of memory, the kernel's page cache of its files included (a
    /// memory cgroup the process enters just before opening the engine and leaves after closing
    /// it; the generated workload stays outside). Makes a larger-than-memory run fair between
    /// engines with caches of their own and engines that read through the page cache. Linux
    /// cgroup v1, needs root. Each engine runs in a child process; one that exceeds the limit
    /// with memory the kernel cannot reclaim is killed and reported, and the run goes on.
    #[arg(long, value_name = "BYTES")]
    pub(crate) memory_limit: Option<u64>,
    /// After the last phase, before its deferred work is finished, kill each durable engine's
    /// process with SIGKILL and time reopening its directory (recovery). Each engine and
    /// repetition runs in a child process (this program), which is what gets killed; the
    /// reopen runs in this process. The JSON's `recovery_seconds` and `recovered_records`; the
    /// last phase then has no `finish_seconds`.
    #[arg(long)]
    pub(crate) recovery: bool,
    /// The arguments these were parsed from (after `bench`), handed on to the child processes
    /// that run bounded engines.
    #[arg(skip)]
    pub(crate) argv: Vec<String>,
}

struct Prepared {
    workload: Workload,
    label: String,
    /// The aging phase of `--aged` (empty without it); its key ids index `workload.arena`.
    age: OpStream,
    /// The further workloads of a `--workload` sequence, run in order after the first on the
    /// same store: each with its label and its own arena and run phase (its load is the first
    /// one's: the same records, from the same key generator).
    then: Vec<(String, Workload)>,
}

fn prepare(args: &BenchArgs) -> Result<Prepared, String> {
    let names: Vec<&str> = args.workload.split(',').map(str::trim).collect();
    if names.len() > 1 {
        return prepare_sequence(args, &names);
    }
    let spec = WorkloadSpec::named(&args.workload).map_err(|e| e.to_string())?;
    if !args.trace.is_empty() {
        if args.aged {
            return Err("--aged needs a generated workload, not --trace files".into());
        }
        if args.load_order != "random" {
            return Err(
                "--load-order needs a generated workload: a trace's load runs in its own order"
                    .into(),
            );
        }
        if args.trace.len() > 2 {
            return Err(
                "give at most two --trace files: the load phase, then the run phase".into(),
            );
        }
        let as_ = if spec.name == 'y' {
            ScanEndAs::Map
        } else {
            ScanEndAs::Ordered
        };
        let mut reader = TraceReader::new(as_);
        let load = reader
            .read_file(&args.trace[0])
            .map_err(|e| e.to_string())?;
        let run = match args.trace.get(1) {
            Some(p) => reader.read_file(p).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        return Ok(Prepared {
            workload: Workload {
                arena: reader.into_arena(),
                load,
                run,
            },
            label: "trace".into(),
            age: OpStream::new(),
            then: Vec::new(),
        });
    }
    let (params, keys) = generate_params(args, spec)?;
    let mut workload = generate(&params, &keys).map_err(|e| e.to_string())?;
    order_load(args, &mut workload);
    let (age, label) = if args.aged {
        (
            aging_ops(&params, &keys, &workload)?,
            format!("{} aged", args.workload),
        )
    } else {
        (OpStream::new(), args.workload.clone())
    };
    Ok(Prepared {
        workload,
        label,
        age,
        then: Vec::new(),
    })
}

/// Puts the load phase in key order under `--load-order key` (the generator shuffles it).
fn order_load(args: &BenchArgs, w: &mut Workload) {
    if args.load_order == "key" {
        let arena = &w.arena;
        w.load
            .sort_unstable_by(|a, b| arena.get(a.key).cmp(arena.get(b.key)));
    }
}

/// A `--workload` sequence (`c,b,a,e`): the first workload's load and run, then each further
/// one's run phase, generated with its own seed (the first keeps `--seed`, so its run is the one
/// it has alone). Each run is labelled with its place, `b (2/4 of c,b,a,e)`.
fn prepare_sequence(args: &BenchArgs, names: &[&str]) -> Result<Prepared, String> {
    if !args.trace.is_empty() || args.aged {
        return Err(
            "a --workload sequence needs generated workloads, without --trace or --aged".into(),
        );
    }
    let mut generated = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let spec = WorkloadSpec::named(name).map_err(|e| e.to_string())?;
        let (mut params, keys) = generate_params(args, spec)?;
        params.seed ^= (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut w = generate(&params, &keys).map_err(|e| e.to_string())?;
        if i > 0 {
            // Only the first load runs; the others would hold a record count of operations.
            w.load = OpStream::new();
        } else {
            order_load(args, &mut w);
        }
        let label = format!("{name} ({}/{} of {})", i + 1, names.len(), args.workload);
        generated.push((label, w));
    }
    let mut rest = generated.into_iter();
    let Some((label, workload)) = rest.next() else {
        return Err("--workload names no workload".into());
    };
    Ok(Prepared {
        workload,
        label,
        age: OpStream::new(),
        then: rest.collect(),
    })
}

/// The generator's parameters and key generator for `spec` under `args`.
fn generate_params(
    args: &BenchArgs,
    mut spec: WorkloadSpec,
) -> Result<(GenerateParams, KeyGen), String> {
    if args.records == 0 {
        return Err("--records must be at least 1".into());
    }
    if let Some(m) = args.max_scan {
        if m == 0 {
            return Err("--max-scan must be at least 1".into());
        }
        spec.max_scan = m;
    }
    let dist = match &args.dist {
        Some(d) => Distribution::parse(d).ok_or_else(|| {
            format!("unknown distribution `{d}`; valid: uniform, zipfian, latest")
        })?,
        None => spec.default_dist,
    };
    let keys = KeySet::parse(&args.keys)
        .map_err(|e| e.to_string())?
        .generator(args.seed)
        .map_err(|e| e.to_string())?;
    let params = GenerateParams {
        spec,
        dist,
        records: args.records,
        ops: args.ops,
        seed: args.seed,
    };
    Ok((params, keys))
}

/// The aging phase of `--aged`: the run phase of YCSB A (zipfian) over the same records, with its
/// own seed. A has no inserts, so its key ids are the loaded records', which are the same ids in
/// `workload.arena` (both arenas start with the records' keys from the same key generator).
fn aging_ops(
    params: &GenerateParams,
    keys: &KeyGen,
    workload: &Workload,
) -> Result<OpStream, String> {
    let age_params = GenerateParams {
        spec: WorkloadSpec::named("a").map_err(|e| e.to_string())?,
        dist: Distribution::Zipfian,
        records: params.records,
        ops: params.ops,
        seed: params.seed ^ 0xa9ed,
    };
    let aging = generate(&age_params, keys).map_err(|e| e.to_string())?;
    debug_assert!(aging
        .run
        .iter()
        .all(|op| aging.arena.get(op.key) == workload.arena.get(op.key)));
    Ok(aging.run)
}

/// The phase of `--warm`: uniform reads of loaded records (YCSB C's run phase with its own
/// seed). C has no inserts, so its key ids are the loaded records', the same ids in every
/// workload's arena (each starts with the records' keys from the same key generator).
fn warming_ops(args: &BenchArgs) -> Result<OpStream, String> {
    if args.warm == 0 {
        return Ok(OpStream::new());
    }
    if !args.trace.is_empty() {
        return Err("--warm needs a generated workload, not --trace files".into());
    }
    let spec = WorkloadSpec::named("c").map_err(|e| e.to_string())?;
    let (params, keys) = generate_params(args, spec)?;
    let params = GenerateParams {
        dist: Distribution::Uniform,
        ops: args.warm,
        seed: params.seed ^ 0x3a4b,
        ..params
    };
    Ok(generate(&params, &keys).map_err(|e| e.to_string())?.run)
}

fn progress_bar(len: usize, message: String) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    let style =
        ProgressStyle::with_template("{msg:>28} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    pb.set_style(style);
    pb.set_message(message);
    pb
}

/// Runs `sylva bench`: the measurements, then the table and the JSON file.
pub fn run(args: BenchArgs) -> Result<(), String> {
    let records = measure(&args)?;
    let child = crate::children::is_child();
    if !child {
        print!("{}", summary_table(&records.runs));
        for f in &records.failed {
            println!("{}: no result: {}", f.engine, f.reason);
        }
    }
    if let Some(path) = &args.json {
        write_json(path, &records.runs)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if !child {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Parses `sylva bench` arguments (without the program and subcommand names).
pub(crate) fn parse_args(args: &[String]) -> Result<BenchArgs, String> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: BenchArgs,
    }
    use clap::Parser;
    let argv = std::iter::once("bench".to_string()).chain(args.iter().cloned());
    Wrapper::try_parse_from(argv)
        .map(|w| BenchArgs {
            argv: args.to_vec(),
            ..w.args
        })
        .map_err(|e| e.to_string())
}

/// What [`measure`] returns.
pub(crate) struct Measured {
    /// One record per engine, phase and repetition.
    pub runs: Vec<RunRecord>,
    /// Engines that gave no result under `--memory-limit` (each in its own child process), and
    /// why; without a limit any failure ends the whole measurement with an error instead.
    pub failed: Vec<Failure>,
}

/// An engine that gave no result.
pub(crate) struct Failure {
    pub engine: String,
    pub reason: String,
}

/// The directory of engine number `index` (named `name`) in repetition `rep` under `base`.
pub(crate) fn instance_dir(base: &Path, index: usize, name: &str, rep: usize) -> PathBuf {
    base.join(format!("{index}-{name}-{rep}"))
}

/// Runs every engine of `args` on its workload.
pub(crate) fn measure(args: &BenchArgs) -> Result<Measured, String> {
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    let texts = if args.engines.is_empty() {
        vec![DEFAULT_ENGINE.to_owned()]
    } else {
        args.engines.clone()
    };
    let engines: Vec<(EngineSpec, Opener)> = texts
        .iter()
        .map(|t| {
            let spec = fit_window(EngineSpec::parse(t)?, args.inflight)?;
            let open = opener(&spec)?;
            Ok((spec, open))
        })
        .collect::<Result<_, String>>()?;

    let child = crate::children::ChildRole::from_env();
    if child.is_none() && (args.memory_limit.is_some() || args.recovery) {
        return crate::children::measure_in_children(args, &texts);
    }
    let (child_cgroup, kill_ready) = child.map(|c| (c.cgroup, c.kill_ready)).unwrap_or_default();

    let Prepared {
        workload,
        label,
        age,
        then,
    } = prepare(args)?;
    let warm = warming_ops(args)?;
    // The load is labelled with the whole sequence; each run with its own workload.
    let mut load_label = if then.is_empty() {
        label.clone()
    } else {
        args.workload.clone()
    };
    if args.load_order == "key" {
        load_label.push_str(", key order");
    }
    let (_temp_dir, base) = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            (None, d.clone())
        }
        None => {
            let t = tempfile::tempdir()
                .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };

    let mut records: Vec<RunRecord> = Vec::new();
    let source = match &args.from {
        Some(from) => {
            let specs: Vec<EngineSpec> = engines.iter().map(|(s, _)| s.clone()).collect();
            crate::from::check_args(args, &specs)?;
            let source = crate::from::prepare(args, from, &workload)?;
            records.extend(source.load.clone());
            Some(source)
        }
        None => None,
    };
    let no_load = OpStream::new();
    let load_ops = if source.is_some() {
        &no_load
    } else {
        &workload.load
    };
    for rep in 0..args.repeat {
        for (index, (spec, open)) in engines.iter().enumerate() {
            let dir = instance_dir(&base, index, &spec.name, rep);
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            if let Some(source) = &source {
                crate::from::copy(source, &dir)?;
            }
            release_free_memory();
            let bound = child_cgroup.as_deref().map(MemoryBound::join).transpose()?;
            let rss_before = rss_bytes();
            let mut target = open(&dir).map_err(|e| format!("{}: {e}", spec.text))?;
            let growth = || {
                rss_bytes()
                    .zip(rss_before)
                    .map(|(now, before)| now.saturating_sub(before))
            };

            // (phase, label, arena, operations, first value sequence number)
            let mut phases = vec![
                ("load", &load_label, &workload.arena, load_ops, 0u64),
                ("warm", &label, &workload.arena, &warm, 3u64 << 46),
                ("age", &label, &workload.arena, &age, 1u64 << 47),
                ("run", &label, &workload.arena, &workload.run, 1u64 << 48),
            ];
            for (i, (then_label, w)) in then.iter().enumerate() {
                let seq_base = (1u64 << 48) + ((i as u64 + 1) << 40);
                phases.push(("run", then_label, &w.arena, &w.run, seq_base));
            }
            let last = phases.iter().rposition(|p| !p.3.is_empty());
            for (i, (phase, phase_label, arena, ops, seq_base)) in phases.into_iter().enumerate() {
                if ops.is_empty() {
                    continue;
                }
                let pb = progress_bar(ops.len(), format!("{} {phase} #{}", spec.text, rep + 1));
                let before = ProcessSnapshot::take();
                let rate = args.rate.filter(|_| phase == "run");
                let client = Client {
                    inflight: args.inflight as usize,
                    rate: rate.map(|r| r / args.threads.max(1) as f64),
                };
                let result = run_phase_with(
                    &mut *target,
                    arena,
                    ops,
                    args.threads,
                    client,
                    args.value_size,
                    seq_base,
                    &|n| pb.inc(n),
                )
                .map_err(|e| format!("{} {phase}: {e}", spec.text))?;
                let after = ProcessSnapshot::take();
                pb.finish_and_clear();
                let stats = target.stats();
                let mut record = RunRecord::new(
                    &spec.text,
                    phase_label,
                    phase,
                    args.threads,
                    rep,
                    &result,
                    growth(),
                    &stats,
                );
                after.record_since(&before, &result, &mut record);
                if target.pipelined() {
                    record.inflight = args.inflight as usize;
                }
                record.offered_rate = rate;
                if record.machine_busy() {
                    eprintln!(
                        "warning: {} {phase} #{}: the machine was busy (load average {:.1}, {:.1} of it from outside this process)",
                        spec.text,
                        rep + 1,
                        record.load_average.map_or(0.0, |l| l[0]),
                        record.other_load.unwrap_or(0.0)
                    );
                }
                record.memory_limit = args.memory_limit;
                record.memory_peak = bound.as_ref().and_then(MemoryBound::peak);
                record.memory_anon = bound.as_ref().and_then(|b| b.stat("rss"));
                record.memory_page_cache = bound.as_ref().and_then(|b| b.stat("cache"));
                if Some(i) == last {
                    if let Some(ready) = &kill_ready {
                        // `--recovery`: the parent kills this process now, before the deferred
                        // work is done, and times reopening the directory.
                        records.push(record);
                        return crate::children::await_kill(args, &records, ready);
                    }
                }
                let io0 = IoCounters::now();
                let t0 = std::time::Instant::now();
                target.finish_deferred().map_err(|e| {
                    format!("{} finishing deferred work after {phase}: {e}", spec.text)
                })?;
                let finish = t0.elapsed().as_secs_f64();
                let io = IoCounters::now().zip(io0).map(|(b, a)| b.since(&a));
                record.set_finish(finish, io);
                record.file_bytes = dir_bytes(&dir).filter(|&b| b > 0);
                records.push(record);
            }
            drop(target);
            drop(bound);
            // Each instance's files go once it is measured (the temporary base goes at the end).
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(Measured {
        runs: records,
        failed: Vec::new(),
    })
}

/// Parses `--rate`: a positive, finite number of operations per second.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "'{s}' is not a positive number of operations per second"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(extra: &[&str]) -> Prepared {
        let mut argv: Vec<String> = ["--keys", "sparse", "--records", "500", "--ops", "300"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        argv.extend(extra.iter().map(|s| s.to_string()));
        prepare(&parse_args(&argv).expect("args")).expect("prepare")
    }

    /// `--load-order key` loads the same records in ascending key order and leaves the run
    /// phase as it is, alone and as the first workload of a sequence.
    #[test]
    fn a_key_order_load_holds_the_same_records_in_key_order_and_the_same_run() {
        for workload in ["a", "e,c"] {
            let random = prepared(&["--workload", workload]);
            let ordered = prepared(&["--workload", workload, "--load-order", "key"]);
            let keys = |p: &Prepared| -> Vec<Vec<u8>> {
                let w = &p.workload;
                w.load
                    .iter()
                    .map(|op| w.arena.get(op.key).to_vec())
                    .collect()
            };
            let (r, o) = (keys(&random), keys(&ordered));
            assert!(
                o.windows(2).all(|w| w[0] < w[1]),
                "{workload}: not ascending"
            );
            assert_ne!(r, o, "{workload}: the default order is not key order");
            let mut sorted = r.clone();
            sorted.sort();
            assert_eq!(sorted, o, "{workload}: other records");
            let run = |p: &Prepared| -> Vec<(Vec<u8>, u64)> {
                let w = &p.workload;
                w.run
                    .iter()
                    .map(|op| (w.arena.get(op.key).to_vec(), op.arg))
                    .collect()
            };
            assert_eq!(run(&random), run(&ordered), "{workload}: another run phase");
        }
    }
}
