//! Docs that name files, engines or commands are checked here so they cannot drift.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn every_file_the_readme_and_docs_link_exists() {
    for doc in ["README.md", "docs/benchmarking.md"] {
        let text = read(doc);
        let base = root()
            .join(doc)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(root);
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.starts_with("http") || target.starts_with('#') {
                continue;
            }
            assert!(
                base.join(target).exists(),
                "{doc} links to {target}, which does not exist"
            );
        }
    }
}

#[test]
fn the_readme_commands_are_the_ones_ci_runs() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    assert!(
        readme.contains("cargo test --workspace")
            && ci
                .lines()
                .any(|l| !l.trim_start().starts_with('#') && l.contains("cargo test --workspace;")),
        "test command"
    );
    assert!(
        readme.contains("cargo run --release -p sylva-cli -- bench"),
        "main job command"
    );
}

#[test]
fn every_engine_the_readme_lists_is_known_to_the_cli() {
    let readme = read("README.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sylva"))
        .args(["bench", "--engine", "no-such-engine"])
        .output()
        .expect("run sylva");
    let valid = String::from_utf8_lossy(&out.stderr).to_string();
    let engines = readme
        .split("## Engines")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an Engines section");
    for line in engines.lines().filter(|l| l.starts_with("| `")) {
        for name in line
            .split('|')
            .nth(1)
            .unwrap_or("")
            .split(',')
            .map(|n| n.trim().trim_matches('`'))
        {
            if !name.is_empty() {
                assert!(
                    valid.contains(name),
                    "README lists engine `{name}`, which sylva bench does not know: {valid}"
                );
            }
        }
    }
}

/// The README's command-line session, run step by step in an empty directory: each `$ sylva ...`
/// line must exit 0 (or the code its comment names, `exit 1`) and print exactly the lines that
/// follow it; a `...` line ends what is compared (the rest of the output is not checked).
#[test]
fn the_readme_command_line_session_runs_as_shown() {
    let readme = read("README.md");
    let block = readme
        .split("## Using a database from the command line")
        .nth(1)
        .and_then(|s| s.split("```console\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("a console block in the command-line section");
    let mut steps: Vec<(String, String, Vec<String>)> = Vec::new();
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            let (command, comment) = command.split_once('#').unwrap_or((command, ""));
            steps.push((command.trim().into(), comment.into(), Vec::new()));
        } else {
            steps
                .last_mut()
                .expect("output before any command")
                .2
                .push(line.into());
        }
    }
    assert!(steps.len() >= 10, "the session shrank: {steps:?}");
    let cwd = tempfile::tempdir().expect("tempdir");
    for (command, comment, expected) in steps {
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(words[0], "sylva", "{command}");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sylva"))
            .args(&words[1..])
            .current_dir(cwd.path())
            .output()
            .expect("run sylva");
        let code = if comment.contains("exit 1") { 1 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(code),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).expect("utf8");
        let shown = expected.iter().position(|l| l == "...");
        let lines: String = expected[..shown.unwrap_or(expected.len())]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        if shown.is_some() {
            assert!(
                stdout.starts_with(&lines),
                "{command}: printed {stdout:?}, README shows {lines:?}"
            );
        } else {
            assert_eq!(stdout, lines, "{command}");
        }
    }
}
