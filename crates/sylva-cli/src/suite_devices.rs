//! The devices set of `sylva bench --suite patree` (`crate::suite_patree`): `fio`'s 4 KiB
//! random reads, the figure every disk-bound claim is read against, and `sylva calibrate`'s
//! measurement, whose model the probe set reads.
//!
//! `fio` is run as a program (installed from Debian), not reimplemented: its figure is the
//! reference because it is not ours. Each measurement is one row of a table whose rows are the
//! times it was taken (before a set, in a repetition), so the disk's drift over a suite run can
//! be read beside the engines' figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::suite_patree::Sizes;

/// fio's queue depths.
pub(crate) const FIO_DEPTHS: &[u32] = &[1, 32, 64];

/// One `fio` measurement at every depth of [`FIO_DEPTHS`]: (IOPS, mean latency in µs) each,
/// or why there is none.
pub(crate) type FioRow = Result<Vec<(f64, f64)>, String>;

/// fio's 4 KiB random reads at each of [`FIO_DEPTHS`] on `file` (at least 16 MiB, `bytes`
/// if more), `seconds` a depth.
pub(crate) fn fio_row(file: &Path, bytes: u64, seconds: u64) -> FioRow {
    let size = bytes.max(16 << 20);
    FIO_DEPTHS
        .iter()
        .map(|&depth| fio(file, size, depth, seconds))
        .collect()
}

/// A table of labelled fio rows (`label`: when it was measured), `seconds` a point.
pub(crate) fn fio_table(rows: &[(String, FioRow)], seconds: u64) -> String {
    let mut out = format!("fio, {seconds} s a point (IOPS, and mean latency in µs):\n\n| when |");
    for d in FIO_DEPTHS {
        let _ = write!(out, " QD {d} IOPS | QD {d} µs |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(2 * FIO_DEPTHS.len()));
    out.push('\n');
    for (label, row) in rows {
        match row {
            Ok(points) => {
                let _ = write!(out, "| {label} |");
                for (iops, lat) in points {
                    let _ = write!(out, " {iops:.0} | {lat:.1} |");
                }
                out.push('\n');
            }
            Err(e) => {
                let _ = write!(out, "| {label} | no figures: {e} |");
                out.push_str(&" |".repeat(2 * FIO_DEPTHS.len() - 1));
                out.push('\n');
            }
        }
    }
    out.push('\n');
    out
}

/// One fio run: (read IOPS, mean latency in µs).
fn fio(file: &Path, size: u64, depth: u32, seconds: u64) -> Result<(f64, f64), String> {
    let out = Command::new("fio")
        .args([
            "--name=r",
            &format!("--filename={}", file.display()),
            &format!("--size={size}"),
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
            &format!("--iodepth={depth}"),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--output-format=json",
        ])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "fio is not installed".to_string(),
            _ => format!("cannot run fio: {e}"),
        })?;
    if !out.status.success() {
        return Err(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("fio's JSON does not parse: {e}"))?;
    let read = &v["jobs"][0]["read"];
    match (read["iops"].as_f64(), read["lat_ns"]["mean"].as_f64()) {
        (Some(iops), Some(lat)) => Ok((iops, lat / 1e3)),
        _ => Err("fio's JSON has no read IOPS".into()),
    }
}

/// Calibrates on a scratch file in `dir` and writes the model to `out/patree-model.txt`;
/// its points as a table in `md`. The model's path, if the calibration ran.
#[cfg(target_os = "linux")]
pub(crate) fn calibrate_table(
    md: &mut String,
    dir: &Path,
    out: &Path,
    sizes: Sizes,
    scale: f64,
) -> Option<PathBuf> {
    use sylva::exec::calibrate::{calibrate, CalibrateOptions};
    let options = CalibrateOptions {
        // Whole MiB: the scratch file is written in 1 MiB O_DIRECT chunks.
        file_bytes: sizes.tree_bytes.max(16 << 20).next_multiple_of(1 << 20),
        per_point: Duration::from_millis(((300.0 * scale) as u64).clamp(20, 300)),
        read_percents: vec![100, 90, 50],
        depths: vec![1, 2, 4, 8, 16, 32, 64],
        max_pause: Duration::from_micros(200),
    };
    let c = match calibrate(dir, &options) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(md, "Calibration: no result: {e}.\n");
            return None;
        }
    };
    let path = out.join("patree-model.txt");
    if let Err(e) = std::fs::write(&path, c.model.to_text()) {
        let _ = writeln!(md, "Calibration: cannot write {}: {e}.\n", path.display());
        return None;
    }
    let _ = writeln!(
        md,
        "`sylva calibrate` ({} ms a point, random pauses up to 200 µs before each probe; model fitted to {} probes, written to `{}`):\n\n| reads % | depth | IOPS | latency µs | CPU µs/IO |\n|---:|---:|---:|---:|---:|",
        options.per_point.as_millis(),
        c.samples,
        path.display()
    );
    for p in &c.points {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.1} | {:.2} |",
            p.read_percent, p.depth, p.iops, p.mean_latency_us, p.cpu_us_per_io
        );
    }
    md.push('\n');
    Some(path)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn calibrate_table(
    md: &mut String,
    _dir: &Path,
    _out: &Path,
    _sizes: Sizes,
    _scale: f64,
) -> Option<PathBuf> {
    let _ = writeln!(md, "Calibration: io_uring is Linux's; not calibrated.\n");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fio_table_has_a_row_per_measurement_and_says_why_one_has_no_figures() {
        let rows = vec![
            ("1: before set 2".to_string(), Ok(vec![(100.0, 9.5); 3])),
            (
                "1: at the end".to_string(),
                Err("fio is not installed".into()),
            ),
        ];
        let t = fio_table(&rows, 5);
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(
            lines[2],
            "| 1: before set 2 | 100 | 9.5 | 100 | 9.5 | 100 | 9.5 |"
        );
        // Every row has as many cells as the header.
        let cells = |l: &str| l.matches('|').count();
        assert!(lines.iter().all(|l| cells(l) == cells(lines[0])), "{t}");
        assert!(lines[3].contains("fio is not installed"));
    }
}
