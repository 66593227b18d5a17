//! `sylva put --value-file FILE` (`-`: standard input) and `sylva get --out FILE` (`-`: standard
//! output), each command its own process: a value of 10 MB, which no argument could carry (the
//! kernel refuses arguments over 128 KiB), round-trips byte for byte (issue 23); `sylva dump` and
//! `sylva load` move a database's records, large values included, and refuse damaged dumps;
//! `sylva stats` shows the runs and the free space and `sylva compact` gives deleted runs back;
//! the README's sessions for them run as shown.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn sylva_at(command: &str, dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut all = vec![command, "--db", dir.to_str().expect("utf8 path")];
    all.extend_from_slice(args);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(&all)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sylva");
    if let Some(bytes) = stdin {
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(bytes).expect("write stdin");
    }
    child.wait_with_output().expect("wait for sylva")
}

fn ok(o: Output, what: &str) -> Vec<u8> {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// 10 MB of bytes of every value, no two 251-byte stretches alike.
fn big_value() -> Vec<u8> {
    (0..10_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[test]
fn a_10_mb_value_round_trips_through_files_and_pipes() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    let value = big_value();
    let file = temp.path().join("value.bin");
    std::fs::write(&file, &value).expect("write value file");

    let f = file.to_str().expect("utf8");
    ok(
        sylva_at("put", &db, &["big", "--value-file", f], None),
        "put --value-file",
    );
    let out = temp.path().join("out.bin");
    let o = out.to_str().expect("utf8");
    assert!(ok(
        sylva_at("get", &db, &["big", "--out", o], None),
        "get --out"
    )
    .is_empty());
    assert!(
        std::fs::read(&out).expect("read out") == value,
        "--out FILE"
    );
    let piped = ok(
        sylva_at("get", &db, &["big", "--out", "-"], None),
        "get --out -",
    );
    assert!(piped == value, "--out - writes the bytes as they are");

    // From standard input, and binary keys with --hex.
    let mut other = value.clone();
    other.reverse();
    ok(
        sylva_at(
            "put",
            &db,
            &["--hex", "00ff", "--value-file", "-"],
            Some(&other),
        ),
        "put --value-file -",
    );
    let got = ok(
        sylva_at("get", &db, &["--hex", "00ff", "--out", "-"], None),
        "get",
    );
    assert!(got == other, "a value from standard input");

    // An empty file is an empty value; the database checks clean.
    let empty = temp.path().join("empty");
    std::fs::write(&empty, b"").expect("write");
    ok(
        sylva_at(
            "put",
            &db,
            &["e", "--value-file", empty.to_str().expect("utf8")],
            None,
        ),
        "put empty",
    );
    assert_eq!(ok(sylva_at("get", &db, &["e"], None), "get e"), b"\n");
    let check = String::from_utf8(ok(sylva_at("check", &db, &[], None), "check")).expect("utf8");
    assert!(check.starts_with("ok: 3 records"), "{check}");
    let stats = String::from_utf8(ok(sylva_at("stats", &db, &[], None), "stats")).expect("utf8");
    assert!(stats.contains("overflow_values: 2\n"), "{stats}");
}

#[test]
fn bad_value_files_are_one_error_line() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    let missing = temp.path().join("missing");
    let o = sylva_at(
        "put",
        &db,
        &["k", "--value-file", missing.to_str().expect("utf8")],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: cannot read the value from") && err.lines().count() == 1,
        "{err}"
    );
    // A value and --value-file together are refused by the argument parser.
    let o = sylva_at("put", &db, &["k", "v", "--value-file", "-"], None);
    assert!(!o.status.success());
    // --out to a directory that does not exist.
    ok(sylva_at("put", &db, &["k", "v"], None), "put");
    let o = sylva_at("get", &db, &["k", "--out", "/nonexistent/dir/file"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: cannot write the value"));
}

/// The README's "Values of any size" session runs as shown.
#[test]
fn the_readme_large_value_session_runs_as_shown() {
    readme_session_runs_as_shown("### Values of any size");
}

/// The README's "Dump and load" session runs as shown.
#[test]
fn the_readme_dump_and_load_session_runs_as_shown() {
    readme_session_runs_as_shown("### Dump and load");
}

/// The number on `stats`' line `name: N`.
fn stat(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {stats}"))
        .parse()
        .expect("a number")
}

/// `sylva stats` counts the runs of large values and the free space; after the values are
/// deleted, `sylva compact` gives their pages back (the file is as long as it says), the
/// records stay, `check` passes; on a missing database it fails as every command does.
#[test]
fn compact_gives_deleted_runs_back_and_stats_show_where_the_space_is() {
    let temp = tempfile::tempdir().expect("tempdir");
    let db = temp.path().join("db");
    let file = temp.path().join("value.bin");
    std::fs::write(&file, vec![7u8; 300_000]).expect("write");
    let f = file.to_str().expect("utf8");
    ok(sylva_at("put", &db, &["keep", "small"], None), "put");
    for i in 0..6 {
        let k = format!("big{i}");
        ok(sylva_at("put", &db, &[&k, "--value-file", f], None), "put");
    }
    let stats = String::from_utf8(ok(sylva_at("stats", &db, &[], None), "stats")).expect("utf8");
    // 300,000 bytes and a 48-byte header: 74 pages of 4 KiB each.
    assert_eq!(stat(&stats, "overflow_values"), 6, "{stats}");
    assert_eq!(stat(&stats, "overflow_pages"), 6 * 74, "{stats}");
    assert_eq!(stat(&stats, "overflow_run_bytes"), 6 * 74 * 4096, "{stats}");
    for i in 0..6 {
        ok(
            sylva_at("delete", &db, &[&format!("big{i}")], None),
            "delete",
        );
    }
    let stats = String::from_utf8(ok(sylva_at("stats", &db, &[], None), "stats")).expect("utf8");
    let len = std::fs::metadata(db.join("data.sylva"))
        .expect("data")
        .len();
    assert_eq!(stat(&stats, "file_bytes"), len, "{stats}");
    assert_eq!(
        stat(&stats, "free_bytes"),
        stat(&stats, "free_pages") * 4096
    );
    assert!(stat(&stats, "free_extents") >= 1, "{stats}");
    assert!(
        stat(&stats, "largest_free_extent_pages") >= 6 * 74,
        "{stats}"
    );
    assert!(stat(&stats, "free_pages_at_end") >= 6 * 74, "{stats}");
    assert!(stat(&stats, "free_space_pages") >= 1, "{stats}");

    let out = String::from_utf8(ok(sylva_at("compact", &db, &[], None), "compact")).expect("utf8");
    let after = std::fs::metadata(db.join("data.sylva"))
        .expect("data")
        .len();
    assert!(
        out.starts_with(&format!(
            "compacted {}: {len} bytes before, {after} after (",
            db.display()
        )) && out.ends_with(")\n")
            && out.lines().count() == 1,
        "{out}"
    );
    assert!(after + (6 * 74 - 2) * 4096 <= len, "{out}");
    let stats = String::from_utf8(ok(sylva_at("stats", &db, &[], None), "stats")).expect("utf8");
    assert_eq!(stat(&stats, "file_bytes"), after, "{stats}");
    assert_eq!(stat(&stats, "file_pages") * 4096, after, "{stats}");
    assert!(stat(&stats, "free_pages_at_end") <= 1, "{stats}");
    assert_eq!(ok(sylva_at("get", &db, &["keep"], None), "get"), b"small\n");
    ok(sylva_at("check", &db, &[], None), "check");

    let missing = temp.path().join("missing");
    let o = sylva_at("compact", &missing, &[], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: no database at"));
    assert!(!missing.exists());
}

/// The README's "Space" session (`sylva stats`' free-space lines, `sylva compact`) runs as
/// shown.
#[test]
fn the_readme_space_session_runs_as_shown() {
    readme_session_runs_as_shown("### Space");
}

/// The first console block after `heading` in the README: each `$` line through `sh` with the
/// built `sylva` first on the `PATH`, its stdout compared with the lines after it.
fn readme_session_runs_as_shown(heading: &str) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let block = readme
        .split(heading)
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
    assert!(steps.len() >= 6, "{steps:?}");
    let bin = Path::new(env!("CARGO_BIN_EXE_sylva"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cwd = tempfile::tempdir().expect("tempdir");
    for (command, expected) in steps {
        let out = Command::new("sh")
            .args(["-c", &command])
            .env("PATH", &path)
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

#[test]
fn dump_and_load_move_large_values_and_refuse_a_damaged_dump() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (old, new) = (temp.path().join("old"), temp.path().join("new"));
    let value = big_value();
    let file = temp.path().join("value.bin");
    std::fs::write(&file, &value).expect("write");
    let f = file.to_str().expect("utf8");
    ok(
        sylva_at("put", &old, &["big", "--value-file", f], None),
        "put",
    );
    ok(
        sylva_at("put", &old, &["--hex", "00ff00", "0102"], None),
        "put",
    );
    let dump = ok(sylva_at("dump", &old, &[], None), "dump");
    ok(
        sylva_at("load", &new, &["-"], Some(&dump)),
        "load from stdin",
    );
    let got = ok(sylva_at("get", &new, &["big", "--out", "-"], None), "get");
    assert!(got == value, "the large value survives dump and load");
    assert_eq!(
        ok(sylva_at("get", &new, &["--hex", "00ff00"], None), "get"),
        b"0102\n"
    );
    ok(sylva_at("check", &new, &[], None), "check");

    // A damaged dump file: refused with its offset, nothing loaded.
    let mut bad = dump.clone();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    let bad_file = temp.path().join("bad.dump");
    std::fs::write(&bad_file, &bad).expect("write");
    let target = temp.path().join("target");
    let o = sylva_at("load", &target, &[bad_file.to_str().expect("utf8")], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("byte offset") && err.contains("nothing was loaded"),
        "{err}"
    );
    assert!(
        !target.join("data.sylva").exists(),
        "a refused file load creates no database"
    );
}
