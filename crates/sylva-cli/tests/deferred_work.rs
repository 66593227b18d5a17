//! Issue 24, part 2: `sylva bench` finishes every engine's deferred work after each phase and
//! times it, and `--recovery` kills a durable engine at the end of its run and times the reopen.

use std::path::Path;
use std::process::Command;

fn bench(dir: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let out = dir.join("out.json");
    let mut args = vec![
        "bench",
        "--workload",
        "a",
        "--records",
        "3000",
        "--ops",
        "3000",
        "--dir",
        dir.to_str().expect("utf8"),
        "--json",
        out.to_str().expect("utf8"),
    ];
    args.extend_from_slice(extra);
    let o = Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(&args)
        .output()
        .expect("run sylva");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("read json")).expect("json");
    v["runs"].as_array().expect("runs").clone()
}

/// Every engine this build has.
fn engines() -> Vec<&'static str> {
    let mut e = vec![
        "db",
        "memmap",
        "btreemap",
        "btree",
        "bptree",
        "bptree-baseline",
    ];
    if cfg!(feature = "peers-no-rocksdb") {
        e.extend(["lmdb", "redb", "fjall", "sled"]);
    }
    if cfg!(feature = "peers") {
        e.push("rocksdb");
    }
    e
}

fn counter(r: &serde_json::Value, name: &str) -> u64 {
    r["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn every_engine_has_its_deferred_work_finished_and_timed_after_every_phase() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = Vec::new();
    for e in engines() {
        args.extend(["--engine", e]);
    }
    let runs = bench(dir.path(), &args);
    assert_eq!(runs.len(), engines().len() * 2, "a load and a run each");
    for r in &runs {
        let what = format!("{} {}", r["engine"], r["phase"]);
        let finish = r["finish_seconds"].as_f64();
        assert!(finish.is_some_and(|s| s >= 0.0), "{what}: no finish time");
        let with = r["ops_per_sec_with_finish"].as_f64().expect("with finish");
        let without = r["ops_per_sec"].as_f64().expect("ops/s");
        assert!(with <= without && with > 0.0, "{what}: {with} vs {without}");
        let engine = r["engine"].as_str().expect("engine");
        let durable =
            !["memmap", "btreemap", "btree", "bptree", "bptree-baseline"].contains(&engine);
        assert_eq!(
            r["file_bytes"].as_u64().is_some_and(|b| b > 0),
            durable,
            "{what}: the size of its files after the finish"
        );
        for field in [
            "cpu_user_seconds",
            "cpu_worker_seconds",
            "cpu_other_seconds",
            "ops_per_cpu_second",
        ] {
            assert!(r[field].as_f64().is_some(), "{what}: no {field}");
        }
    }
    let run = |engine: &str| {
        runs.iter()
            .find(|r| r["engine"] == engine && r["phase"] == "run")
            .unwrap_or_else(|| panic!("no run of {engine}"))
    };
    // The load's finish is what checkpointed `db` (its log threshold is 1 GiB, which 3,000
    // records never reach) and flushed the LSMs' memtables into tables.
    assert!(counter(run("db"), "checkpoints") >= 1, "{}", run("db"));
    if cfg!(feature = "peers-no-rocksdb") {
        assert!(counter(run("fjall"), "tables") >= 1, "{}", run("fjall"));
    }
    if cfg!(feature = "peers") {
        assert!(
            counter(run("rocksdb"), "sst_bytes") > 0,
            "{}",
            run("rocksdb")
        );
    }
}

#[test]
fn recovery_kills_durable_engines_after_their_last_phase_and_times_the_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runs = bench(
        dir.path(),
        &["--engine", "db", "--engine", "memmap", "--recovery"],
    );
    let get = |engine: &str, phase: &str| {
        runs.iter()
            .find(|r| r["engine"] == engine && r["phase"] == phase)
            .unwrap_or_else(|| panic!("no {phase} of {engine}"))
    };
    let db = get("db", "run");
    assert!(
        db["recovery_seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{db}"
    );
    // Workload a only updates, so every loaded record survives (the load's finish synced them).
    assert_eq!(db["recovered_records"].as_u64(), Some(3000), "{db}");
    assert!(
        db["finish_seconds"].is_null(),
        "killed before its finish: {db}"
    );
    assert!(get("db", "load")["finish_seconds"].as_f64().is_some());
    let memmap = get("memmap", "run");
    assert!(memmap["recovery_seconds"].is_null(), "{memmap}");
    assert!(memmap["finish_seconds"].as_f64().is_some(), "{memmap}");
    // The killed child's directory is gone once it is measured.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("bound-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
