//! The storage-stack issue's limits on the library's layout, kept true as engines are added:
//! no source file in `crates/sylva/src` over 900 lines, `db/mod.rs` under 800, and the
//! in-memory trees (`mem`) importing nothing from the paged B-tree (`btree`). A file that
//! outgrows the limit is split by what its parts do (as `btree/split.rs` and
//! `buffer/flush.rs` were), not by line count alone.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;
const MAX_DB_MOD_LINES: usize = 800;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("list a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .expect("read a source file")
        .lines()
        .count()
}

#[test]
fn no_source_file_is_over_the_limit() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    assert!(files.len() > 50, "found only {} sources", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, lines(f)))
        .filter(|&(_, n)| n > MAX_LINES)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
    let db = lines(&src().join("db/mod.rs"));
    assert!(db < MAX_DB_MOD_LINES, "db/mod.rs has {db} lines");
}

#[test]
fn the_in_memory_trees_import_nothing_from_btree() {
    let mut files = Vec::new();
    sources(&src().join("mem"), &mut files);
    assert!(!files.is_empty());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.contains("crate::btree"),
                "{}:{}: {line}",
                f.display(),
                i + 1
            );
        }
    }
}
