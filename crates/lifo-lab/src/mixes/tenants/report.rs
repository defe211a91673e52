//! The tenants mix's figures: each seed's quiet tenants' p95 age at start
//! against the ideal's ([`crate::ideal`]) for the same arrivals, and
//! their median and worst over the seeds, as a table and as JSON.

use super::{TenantsArgs, is_flooder, late};
use crate::ideal::{self, Arrival, Slots};
use crate::mixes::MixRun;
use crate::report::percentile;
use crate::report::secs;
use crate::simulate::Outcome;
use lifo_core::{Task, TaskStatus};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::time::Duration;

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
    /// The ideal with that overhead, and no task started before its
    /// create request returned: what the write itself costs.
    pub quiet_p95_ideal_writes: Option<u64>,
    /// The nine's writes: from the stamp to the request's return, p50 and
    /// p95 (ms).
    pub write_ms: Option<(u64, u64)>,
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
    /// Share on: where the nine's tasks later than the ideal + overhead's
    /// p95 waited, against the ideal for the same tasks.
    pub late: Option<late::Late>,
}

/// Starts while tasks arrived (ms of age), of `tasks`.
fn ages_under_load(outcome: &Outcome, tasks: &[&Task]) -> Vec<u64> {
    let end = outcome.epoch_ms + outcome.workload.duration.as_millis() as u64;
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

fn quiet(outcome: &Outcome) -> Vec<&Task> {
    outcome.tasks.iter().filter(|t| !is_flooder(t)).collect()
}

/// The tenants not flooding: their p95 age at start while tasks arrived
/// (ms).
pub fn quiet_p95(outcome: &Outcome) -> u64 {
    percentile(&ages_under_load(outcome, &quiet(outcome)), 95.0)
}

/// The tenants not flooding: their tasks never started (shed), less
/// those superseded.
pub fn quiet_shed(outcome: &Outcome) -> usize {
    quiet(outcome)
        .iter()
        .filter(|t| t.started_at.is_none() && t.task_status != TaskStatus::Superseded)
        .count()
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

/// The ideal scheduler fed a run's arrivals: its tasks by arrival, each
/// one's start in the ideal (ms from the run's start), and the run's end.
struct Ideal<'a> {
    tasks: Vec<&'a Task>,
    arrivals: Vec<Arrival>,
    started: Vec<ideal::Started>,
    epoch_ms: u64,
    end_ms: u64,
}

impl<'a> Ideal<'a> {
    /// Schedules `run`'s arrivals with `overhead` added to each start, and
    /// with `writes`, none before its create request returned.
    fn of(run: &'a MixRun, overhead: Duration, writes: bool, seed: u64) -> Self {
        let w = &run.outcome.workload;
        let epoch_ms = run.outcome.epoch_ms;
        let written = |t: &Task| match writes {
            true => written_ms(run, t),
            false => t.ready_at,
        };
        let mut tasks: Vec<&Task> = run.outcome.tasks.iter().collect();
        tasks.sort_by_key(|t| (written(t), t.ready_at));
        let arrivals: Vec<Arrival> = tasks
            .iter()
            .map(|t| Arrival {
                at_ms: t.ready_at.saturating_sub(epoch_ms),
                written_ms: written(t).saturating_sub(epoch_ms),
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
        Self {
            tasks,
            arrivals,
            started,
            epoch_ms,
            end_ms: w.duration.as_millis() as u64,
        }
    }

    /// The other nine's p95 age at start while tasks arrive.
    fn quiet_p95(&self) -> u64 {
        let mut ages: Vec<u64> = self
            .tasks
            .iter()
            .zip(&self.arrivals)
            .zip(&self.started)
            .filter(|((t, _), s)| !is_flooder(t) && s.is_some_and(|s| s <= self.end_ms))
            .filter_map(|((_, a), s)| s.map(|s| s - a.at_ms))
            .collect();
        ages.sort_unstable();
        percentile(&ages, 95.0)
    }

    /// Where the nine's tasks later than `bar_ms` waited in the real run
    /// and here ([`late::waits`]).
    fn late(&self, bar_ms: u64) -> late::Late {
        let entries: Vec<late::Entry> = self
            .tasks
            .iter()
            .zip(&self.arrivals)
            .zip(&self.started)
            .map(|((t, a), ideal)| late::Entry {
                tenant: a.tenant.clone(),
                flooder: is_flooder(t),
                ready: a.at_ms,
                real: t.started_at.map(|s| s.saturating_sub(self.epoch_ms)),
                ideal: *ideal,
            })
            .collect();
        late::waits(&entries, bar_ms, self.end_ms)
    }
}

/// The ideal scheduler's p95 for the other nine, fed `run`'s arrivals.
fn ideal_quiet_p95(run: &MixRun, overhead: Duration, seed: u64) -> u64 {
    Ideal::of(run, overhead, false, seed).quiet_p95()
}

/// When `t`'s create request returned (epoch ms; its stamp if not known).
fn written_ms(run: &MixRun, t: &Task) -> u64 {
    let at = run.outcome.written_ms.get(&t.task_id).copied();
    at.unwrap_or(t.ready_at).max(t.ready_at)
}

/// The nine's writes, stamp to return: p50 and p95 (ms).
fn quiet_writes(run: &MixRun) -> (u64, u64) {
    let mut ms: Vec<u64> = quiet(&run.outcome)
        .iter()
        .map(|t| written_ms(run, t) - t.ready_at)
        .collect();
    ms.sort_unstable();
    (percentile(&ms, 50.0), percentile(&ms, 95.0))
}

/// One seed's figures from its runs.
pub fn figures(seed: u64, runs: &[MixRun]) -> SeedFigures {
    let mut f = SeedFigures {
        seed,
        ..SeedFigures::default()
    };
    let p95 = |run: &MixRun| quiet_p95(&run.outcome);
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
                f.quiet_shed_on = Some(quiet_shed(&run.outcome));
                f.flooder_starts_on = Some(flooder_starts(run));
                f.read_units_on = Some(run.outcome.read_units_per_success);
                f.quiet_p95_ideal = Some(ideal_quiet_p95(run, Duration::ZERO, seed));
                let oh = overhead_ms(run);
                f.overhead_ms = oh;
                // One schedule gives the bar and where the late ones waited.
                if let Some(ms) = oh {
                    let ideal = Ideal::of(run, Duration::from_millis(ms), false, seed);
                    let bar = ideal.quiet_p95();
                    f.quiet_p95_ideal_overhead = Some(bar);
                    f.late = Some(ideal.late(bar));
                    let writes = Ideal::of(run, Duration::from_millis(ms), true, seed);
                    f.quiet_p95_ideal_writes = Some(writes.quiet_p95());
                    f.write_ms = Some(quiet_writes(run));
                }
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
    /// … against the ideal's with that overhead and the writes' time.
    pub fn vs_ideal_writes(&self) -> Option<f64> {
        ratio(self.quiet_p95_on, self.quiet_p95_ideal_writes)
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
         | seed | share on | ideal | ideal + overhead (per start) | on / ideal | on / (ideal + overhead) | + writes (the nine's p50, p95) | on / (ideal + overhead + writes) | nine's tasks shed | with the cap | flooders absent | cap / absent | flooders' starts lost to the cap | read units / success on / off |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.flooders, args.flood_ratio
    );
    for f in seeds {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} ({}) | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} |",
            f.seed,
            opt_ms(f.quiet_p95_on),
            opt_ms(f.quiet_p95_ideal),
            opt_ms(f.quiet_p95_ideal_overhead),
            f.overhead_ms
                .map_or("–".to_owned(), |ms| format!("{ms} ms")),
            opt_x(f.vs_ideal()),
            opt_x(f.vs_ideal_overhead()),
            opt_ms(f.quiet_p95_ideal_writes),
            f.write_ms
                .map_or("–".to_owned(), |(p50, p95)| format!("{p50}, {p95} ms")),
            opt_x(f.vs_ideal_writes()),
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
        "share on / (ideal + overhead + writes)",
        all(SeedFigures::vs_ideal_writes),
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
    let late: Vec<(u64, late::Late)> = seeds
        .iter()
        .filter_map(|f| f.late.map(|l| (f.seed, l)))
        .collect();
    out.push_str(&late::table(&late));
    out
}

pub fn json(args: &TenantsArgs, seeds: &[SeedFigures]) -> Value {
    json!({
        "floodRatio": args.flood_ratio,
        "flooders": args.flooders,
        "seeds": seeds.iter().map(|f| json!({
            "seed": f.seed,
            "quietP95Ms": {"shareOn": f.quiet_p95_on, "ideal": f.quiet_p95_ideal,
                "idealWithOverhead": f.quiet_p95_ideal_overhead,
                "idealWithOverheadAndWrites": f.quiet_p95_ideal_writes, "capped": f.quiet_p95_capped,
                "floodersAbsent": f.quiet_p95_absent, "cappedIdeal": f.quiet_p95_capped_ideal,
                "floodersAbsentIdeal": f.quiet_p95_absent_ideal},
            "overheadMsPerStart": f.overhead_ms,
            "quietWriteMs": f.write_ms.map(|(p50, p95)| json!({"p50": p50, "p95": p95})),
            "quietShedShareOn": f.quiet_shed_on,
            "flooderStarts": {"shareOn": f.flooder_starts_on, "capped": f.flooder_starts_capped},
            "readUnitsPerSuccess": {"shareOn": f.read_units_on, "shareOff": f.read_units_off},
            "aloneStarts": f.alone_starts.map(|(on, off)| json!({"shareOn": on, "shareOff": off})),
            "backloggedShareTimesN": f.backlogged_shares.map(|(lo, hi)| json!({"least": lo, "greatest": hi})),
            "lateShareOn": f.late,
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
}
