//! The sweep's table (Markdown): per constant, workload and figure, the
//! default's median over the seeds with its spread, and each variant's
//! median against it; then which constants stay within 1% everywhere.

use super::{Swept, Variant};
use std::fmt::Write as _;

/// What stays within this fraction of the default changes nothing.
pub const TOLERANCE: f64 = 0.01;

/// A figure's value as shown: ages in seconds, ratios and units with three
/// decimals, counts whole.
fn value(metric: &str, v: f64) -> String {
    if metric.contains("age") {
        format!("{:.2} s", v / 1000.0)
    } else if metric.contains("vs") || metric.contains("units") {
        format!("{v:.3}")
    } else {
        format!("{v:.0}")
    }
}

fn change(c: Option<f64>) -> String {
    match c {
        None => "—".to_owned(),
        Some(0.0) => "0".to_owned(),
        Some(c) => format!("{:+.1}%", c * 100.0),
    }
}

/// The table of `swept`, and the verdict.
pub fn table(swept: &[Swept]) -> String {
    let mut out = String::from(
        "| constant | workload | figure | default: median [min–max] | without | half | double |\n\
         |---|---|---|---:|---:|---:|---:|\n",
    );
    for s in swept {
        let mut first = true;
        for (bench, runs) in &s.results {
            let Some((_, default)) = runs.iter().find(|(v, _)| *v == Variant::Default) else {
                continue;
            };
            for (i, metric) in bench.metrics().iter().enumerate() {
                let (lo, hi) = default.spread(i);
                let name = match first {
                    true => format!("`{}`", s.constant.name),
                    false => String::new(),
                };
                first = false;
                let _ = writeln!(
                    out,
                    "| {name} | {} | {metric} | {} [{}–{}] | {} | {} | {} |",
                    bench.name(),
                    value(metric, default.median(i)),
                    value(metric, lo),
                    value(metric, hi),
                    change(s.change(*bench, Variant::Without, i)),
                    change(s.change(*bench, Variant::Half, i)),
                    change(s.change(*bench, Variant::Double, i)),
                );
            }
        }
    }
    out.push_str("\nWhat each does, and what \"without\" sets:\n\n");
    for s in swept {
        let c = &s.constant;
        let _ = writeln!(
            out,
            "- `{}` ({}): {}; without: {}.",
            c.name,
            c.place,
            c.does,
            c.without.unwrap_or("none (it has no off value)")
        );
    }
    let idle: Vec<&str> = swept
        .iter()
        .filter(|s| s.within(TOLERANCE))
        .map(|s| s.constant.name)
        .collect();
    let _ = writeln!(
        out,
        "\nWithin {:.0}% of the default in every variant, on every figure of every workload: {}.",
        TOLERANCE * 100.0,
        match idle.is_empty() {
            true => "none".to_owned(),
            false => idle.join(", "),
        }
    );
    out
}
