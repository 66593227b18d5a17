//! The fuzz targets' drivers (`sylva::fuzz`, run by `fuzz/`) over their seeds, the stored
//! fixtures, and over those seeds with every header byte of every node set to a few values: a
//! deterministic sample of what the fuzzers explore, run on stable with the rest of the tests,
//! so a decoder change that panics on damaged bytes fails here before a fuzzer finds it.
//! (The drivers must return, whatever the bytes; a panic fails the test.)

use std::path::{Path, PathBuf};

const PAGE: usize = 4096;
const HEADER: usize = 32;

fn fixture_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read the fixtures") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        &mut files,
    );
    files.sort();
    files
}

/// The payloads of a log file's records (frames of 16 or 20 bytes by the header's version).
fn payloads(log: &[u8]) -> Vec<&[u8]> {
    let frame = if log[8] == 1 { 16 } else { 20 };
    let mut out = Vec::new();
    let mut at = 32;
    while at + frame <= log.len() {
        let n = u32::from_le_bytes(log[at..at + 4].try_into().expect("4 bytes")) as usize;
        let Some(payload) = log.get(at + frame..at + frame + n) else {
            break;
        };
        out.push(payload);
        at += frame + n;
    }
    out
}

/// Runs every node driver over `node` and over copies with each of its first 40 bytes set to
/// each of a few values.
fn nodes(node: &[u8]) -> usize {
    let run = |b: &[u8]| {
        sylva::fuzz::slotted_node(b);
        sylva::fuzz::dense_leaf(b);
        sylva::fuzz::semidense_leaf(b);
    };
    run(node);
    let mut runs = 1;
    let mut copy = node.to_vec();
    for at in 0..40.min(node.len()) {
        let was = copy[at];
        for v in [
            0u8,
            1,
            2,
            0x7f,
            0x80,
            0xfe,
            0xff,
            was ^ 1,
            was.wrapping_add(16),
        ] {
            copy[at] = v;
            run(&copy);
            runs += 1;
        }
        copy[at] = was;
    }
    runs
}

#[test]
fn every_driver_returns_on_the_fixtures_and_their_damaged_headers() {
    let (mut pages, mut logs, mut records, mut runs, mut buckets) = (0, 0, 0, 0, 0);
    for file in fixture_files() {
        let bytes = std::fs::read(&file).expect("read a fixture");
        if bytes.starts_with(b"SYpg") {
            sylva::fuzz::meta_page(&bytes[..bytes.len().min(8 * PAGE)]);
            sylva::fuzz::free_space(&bytes[..bytes.len().min(64 * PAGE)]);
            for (i, page) in bytes.chunks_exact(PAGE).enumerate() {
                sylva::fuzz::free_space_page(page);
                if page[6] == 5 {
                    // The first page of a value's run: the value follows its 16-byte run header
                    // through the next pages, which have no header of their own; in a database
                    // of state version 6 it may be a bucket of long keys.
                    let len = u32::from_le_bytes(page[HEADER..HEADER + 4].try_into().expect("4"));
                    let start = i * PAGE + HEADER + 16;
                    if let Some(value) = bytes.get(start..start + len as usize) {
                        buckets += key_buckets(value);
                    }
                }
                runs += nodes(&page[HEADER..]);
                pages += 1;
            }
        } else if bytes.starts_with(b"sylvaWAL") {
            logs += 1;
            for payload in payloads(&bytes) {
                sylva::fuzz::db_log_payload(payload);
                for cut in [
                    1,
                    2,
                    3,
                    11,
                    payload.len() / 2,
                    payload.len().saturating_sub(1),
                ] {
                    sylva::fuzz::db_log_payload(&payload[..cut.min(payload.len())]);
                }
                if payload.first().is_some_and(|&t| t == 3 || t == 6) {
                    // The images a PAGES or PAGES_EDIT record carries are nodes too.
                    let mut bumped = payload.to_vec();
                    for at in 1..bumped.len().min(24) {
                        bumped[at] = bumped[at].wrapping_add(1);
                        sylva::fuzz::db_log_payload(&bumped);
                    }
                }
                records += 1;
            }
        }
    }
    assert!(
        pages > 100 && logs >= 6 && records > 1000,
        "the fixtures: {pages} pages, {logs} logs, {records} records"
    );
    assert!(runs > 50_000, "{runs} node decodings");
    assert!(
        buckets >= 3,
        "{buckets} whole buckets in the fixtures' runs"
    );
}

/// The `key_bucket` driver over a run's value, and, when the value has a bucket's shape (a count
/// and entries whose lengths add up to the value's), over cuts and damaged copies of it: whether
/// it had that shape.
fn key_buckets(value: &[u8]) -> usize {
    sylva::fuzz::key_bucket(value);
    let u32_at = |at: usize| {
        value
            .get(at..at + 4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")) as usize)
    };
    let Some(count) = u32_at(0).filter(|&n| (1..1000).contains(&n)) else {
        return 0;
    };
    let mut at = 4;
    for _ in 0..count {
        let (Some(s), Some(v)) = (u32_at(at), u32_at(at + 4)) else {
            return 0;
        };
        at += 8 + s + v;
    }
    if at != value.len() {
        return 0;
    }
    for cut in [1, 4, 8, value.len() / 2, value.len() - 1] {
        sylva::fuzz::key_bucket(&value[..cut.min(value.len())]);
    }
    let mut damaged = value.to_vec();
    for at in 0..damaged.len().min(64) {
        damaged[at] ^= 0x41;
        sylva::fuzz::key_bucket(&damaged);
        damaged[at] ^= 0x41;
    }
    1
}

#[test]
fn the_readme_names_every_fuzz_target_and_how_to_run_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let section = readme
        .split("## Fuzzing")
        .nth(1)
        .expect("the README has a Fuzzing section");
    let targets: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| bin.lines().find_map(|l| l.strip_prefix("name = ")))
        .map(|name| name.trim_matches('"'))
        .collect();
    assert!(targets.len() >= 8, "{targets:?}");
    for t in targets {
        assert!(
            root.join(format!("fuzz/fuzz_targets/{t}.rs")).exists(),
            "{t}'s source"
        );
        assert!(
            section.contains(&format!("| `{t}` |")),
            "README's table lacks {t}"
        );
        assert!(
            section.contains(&format!(
                "fuzz run -O {t} corpus/{t} -- -max_total_time=600"
            )),
            "README's commands lack {t}"
        );
    }
}
