//! A run against a downstream whose capacity follows a schedule
//! (`lifo simulate --downstream-capacity`), phase by phase: what issue 54's
//! acceptance asks of the adaptive limit.

use crate::report::{percentile, secs};
use crate::simulate::Outcome;
use lifo_core::TaskStatus;
use process::runner::downstream::{Run, Served};
use std::fmt::Write as _;

/// Attempts in a phase's first seconds are not judged wasted: the limit
/// needs them to see the change.
pub const GRACE_MS: u64 = 5_000;

/// One phase of a run (or the whole of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub label: String,
    /// Tasks that started in it and succeeded (all within their TTL: a
    /// task past it is never started).
    pub succeeded: usize,
    /// Runs the downstream served (ended done) in it, whenever they
    /// started: the work the phase's capacity did. A fixed limit's queue
    /// inside the downstream, started in one phase, is served in the next.
    pub served: usize,
    /// Runs the downstream refused or that timed out, and all runs.
    pub wasted: usize,
    pub attempts: usize,
    /// Of those after its first [`GRACE_MS`].
    pub wasted_after_grace: usize,
    pub attempts_after_grace: usize,
    /// The downstream's own p95 latency over the runs it served (ms), and
    /// over those after the phase's first [`GRACE_MS`] (its steady state).
    pub p95_latency_ms: u64,
    pub p95_latency_after_grace_ms: u64,
    /// Age at start p50 and p95 (ms).
    pub age_ms: [u64; 2],
}

/// `o`'s phases (the schedule's steps over the arrivals), then the whole
/// run; empty without a scheduled downstream.
pub fn phases(o: &Outcome) -> Vec<Phase> {
    let Some(d) = &o.workload.downstream else {
        return Vec::new();
    };
    let end = o.workload.duration.as_millis() as u64;
    let steps = d.schedule.steps();
    let mut out: Vec<Phase> = steps
        .iter()
        .enumerate()
        .filter(|(_, (from, _))| (from.as_millis() as u64) < end)
        .map(|(i, (from, cap))| {
            let from = from.as_millis() as u64;
            let to = steps
                .get(i + 1)
                .map_or(end, |(t, _)| (t.as_millis() as u64).min(end));
            let label = format!("{}–{} s (capacity {cap})", from / 1000, to / 1000);
            phase(o, label, from, to)
        })
        .collect();
    let whole = o.elapsed.as_millis() as u64;
    out.push(phase(o, "whole run".to_owned(), 0, whole.max(end)));
    out
}

fn phase(o: &Outcome, label: String, from: u64, to: u64) -> Phase {
    let within = |ms: u64| (from..to).contains(&ms);
    let started_ms = |at: u64| at.saturating_sub(o.epoch_ms);
    let succeeded = o
        .tasks
        .iter()
        .filter(|t| t.task_status == TaskStatus::Success)
        .filter(|t| t.started_at.is_some_and(|s| within(started_ms(s))))
        .count();
    let runs: Vec<_> = o
        .downstream_runs
        .iter()
        .filter(|r| within(r.started_ms))
        .collect();
    let late: Vec<_> = runs
        .iter()
        .filter(|r| r.started_ms >= from + GRACE_MS)
        .collect();
    let served = |runs: &[&&process::runner::downstream::Run]| {
        let mut l: Vec<u64> = runs
            .iter()
            .filter(|r| r.served == Served::Done)
            .map(|r| r.ended_ms - r.started_ms)
            .collect();
        l.sort_unstable();
        percentile(&l, 95.0)
    };
    let all: Vec<_> = runs.iter().collect();
    let mut ages: Vec<u64> = o
        .starts
        .iter()
        .filter(|s| within((s.at_s * 1000.0) as u64))
        .map(|s| s.age_ms)
        .collect();
    ages.sort_unstable();
    Phase {
        label,
        succeeded,
        served: served_between(&o.downstream_runs, from, to),
        wasted: runs.iter().filter(|r| r.served != Served::Done).count(),
        attempts: runs.len(),
        wasted_after_grace: late.iter().filter(|r| r.served != Served::Done).count(),
        attempts_after_grace: late.len(),
        p95_latency_ms: served(&all),
        p95_latency_after_grace_ms: served(&late),
        age_ms: [percentile(&ages, 50.0), percentile(&ages, 95.0)],
    }
}

/// Runs the downstream served (done) that ended in `from..to` ms, whenever
/// they started.
fn served_between(runs: &[Run], from: u64, to: u64) -> usize {
    runs.iter()
        .filter(|r| r.served == Served::Done && (from..to).contains(&r.ended_ms))
        .count()
}

/// The phases of each outcome as one Markdown table, a row per phase.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| run | phase | succeeded | served in it | wasted / success | wasted after 5 s | downstream p95 | after 5 s | age p50 | age p95 |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in outcomes {
        let w = &o.workload;
        let run = format!("{} {} seed {}", w.runner_concurrency, w.concurrency, w.seed);
        for p in phases(o) {
            let per_success = p.wasted as f64 / p.succeeded.max(1) as f64;
            let late = 100.0 * p.wasted_after_grace as f64 / p.attempts_after_grace.max(1) as f64;
            let _ = writeln!(
                out,
                "| {run} | {} | {} | {} | {per_success:.2} | {late:.1}% | {} | {} | {} | {} |",
                p.label,
                p.succeeded,
                p.served,
                secs(p.p95_latency_ms),
                secs(p.p95_latency_after_grace_ms),
                secs(p.age_ms[0]),
                secs(p.age_ms[1]),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(started_ms: u64, ended_ms: u64, served: Served) -> Run {
        Run {
            started_ms,
            ended_ms,
            served,
        }
    }

    /// A run counts where the downstream finished it: one started before
    /// the phase and ended in it counts in it, one started in it and ended
    /// after does not, and refusals and timeouts never do.
    #[test]
    fn a_run_is_served_in_the_phase_it_ends_in() {
        let runs = [
            run(29_500, 30_500, Served::Done),
            run(59_500, 60_100, Served::Done),
            run(40_000, 41_000, Served::Done),
            run(45_000, 45_001, Served::Refused),
            run(46_000, 56_000, Served::TimedOut),
        ];
        assert_eq!(served_between(&runs, 30_000, 60_000), 2);
        assert_eq!(served_between(&runs, 0, 30_000), 0);
        assert_eq!(served_between(&runs, 60_000, 90_000), 1);
    }
}
