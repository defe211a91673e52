//! The adaptive limit against the simulated downstream, on tokio's paused
//! clock: a closed loop that keeps as many runs in flight as each limit
//! allows, sampled once a second.

use crate::runner::downstream::{Downstream, Schedule, Served};
use crate::runner::{Concurrency, Limited, SimulatedRunner, Slots, TaskRunner};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

fn task() -> lifo_core::Task {
    lifo_core::Task::new_pending("t".into(), lifo_core::Payload::new(), 0, 60, 1)
}

/// `ceilings.len()` processors, each with adaptive slots of its ceiling,
/// into one downstream of `schedule` (1 s runs, 10 waiting at most, 30 s
/// timeout), for `secs`; each processor's limit at each second, and the
/// downstream.
async fn closed_loop(
    schedule: &str,
    ceilings: &[usize],
    secs: u64,
) -> (Vec<Vec<usize>>, Arc<Downstream>) {
    let downstream = Arc::new(Downstream::new(
        Schedule::parse(schedule).unwrap(),
        10,
        Duration::from_secs(30),
    ));
    let runner = Arc::new(
        SimulatedRunner::new(1000, Duration::from_secs(1), 0.0, 0.0)
            .with_downstream(Arc::clone(&downstream)),
    );
    let holders: Vec<(Arc<Slots>, Arc<Limited<SimulatedRunner>>)> = ceilings
        .iter()
        .map(|c| {
            let slots = Arc::new(Slots::new(Concurrency::Adaptive, *c, None));
            let limited = Arc::new(Limited::new(Arc::clone(&runner), Arc::clone(&slots)));
            (slots, limited)
        })
        .collect();
    let mut running: Vec<JoinSet<()>> = holders.iter().map(|_| JoinSet::new()).collect();
    let mut limits = vec![Vec::new(); holders.len()];
    let start = Instant::now();
    let mut next_sample = start + Duration::from_secs(1);
    while start.elapsed() < Duration::from_secs(secs) {
        for ((slots, limited), set) in holders.iter().zip(&mut running) {
            while set.try_join_next().is_some() {}
            while set.len() < slots.limit() {
                let r = Arc::clone(limited);
                set.spawn(async move {
                    r.run(&task()).await;
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(1);
            for (l, (slots, _)) in limits.iter_mut().zip(&holders) {
                l.push(slots.limit());
            }
        }
    }
    (limits, downstream)
}

/// The p95 latency (ms) of the runs the downstream served that started in
/// `[from, to)` s.
fn p95_ms(d: &Downstream, from: u64, to: u64) -> u64 {
    let mut l: Vec<u64> = d
        .runs()
        .iter()
        .filter(|r| r.served == Served::Done && (from * 1000..to * 1000).contains(&r.started_ms))
        .map(|r| r.ended_ms - r.started_ms)
        .collect();
    l.sort_unstable();
    l[(l.len() * 95).div_ceil(100).max(1) - 1]
}

#[tokio::test(start_paused = true)]
async fn the_limit_falls_with_the_downstreams_capacity_and_recovers_with_it() {
    let (limits, d) = closed_loop("10,4@30s,10@60s", &[20], 90).await;
    let l = &limits[0];
    let band = |from: usize, to: usize| {
        let w = &l[from..to];
        (*w.iter().min().unwrap(), *w.iter().max().unwrap())
    };
    // Each phase's last 20 s: near its capacity, within the tolerance.
    let (lo, hi) = band(10, 29);
    assert!(lo >= 9 && hi <= 16, "capacity 10: {lo}..{hi} in {l:?}");
    let (lo, hi) = band(40, 59);
    assert!(lo >= 3 && hi <= 7, "capacity 4: {lo}..{hi} in {l:?}");
    let (lo, hi) = band(70, 89);
    assert!(
        lo >= 9 && hi <= 16,
        "capacity 10 again: {lo}..{hi} in {l:?}"
    );
    // The downstream is protected: p95 latency within 2× its unloaded 1 s.
    for (from, to) in [(10, 30), (40, 60), (70, 90)] {
        assert!(
            p95_ms(&d, from, to) <= 2000,
            "{from}..{to} s: {}",
            p95_ms(&d, from, to)
        );
    }
}

/// Two processors share one downstream of 10 (ceilings of 10 each). Each
/// saws as one alone does (falling to what the latency says it serves,
/// rising again), out of step with the other; what the downstream sees,
/// their sum, stays between 0.8 and 1.7 times its capacity, and neither
/// starves: each keeps at least 3 and about half of the runs.
#[tokio::test(start_paused = true)]
async fn two_processors_share_a_downstream_without_starving_or_swinging() {
    let (limits, d) = closed_loop("10", &[10, 10], 60).await;
    let steady = |l: &Vec<usize>| l[20..].to_vec();
    let (a, b) = (steady(&limits[0]), steady(&limits[1]));
    let sums: Vec<usize> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert!(
        sums.iter().all(|s| (8..=17).contains(s)),
        "the two together: {sums:?}"
    );
    for (i, l) in [&a, &b].into_iter().enumerate() {
        let share = l.iter().sum::<usize>() as f64 / sums.iter().sum::<usize>() as f64;
        assert!(
            *l.iter().min().unwrap() >= 3 && (0.35..=0.65).contains(&share),
            "processor {i}: {l:?}, {share:.2} of the runs"
        );
    }
    assert!(p95_ms(&d, 20, 60) <= 2000, "{}", p95_ms(&d, 20, 60));
}
