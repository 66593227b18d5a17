//! Trace files in the index-microbench / RECIPE text format, one operation per line:
//!
//! ```text
//! INSERT <key>
//! READ <key>
//! UPDATE <key>
//! SCAN <key> <count>
//! SCANEND <key> <end-key>
//! DELETE <key>
//! ```
//!
//! A key that is all decimal digits and fits in a u64 is that number as 8 big-endian bytes (so
//! numeric traces sort numerically); any other whitespace-free token is its own bytes. Blank lines
//! are skipped. `SCANEND` (the BP-tree artifact's form for its workloads X and Y) covers
//! `[key, end-key)`: replayed as an ordered scan, or as an unordered range map when the bench runs
//! with `--workload y`.
//!
//! Writing is the inverse: 8-byte keys are written as decimal numbers, other keys as text; a key
//! that cannot round-trip (whitespace, empty, or a digit string that would read back as a number)
//! is an error.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use crate::workload::{KeyArena, Op, OpKind, OpStream};
use crate::WorkloadError;

/// How `SCANEND` lines are replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanEndAs {
    /// Ordered iteration from the key up to the end key.
    Ordered,
    /// Unordered range map over `[key, end-key)`.
    Map,
}

/// Reads trace files into one arena; returns one operation stream per file, in order.
pub struct TraceReader {
    arena: KeyArena,
    ids: HashMap<Vec<u8>, u64>,
    scan_end_as: ScanEndAs,
}

impl TraceReader {
    /// A reader replaying `SCANEND` as `scan_end_as`.
    pub fn new(scan_end_as: ScanEndAs) -> Self {
        TraceReader {
            arena: KeyArena::default(),
            ids: HashMap::new(),
            scan_end_as,
        }
    }

    fn key_id(&mut self, token: &str) -> u64 {
        let bytes = parse_key(token);
        if let Some(&id) = self.ids.get(&bytes) {
            return id;
        }
        let id = self.arena.push(&bytes);
        self.ids.insert(bytes, id);
        id
    }

    /// Reads one trace file.
    pub fn read_file(&mut self, path: &Path) -> Result<OpStream, WorkloadError> {
        let file = std::fs::File::open(path).map_err(|e| WorkloadError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        let mut ops = Vec::new();
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| WorkloadError::Io {
                path: path.to_path_buf(),
                source: e,
            })?;
            let err = |detail: String| WorkloadError::Parse {
                path: path.to_path_buf(),
                line: n + 1,
                detail,
            };
            let mut parts = line.split_whitespace();
            let Some(verb) = parts.next() else { continue };
            let mut arg = |what: &str| {
                parts
                    .next()
                    .ok_or_else(|| err(format!("{verb} needs {what}")))
            };
            let (kind, key, extra) = match verb {
                "INSERT" => (OpKind::Insert, arg("a key")?, None),
                "READ" => (OpKind::Read, arg("a key")?, None),
                "UPDATE" => (OpKind::Update, arg("a key")?, None),
                "DELETE" => (OpKind::Delete, arg("a key")?, None),
                "SCAN" => (OpKind::Scan, arg("a key")?, Some(arg("a count")?)),
                "SCANEND" => {
                    let kind = match self.scan_end_as {
                        ScanEndAs::Ordered => OpKind::ScanTo,
                        ScanEndAs::Map => OpKind::Map,
                    };
                    (kind, arg("a key")?, Some(arg("an end key")?))
                }
                _ => {
                    return Err(err(format!(
                        "unknown operation `{verb}`; valid: INSERT, READ, UPDATE, SCAN, SCANEND, DELETE"
                    )))
                }
            };
            if let Some(more) = parts.next() {
                return Err(err(format!("unexpected `{more}` after the operation")));
            }
            let key = self.key_id(key);
            let arg = match (kind, extra) {
                (OpKind::Scan, Some(count)) => count
                    .parse::<u64>()
                    .map_err(|_| err(format!("scan count `{count}` is not a number")))?,
                (_, Some(end)) => self.key_id(end),
                _ => 0,
            };
            ops.push(Op { kind, key, arg });
        }
        Ok(ops)
    }

    /// The keys of every file read so far.
    pub fn into_arena(self) -> KeyArena {
        self.arena
    }
}

fn parse_key(token: &str) -> Vec<u8> {
    if token.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = token.parse::<u64>() {
            return n.to_be_bytes().to_vec();
        }
    }
    token.as_bytes().to_vec()
}

fn format_key(key: &[u8]) -> Result<String, String> {
    if let Ok(eight) = <[u8; 8]>::try_from(key) {
        return Ok(u64::from_be_bytes(eight).to_string());
    }
    let text = std::str::from_utf8(key).map_err(|_| format!("key {key:?} is not text"))?;
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        return Err(format!("key {text:?} is empty or holds whitespace"));
    }
    if parse_key(text) != key {
        return Err(format!("key {text:?} would read back as a number"));
    }
    Ok(text.to_owned())
}

/// Writes `ops` (keys from `arena`) as a trace file.
pub fn write_trace(path: &Path, arena: &KeyArena, ops: &[Op]) -> Result<(), WorkloadError> {
    let io = |e| WorkloadError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = BufWriter::new(file);
    for (n, op) in ops.iter().enumerate() {
        let bad = |detail| WorkloadError::Parse {
            path: path.to_path_buf(),
            line: n + 1,
            detail,
        };
        let key = format_key(arena.get(op.key)).map_err(bad)?;
        let line = match op.kind {
            OpKind::Insert => format!("INSERT {key}"),
            OpKind::Read => format!("READ {key}"),
            OpKind::Update => format!("UPDATE {key}"),
            OpKind::Delete => format!("DELETE {key}"),
            OpKind::Scan => format!("SCAN {key} {}", op.arg),
            OpKind::ScanTo | OpKind::Map => format!(
                "SCANEND {key} {}",
                format_key(arena.get(op.arg)).map_err(bad)?
            ),
            OpKind::ReadModifyWrite => {
                return Err(bad(
                    "read-modify-write has no trace verb; workload f cannot be written".into(),
                ))
            }
        };
        writeln!(out, "{line}").map_err(io)?;
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeySet;
    use crate::workload::{generate, GenerateParams, WorkloadSpec};

    fn round_trip(keys: KeySet, workload: &str) {
        let spec = WorkloadSpec::named(workload).expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 3000,
            ops: 5000,
            seed: 4,
        };
        let w = generate(&p, &keys.generator(2).expect("keys")).expect("generate");
        let dir = tempfile::tempdir().expect("tempdir");
        let (lp, rp) = (dir.path().join("load.txt"), dir.path().join("run.txt"));
        write_trace(&lp, &w.arena, &w.load).expect("write load");
        write_trace(&rp, &w.arena, &w.run).expect("write run");
        let as_ = if workload == "y" {
            ScanEndAs::Map
        } else {
            ScanEndAs::Ordered
        };
        let mut r = TraceReader::new(as_);
        let (load, run) = (
            r.read_file(&lp).expect("read load"),
            r.read_file(&rp).expect("read run"),
        );
        let arena = r.into_arena();
        let resolve = |a: &KeyArena, ops: &[Op]| -> Vec<(OpKind, Vec<u8>, Vec<u8>)> {
            ops.iter()
                .map(|o| {
                    let arg = match o.kind {
                        OpKind::ScanTo | OpKind::Map => a.get(o.arg).to_vec(),
                        _ => o.arg.to_be_bytes().to_vec(),
                    };
                    (o.kind, a.get(o.key).to_vec(), arg)
                })
                .collect()
        };
        assert_eq!(
            resolve(&arena, &load),
            resolve(&w.arena, &w.load),
            "{keys:?} {workload}: load phase"
        );
        assert_eq!(
            resolve(&arena, &run),
            resolve(&w.arena, &w.run),
            "{keys:?} {workload}: run phase"
        );
    }

    #[test]
    fn traces_round_trip() {
        round_trip(KeySet::Dense, "a");
        round_trip(KeySet::Sparse, "e");
        round_trip(KeySet::Urls, "d");
        round_trip(KeySet::Wiki, "y");
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (text, needle) in [
            ("INSERT 1\nFROB 2\n", ":2:"),
            ("INSERT 1\n\nSCAN 5\n", ":3:"),
            ("SCAN 5 many\n", ":1:"),
            ("READ 1 2\n", ":1:"),
        ] {
            let p = dir.path().join("t.txt");
            std::fs::write(&p, text).expect("write");
            let err = TraceReader::new(ScanEndAs::Ordered)
                .read_file(&p)
                .expect_err("must fail");
            let msg = err.to_string();
            assert!(
                msg.contains("t.txt") && msg.contains(needle),
                "{text:?}: {msg}"
            );
        }
        let missing = TraceReader::new(ScanEndAs::Ordered).read_file(&dir.path().join("nope.txt"));
        assert!(missing.is_err());
    }

    #[test]
    fn numeric_and_string_keys_parse() {
        assert_eq!(parse_key("258"), vec![0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(parse_key("user42"), b"user42".to_vec());
        assert_eq!(
            parse_key("99999999999999999999"),
            b"99999999999999999999".to_vec()
        );
    }
}
