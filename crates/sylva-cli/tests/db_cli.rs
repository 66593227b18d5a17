//! The database tools end to end, each command its own process: `sylva put`, `get`, `delete`,
//! `scan`, `stats`, `check`, their exit codes and error lines; and the `db` engine of
//! `sylva bench`.

use std::path::Path;
use std::process::{Command, Output};

use sylva::{Db, DbOptions};

fn sylva(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(args)
        .output()
        .expect("run sylva")
}

/// Runs `sylva COMMAND --db DIR ARGS...`.
fn at(command: &str, dir: &Path, args: &[&str]) -> Output {
    let mut all = vec![command, "--db", dir.to_str().expect("utf8 path")];
    all.extend_from_slice(args);
    sylva(&all)
}

/// Runs it and returns stdout, asserting exit code 0 and a quiet stderr.
fn ok(command: &str, dir: &Path, args: &[&str]) -> Vec<u8> {
    let o = at(command, dir, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "sylva {command} {args:?} failed ({:?}): {err}",
        o.status.code()
    );
    assert!(
        err.is_empty(),
        "sylva {command} {args:?} wrote to stderr: {err}"
    );
    o.stdout
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf8 output")
}

/// Asserts exit code 2 with exactly one line `error: ...` containing `needle` on stderr.
fn fails(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "expected exit 2: {err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
    assert!(
        err.starts_with("error: ") && err.ends_with('\n') && err.lines().count() == 1,
        "not one error line: {err:?}"
    );
    assert!(err.contains(needle), "expected `{needle}` in {err:?}");
}

fn not_found(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stderr, b"not found\n");
    assert!(o.stdout.is_empty());
}

#[test]
fn put_get_delete_round_trip_across_processes() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    assert!(ok("put", &db, &["greeting", "hello"]).is_empty());
    ok("put", &db, &["empty", ""]);
    ok("put", &db, &["-dash", "-v"]);
    ok("put", &db, &["héllo", "wörld"]);
    ok("put", &db, &["greeting", "hello, world"]);
    assert_eq!(text(ok("get", &db, &["greeting"])), "hello, world\n");
    assert_eq!(text(ok("get", &db, &["empty"])), "\n");
    assert_eq!(text(ok("get", &db, &["-dash"])), "-v\n");
    assert_eq!(text(ok("get", &db, &["héllo"])), "wörld\n");
    not_found(&at("get", &db, &["nobody"]));

    assert_eq!(text(ok("delete", &db, &["greeting"])), "deleted\n");
    not_found(&at("get", &db, &["greeting"]));
    not_found(&at("delete", &db, &["greeting"]));
    assert_eq!(text(ok("get", &db, &["empty"])), "\n", "others stay");

    fails(&at("put", &db, &["", "v"]), "empty");
    fails(&at("put", &db, &["--hex", "abc", "00"]), "not hex");
}

#[test]
fn scan_prints_ranges_limits_and_reverse_exactly() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    for (k, v) in [("c", "3"), ("a", "1"), ("e", "5"), ("b", "2"), ("d", "4")] {
        ok("put", &db, &[k, v]);
    }
    // A binary key, and a value with a newline and a tab: reachable only as hex.
    ok("put", &db, &["--hex", "00ff", "0a09"]);
    let scan = |args: &[&str]| text(ok("scan", &db, args));
    let letters = "a\t1\nb\t2\nc\t3\nd\t4\ne\t5\n";

    let all = ok("scan", &db, &[]);
    let mut expected = b"\x00\xff\t\n\t\n".to_vec();
    expected.extend_from_slice(letters.as_bytes());
    assert_eq!(all, expected, "text mode writes bytes unchanged");

    assert_eq!(scan(&["--from", "b", "--to", "d"]), "b\t2\nc\t3\n");
    assert_eq!(
        scan(&["--from", "b", "--to", "d", "--reverse"]),
        "c\t3\nb\t2\n"
    );
    assert_eq!(scan(&["--from", "bb", "--to", "dd"]), "c\t3\nd\t4\n");
    assert_eq!(scan(&["--reverse", "--limit", "2"]), "e\t5\nd\t4\n");
    assert_eq!(scan(&["--from", "c", "--limit", "1"]), "c\t3\n");
    assert_eq!(scan(&["--from", "a"]), letters);
    assert_eq!(scan(&["--from", "c", "--reverse"]), "e\t5\nd\t4\nc\t3\n");
    assert_eq!(scan(&["--from", "d", "--to", "b"]), "", "an empty range");
    assert_eq!(scan(&["--from", "b", "--to", "b"]), "");
    assert_eq!(scan(&["--limit", "0"]), "");
    assert_eq!(scan(&["--from", "f"]), "");

    assert_eq!(
        scan(&["--hex", "--to", "62"]),
        "00ff\t0a09\n61\t31\n",
        "hex keys and values, --to exclusive"
    );
    assert_eq!(scan(&["--hex", "--to", "61", "--reverse"]), "00ff\t0a09\n");
    assert_eq!(
        scan(&["--hex", "--from", "0x63", "--to", "65", "--reverse"]),
        "64\t34\n63\t33\n"
    );
    assert_eq!(text(ok("get", &db, &["--hex", "00FF"])), "0a09\n");
    not_found(&at("get", &db, &["00ff"]));
    fails(&at("scan", &db, &["--hex", "--from", "zz"]), "not hex");
    let o = at("scan", &db, &["--limit", "-1"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: "));
}

#[test]
fn only_put_creates_a_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let missing = temp.path().join("missing");
    for command in ["get", "delete", "scan", "stats", "check"] {
        let args: &[&str] = if ["get", "delete"].contains(&command) {
            &["k"]
        } else {
            &[]
        };
        fails(&at(command, &missing, args), "no database at");
        assert!(!missing.exists(), "{command} created {}", missing.display());
    }
    let empty = temp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    fails(&at("get", &empty, &["k"]), "no database at");
    assert_eq!(std::fs::read_dir(&empty).expect("read_dir").count(), 0);
}

#[test]
fn a_database_open_in_another_process_is_locked() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let db = Db::open(&dir, DbOptions::default()).expect("open");
    db.put(b"k", b"v").expect("put");
    fails(&at("get", &dir, &["k"]), "locked");
    fails(&at("put", &dir, &["k", "w"]), "locked");
    fails(&at("check", &dir, &[]), "locked");
    db.close().expect("close");
    assert_eq!(text(ok("get", &dir, &["k"])), "v\n");
}

#[test]
fn foreign_directories_and_garbage_files_are_refused_cleanly() {
    let temp = tempfile::tempdir().expect("tempdir");
    let foreign = temp.path().join("foreign");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::fs::write(foreign.join("notes.txt"), "my notes").expect("write");
    let o = at("put", &foreign, &["k", "v"]);
    fails(&o, "");
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).expect("read"),
        "my notes"
    );
    assert!(
        !foreign.join("data.sylva").exists(),
        "no database was made there"
    );

    let garbage = temp.path().join("garbage");
    std::fs::create_dir(&garbage).expect("mkdir");
    let bytes: Vec<u8> = (0..3 * 4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(garbage.join("data.sylva"), &bytes).expect("write");
    for (command, args) in [
        ("get", &["k"][..]),
        ("put", &["k", "v"][..]),
        ("scan", &[][..]),
        ("stats", &[][..]),
        ("check", &[][..]),
    ] {
        fails(&at(command, &garbage, args), "data.sylva");
    }
    assert_eq!(
        std::fs::read(garbage.join("data.sylva")).expect("read"),
        bytes,
        "a foreign file is left as it was"
    );
}

/// Flips one byte in the middle of page `page` (4096-byte pages) of `dir/data.sylva`.
fn flip_byte(dir: &Path, page: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("data.sylva"))
        .expect("open data.sylva");
    let at = page * 4096 + 2048;
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.read_exact(&mut b).expect("read");
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.write_all(&[b[0] ^ 0x10]).expect("write");
}

#[test]
fn check_passes_a_good_database_and_fails_a_flipped_byte() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let db = Db::open(&dir, DbOptions::default()).expect("open");
    for i in 0..2000u32 {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("value of record {i}").as_bytes(),
        )
        .expect("put");
    }
    db.close().expect("close");
    let report = text(ok("check", &dir, &[]));
    assert!(report.starts_with("ok: 2000 records; "), "{report}");
    let size = std::fs::metadata(dir.join("data.sylva"))
        .expect("stat")
        .len();
    assert!(size >= 4 * 4096, "at least two tree pages: {size} bytes");

    for page in [2, 3] {
        flip_byte(&dir, page);
        let o = at("check", &dir, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(
            o.status.code(),
            Some(0),
            "check passed a flipped byte in page {page}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.starts_with("error: "), "{err}");
        flip_byte(&dir, page);
        let report = text(ok("check", &dir, &[]));
        assert!(
            report.starts_with("ok: 2000 records"),
            "after restoring: {report}"
        );
    }
}

#[test]
fn stats_prints_every_field() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    for k in ["x", "y", "z"] {
        ok("put", &db, &[k, "value"]);
    }
    ok("delete", &db, &["y"]);
    let stats = text(ok("stats", &db, &[]));
    let field = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .to_string()
    };
    assert_eq!(field("records"), "2");
    assert_eq!(field("page_size"), "4096");
    assert_eq!(field("height"), "1");
    for name in [
        "file_pages",
        "tree_pages",
        "free_pages",
        "fill_factor",
        "cache_hit_rate",
        "wal_bytes",
    ] {
        field(name);
    }
    let fill: f64 = field("fill_factor").parse().expect("a number");
    assert!(fill > 0.0 && fill < 1.0, "{fill}");
    let pages: u64 = field("file_pages").parse().expect("a number");
    assert!(pages >= 3, "two meta pages and a tree: {pages}");
}

#[test]
fn bench_runs_the_db_engine_by_default_and_removes_its_directory() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("data");
    let json = temp.path().join("out.json");
    let o = sylva(&[
        "bench",
        "--engine",
        "db",
        "--engine",
        "db:sync=never,cache_bytes=1048576,direct_io=false",
        "--workload",
        "a",
        "--records",
        "2000",
        "--ops",
        "2000",
        "--dir",
        dir.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("db:sync=never"));
    assert_eq!(
        std::fs::read_dir(&dir).expect("the --dir stays").count(),
        0,
        "every instance's directory is removed"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let runs: Vec<&serde_json::Value> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["phase"] == "run")
        .collect();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["checksum"], runs[1]["checksum"], "same answers");
    assert_eq!(runs[0]["records"], 2000);

    // No --engine: the default engine is db.
    let o = sylva(&[
        "bench",
        "--workload",
        "c",
        "--records",
        "500",
        "--ops",
        "500",
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    assert_eq!(v["runs"][0]["engine"], "db");

    let o = sylva(&["bench", "--engine", "db:colour=red", "--records", "10"]);
    fails(&o, "checkpoint_bytes");
}

#[test]
fn scan_crosses_leaves_in_both_directions() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let db = Db::open(&dir, DbOptions::default()).expect("open");
    let key = |i: u32| format!("k{:06}", i * 3);
    for i in 0..3000u32 {
        db.put(key(i).as_bytes(), format!("v{i}").as_bytes())
            .expect("put");
    }
    db.close().expect("close");
    let line = |i: u32| format!("{}\tv{i}\n", key(i));
    // --from and --to fall between keys (k000100 is absent; k000301 lies between k000300 and k000303).
    let forward: String = (34..101).map(line).collect();
    let o = text(ok("scan", &dir, &["--from", "k000100", "--to", "k000301"]));
    assert_eq!(o, forward);
    let reverse: String = (34..101).rev().map(line).collect();
    let o = text(ok(
        "scan",
        &dir,
        &["--from", "k000100", "--to", "k000301", "--reverse"],
    ));
    assert_eq!(o, reverse);
    let all = text(ok("scan", &dir, &["--reverse"]));
    assert_eq!(all.lines().count(), 3000);
    assert_eq!(all, (0..3000).rev().map(line).collect::<String>());
    let top: String = (2990..3000).rev().map(line).collect();
    assert_eq!(text(ok("scan", &dir, &["--reverse", "--limit", "10"])), top);
}
