//! The freshness plot of `lifo simulate`: age at start over time, one
//! colour per series (a run: LIFO, FIFO; or a run's class: a tenant group,
//! a priority), every start as a dot and the p95 of each 2-second window as a
//! line. Written as SVG and PNG.

use crate::report::percentile;
use crate::simulate::{Outcome, Start};
use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Width of the windows of the p95 line, seconds.
const WINDOW_S: f64 = 2.0;

fn colour(i: usize) -> RGBColor {
    // Okabe-Ito: told apart with any colour vision.
    [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
    ][i % 6]
}

/// (window middle, p95 age in seconds) for each 2-second window with starts.
pub fn p95_line(starts: &[Start]) -> Vec<(f64, f64)> {
    let mut windows: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for s in starts {
        windows
            .entry((s.at_s / WINDOW_S).floor() as u64)
            .or_default()
            .push(s.age_ms);
    }
    windows
        .into_iter()
        .map(|(w, mut ages)| {
            ages.sort_unstable();
            (
                (w as f64 + 0.5) * WINDOW_S,
                percentile(&ages, 95.0) as f64 / 1000.0,
            )
        })
        .collect()
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    arrivals_end_s: f64,
    series: &[(String, Vec<Start>)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let x_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|s| s.at_s))
        .fold(1.0f64, f64::max)
        .ceil();
    let y_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|s| s.age_ms as f64 / 1000.0))
        .fold(1.0f64, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first arrival")
        .y_desc("age at start (s)")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    if arrivals_end_s > 0.0 {
        chart
            .draw_series(LineSeries::new(
                [(arrivals_end_s, 0.0), (arrivals_end_s, y_max)],
                BLACK.mix(0.4).stroke_width(1),
            ))?
            .label("arrivals stop")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    }
    for (i, (name, starts)) in series.iter().enumerate() {
        let c = colour(i);
        chart.draw_series(
            starts
                .iter()
                .map(|s| Circle::new((s.at_s, s.age_ms as f64 / 1000.0), 2, c.mix(0.25).filled())),
        )?;
        chart
            .draw_series(LineSeries::new(p95_line(starts), c.stroke_width(3)))?
            .label(format!("{name}: p95 per 2 s"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 16))
        .draw()?;
    root.present()
}

/// Writes the plot of `outcomes` (one series per run, dots: every start) as
/// `<path>.svg` and `<path>.png`; returns both paths.
pub fn write(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let title = match outcomes.first() {
        Some(o) => format!(
            "Age at start: {:.0} tasks/s arriving, {:.0}/s served ({:.1}× load), TTL {} s",
            o.workload.rate,
            o.workload.capacity_per_second(),
            o.workload.load(),
            o.workload.ttl_seconds
        ),
        None => "Age at start".to_owned(),
    };
    let end = outcomes
        .first()
        .map_or(0.0, |o| o.workload.duration.as_secs_f64());
    let series: Vec<(String, Vec<Start>)> = outcomes
        .iter()
        .map(|o| (o.order.as_str().to_uppercase(), o.starts.clone()))
        .collect();
    write_series(path, &title, end, &series)
}

/// Writes a plot of `series` (name, starts) titled `title`, with a line
/// where arrivals stop (`arrivals_end_s`), as `<path>.svg` and
/// `<path>.png` (whatever extension `path` has); returns both paths.
pub fn write_series(
    path: &Path,
    title: &str,
    arrivals_end_s: f64,
    series: &[(String, Vec<Start>)],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let svg = path.with_extension("svg");
    // ab_glyph needs the font registered once; a second registration is a
    // harmless replacement.
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow::anyhow!("the embedded font does not load"))?;
    if let Some(dir) = svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let png = path.with_extension("png");
    let size = (1100, 600);
    let svg_area = SVGBackend::new(&svg, size).into_drawing_area();
    draw(svg_area, title, arrivals_end_s, series)
        .with_context(|| format!("writing {}", svg.display()))?;
    let png_area = BitMapBackend::new(&png, size).into_drawing_area();
    draw(png_area, title, arrivals_end_s, series)
        .with_context(|| format!("writing {}", png.display()))?;
    Ok((svg, png))
}
