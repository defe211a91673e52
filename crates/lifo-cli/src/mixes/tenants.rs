//! `lifo simulate --mix tenants`: nine tenants and one or more flooding
//! ones, through the local pipeline, judged against the ideal scheduler
//! ([`lifo_local::ideal`]) fed the same arrivals.
//!
//! The nine write together 60% of what the downstream can serve; each
//! flooding tenant writes `--flood-ratio` times what one of the nine does
//! (AWS's own load test of fair queues uses 20:1). The runs
//! (`--runs`):
//! - `absent`: the nine alone, the share on;
//! - `on`: everyone, the share on;
//! - `capped`: the same with the tenant cap (`--tenant-max-in-flight`,
//!   else the runner's concurrency − 1);
//! - `off`: everyone, the share off;
//! - `alone`: one tenant alone at 2× the capacity, share on and off (a
//!   tenant alone must get every start the runner allows);
//! - `backlogged`: ten tenants at 0.3× the capacity each (each tenant's
//!   share of starts must be 1/10).
//!
//! Each seed's arrivals are the same in every run it has (the nine's are
//! the same with the flooders and without). Over `--seeds` seeds it
//! prints each seed's figures and their median and worst.

use super::{MixRun, Plan, merged, plan, spec};
use crate::print::secs;
use lifo_core::{Task, TaskStatus};
use lifo_local::ideal::{self, Arrival, Slots};
use lifo_local::report::percentile;
use lifo_local::simulate::Workload;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::Duration;

/// The tenants mix's options.
#[derive(Debug, Clone, clap::Args)]
pub struct TenantsArgs {
    /// The tenants mix: each flooding tenant's rate, as a multiple of each
    /// other tenant's.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100))]
    pub flood_ratio: u32,
    /// The tenants mix: flooding tenants, beside the nine others.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5))]
    pub flooders: usize,
    /// The tenants mix's runs: absent (the nine alone), on, capped (the
    /// share with the tenant cap), off, alone (one tenant at 2× capacity,
    /// share on and off), backlogged (ten tenants at 0.3× capacity each).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "absent,on,capped,off"
    )]
    pub runs: Vec<TenantsRun>,
}

/// One run of the tenants mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TenantsRun {
    Absent,
    On,
    Capped,
    Off,
    Alone,
    Backlogged,
}

/// Which tenants a task's tenant is among.
fn is_flooder(t: &Task) -> bool {
    t.tenant
        .as_deref()
        .is_some_and(|n| n.starts_with("flooder-"))
}

/// The class a task is shown under in `run`.
pub fn class_of(run: &str, t: &Task) -> String {
    if run.starts_with("every tenant") {
        t.tenant.clone().unwrap_or_default()
    } else if is_flooder(t) {
        "flooders".to_owned()
    } else {
        "the other nine".to_owned()
    }
}

/// The cap of the `capped` run: the one asked for, else one slot fewer
/// than the runner has.
pub fn cap_of(base: &Workload) -> u32 {
    base.tenant_max_in_flight
        .map_or((base.concurrency as u32).saturating_sub(1).max(1), |n| {
            n.get()
        })
}

/// The runs of the mix over `w` (60 s, the runs' jitter set).
pub(super) fn plans(w: &Workload, args: &TenantsArgs) -> Vec<Plan> {
    let cap = w.capacity_per_second();
    let ttl = w.ttl_seconds;
    // The nine at 60% of the capacity together; the flooders at `ratio`×
    // each of them. Sources 1..=9 are the nine, 0 and 10.. the flooders,
    // so the nine's arrivals do not depend on how many flood.
    let r = 0.6 * cap / 9.0;
    let flood = f64::from(args.flood_ratio) * r;
    let flooder_sources: Vec<usize> = (0..args.flooders)
        .map(|i| if i == 0 { 0 } else { 9 + i })
        .collect();
    let mut rates = vec![0.0; 10 + args.flooders.saturating_sub(1)];
    rates[1..=9].fill(r);
    for s in &flooder_sources {
        rates[*s] = flood;
    }
    let name = |source: usize| match flooder_sources.iter().position(|s| *s == source) {
        Some(i) => format!("flooder-{}", i + 1),
        None => format!("tenant-{source}"),
    };
    let all = merged(w, &rates);
    let tagged = |with_flooders: bool| -> Vec<(Duration, Value)> {
        all.iter()
            .enumerate()
            .filter(|(_, (_, s))| with_flooders || !flooder_sources.contains(s))
            .map(|(n, (at, s))| (*at, spec(n, ttl, json!({"tenant": name(*s)}))))
            .collect()
    };
    let with = |fair: bool, cap: Option<u32>| Workload {
        fair_share: fair,
        tenant_max_in_flight: cap.and_then(std::num::NonZeroU32::new),
        ..w.clone()
    };
    let mut out = Vec::new();
    for run in &args.runs {
        match run {
            TenantsRun::Absent => {
                out.push(plan("flooders absent", &with(true, None), tagged(false)));
            }
            TenantsRun::On => out.push(plan("share on", &with(true, None), tagged(true))),
            TenantsRun::Capped => {
                let n = cap_of(w);
                let label = format!("share on, cap {n}");
                out.push(plan(&label, &with(true, Some(n)), tagged(true)));
            }
            TenantsRun::Off => out.push(plan("share off", &with(false, None), tagged(true))),
            TenantsRun::Alone => {
                let one = merged(w, &[2.0 * cap]);
                let tasks: Vec<(Duration, Value)> = one
                    .iter()
                    .enumerate()
                    .map(|(n, (at, _))| (*at, spec(n, ttl, json!({"tenant": "flooder-1"}))))
                    .collect();
                out.push(plan(
                    "one tenant alone, share on",
                    &with(true, None),
                    tasks.clone(),
                ));
                out.push(plan(
                    "one tenant alone, share off",
                    &with(false, None),
                    tasks,
                ));
            }
            TenantsRun::Backlogged => {
                let ten = merged(w, &[0.3 * cap; 10]);
                let tasks: Vec<(Duration, Value)> = ten
                    .iter()
                    .enumerate()
                    .map(|(n, (at, s))| {
                        (*at, spec(n, ttl, json!({"tenant": format!("tenant-{s}")})))
                    })
                    .collect();
                out.push(plan("every tenant backlogged", &with(true, None), tasks));
            }
        }
    }
    out
}

/// What one seed's runs show, against the acceptance of the fair share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeedFigures {
    pub seed: u64,
    /// The other nine's p95 age at start while tasks arrive (ms): share
    /// on, the ideal, the ideal with the measured overhead, cap, absent.
    pub quiet_p95_on: Option<u64>,
    pub quiet_p95_ideal: Option<u64>,
    pub quiet_p95_ideal_overhead: Option<u64>,
    /// What a start held a slot for beyond its run, measured (ms).
    pub overhead_ms: Option<u64>,
    pub quiet_shed_on: Option<usize>,
    pub quiet_p95_capped: Option<u64>,
    pub quiet_p95_absent: Option<u64>,
    /// The ideal's for the same two runs (each with its measured
    /// overhead): how far a cap can isolate at all in this mix.
    pub quiet_p95_capped_ideal: Option<u64>,
    pub quiet_p95_absent_ideal: Option<u64>,
    /// The flooders' starts with the share on and with the cap.
    pub flooder_starts_on: Option<usize>,
    pub flooder_starts_capped: Option<usize>,
    pub read_units_on: Option<f64>,
    pub read_units_off: Option<f64>,
    /// One tenant alone: its starts with the share on and off.
    pub alone_starts: Option<(usize, usize)>,
    /// Every tenant backlogged: the least and the greatest share of the
    /// starts while tasks arrive, times the tenants (1.0: exactly 1/n).
    pub backlogged_shares: Option<(f64, f64)>,
}

/// Starts while tasks arrived (ms of age), of `tasks`.
fn ages_under_load(run: &MixRun, tasks: &[&Task]) -> Vec<u64> {
    let end = run.outcome.epoch_ms + run.outcome.workload.duration.as_millis() as u64;
    let mut ages: Vec<u64> = tasks
        .iter()
        .filter_map(|t| {
            let s = t.started_at?;
            (s <= end).then(|| s.saturating_sub(t.ready_at))
        })
        .collect();
    ages.sort_unstable();
    ages
}

fn quiet(run: &MixRun) -> Vec<&Task> {
    run.outcome
        .tasks
        .iter()
        .filter(|t| !is_flooder(t))
        .collect()
}

/// What a start held its slot for beyond the run itself, on average over
/// `run`'s successes while tasks arrived (ms): the claim's round trip
/// before it (from the end of the run the slot held before, to this
/// start) and the outcome's write after it. Every slot is busy then (the
/// mix overloads the runner), so each end is followed by a start.
fn overhead_ms(run: &MixRun) -> Option<u64> {
    let (from, to) = (
        run.outcome.epoch_ms,
        run.outcome.epoch_ms + run.outcome.workload.duration.as_millis() as u64,
    );
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut held = Vec::new();
    for t in &run.outcome.tasks {
        let Some(started) = t.started_at.filter(|s| (from..to).contains(s)) else {
            continue;
        };
        starts.push(started);
        if let Some(done) = t
            .history
            .iter()
            .rev()
            .find(|h| h.status == TaskStatus::Success)
        {
            held.push(done.at.saturating_sub(started));
            ends.push(done.at);
        }
    }
    if held.is_empty() {
        return None;
    }
    starts.sort_unstable();
    ends.sort_unstable();
    // Each end's slot goes to the first start after it not yet matched.
    let mut next = 0;
    let mut gaps = Vec::new();
    for end in ends.iter().filter(|e| **e < to) {
        next += starts[next..].partition_point(|s| s < end);
        let Some(start) = starts.get(next) else { break };
        gaps.push(start - end);
        next += 1;
    }
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let latency = run.outcome.workload.latency.as_millis() as f64;
    Some((mean(&held) - latency + mean(&gaps)).max(0.0).round() as u64)
}

/// The ideal scheduler's p95 for the other nine, fed `run`'s arrivals.
fn ideal_quiet_p95(run: &MixRun, overhead: Duration, seed: u64) -> u64 {
    let w = &run.outcome.workload;
    let epoch = run.outcome.epoch_ms;
    let mut tasks: Vec<&Task> = run.outcome.tasks.iter().collect();
    tasks.sort_by_key(|t| t.ready_at);
    let arrivals: Vec<Arrival> = tasks
        .iter()
        .map(|t| Arrival {
            at_ms: t.ready_at.saturating_sub(epoch),
            tenant: t.tenant.clone().unwrap_or_default(),
        })
        .collect();
    let slots = Slots {
        slots: w.concurrency,
        latency: w.latency,
        jitter: w.latency_jitter,
        ttl: Duration::from_secs(w.ttl_seconds),
        overhead,
        tenant_cap: w.tenant_max_in_flight.map(|n| n.get() as usize),
        seed,
    };
    let started = ideal::schedule(&arrivals, &slots);
    let end = w.duration.as_millis() as u64;
    let mut ages: Vec<u64> = tasks
        .iter()
        .zip(&arrivals)
        .zip(&started)
        .filter(|((t, _), s)| !is_flooder(t) && s.is_some_and(|s| s <= end))
        .filter_map(|((_, a), s)| s.map(|s| s - a.at_ms))
        .collect();
    ages.sort_unstable();
    percentile(&ages, 95.0)
}

/// One seed's figures from its runs.
pub fn figures(seed: u64, runs: &[MixRun]) -> SeedFigures {
    let mut f = SeedFigures {
        seed,
        ..SeedFigures::default()
    };
    let p95 = |run: &MixRun| percentile(&ages_under_load(run, &quiet(run)), 95.0);
    let flooder_starts = |run: &MixRun| {
        run.outcome
            .tasks
            .iter()
            .filter(|t| is_flooder(t) && t.started_at.is_some())
            .count()
    };
    let starts = |run: &MixRun| {
        run.outcome
            .tasks
            .iter()
            .filter(|t| t.started_at.is_some())
            .count()
    };
    let ideal_with_overhead = |run: &MixRun| {
        let overhead = Duration::from_millis(overhead_ms(run).unwrap_or(0));
        ideal_quiet_p95(run, overhead, seed)
    };
    let mut alone = (None, None);
    // The run without the flooders leaves slots idle, so what it spends
    // per start cannot be read off it: its ideal takes the capped run's
    // (or the share-on run's).
    let mut absent: Option<&MixRun> = None;
    let mut capped_overhead = None;
    for run in runs {
        match run.label.as_str() {
            "flooders absent" => {
                f.quiet_p95_absent = Some(p95(run));
                absent = Some(run);
            }
            "share on" => {
                f.quiet_p95_on = Some(p95(run));
                f.quiet_shed_on = Some(
                    quiet(run)
                        .iter()
                        .filter(|t| {
                            t.started_at.is_none() && t.task_status != TaskStatus::Superseded
                        })
                        .count(),
                );
                f.flooder_starts_on = Some(flooder_starts(run));
                f.read_units_on = Some(run.outcome.read_units_per_success);
                f.quiet_p95_ideal = Some(ideal_quiet_p95(run, Duration::ZERO, seed));
                let oh = overhead_ms(run);
                f.overhead_ms = oh;
                f.quiet_p95_ideal_overhead =
                    oh.map(|ms| ideal_quiet_p95(run, Duration::from_millis(ms), seed));
            }
            "share off" => f.read_units_off = Some(run.outcome.read_units_per_success),
            "one tenant alone, share on" => alone.0 = Some(starts(run)),
            "one tenant alone, share off" => alone.1 = Some(starts(run)),
            "every tenant backlogged" => {
                let end = run.outcome.epoch_ms + run.outcome.workload.duration.as_millis() as u64;
                let mut per: std::collections::BTreeMap<&str, usize> = Default::default();
                for t in &run.outcome.tasks {
                    if t.started_at.is_some_and(|s| s <= end) {
                        *per.entry(t.tenant.as_deref().unwrap_or_default())
                            .or_default() += 1;
                    }
                }
                let total: usize = per.values().sum();
                let n = per.len().max(1) as f64;
                let share = |c: usize| c as f64 * n / total.max(1) as f64;
                let lo = per
                    .values()
                    .map(|c| share(*c))
                    .fold(f64::INFINITY, f64::min);
                let hi = per.values().map(|c| share(*c)).fold(0.0, f64::max);
                f.backlogged_shares = Some((lo, hi));
            }
            label if label.starts_with("share on, cap") => {
                f.quiet_p95_capped = Some(p95(run));
                capped_overhead = overhead_ms(run);
                f.quiet_p95_capped_ideal = Some(ideal_with_overhead(run));
                f.flooder_starts_capped = Some(flooder_starts(run));
            }
            _ => {}
        }
    }
    if let Some(run) = absent {
        let overhead = Duration::from_millis(capped_overhead.or(f.overhead_ms).unwrap_or(0));
        f.quiet_p95_absent_ideal = Some(ideal_quiet_p95(run, overhead, seed));
    }
    if let (Some(on), Some(off)) = alone {
        f.alone_starts = Some((on, off));
    }
    f
}

fn ratio(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    Some(a? as f64 / b?.max(1) as f64)
}

impl SeedFigures {
    /// The other nine's p95 against the ideal's.
    pub fn vs_ideal(&self) -> Option<f64> {
        ratio(self.quiet_p95_on, self.quiet_p95_ideal)
    }
    /// … against the ideal's with the measured overhead of a start.
    pub fn vs_ideal_overhead(&self) -> Option<f64> {
        ratio(self.quiet_p95_on, self.quiet_p95_ideal_overhead)
    }
    /// With the cap, against the nine alone.
    pub fn capped_vs_absent(&self) -> Option<f64> {
        ratio(self.quiet_p95_capped, self.quiet_p95_absent)
    }
    /// The same for the ideal: the least a cap can give in this mix.
    pub fn capped_vs_absent_ideal(&self) -> Option<f64> {
        ratio(self.quiet_p95_capped_ideal, self.quiet_p95_absent_ideal)
    }
    /// The flooders' starts the cap cost, in percent of theirs without it.
    pub fn flooders_lost_pct(&self) -> Option<f64> {
        let (on, capped) = (self.flooder_starts_on?, self.flooder_starts_capped?);
        Some(100.0 * on.saturating_sub(capped) as f64 / on.max(1) as f64)
    }
    pub fn reads_on_vs_off(&self) -> Option<f64> {
        Some(self.read_units_on? / self.read_units_off?.max(1e-9))
    }
    pub fn alone_ratio(&self) -> Option<f64> {
        self.alone_starts
            .map(|(on, off)| on as f64 / off.max(1) as f64)
    }
}

/// The median and the worst (greatest, or least with `low_is_worse`) of
/// `values`.
fn median_worst(values: &[f64], low_is_worse: bool) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    let worst = if low_is_worse { v[0] } else { v[v.len() - 1] };
    Some((median, worst))
}

fn opt_ms(v: Option<u64>) -> String {
    v.map_or("–".to_owned(), secs)
}

fn opt_x(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |x| format!("{x:.2}×"))
}

/// The table of every seed, then the median and worst of each ratio.
pub fn summary(args: &TenantsArgs, seeds: &[SeedFigures]) -> String {
    let mut out = format!(
        "\n{} flooding tenant(s) at {}× each other tenant's rate; the other nine's p95 age at \
         start while tasks arrive:\n\n\
         | seed | share on | ideal | ideal + overhead (per start) | on / ideal | on / (ideal + overhead) | nine's tasks shed | with the cap | flooders absent | cap / absent | flooders' starts lost to the cap | read units / success on / off |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.flooders, args.flood_ratio
    );
    for f in seeds {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            f.seed,
            opt_ms(f.quiet_p95_on),
            opt_ms(f.quiet_p95_ideal),
            opt_ms(f.quiet_p95_ideal_overhead),
            f.overhead_ms
                .map_or("–".to_owned(), |ms| format!("{ms} ms")),
            opt_x(f.vs_ideal()),
            opt_x(f.vs_ideal_overhead()),
            f.quiet_shed_on.map_or("–".to_owned(), |n| n.to_string()),
            opt_ms(f.quiet_p95_capped),
            opt_ms(f.quiet_p95_absent),
            opt_x(f.capped_vs_absent()),
            f.flooders_lost_pct()
                .map_or("–".to_owned(), |p| format!("{p:.0}%")),
            match (f.read_units_on, f.read_units_off) {
                (Some(on), Some(off)) => format!("{on:.2} / {off:.2} = {:.2}×", on / off.max(1e-9)),
                (Some(on), None) => format!("{on:.2} / –"),
                _ => "–".to_owned(),
            },
        );
    }
    let line = |out: &mut String, what: &str, values: Vec<f64>, low_is_worse: bool, unit: &str| {
        if let Some((m, w)) = median_worst(&values, low_is_worse) {
            let _ = writeln!(
                out,
                "- {what}: median {m:.2}{unit}, worst {w:.2}{unit} ({} seeds)",
                values.len()
            );
        }
    };
    out.push('\n');
    let all = |f: fn(&SeedFigures) -> Option<f64>| seeds.iter().filter_map(f).collect::<Vec<_>>();
    line(
        &mut out,
        "share on / ideal",
        all(SeedFigures::vs_ideal),
        false,
        "×",
    );
    line(
        &mut out,
        "share on / (ideal + overhead)",
        all(SeedFigures::vs_ideal_overhead),
        false,
        "×",
    );
    line(
        &mut out,
        "with the cap / flooders absent",
        all(SeedFigures::capped_vs_absent),
        false,
        "×",
    );
    line(
        &mut out,
        "the ideal with the cap / the ideal without the flooders (each + its overhead)",
        all(SeedFigures::capped_vs_absent_ideal),
        false,
        "×",
    );
    line(
        &mut out,
        "flooders' starts lost to the cap",
        all(SeedFigures::flooders_lost_pct),
        false,
        "%",
    );
    line(
        &mut out,
        "read units per success, share on / off",
        all(SeedFigures::reads_on_vs_off),
        false,
        "×",
    );
    line(
        &mut out,
        "one tenant alone: its starts share on / off",
        all(SeedFigures::alone_ratio),
        true,
        "×",
    );
    let shed: usize = seeds.iter().filter_map(|f| f.quiet_shed_on).sum();
    if seeds.iter().any(|f| f.quiet_shed_on.is_some()) {
        let _ = writeln!(
            out,
            "- the nine's tasks shed with the share on: {shed} in all"
        );
    }
    let lows: Vec<f64> = seeds
        .iter()
        .filter_map(|f| f.backlogged_shares.map(|s| s.0))
        .collect();
    let highs: Vec<f64> = seeds
        .iter()
        .filter_map(|f| f.backlogged_shares.map(|s| s.1))
        .collect();
    if !lows.is_empty() {
        let lo = lows.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = highs.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "- every tenant backlogged: each tenant's share of the starts between {lo:.2} and {hi:.2} × 1/n"
        );
    }
    out
}

pub fn json(args: &TenantsArgs, seeds: &[SeedFigures]) -> Value {
    json!({
        "floodRatio": args.flood_ratio,
        "flooders": args.flooders,
        "seeds": seeds.iter().map(|f| json!({
            "seed": f.seed,
            "quietP95Ms": {"shareOn": f.quiet_p95_on, "ideal": f.quiet_p95_ideal,
                "idealWithOverhead": f.quiet_p95_ideal_overhead, "capped": f.quiet_p95_capped,
                "floodersAbsent": f.quiet_p95_absent, "cappedIdeal": f.quiet_p95_capped_ideal,
                "floodersAbsentIdeal": f.quiet_p95_absent_ideal},
            "overheadMsPerStart": f.overhead_ms,
            "quietShedShareOn": f.quiet_shed_on,
            "flooderStarts": {"shareOn": f.flooder_starts_on, "capped": f.flooder_starts_capped},
            "readUnitsPerSuccess": {"shareOn": f.read_units_on, "shareOff": f.read_units_off},
            "aloneStarts": f.alone_starts.map(|(on, off)| json!({"shareOn": on, "shareOff": off})),
            "backloggedShareTimesN": f.backlogged_shares.map(|(lo, hi)| json!({"least": lo, "greatest": hi})),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_worst() {
        assert_eq!(median_worst(&[1.3, 1.0, 1.1], false), Some((1.1, 1.3)));
        assert_eq!(median_worst(&[0.97, 1.0], true), Some((0.985, 0.97)));
        assert_eq!(median_worst(&[], false), None);
    }

    #[test]
    fn the_nine_arrive_alike_with_one_flooder_or_two_and_without() {
        let w = Workload {
            latency_jitter: 0.5,
            ..Workload::demo(0.0, Duration::from_secs(60), 3)
        };
        let args = |flooders| TenantsArgs {
            flood_ratio: 20,
            flooders,
            runs: vec![TenantsRun::Absent, TenantsRun::On],
        };
        let nine = |p: &Plan| -> Vec<(Duration, String)> {
            p.arrivals
                .iter()
                .zip(&p.specs)
                .filter(|(_, s)| {
                    s["tenant"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("tenant-"))
                })
                .map(|(a, s)| (*a, s["tenant"].as_str().unwrap_or_default().to_owned()))
                .collect()
        };
        let one = plans(&w, &args(1));
        let two = plans(&w, &args(2));
        assert_eq!(nine(&one[0]), nine(&one[1]));
        assert_eq!(nine(&one[1]), nine(&two[1]));
        let flooders = |p: &Plan| {
            p.specs
                .iter()
                .filter_map(|s| s["tenant"].as_str())
                .filter(|t| t.starts_with("flooder-"))
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        };
        assert_eq!(
            (flooders(&one[0]), flooders(&one[1]), flooders(&two[1])),
            (0, 1, 2)
        );
        // Each flooder at 20× one of the nine.
        let count = |p: &Plan, t: &str| p.specs.iter().filter(|s| s["tenant"] == t).count() as f64;
        let nine_mean = (1..=9)
            .map(|i| count(&two[1], &format!("tenant-{i}")))
            .sum::<f64>()
            / 9.0;
        let f2 = count(&two[1], "flooder-2") / nine_mean;
        assert!((15.0..25.0).contains(&f2), "{f2}");
    }
}
