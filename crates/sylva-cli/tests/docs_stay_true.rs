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
        readme.contains("cargo test --workspace") && ci.contains("\ncargo test --workspace\n"),
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
            if !name.is_empty() && name != "db" {
                assert!(
                    valid.contains(name),
                    "README lists engine `{name}`, which sylva bench does not know: {valid}"
                );
            }
        }
    }
}
