//! `lifo simulate --mix …`: the three features no other queue offers in a
//! LIFO queue, each through the local pipeline (AWS's timings, the
//! template's settings) against a run that shows what they change:
//!
//! - **tenants**: nine tenants and one or more flooding ones, with the
//!   fair share on, capped and off, and the nine alone, against the ideal
//!   scheduler ([`tenants`]);
//! - **keys**: 50 keys, each updated about once a second, with
//!   `supersedeKey` (latest wins) and without;
//! - **priorities**: 2× overload with half the arrivals `high`, and the high
//!   arrivals alone at the same rate.
//!
//! Every run's downstream takes its latency ± 50% (uniform, [`JITTER`]).
//!
//! Each prints a table per class (tenant group, priority, key use): tasks,
//! starts, sheds, supersedes and age at start while tasks kept arriving;
//! and writes one plot of age at start over time per class.

use crate::report::percentile;
use crate::report::secs;
use crate::simulate::{Outcome, Start, Workload};
use anyhow::Context as _;
use lifo_core::{Order, Task, TaskStatus};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

pub mod tenants;

/// Each run of a mix takes the downstream's latency ± this (uniform).
pub const JITTER: f64 = 0.5;

/// A feature's workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    Tenants,
    Keys,
    /// `lanes` is its name before this release, kept for one release.
    #[value(alias = "lanes")]
    Priorities,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Tenants => "tenants",
            Mix::Keys => "keys",
            Mix::Priorities => "priorities",
        }
    }
}

/// One run of a mix: its label, the class of each task, the outcome.
pub struct MixRun {
    pub label: String,
    pub outcome: Outcome,
    /// (class, tasks of the class), classes in the order shown.
    pub classes: Vec<(String, Vec<Task>)>,
}

/// One row of the table: a class of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassRow {
    pub run: String,
    pub class: String,
    pub tasks: usize,
    pub started: usize,
    pub shed: usize,
    pub superseded: usize,
    /// Starts of a task whose key had a newer task created before the
    /// start (with supersedeKey, only the race that remains: a claim that
    /// landed before the newer task's write).
    pub stale_starts: usize,
    /// p50, p95, p99 age at start while tasks kept arriving (ms).
    pub ages_ms: [u64; 3],
    /// The run's read units per success (every class of the run).
    pub read_units_per_success: f64,
}

/// Merged Poisson arrivals of several sources: (offset, source index).
fn merged(base: &Workload, rates: &[f64]) -> Vec<(Duration, usize)> {
    let mut all: Vec<(Duration, usize)> = rates
        .iter()
        .enumerate()
        .flat_map(|(i, rate)| {
            let w = Workload {
                rate: *rate,
                seed: base.seed.wrapping_mul(1_000).wrapping_add(i as u64),
                ..base.clone()
            };
            w.arrivals().into_iter().map(move |a| (a, i))
        })
        .collect();
    all.sort();
    all
}

/// A run's arrivals and the create request of each.
pub(crate) struct Plan {
    pub(crate) label: String,
    pub(crate) workload: Workload,
    pub(crate) arrivals: Vec<Duration>,
    pub(crate) specs: Vec<Value>,
}

fn plan(label: &str, workload: &Workload, arrivals: Vec<(Duration, Value)>) -> Plan {
    let (arrivals, specs) = arrivals.into_iter().unzip();
    Plan {
        label: label.to_owned(),
        workload: workload.clone(),
        arrivals,
        specs,
    }
}

fn spec(n: usize, ttl: u64, extra: Value) -> Value {
    let mut s = json!({"payload": {"n": n}, "ttlSeconds": ttl});
    if let (Some(s), Value::Object(extra)) = (s.as_object_mut(), extra) {
        s.extend(extra);
    }
    s
}

/// The runs of `mix` over `base`'s downstream.
pub(crate) fn plans(mix: Mix, base: &Workload, tenants: &tenants::TenantsArgs) -> Vec<Plan> {
    let cap = base.capacity_per_second();
    let ttl = base.ttl_seconds;
    let mut w = base.clone();
    w.duration = Duration::from_secs(60);
    // A real downstream's runs do not all take the same time; with a fixed
    // latency the slots free in lockstep, every run of the mix alike.
    w.latency_jitter = JITTER;
    match mix {
        Mix::Tenants => tenants::plans(&w, tenants),
        Mix::Keys => {
            // 50 keys, each updated about once a second: 5× the capacity
            // of the default downstream.
            let keys = 50;
            let all = merged(&w, &vec![1.0; keys]);
            let tagged = |keyed: bool| -> Vec<(Duration, Value)> {
                all.iter()
                    .enumerate()
                    .map(|(n, (at, k))| {
                        let key = format!("key-{k}");
                        let extra = if keyed {
                            json!({"supersedeKey": key})
                        } else {
                            json!({})
                        };
                        let mut s = spec(n, ttl, extra);
                        s["payload"]["key"] = json!(key);
                        (*at, s)
                    })
                    .collect()
            };
            vec![
                plan("supersedeKey (latest wins)", &w, tagged(true)),
                plan("no key", &w, tagged(false)),
            ]
        }
        Mix::Priorities => {
            // 2× overload, half of it high; then the high arrivals alone.
            let all = merged(&w, &[cap, cap]);
            let tagged = |high_only: bool| -> Vec<(Duration, Value)> {
                all.iter()
                    .enumerate()
                    .filter(|(_, (_, priority))| !(high_only && *priority == 1))
                    .map(|(n, (at, priority))| {
                        let p = if *priority == 0 { "high" } else { "normal" };
                        (*at, spec(n, ttl, json!({"priority": p})))
                    })
                    .collect()
            };
            vec![
                plan("high + normal", &w, tagged(false)),
                plan("high alone", &w, tagged(true)),
            ]
        }
    }
}

/// The class a task is shown under in `run` of `mix`.
fn class_of(mix: Mix, run: &str, t: &Task) -> String {
    match mix {
        Mix::Tenants => tenants::class_of(run, t),
        Mix::Keys => "every task".to_owned(),
        Mix::Priorities => t.priority().as_str().to_owned(),
    }
}

/// Runs `mix` on fresh stacks, one per run.
pub async fn run(
    mix: Mix,
    base: &Workload,
    tenants: &tenants::TenantsArgs,
) -> anyhow::Result<Vec<MixRun>> {
    let mut runs = Vec::new();
    for p in plans(mix, base, tenants) {
        eprintln!(
            "mix {} / {}: {} arrivals over {} s into {:.1} tasks/s",
            mix.name(),
            p.label,
            p.arrivals.len(),
            p.workload.duration.as_secs(),
            p.workload.capacity_per_second()
        );
        let outcome = crate::engine::run_specs(
            &p.workload,
            Order::Lifo,
            &p.arrivals,
            Some(&p.specs),
            &mut |_| {},
        )
        .await
        .with_context(|| format!("the {} mix, {}", mix.name(), p.label))?;
        let mut classes: Vec<(String, Vec<Task>)> = Vec::new();
        for t in &outcome.tasks {
            let class = class_of(mix, &p.label, t);
            match classes.iter_mut().find(|(c, _)| *c == class) {
                Some((_, list)) => list.push(t.clone()),
                None => classes.push((class, vec![t.clone()])),
            }
        }
        classes.sort_by(|a, b| a.0.cmp(&b.0));
        runs.push(MixRun {
            label: p.label,
            outcome,
            classes,
        });
    }
    Ok(runs)
}

/// Starts of `tasks` (seconds since the run began, age).
fn starts(run: &MixRun, tasks: &[Task]) -> Vec<Start> {
    let epoch = run.outcome.epoch_ms;
    let mut s: Vec<Start> = tasks
        .iter()
        .filter_map(|t| {
            t.started_at.map(|at| Start {
                at_s: at.saturating_sub(epoch) as f64 / 1000.0,
                age_ms: at.saturating_sub(t.ready_at),
            })
        })
        .collect();
    s.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    s
}

/// Starts of a task whose key had a newer task written before it started
/// (the key is in the payload, with or without `supersedeKey`).
fn stale_starts(all: &[Task], tasks: &[Task]) -> usize {
    let key = |t: &Task| {
        t.payload
            .to_map()
            .get("key")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    tasks
        .iter()
        .filter(|t| {
            let (Some(k), Some(started)) = (key(t), t.started_at) else {
                return false;
            };
            all.iter().any(|o| {
                key(o).as_deref() == Some(k.as_str())
                    && o.task_created > t.task_created
                    && o.task_created < started
            })
        })
        .count()
}

/// The table rows of `runs`.
pub fn rows(runs: &[MixRun]) -> Vec<ClassRow> {
    let mut out = Vec::new();
    for run in runs {
        let end = run.outcome.workload.duration.as_secs_f64();
        for (class, tasks) in &run.classes {
            let s = starts(run, tasks);
            let mut ages: Vec<u64> = s
                .iter()
                .filter(|s| s.at_s <= end)
                .map(|s| s.age_ms)
                .collect();
            ages.sort_unstable();
            let count = |st: TaskStatus| tasks.iter().filter(|t| t.task_status == st).count();
            out.push(ClassRow {
                run: run.label.clone(),
                class: class.clone(),
                tasks: tasks.len(),
                started: s.len(),
                // Never started and not superseded: expired unstarted
                // (shed, or past its expiry and not met by a reader yet).
                shed: tasks
                    .iter()
                    .filter(|t| t.started_at.is_none() && t.task_status != TaskStatus::Superseded)
                    .count(),
                superseded: count(TaskStatus::Superseded),
                stale_starts: stale_starts(&run.outcome.tasks, tasks),
                ages_ms: [50.0, 95.0, 99.0].map(|p| percentile(&ages, p)),
                read_units_per_success: run.outcome.read_units_per_success,
            });
        }
    }
    out
}

/// The table (Markdown), then what the acceptance compares.
pub fn table(mix: Mix, rows: &[ClassRow]) -> String {
    let mut out = String::from(
        "| run | class | tasks | started | shed | superseded | started after a newer task was created | age at start p50 | p95 | p99 | read units / success (run, ddb-local) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let [p50, p95, p99] = r.ages_ms;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            r.run,
            r.class,
            r.tasks,
            r.started,
            r.shed,
            r.superseded,
            r.stale_starts,
            secs(p50),
            secs(p95),
            secs(p99),
            r.read_units_per_success
        );
    }
    let p95 = |run: &str, class: &str| {
        rows.iter()
            .find(|r| r.run == run && r.class == class)
            .map_or(0, |r| r.ages_ms[1])
    };
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let _ = match mix {
        // The tenants mix's comparisons are its summary
        // ([`tenants::summary`]), over every seed.
        Mix::Tenants => Ok(()),
        Mix::Keys => writeln!(
            out,
            "\nWithout a key, every start after a newer task of its key was created is work nobody \
             will use. With supersedeKey the only such starts are the race that remains: a claim \
             that landed while the newer task was being written."
        ),
        Mix::Priorities => writeln!(
            out,
            "\nThe high priority's p95 age at start under 2× overload: {:.2}× its p95 alone at the same rate.",
            ratio(p95("high + normal", "high"), p95("high alone", "high")),
        ),
    };
    out
}

pub fn json(mix: Mix, rows: &[ClassRow]) -> Value {
    json!({
        "mix": mix.name(),
        "rows": rows.iter().map(|r| json!({
            "run": r.run,
            "class": r.class,
            "tasks": r.tasks,
            "started": r.started,
            "shed": r.shed,
            "superseded": r.superseded,
            "startedAfterANewerTaskWasCreated": r.stale_starts,
            "ageAtStartMs": {"p50": r.ages_ms[0], "p95": r.ages_ms[1], "p99": r.ages_ms[2]},
            "readUnitsPerSuccess": r.read_units_per_success,
        })).collect::<Vec<_>>(),
    })
}

/// The plot: age at start over time, one colour per run and class.
pub fn plot(
    mix: Mix,
    runs: &[MixRun],
    path: &Path,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let series: Vec<(String, Vec<Start>)> = runs
        .iter()
        .flat_map(|run| {
            run.classes
                .iter()
                .map(move |(class, tasks)| (format!("{}: {class}", run.label), starts(run, tasks)))
        })
        .collect();
    let end = runs
        .first()
        .map_or(0.0, |r| r.outcome.workload.duration.as_secs_f64());
    let title = match mix {
        Mix::Tenants => "Age at start: nine tenants and the flooding ones",
        Mix::Keys => "Age at start: 50 keys, each updated every second (5× load)",
        Mix::Priorities => "Age at start: 2× overload, half of it high",
    };
    crate::plot::write_series(path, title, end, &series)
}
