//! `lifo simulate --load …`: freshness at every load, through the local
//! pipeline with AWS's timings and the template's settings
//! ([`lifo_local::aws`]): the same downstream (the simulate flags'), four
//! arrival patterns.
//!
//! - **light**: one task every 5 s on average (Poisson), for `--light-seconds`;
//! - **steady**: half the downstream's capacity, for 120 s;
//! - **mild**: 1.2× its capacity, for 40 s (an overload the queue could
//!   still catch up with: the one where newest first sheds what oldest
//!   first would start in time);
//! - **overload**: twice its capacity, for 40 s (the demo);
//! - **burst**: 200 tasks within one second into an idle queue (nothing
//!   running, no warm instance: a fresh stack is what ten idle minutes
//!   leave), timed to the first and the last start.
//!
//! Each row: age at start p50/p95/p99 and the longest, over the tasks that
//! started while tasks kept arriving (as the demo counts them: a LIFO
//! queue's drain runs the old tasks it still can, by design), and over
//! every start for the burst; the burst's first and last start; and what
//! the wiring cost per task: SNS publishes, process and trigger
//! invocations, throttled attempts.
//!
//! With `--compare`, each load runs in every order (LIFO, FIFO, adaptive)
//! on the same arrivals, for each of `--seeds` seeds: [`compare_table`]
//! gives the tasks started within their TTL, the ages at start while tasks
//! arrive and over every start, and the read units per success, then how
//! adaptive fares against the better of the other two; one plot per load.

use crate::report::percentile;
use crate::report::secs;
use crate::simulate::{self, Outcome};
use anyhow::Context as _;
use lifo_core::Order;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::Duration;

/// An arrival pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Load {
    Light,
    Steady,
    Mild,
    Overload,
    Burst,
}

impl Load {
    pub const ALL: [Load; 5] = [
        Load::Light,
        Load::Steady,
        Load::Mild,
        Load::Overload,
        Load::Burst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Light => "light",
            Self::Steady => "steady",
            Self::Mild => "mild",
            Self::Overload => "overload",
            Self::Burst => "burst",
        }
    }

    /// This pattern's arrivals (offsets from the start), over `base`'s
    /// downstream.
    pub(crate) fn arrivals(
        self,
        base: &simulate::Workload,
        light_seconds: u64,
    ) -> (simulate::Workload, Vec<Duration>) {
        let capacity = base.capacity_per_second();
        let mut w = base.clone();
        match self {
            Self::Light => {
                w.rate = 0.2;
                w.duration = Duration::from_secs(light_seconds);
            }
            Self::Steady => {
                w.rate = capacity / 2.0;
                w.duration = Duration::from_secs(120);
            }
            Self::Mild => {
                w.rate = capacity * 1.2;
                w.duration = Duration::from_secs(40);
            }
            Self::Overload => {
                w.rate = capacity * 2.0;
                w.duration = Duration::from_secs(40);
            }
            Self::Burst => {
                w.rate = 200.0;
                w.duration = Duration::from_secs(1);
                let arrivals = (0..200).map(|i| Duration::from_millis(i * 5)).collect();
                return (w, arrivals);
            }
        }
        let arrivals = w.arrivals();
        (w, arrivals)
    }
}

/// One pattern's figures.
#[derive(Debug, Clone)]
pub struct LoadRow {
    pub load: Load,
    pub seed: u64,
    pub outcome: Outcome,
    /// p50, p95, p99 and the longest age at start (ms), of the tasks that
    /// started while tasks arrived (every start for the burst).
    pub ages_ms: [u64; 4],
    /// p50, p95, p99 over every start (ms), the drain's included.
    pub all_ms: [u64; 3],
    /// From the first arrival to the first and to the last start (ms).
    pub first_start_ms: u64,
    pub last_start_ms: u64,
}

impl LoadRow {
    fn of(load: Load, outcome: Outcome, first_arrival: Duration) -> Self {
        let arriving = outcome.workload.duration.as_secs_f64();
        let mut ages: Vec<u64> = outcome
            .starts
            .iter()
            .filter(|s| load == Load::Burst || s.at_s <= arriving)
            .map(|s| s.age_ms)
            .collect();
        ages.sort_unstable();
        let [p50, p95, p99] = [50.0, 95.0, 99.0].map(|p| percentile(&ages, p));
        let max = ages.last().copied().unwrap_or(0);
        let mut all: Vec<u64> = outcome.starts.iter().map(|s| s.age_ms).collect();
        all.sort_unstable();
        let all_ms = [50.0, 95.0, 99.0].map(|p| percentile(&all, p));
        let from_first =
            |at_s: f64| ((at_s - first_arrival.as_secs_f64()).max(0.0) * 1000.0) as u64;
        let first_start_ms = outcome.starts.first().map_or(0, |s| from_first(s.at_s));
        let last_start_ms = outcome.starts.last().map_or(0, |s| from_first(s.at_s));
        Self {
            load,
            seed: outcome.workload.seed,
            outcome,
            ages_ms: [p50, p95, p99, max],
            all_ms,
            first_start_ms,
            last_start_ms,
        }
    }

    fn per_task(&self, n: usize) -> f64 {
        n as f64 / self.outcome.created.max(1) as f64
    }
}

/// Runs each of `loads`, for each of `seeds`, in each of `orders`, each
/// on a fresh stack (the orders of one seed on the same arrivals).
pub async fn run(
    base: simulate::Workload,
    light_seconds: u64,
    loads: &[Load],
    orders: &[Order],
    seeds: std::ops::Range<u64>,
) -> anyhow::Result<Vec<LoadRow>> {
    let mut rows = Vec::new();
    for load in loads {
        for seed in seeds.clone() {
            let seeded = simulate::Workload {
                seed,
                ..base.clone()
            };
            let (workload, arrivals) = load.arrivals(&seeded, light_seconds);
            for order in orders {
                eprintln!(
                    "load {} ({order}, seed {seed}): {} arrivals over {} s into {:.1} tasks/s",
                    load.name(),
                    arrivals.len(),
                    workload.duration.as_secs(),
                    workload.capacity_per_second()
                );
                let outcome = crate::engine::run(&workload, *order, &arrivals, &mut |_| {})
                    .await
                    .with_context(|| format!("the {} load, {order}, seed {seed}", load.name()))?;
                let first = arrivals.first().copied().unwrap_or_default();
                rows.push(LoadRow::of(*load, outcome, first));
            }
        }
    }
    Ok(rows)
}

/// The median of `v` (the lower middle one), 0 when empty.
pub(crate) fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<T> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// The orders side by side at each load (`--compare`): per load and order,
/// each seed's tasks started within their TTL and shed, the median over the
/// seeds of the ages at start and of the read units per success; then, per
/// load, adaptive against the better of LIFO and FIFO.
pub fn compare_table(rows: &[LoadRow]) -> String {
    let mut out = String::from(
        "| load | order | started in TTL (each seed) | shed | age at start while arriving p50 | p95 | p99 | over every start p50 | p95 | p99 | read units / success |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut loads: Vec<Load> = rows.iter().map(|r| r.load).collect();
    loads.dedup();
    let of = |load: Load, order: Order| -> Vec<&LoadRow> {
        rows.iter()
            .filter(|r| r.load == load && r.outcome.order == order)
            .collect()
    };
    let list = |v: Vec<usize>| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut verdicts = String::new();
    for load in &loads {
        for order in Order::ALL {
            let runs = of(*load, order);
            if runs.is_empty() {
                continue;
            }
            let med = |f: &dyn Fn(&LoadRow) -> u64| median(runs.iter().map(|r| f(r)).collect());
            let ru = median(
                runs.iter()
                    .map(|r| r.outcome.read_units_per_success)
                    .collect(),
            );
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3} |",
                load.name(),
                order,
                list(runs.iter().map(|r| r.outcome.starts.len()).collect()),
                list(runs.iter().map(|r| r.outcome.shed).collect()),
                secs(med(&|r| r.ages_ms[0]).unwrap_or(0)),
                secs(med(&|r| r.ages_ms[1]).unwrap_or(0)),
                secs(med(&|r| r.ages_ms[2]).unwrap_or(0)),
                secs(med(&|r| r.all_ms[0]).unwrap_or(0)),
                secs(med(&|r| r.all_ms[1]).unwrap_or(0)),
                secs(med(&|r| r.all_ms[2]).unwrap_or(0)),
                ru.unwrap_or(0.0),
            );
        }
        let (l, f, a) = (
            of(*load, Order::Lifo),
            of(*load, Order::Fifo),
            of(*load, Order::Adaptive),
        );
        if l.len() != a.len() || f.len() != a.len() || a.is_empty() {
            continue;
        }
        let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { 1.0 };
        let per_seed = |g: &dyn Fn(usize) -> f64| {
            (0..a.len())
                .map(|i| format!("{:.2}", g(i)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let started = |rs: &[&LoadRow], i: usize| rs[i].outcome.starts.len() as f64;
        let p50 = |rs: &[&LoadRow], i: usize| rs[i].ages_ms[0] as f64;
        let ru = |rs: &[&LoadRow], i: usize| rs[i].outcome.read_units_per_success;
        let _ = writeln!(
            verdicts,
            "- {}: started in TTL, adaptive / the better of LIFO and FIFO: {} (bar ≥ 0.98); \
             p50 while arriving, adaptive / LIFO: {}, adaptive / FIFO: {}; \
             read units per success, adaptive / LIFO: {} (bar ≤ 1.1)",
            load.name(),
            per_seed(&|i| ratio(started(&a, i), started(&l, i).max(started(&f, i)))),
            per_seed(&|i| ratio(p50(&a, i), p50(&l, i))),
            per_seed(&|i| ratio(p50(&a, i), p50(&f, i))),
            per_seed(&|i| ratio(ru(&a, i), ru(&l, i))),
        );
    }
    if !verdicts.is_empty() {
        out.push_str("\nAdaptive, per seed:\n");
        out.push_str(&verdicts);
    }
    out
}

/// One plot per load (of the first seed), every order run: `<path>-<load>`.
pub fn plots(path: &std::path::Path, rows: &[LoadRow]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut written = Vec::new();
    let Some(seed) = rows.first().map(|r| r.seed) else {
        return Ok(written);
    };
    let mut loads: Vec<Load> = rows.iter().map(|r| r.load).collect();
    loads.dedup();
    for load in loads {
        let outcomes: Vec<Outcome> = rows
            .iter()
            .filter(|r| r.load == load && r.seed == seed)
            .map(|r| r.outcome.clone())
            .collect();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("lifo-simulate");
        let at = path.with_file_name(format!("{stem}-{}.svg", load.name()));
        let (_, png) = crate::plot::write(&at, &outcomes)?;
        written.push(png);
    }
    Ok(written)
}

/// The table (Markdown).
pub fn table(rows: &[LoadRow]) -> String {
    let mut out = String::from(
        "| load | tasks | started | shed | age at start p50 | p95 | p99 | longest | first / last start | SNS publishes / task | process invocations / task | trigger invocations / task | throttled attempts / task |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let [p50, p95, p99, max] = r.ages_ms;
        let o = &r.outcome;
        let burst = if r.load == Load::Burst {
            format!("{} / {}", secs(r.first_start_ms), secs(r.last_start_ms))
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {burst} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.load.name(),
            o.created,
            o.starts.len(),
            o.shed,
            secs(p50),
            secs(p95),
            secs(p99),
            secs(max),
            r.per_task(o.pipeline.published),
            r.per_task(o.pipeline.process_invocations),
            r.per_task(o.pipeline.trigger_invocations),
            r.per_task(o.pipeline.throttles),
        );
    }
    out
}

pub fn json(rows: &[LoadRow]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                let [p50, p95, p99, max] = r.ages_ms;
                let o = &r.outcome;
                json!({
                    "load": r.load.name(),
                    "order": r.outcome.order.as_str(),
                    "seed": r.seed,
                    "ageAtStartEveryStartMs": {"p50": r.all_ms[0], "p95": r.all_ms[1], "p99": r.all_ms[2]},
                    "readUnitsPerSuccess": r.outcome.read_units_per_success,
                    "writeUnitsPerSuccess": o.write_units_per_success,
                    "created": o.created,
                    "started": o.starts.len(),
                    "shed": o.shed,
                    "ageAtStartMs": {"p50": p50, "p95": p95, "p99": p99, "max": max},
                    "firstStartMs": r.first_start_ms,
                    "lastStartMs": r.last_start_ms,
                    "snsPublishesPerTask": r.per_task(o.pipeline.published),
                    "processInvocationsPerTask": r.per_task(o.pipeline.process_invocations),
                    "triggerInvocationsPerTask": r.per_task(o.pipeline.trigger_invocations),
                    "throttlesPerTask": r.per_task(o.pipeline.throttles),
                    "deadLettered": o.pipeline.dead_lettered,
                    "dropped": o.pipeline.dropped,
                    "sweeps": o.pipeline.sweeps,
                    "writeUnitsPerSuccessfulTask": o.write_units_per_successful_task,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_load_is_its_share_of_the_downstream_for_its_time() {
        let base = simulate::Workload::demo(1.0, Duration::from_secs(1), 1);
        let load = |l: Load| {
            let (w, _) = l.arrivals(&base, 300);
            (w.load(), w.duration.as_secs())
        };
        assert_eq!(load(Load::Steady), (0.5, 120));
        assert_eq!(load(Load::Mild), (1.2, 40));
        assert_eq!(load(Load::Overload), (2.0, 40));
        let names: Vec<&str> = Load::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(names, ["light", "steady", "mild", "overload", "burst"]);
    }
}
