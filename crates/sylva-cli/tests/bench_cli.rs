//! `sylva bench` end to end: the table, the JSON, trace replay and bad input.

use std::path::Path;
use std::process::{Command, Output};

fn sylva(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(args)
        .output()
        .expect("run sylva")
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read json")).expect("parse json")
}

#[test]
fn two_engines_print_a_table_write_json_and_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.json");
    let o = sylva(&[
        "bench",
        "--engine",
        "memmap",
        "--engine",
        "btreemap",
        "--workload",
        "e",
        "--records",
        "20000",
        "--ops",
        "5000",
        "--repeat",
        "2",
        "--json",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("run phase") && table.contains("btreemap"),
        "{table}"
    );
    let v = json(&out);
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 8, "2 engines × 2 phases × 2 repetitions");
    let run_sums: Vec<u64> = runs
        .iter()
        .filter(|r| r["phase"] == "run")
        .map(|r| r["checksum"].as_u64().expect("checksum"))
        .collect();
    assert!(
        run_sums.iter().all(|&c| c == run_sums[0]),
        "identical operations, different answers: {run_sums:?}"
    );
    assert!(runs
        .iter()
        .all(|r| r["ops_per_sec"].as_f64().expect("ops/s") > 0.0));
    // Engines alternate: memmap, btreemap, memmap, btreemap.
    let order: Vec<&str> = runs
        .iter()
        .filter(|r| r["phase"] == "load")
        .map(|r| r["engine"].as_str().expect("engine"))
        .collect();
    assert_eq!(order, ["memmap", "btreemap", "memmap", "btreemap"]);
}

#[test]
fn aged_runs_age_each_store_with_ycsb_a_first_and_are_labelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("aged.json");
    fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "bench",
            "--engine",
            "btreemap",
            "--engine",
            "db",
            "--workload",
            "e",
            "--records",
            "5000",
            "--ops",
            "3000",
        ];
        a.extend_from_slice(extra);
        a
    }
    let o = sylva(&args(&["--aged", "--json", out.to_str().expect("utf8")]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("workload e aged"));
    let v = json(&out);
    let runs = v["runs"].as_array().expect("runs");
    let phases: Vec<&str> = runs
        .iter()
        .map(|r| r["phase"].as_str().expect("phase"))
        .collect();
    assert_eq!(phases, ["load", "age", "run", "load", "age", "run"]);
    let sums = |phase: &str| -> Vec<u64> {
        runs.iter()
            .filter(|r| r["phase"] == phase)
            .map(|r| r["checksum"].as_u64().expect("checksum"))
            .collect()
    };
    for phase in ["age", "run"] {
        let s = sums(phase);
        assert_eq!(s[0], s[1], "{phase}: the engines disagree");
    }
    // Aging changes values, so the aged run reads other values than a fresh one.
    let fresh = dir.path().join("fresh.json");
    let o = sylva(&args(&["--json", fresh.to_str().expect("utf8")]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fresh_sum = json(&fresh)["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["phase"] == "run")
        .map(|r| r["checksum"].as_u64().expect("checksum"));
    assert_ne!(fresh_sum, Some(sums("run")[0]));
    let o = sylva(&["bench", "--aged", "--trace", "no-such-file"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--aged"));
}

#[test]
fn a_workload_sequence_loads_once_and_runs_each_workload_on_the_same_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |workload: &str, name: &str| {
        let out = dir.path().join(name);
        let o = sylva(&[
            "bench",
            "--engine",
            "memmap",
            "--engine",
            "db",
            "--workload",
            workload,
            "--records",
            "5000",
            "--ops",
            "3000",
            "--json",
            out.to_str().expect("utf8"),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (String::from_utf8_lossy(&o.stdout).into_owned(), json(&out))
    };
    let (table, v) = run("c,a,e", "seq.json");
    assert!(table.contains("workload a (2/3 of c,a,e)"), "{table}");
    let runs = v["runs"].as_array().expect("runs");
    let rows: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["phase"].as_str().expect("phase"),
                r["workload"].as_str().expect("workload"),
            )
        })
        .collect();
    let one_engine = [
        ("load", "c,a,e"),
        ("run", "c (1/3 of c,a,e)"),
        ("run", "a (2/3 of c,a,e)"),
        ("run", "e (3/3 of c,a,e)"),
    ];
    assert_eq!(rows[..4], one_engine);
    assert_eq!(rows[4..], one_engine);
    for i in 1..4 {
        assert_eq!(
            runs[i]["checksum"],
            runs[i + 4]["checksum"],
            "{:?}: the engines disagree",
            rows[i]
        );
    }
    // The first run of a sequence is the run its workload has alone.
    let (_, alone) = run("c", "alone.json");
    let alone_run = alone["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["phase"] == "run")
        .map(|r| r["checksum"].clone());
    assert_eq!(alone_run, Some(runs[1]["checksum"].clone()));
    for bad in [
        vec!["bench", "--workload", "c,q"],
        vec!["bench", "--workload", "c,a", "--aged"],
        vec!["bench", "--workload", "c,a", "--trace", "no-such-file"],
        vec!["bench", "--load-order", "key", "--trace", "no-such-file"],
        vec!["bench", "--load-order", "sideways"],
    ] {
        let o = sylva(&bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).is_empty());
    }
}

#[test]
fn traces_replay_with_the_same_answers_as_generated_operations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (load, run) = (dir.path().join("load.txt"), dir.path().join("run.txt"));
    let mut l = String::new();
    for k in 0..1000u64 {
        l.push_str(&format!("INSERT {}\n", k * 7));
    }
    std::fs::write(&load, l).expect("write load");
    std::fs::write(
        &run,
        "READ 7\nREAD 8\nUPDATE 14\nSCAN 0 10\nSCANEND 70 140\nDELETE 21\nREAD 21\n",
    )
    .expect("write run");
    let out = dir.path().join("t.json");
    let o = sylva(&[
        "bench",
        "--engine",
        "memmap",
        "--engine",
        "btreemap",
        "--trace",
        load.to_str().expect("utf8"),
        "--trace",
        run.to_str().expect("utf8"),
        "--json",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&out);
    let run: Vec<&serde_json::Value> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["phase"] == "run")
        .collect();
    assert_eq!(run.len(), 2);
    for r in &run {
        assert_eq!(r["ops"], 7);
        assert_eq!(r["workload"], "trace");
        // READ 7 and UPDATE-free reads: 7 found, 8 missing, DELETE 21 found, READ 21 missing.
        assert_eq!(r["found"], 2, "{r}");
        assert_eq!(r["missing"], 2, "{r}");
        assert_eq!(
            r["scanned"], 20,
            "SCAN 0 10 gives 10 records, SCANEND [70, 140) gives 10"
        );
        assert_eq!(r["records"], 999);
    }
    assert_eq!(run[0]["checksum"], run[1]["checksum"]);
}

#[test]
fn bad_input_is_one_line_on_stderr_and_exit_code_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad_trace = dir.path().join("bad.txt");
    std::fs::write(&bad_trace, "INSERT 1\nINSERT\n").expect("write");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--engine".into(), "nosuch".into()], "unknown engine"),
        (vec!["--workload".into(), "q".into()], "unknown workload"),
        (vec!["--records".into(), "0".into()], "at least 1"),
        (
            vec![
                "--trace".into(),
                dir.path().join("missing.txt").display().to_string(),
            ],
            "missing.txt",
        ),
        (
            vec!["--trace".into(), bad_trace.display().to_string()],
            "bad.txt:2",
        ),
        (
            vec!["--engine".into(), "memmap:size=3".into()],
            "no option `size`",
        ),
        (
            vec!["--dist".into(), "pareto".into()],
            "unknown distribution",
        ),
        (vec!["--keys".into(), "emoji".into()], "unknown key set"),
        (vec!["--rate".into(), "0".into()], "positive number"),
        (vec!["--rate".into(), "fast".into()], "positive number"),
        (
            vec!["--engine".into(), "patree:mode=threads".into()],
            "not async, dedicated or shared",
        ),
        (
            vec![
                "--engine".into(),
                "patree:inflight=64".into(),
                "--inflight".into(),
                "128".into(),
            ],
            "more than engine `patree:inflight=64`'s 64 task slots",
        ),
        (
            vec![
                "--engine".into(),
                "btreemap".into(),
                "--threads".into(),
                "2".into(),
                "--records".into(),
                "10".into(),
            ],
            "single-threaded",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["bench".to_string()];
        all.extend(args.iter().cloned());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let o = sylva(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected `{needle}` in {err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
    let o = sylva(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2), "unknown subcommand");
}

#[test]
fn the_papers_suite_writes_a_report_and_charts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let o = sylva(&[
        "bench",
        "--suite",
        "papers",
        "--scale",
        "0.002",
        "--engine",
        "memmap",
        "--out",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(out.join("peers.md")).expect("peers.md");
    for needle in [
        "workload a uniform",
        "workload e zipfian",
        "workload x",
        "workload y",
        "p99.99",
        "Larger than memory",
    ] {
        assert!(md.contains(needle), "peers.md lacks `{needle}`");
    }
    let svg = std::fs::read_to_string(out.join("peers-set1-throughput.svg")).expect("chart");
    assert!(
        svg.starts_with("<svg") && svg.contains("memmap"),
        "throughput chart"
    );
    assert!(out.join("peers-set1-latency.svg").exists());
    let md = std::fs::read_to_string(out.join("peers.md")).expect("report");
    assert!(
        md.contains("| ops/s +finish | finish |"),
        "the report charges deferred work: {md}"
    );
    let v = json(&out.join("peers.json"));
    assert!(v["runs"].as_array().expect("runs").len() >= 10);
    let o = sylva(&["bench", "--suite", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    let o = sylva(&["bench", "--suite", "papers", "--recovery"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--recovery"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `--suite patree` at a tiny scale: every set runs what it says (each configuration gives a
/// table, none fails), the rate runs are offered fractions of the measured maximum, and the
/// report and JSON are written.
#[test]
fn the_patree_suite_runs_every_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let data = dir.path().join("data");
    let o = sylva(&[
        "bench",
        "--suite",
        "patree",
        "--scale",
        "0.002",
        "--out",
        out.to_str().expect("utf8"),
        "--dir",
        data.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(out.join("patree-suite.md")).expect("report");
    for needle in [
        "## 1. Devices",
        "## 2. Table I",
        "--workload c,b,a",
        "patree:mode=dedicated",
        "patree:mode=shared",
        "--threads 128",
        "## 3. Probe policies",
        "patree:probe=fixed:200",
        "## 4. Priority",
        "patree:priority=fifo",
        "--dist zipfian",
        "## 5. Yielding",
        "patree:yield=off",
        "--rate ",
        "## 6. Persistence",
        "patree:persist=strong",
        "db:sync=always",
    ] {
        assert!(
            md.contains(needle),
            "patree-suite.md lacks `{needle}`:\n{md}"
        );
    }
    let uring = sylva::exec::open_backend(sylva::BackendKind::Uring, 8).is_ok();
    if uring {
        assert!(!md.contains("No result"), "a configuration failed:\n{md}");
        assert!(md.contains("patree:probe=model:"), "calibrated:\n{md}");
    }
    // Four rate runs, each offered a fraction of the closed-loop maximum.
    assert_eq!(md.matches("--rate ").count(), 4, "{md}");
    let v = json(&out.join("patree-suite.json"));
    let runs = v["runs"].as_array().expect("runs");
    let run_phases = runs.iter().filter(|r| r["phase"] == "run").count();
    // Table I: 9 engines x 3 workloads + 6 x 3 (`patree` at 32, 64 and 128 in flight);
    // probes 7; priority 4; yield 1 + 8; persistence 6 + 1 (without io_uring the baselines
    // and the model probe give none).
    if uring {
        assert_eq!(run_phases, 27 + 18 + 7 + 4 + 9 + 7, "{v}");
        assert!(md.contains("--inflight 128"), "{md}");
    }
    let rated = runs
        .iter()
        .filter(|r| r["phase"] == "run" && r["offered_rate"].is_number())
        .count();
    assert_eq!(rated, 8);
    let o = sylva(&["bench", "--suite", "patree", "--engine", "db"]);
    assert_eq!(o.status.code(), Some(2), "the suite picks its engines");
}

/// `--suite patree --repeat 2` interleaves its repetitions: every command runs once before
/// any runs again, and the second repetition runs a command's engines in reverse order.
#[test]
fn the_patree_suites_repetitions_are_interleaved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let o = sylva(&[
        "bench",
        "--suite",
        "patree",
        "--scale",
        "0.002",
        "--set",
        "4",
        "--repeat",
        "2",
        "--out",
        out.to_str().expect("utf8"),
        "--dir",
        dir.path().join("data").to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&out.join("patree-suite.json"));
    let order: Vec<String> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["phase"] == "run")
        .map(|r| {
            let engine = r["engine"].as_str().expect("engine");
            let policy = engine.split([':', ',']).nth(1).expect("an option");
            format!(
                "{} {policy} #{}",
                r["workload"].as_str().expect("workload"),
                r["repeat"]
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            "set 4.1: c priority=holders #0",
            "set 4.1: c priority=fifo #0",
            "set 4.2: c priority=holders #0",
            "set 4.2: c priority=fifo #0",
            "set 4.1: c priority=fifo #1",
            "set 4.1: c priority=holders #1",
            "set 4.2: c priority=fifo #1",
            "set 4.2: c priority=holders #1",
        ]
    );
    let md = std::fs::read_to_string(out.join("patree-suite.md")).expect("report");
    assert!(md.contains("**4.2** `sylva bench"), "{md}");
    assert!(md.contains("--repeat 1"), "{md}");
    assert!(md.contains("No fio figures"), "{md}");
}

/// The PA-Tree paper's synchronous baselines (`patree:mode=dedicated|shared`: `db` reading
/// through io_uring) give `db`'s answers on the same operations, from several threads, and a
/// paced run records its offered rate.
#[test]
fn the_patree_baselines_answer_as_db_does() {
    if sylva::exec::open_backend(sylva::BackendKind::Uring, 8).is_err() {
        return eprintln!("skipped: the kernel refuses io_uring");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.json");
    let o = sylva(&[
        "bench",
        "--engine",
        "db:cache_bytes=65536",
        "--engine",
        "patree:cache_bytes=65536,mode=dedicated",
        "--engine",
        "patree:cache_bytes=65536,mode=shared",
        "--workload",
        "c",
        "--records",
        "5000",
        "--ops",
        "4000",
        "--threads",
        "1",
        "--rate",
        "400000",
        "--dir",
        dir.path().to_str().expect("utf8"),
        "--json",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&out);
    let runs: Vec<&serde_json::Value> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["phase"] == "run")
        .collect();
    assert_eq!(runs.len(), 3);
    let sums: Vec<u64> = runs
        .iter()
        .map(|r| r["checksum"].as_u64().expect("sum"))
        .collect();
    assert!(sums.iter().all(|&c| c == sums[0]), "{sums:?}");
    assert!(runs
        .iter()
        .all(|r| r["offered_rate"].as_f64() == Some(400000.0)));
}

/// Scans and range maps pipelined on `patree`'s sessions (`--inflight 16`, two threads) give
/// `db`'s answers: the same checksum over every record shown, and as many records. Read-only
/// operations, so that the answers do not depend on the order operations finish in: a trace
/// of scans and lookups, and workload y (range maps).
#[test]
fn pipelined_scans_answer_as_db_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (load, run) = (dir.path().join("load.txt"), dir.path().join("run.txt"));
    let l: String = (0..5000u64)
        .map(|k| format!("INSERT {}\n", k * 7))
        .collect();
    std::fs::write(&load, l).expect("write load");
    let r: String = (0..600u64)
        .map(|i| match i % 3 {
            0 => format!("READ {}\n", (i * 337) % 35_000),
            _ => format!("SCAN {} {}\n", (i * 911) % 35_000, 1 + (i * 37) % 300),
        })
        .collect();
    std::fs::write(&run, r).expect("write run");
    let trace = [
        "--trace",
        load.to_str().expect("utf8"),
        "--trace",
        run.to_str().expect("utf8"),
    ];
    let y = [
        "--workload",
        "y",
        "--max-scan",
        "300",
        "--records",
        "5000",
        "--ops",
        "300",
    ];
    for (i, what) in [&trace[..], &y[..]].into_iter().enumerate() {
        let out = dir.path().join(format!("out{i}.json"));
        let data = dir.path().join(format!("data{i}"));
        let mut args = vec![
            "bench",
            "--engine",
            "db:cache_bytes=65536",
            "--engine",
            "patree:cache_bytes=65536,backend=inline",
            "--threads",
            "2",
            "--inflight",
            "16",
            "--dir",
            data.to_str().expect("utf8"),
            "--json",
            out.to_str().expect("utf8"),
        ];
        args.extend_from_slice(what);
        let o = sylva(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v = json(&out);
        let runs: Vec<&serde_json::Value> = v["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter(|r| r["phase"] == "run")
            .collect();
        assert_eq!(runs.len(), 2, "{what:?}");
        assert_eq!(runs[0]["checksum"], runs[1]["checksum"], "{what:?}");
        assert_eq!(runs[0]["scanned"], runs[1]["scanned"], "{what:?}");
        assert_eq!(runs[0]["found"], runs[1]["found"], "{what:?}");
        assert!(
            runs[1]["scanned"].as_u64().expect("scanned") > 10_000,
            "{what:?}"
        );
    }
}
