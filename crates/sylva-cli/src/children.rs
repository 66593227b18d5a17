//! `sylva bench` engines in child processes: under `--memory-limit` (each in a memory cgroup of
//! its own, so an engine the kernel kills at the limit costs only its own result) and under
//! `--recovery` (each killed with SIGKILL at the end of its last phase, then its directory
//! reopened and timed: the recovery a crash would cost).
//!
//! A child is this program, `bench` with the parent's arguments but one engine, one repetition,
//! a JSON file and a directory of its own; environment variables tell it it is a child, which
//! cgroup to join, and where to signal that it is ready to be killed.
//!
//! Under a memory limit a child also gets `MALLOC_ARENA_MAX=1` (unless the caller set the
//! variable), whatever the engine: glibc's allocator otherwise keeps an arena per thread (up to
//! eight per core), and memory freed in one is not reused by another, so an engine whose
//! background threads allocate and free (RocksDB's flushes and compactions, fjall's) holds
//! hundreds of megabytes of free heap beside its cache, and the kernel kills it at the limit for
//! memory it does not use (`docs/benchmarking.md`, "Memory budget").

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ycsb::report::{write_json, RunRecord};

use crate::bench::{instance_dir, BenchArgs, Failure, Measured};
use crate::bound::MemoryBound;
use crate::engines::{is_durable, opener, EngineSpec};

/// Set (to `1`) in every child process.
const CHILD_ENV: &str = "SYLVA_BENCH_CHILD";
/// Set in a child under `--memory-limit`: the memory cgroup to join before opening the engine.
const CGROUP_ENV: &str = "SYLVA_BENCH_CGROUP";
/// Set in a child under `--recovery`: the file to create once its last phase is measured and
/// written to its JSON file, when it waits to be killed.
const KILL_READY_ENV: &str = "SYLVA_BENCH_KILL_READY";

/// glibc's limit on its allocator's arenas, set to 1 in a child under a memory limit (module
/// docs).
const MALLOC_ARENAS_ENV: &str = "MALLOC_ARENA_MAX";

/// How often the parent checks whether its child exited or is ready to be killed.
const CHILD_POLL: Duration = Duration::from_millis(20);

/// What a child process was asked to do.
#[derive(Debug, Default)]
pub(crate) struct ChildRole {
    /// The memory cgroup to join.
    pub cgroup: Option<PathBuf>,
    /// Where to signal readiness to be killed.
    pub kill_ready: Option<PathBuf>,
}

impl ChildRole {
    /// The role of this process, if it is a child.
    pub(crate) fn from_env() -> Option<ChildRole> {
        is_child().then(|| ChildRole {
            cgroup: std::env::var_os(CGROUP_ENV).map(PathBuf::from),
            kill_ready: std::env::var_os(KILL_READY_ENV).map(PathBuf::from),
        })
    }
}

/// Whether this process is a child of `sylva bench` (it prints no table).
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// In a `--recovery` child at the end of its last phase: writes the records so far to the JSON
/// file, signals the parent and waits to be killed. Returns only an error (the parent gives up
/// on a child that does not signal).
pub(crate) fn await_kill(
    args: &BenchArgs,
    records: &[RunRecord],
    ready: &Path,
) -> Result<Measured, String> {
    let json = args
        .json
        .as_deref()
        .ok_or("a --recovery child needs --json")?;
    write_json(json, records).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    std::fs::write(ready, b"")
        .map_err(|e| format!("cannot signal readiness at {}: {e}", ready.display()))?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Each engine and repetition in a child process, inside a fresh memory cgroup of
/// `args.memory_limit` if set, killed and reopened under `args.recovery`.
pub(crate) fn measure_in_children(
    args: &BenchArgs,
    engines: &[String],
) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let scratch =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let base = strip_options(&args.argv, &["--engine", "--repeat", "--json", "--dir"]);
    // Each child's files go in a directory of their own, removed here even when the child was
    // killed before it could remove them.
    let files = args
        .dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let mut out = Measured {
        runs: Vec::new(),
        failed: Vec::new(),
    };
    for rep in 0..args.repeat {
        for (index, engine) in engines.iter().enumerate() {
            let spec = EngineSpec::parse(engine)?;
            let bound = args.memory_limit.map(MemoryBound::create).transpose()?;
            let dir = files.join(format!("bound-{index}-{rep}"));
            let json = scratch.path().join("child.json");
            let ready = scratch.path().join("ready");
            let _ = std::fs::remove_file(&json);
            let _ = std::fs::remove_file(&ready);
            let mut argv = vec!["bench".to_string()];
            argv.extend(base.iter().cloned());
            argv.extend([
                "--engine".into(),
                engine.clone(),
                "--repeat".into(),
                "1".into(),
                "--json".into(),
                json.display().to_string(),
                "--dir".into(),
                dir.display().to_string(),
            ]);
            let mut command = std::process::Command::new(&exe);
            command
                .args(&argv)
                .env(CHILD_ENV, "1")
                .stdout(std::process::Stdio::null());
            if let Some(b) = &bound {
                command.env(CGROUP_ENV, b.dir());
                if std::env::var_os(MALLOC_ARENAS_ENV).is_none() {
                    command.env(MALLOC_ARENAS_ENV, "1");
                }
            }
            let kill = args.recovery && is_durable(&spec.name);
            if kill {
                command.env(KILL_READY_ENV, &ready);
            }
            let mut child = command
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
            let (status, killed) = loop {
                if let Some(status) = child
                    .try_wait()
                    .map_err(|e| format!("cannot wait for {}: {e}", exe.display()))?
                {
                    break (status, false);
                }
                if kill && ready.exists() {
                    // SIGKILL: no destructor, no close, no final sync runs in the child.
                    let _ = child.kill();
                    let status = child
                        .wait()
                        .map_err(|e| format!("cannot wait for {}: {e}", exe.display()))?;
                    break (status, true);
                }
                std::thread::sleep(CHILD_POLL);
            };
            if status.success() || killed {
                let mut runs = ycsb::report::read_json(&json)?;
                for r in &mut runs {
                    r.repeat = rep;
                }
                if killed {
                    let engine_dir = instance_dir(&dir, 0, &spec.name, 0);
                    let recovered = time_reopen(&spec, &engine_dir);
                    let Some(last) = runs.last_mut() else {
                        return Err(format!("{engine}: the killed child reported no phase"));
                    };
                    match recovered {
                        Ok((seconds, records)) => {
                            last.recovery_seconds = Some(seconds);
                            last.recovered_records = Some(records);
                        }
                        Err(e) => {
                            eprintln!("{engine}: recovery after kill -9 failed: {e}");
                            out.failed.push(Failure {
                                engine: engine.clone(),
                                reason: format!("recovery after kill -9 failed: {e}"),
                            });
                        }
                    }
                }
                let _ = std::fs::remove_dir_all(&dir);
                out.runs.extend(runs);
                continue;
            }
            let _ = std::fs::remove_dir_all(&dir);
            let reason = match (
                bound.as_ref().and_then(MemoryBound::oom_kills),
                exit_signal(&status),
            ) {
                (Some(n), _) if n > 0 => format!(
                    "killed by the kernel's out-of-memory killer at the memory limit of {} bytes \
                     (the engine's memory outside the page cache passed it)",
                    args.memory_limit.unwrap_or(0)
                ),
                (_, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("failed ({status}); its error is above"),
            };
            eprintln!("{engine}: {reason}");
            out.failed.push(Failure {
                engine: engine.clone(),
                reason,
            });
        }
    }
    Ok(out)
}

/// Opens `spec`'s engine on the directory a killed child left, timing the open (its recovery),
/// and counts its records (outside the time).
fn time_reopen(spec: &EngineSpec, dir: &Path) -> Result<(f64, u64), String> {
    let open = opener(spec)?;
    let t0 = Instant::now();
    let target = open(dir)?;
    let seconds = t0.elapsed().as_secs_f64();
    let records = target.stats().records;
    Ok((seconds, records))
}

#[cfg(unix)]
fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn exit_signal(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// `argv` without the options named (as `--name value` or `--name=value`).
fn strip_options(argv: &[String], names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in argv {
        if skip_value {
            skip_value = false;
            continue;
        }
        if names.contains(&a.as_str()) {
            skip_value = true;
        } else if !names
            .iter()
            .any(|n| a.strip_prefix(n).is_some_and(|rest| rest.starts_with('=')))
        {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_options;

    #[test]
    fn strip_options_drops_both_spellings_and_their_values() {
        let argv: Vec<String> = [
            "--engine",
            "db",
            "--ops",
            "5",
            "--json=x.json",
            "--repeat",
            "3",
            "--aged",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            strip_options(&argv, &["--engine", "--json", "--repeat"]),
            ["--ops", "5", "--aged"]
        );
    }
}
