//! The freshness plot of `lifo simulate`: age at start over time, one
//! colour per run (LIFO, FIFO), every start as a dot and the p95 of each
//! 2-second window as a line. Written as SVG and PNG.

use anyhow::Context as _;
use lifo_local::report::percentile;
use lifo_local::simulate::Outcome;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Width of the windows of the p95 line, seconds.
const WINDOW_S: f64 = 2.0;

fn colour(i: usize) -> RGBColor {
    [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
    ][i % 3]
}

/// (window middle, p95 age in seconds) for each 2-second window with starts.
pub fn p95_line(outcome: &Outcome) -> Vec<(f64, f64)> {
    let mut windows: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for s in &outcome.starts {
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
    outcomes: &[Outcome],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let x_max = outcomes
        .iter()
        .flat_map(|o| o.starts.iter().map(|s| s.at_s))
        .fold(1.0f64, f64::max)
        .ceil();
    let y_max = outcomes
        .iter()
        .flat_map(|o| o.starts.iter().map(|s| s.age_ms as f64 / 1000.0))
        .fold(1.0f64, f64::max)
        * 1.05;
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
    if let Some(o) = outcomes.first() {
        let end = o.workload.duration.as_secs_f64();
        chart
            .draw_series(LineSeries::new(
                [(end, 0.0), (end, y_max)],
                BLACK.mix(0.4).stroke_width(1),
            ))?
            .label("arrivals stop")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    }
    for (i, o) in outcomes.iter().enumerate() {
        let c = colour(i);
        chart.draw_series(
            o.starts
                .iter()
                .map(|s| Circle::new((s.at_s, s.age_ms as f64 / 1000.0), 2, c.mix(0.25).filled())),
        )?;
        let name = o.order.as_str().to_uppercase();
        chart
            .draw_series(LineSeries::new(p95_line(o), c.stroke_width(3)))?
            .label(format!("{name}: p95 per 2 s (dots: every start)"))
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

/// Writes the plot of `outcomes` as `<path>.svg` and `<path>.png` (whatever
/// extension `path` has); returns both paths.
pub fn write(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<(PathBuf, PathBuf)> {
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
    draw(SVGBackend::new(&svg, size).into_drawing_area(), outcomes)
        .with_context(|| format!("writing {}", svg.display()))?;
    draw(BitMapBackend::new(&png, size).into_drawing_area(), outcomes)
        .with_context(|| format!("writing {}", png.display()))?;
    Ok((svg, png))
}
