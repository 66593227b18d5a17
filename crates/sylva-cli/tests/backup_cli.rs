//! `sylva backup --db DIR --to DIR2` (issue 23), each command its own process: the copy opens as
//! the database (large values included) and checks clean; a target that is not empty, a missing
//! database and a database another process holds are one error line each; the README's session
//! runs as shown.

use std::path::Path;
use std::process::{Command, Output};

fn sylva(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(args)
        .output()
        .expect("run sylva")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// Asserts exit code 0 and returns stdout.
fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf8 output")
}

/// Asserts exit code 2 with one line `error: ...` containing `needle` on stderr.
fn fails(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "expected exit 2: {err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1,
        "not one error line: {err:?}"
    );
    assert!(err.contains(needle), "expected `{needle}` in {err:?}");
}

#[test]
fn a_backup_opens_as_the_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (db, copy) = (temp.path().join("db"), temp.path().join("copy"));
    for i in 0..50 {
        let (k, v) = (format!("key{i:03}"), format!("value {i}"));
        ok(sylva(&["put", "--db", path(&db), &k, &v]), "put");
    }
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7) as u8).collect();
    let big_file = temp.path().join("big");
    std::fs::write(&big_file, &big).expect("write");
    ok(
        sylva(&[
            "put",
            "--db",
            path(&db),
            "big",
            "--value-file",
            path(&big_file),
        ]),
        "put big",
    );

    let out = ok(
        sylva(&["backup", "--db", path(&db), "--to", path(&copy)]),
        "backup",
    );
    assert!(
        out.starts_with(&format!("backed up {} to {}: ", path(&db), path(&copy))),
        "{out:?}"
    );
    assert!(copy.join("data.sylva").exists() && !copy.join("data.sylva.partial").exists());

    let check = ok(sylva(&["check", "--db", path(&copy)]), "check the copy");
    assert!(check.starts_with("ok: 51 records;"), "{check}");
    let scan = ok(
        sylva(&[
            "scan",
            "--db",
            path(&copy),
            "--from",
            "key",
            "--to",
            "key003",
        ]),
        "scan",
    );
    assert_eq!(scan, "key000\tvalue 0\nkey001\tvalue 1\nkey002\tvalue 2\n");
    let got = temp.path().join("got");
    ok(
        sylva(&["get", "--db", path(&copy), "big", "--out", path(&got)]),
        "get big",
    );
    assert!(
        std::fs::read(&got).expect("read") == big,
        "the large value differs"
    );
    // The copy is a database of its own: writing to it leaves the source alone.
    ok(sylva(&["delete", "--db", path(&copy), "key000"]), "delete");
    let source = ok(sylva(&["get", "--db", path(&db), "key000"]), "get");
    assert_eq!(source, "value 0\n");
}

#[test]
fn bad_targets_and_sources_are_one_error_line() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    ok(sylva(&["put", "--db", path(&db), "k", "v"]), "put");

    let full = temp.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("keep.txt"), b"mine").expect("write");
    let o = sylva(&["backup", "--db", path(&db), "--to", path(&full)]);
    fails(&o, "exists and is not empty (it holds keep.txt)");
    assert_eq!(std::fs::read_dir(&full).expect("list").count(), 1);

    let o = sylva(&["backup", "--db", path(&db), "--to", path(&db)]);
    fails(&o, "is not empty");

    let missing = temp.path().join("nothing");
    let o = sylva(&[
        "backup",
        "--db",
        path(&missing),
        "--to",
        path(&temp.path().join("t")),
    ]);
    fails(&o, "no database at");
    assert!(
        !temp.path().join("t").exists(),
        "a failed backup left a target"
    );

    // Another process (this one) has the database open.
    let held = sylva::Db::open(&db, sylva::DbOptions::default()).expect("open");
    let o = sylva(&[
        "backup",
        "--db",
        path(&db),
        "--to",
        path(&temp.path().join("t2")),
    ]);
    fails(&o, "locked");
    drop(held);
}

/// The README's "Online backup" session runs as shown.
#[test]
fn the_readme_backup_session_runs_as_shown() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let block = readme
        .split("### Online backup")
        .nth(1)
        .and_then(|s| s.split("```console\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a console block in the README's section");
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command.into(), Vec::new())),
            None => steps.last_mut().expect("output first").1.push(line.into()),
        }
    }
    assert!(steps.len() >= 5, "{steps:?}");
    let bin = Path::new(env!("CARGO_BIN_EXE_sylva"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let env_path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cwd = tempfile::tempdir().expect("tempdir");
    for (command, expected) in steps {
        let out = Command::new("sh")
            .args(["-c", &command])
            .env("PATH", &env_path)
            .current_dir(cwd.path())
            .output()
            .expect("run sh");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want: String = expected.iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{command}");
    }
}
