//! The measures that run a workload through the local pipeline: write
//! units, freshness (LIFO vs FIFO), the rate limit.

use super::part::{BenchArgs, Line, Report};
use crate::report::percentile;
use crate::report::secs;
use crate::simulate::{Outcome, Workload};
use anyhow::Context as _;
use lifo_core::Order;
use serde_json::json;
use std::time::Duration;

/// The downstream of the overload runs: 5 at a time × 500 ms = 10 tasks/s,
/// against 20 arrivals/s. Not warmed ([`crate::warm_up`]): these parts
/// count units, check the rate limit and compare orders run alike, and a
/// warm-up would double a short run's time.
pub(super) fn overload(duration: Duration, ttl_seconds: u64) -> Workload {
    Workload {
        ttl_seconds,
        budget: Duration::from_secs(10),
        warm_up: Duration::ZERO,
        ..Workload::demo(20.0, duration.max(Duration::from_secs(1)), 1)
    }
}

async fn run_order(workload: &Workload, order: Order) -> anyhow::Result<Outcome> {
    let arrivals = workload.arrivals();
    crate::engine::run(workload, order, &arrivals, &mut |_| {})
        .await
        .with_context(|| format!("{order} run"))
}

/// p95 age at start (ms) of the starts in each minute of the load (the
/// last one may be partial).
fn p95_per_minute(o: &Outcome) -> Vec<u64> {
    let minutes = (o.workload.duration.as_secs_f64() / 60.0).ceil().max(1.0) as usize;
    (0..minutes)
        .map(|m| {
            let mut ages: Vec<u64> = o
                .starts
                .iter()
                .filter(|s| {
                    (s.at_s / 60.0) as usize == m && s.at_s <= o.workload.duration.as_secs_f64()
                })
                .map(|s| s.age_ms)
                .collect();
            ages.sort_unstable();
            percentile(&ages, 95.0)
        })
        .collect()
}

/// A LIFO overload run of 20 s (or `--minutes`, if shorter).
pub(super) async fn write_units(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let w = overload(Duration::from_secs_f64(args.write_units_seconds()), 10);
    let o = run_order(&w, Order::Lifo).await?;
    out.figures.insert(
        "writeUnitsPerSuccessfulTask".into(),
        json!(o.write_units_per_successful_task),
    );
    out.figures.insert(
        "writeUnitsPerSuccess".into(),
        json!(o.write_units_per_success),
    );
    out.lines.push(Line {
        measure: "Write units per successful task (put + claim + finish, incl. GSI)".into(),
        result: format!(
            "{:.2} (all writes incl. shed tasks / successes: {:.2})",
            o.write_units_per_successful_task, o.write_units_per_success
        ),
        target: "≤ 6".into(),
        met: Some(o.write_units_per_successful_task <= 6.0 + 1e-9),
        flags: if args.write_units_seconds() < 20.0 {
            format!(" --minutes {}", args.minutes)
        } else {
            String::new()
        },
    });
    Ok(out)
}

pub(super) async fn freshness(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let duration = Duration::from_secs_f64((args.minutes * 60.0).max(1.0));
    let w = overload(duration, args.ttl);
    let lifo = run_order(&w, Order::Lifo).await?;
    let fifo = run_order(&w, Order::Fifo).await?;
    let (l, f) = (p95_per_minute(&lifo), p95_per_minute(&fifo));
    let target_ms = 3 * w.latency.as_millis() as u64;
    let l_max = l.iter().copied().max().unwrap_or(0);
    let (f_first, f_max) = (
        f.first().copied().unwrap_or(0),
        f.iter().copied().max().unwrap_or(0),
    );
    out.figures.insert(
        "freshness".into(),
        json!({
            "lifoP95Ms": lifo.age_under_load_ms[1],
            "fifoP95Ms": fifo.age_under_load_ms[1],
            "lifoP95PerMinuteMs": l,
            "fifoP95PerMinuteMs": f,
            "lifoShed": lifo.shed, "fifoShed": fifo.shed,
            "lifoProcessed": lifo.processed, "fifoProcessed": fifo.processed,
        }),
    );
    let per_minute = |v: &[u64]| {
        v.iter()
            .map(|ms| format!("{:.1}", *ms as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    out.lines.push(Line {
        measure: format!(
            "Freshness, 2× overload for {} min (20/s into 5 × 500 ms, TTL {} s): p95 age at start",
            args.minutes, args.ttl
        ),
        result: format!(
            "LIFO {} (per minute, s: {}); FIFO {} (per minute, s: {})",
            secs(lifo.age_under_load_ms[1]),
            per_minute(&l),
            secs(fifo.age_under_load_ms[1]),
            per_minute(&f)
        ),
        target: format!("LIFO ≤ {} every minute; FIFO grows", secs(target_ms)),
        met: Some(l_max <= target_ms && f_max > f_first.max(target_ms)),
        flags: format!(" --minutes {} --ttl {}", args.minutes, args.ttl),
    });
    Ok(out)
}

/// Tasks started per second at most, and the burst above it, of the
/// rate-limit run.
const LIMIT: u32 = 10;
const BURST: u32 = 1;

/// 5× overload against a downstream that could serve far more but is rate
/// limited to 10 tasks/s (burst 1): starts in any one second, from the
/// tasks' own start times.
pub(super) async fn rate_limit(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let seconds = (args.minutes * 60.0).clamp(1.0, 30.0);
    let w = Workload {
        rate: 5.0 * f64::from(LIMIT),
        duration: Duration::from_secs_f64(seconds),
        // 50 at a time × 100 ms: 500 tasks/s of capacity, so only the
        // rate limit binds.
        concurrency: 50,
        latency: Duration::from_millis(100),
        ttl_seconds: 10,
        rate_limit: Some(process::RateLimit {
            per_second: std::num::NonZeroU32::new(LIMIT).unwrap_or(std::num::NonZeroU32::MIN),
            burst: std::num::NonZeroU32::new(BURST).unwrap_or(std::num::NonZeroU32::MIN),
        }),
        ..overload(Duration::from_secs_f64(seconds), 10)
    };
    let o = run_order(&w, Order::Lifo).await?;
    let most = o.max_starts_in_a_second();
    let mean = o.starts.len() as f64 / (o.starts.last().map_or(0.0, |s| s.at_s).max(1.0));
    out.figures
        .insert("rateLimitMaxStartsPerSecond".into(), json!(most));
    out.figures
        .insert("rateLimitMeanStartsPerSecond".into(), json!(mean));
    out.lines.push(Line {
        measure: format!(
            "Rate limit {LIMIT}/s (burst {BURST}), {:.0} s of 5× overload ({}/s into 50 × 100 ms): \
             most tasks started in any 1 s",
            seconds,
            5 * LIMIT
        ),
        result: format!(
            "{most} (mean {mean:.1}/s over {} starts; {} shed)",
            o.starts.len(),
            o.shed
        ),
        target: format!("≤ {}", LIMIT + BURST),
        met: Some(most <= (LIMIT + BURST) as usize),
        flags: if seconds < 30.0 {
            format!(" --minutes {}", args.minutes)
        } else {
            String::new()
        },
    });
    Ok(out)
}
