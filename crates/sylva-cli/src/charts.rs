//! SVG charts of suite results (plotters, SVG backend only: no system fonts or libraries needed
//! beyond what plotters' SVG text output uses).

use std::path::Path;

use plotters::prelude::*;
use ycsb::report::RunRecord;

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("cannot draw {}: {e}", path.display())
}

/// Grouped bars: one group per workload label, one bar per engine (median over repetitions),
/// throughput on a log scale so engines an order of magnitude apart stay readable.
pub fn throughput(
    path: &Path,
    title: &str,
    records: &[RunRecord],
    phase: &str,
) -> Result<(), String> {
    let rows: Vec<&RunRecord> = records.iter().filter(|r| r.phase == phase).collect();
    let groups = distinct(rows.iter().map(|r| r.workload.as_str()));
    let engines = distinct(rows.iter().map(|r| r.engine.as_str()));
    if groups.is_empty() {
        return Ok(());
    }
    let value = |g: &str, e: &str| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.workload == g && r.engine == e)
            .map(|r| r.ops_per_sec)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let max = rows.iter().map(|r| r.ops_per_sec).fold(1.0, f64::max) * 2.0;
    let min = rows
        .iter()
        .map(|r| r.ops_per_sec)
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
        / 2.0;
    let width = (160 * groups.len() as u32).max(640);
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups.len() as f64, (min..max).log_scale())
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len())
        .x_label_formatter(&|x| {
            groups
                .get(x.floor() as usize)
                .map(|g| g.to_string())
                .unwrap_or_default()
        })
        .y_desc("operations per second")
        .draw()
        .map_err(|e| err(path, e))?;
    let slot = 0.8 / engines.len().max(1) as f64;
    for (ei, engine) in engines.iter().enumerate() {
        let color = COLORS[ei % COLORS.len()];
        let bars: Vec<Rectangle<(f64, f64)>> = groups
            .iter()
            .enumerate()
            .filter_map(|(gi, g)| {
                let v = value(g, engine)?;
                let x0 = gi as f64 + 0.1 + slot * ei as f64;
                Some(Rectangle::new(
                    [(x0, min), (x0 + slot * 0.9, v)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| err(path, e))?
            .label(engine.to_string())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// Latency CDF: one line per engine, latency on a log scale, cumulative fraction up the y axis
/// (the tail is read off where the lines reach the top).
pub fn latency_cdf(path: &Path, title: &str, rows: &[&RunRecord]) -> Result<(), String> {
    let engines = distinct(rows.iter().map(|r| r.engine.as_str()));
    let points = |e: &str| {
        rows.iter()
            .find(|r| r.engine == e)
            .map(|r| r.latency_cdf_ns.clone())
            .unwrap_or_default()
    };
    let all: Vec<u64> = rows
        .iter()
        .flat_map(|r| r.latency_cdf_ns.iter().map(|p| p.1))
        .collect();
    let (Some(&lo), Some(&hi)) = (all.iter().min(), all.iter().max()) else {
        return Ok(());
    };
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(
            ((lo.max(1) as f64) / 1.5..(hi as f64) * 1.5).log_scale(),
            0f64..1.0,
        )
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("latency (ns)")
        .y_desc("fraction of operations")
        .draw()
        .map_err(|e| err(path, e))?;
    for (ei, engine) in engines.iter().enumerate() {
        let color = COLORS[ei % COLORS.len()];
        let line: Vec<(f64, f64)> = points(engine)
            .into_iter()
            .map(|(q, ns)| (ns.max(1) as f64, q))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|e| err(path, e))?
            .label(engine.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}
