//! Chaos in virtual time (`lifo_lab::virtual_time::chaos`): 50 seeds of
//! 2,000 tasks each (and an expired backlog) through the real handlers
//! under store faults, invocations cut short, SNS deliveries made twice,
//! processors claiming at once and the index's lag; nothing lost, stuck,
//! committed twice or started stale over any seed. One seed runs twice:
//! the same seed, the same run. Prints its counts (`make test` runs it with
//! the chaos test on DynamoDB Local, output shown).

use lifo_lab::virtual_time::chaos::{Chaos, ChaosRun, run};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const SEEDS: u64 = 50;
const TASKS: usize = 2_000;

/// Runs `chaos` on as many threads as the machine has cores (two at
/// most: it shares them), in the order given.
fn run_all(chaos: &[Chaos]) -> Vec<ChaosRun> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let next = AtomicUsize::new(0);
    let runs: Mutex<Vec<(usize, ChaosRun)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = chaos.get(i) else { return };
                    let r = run(c).unwrap_or_else(|e| panic!("seed {}: {e:#}", c.seed));
                    runs.lock().unwrap().push((i, r));
                }
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by_key(|(i, _)| *i);
    runs.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn chaos_in_virtual_time_nothing_lost_stuck_duplicated_or_stale_over_fifty_seeds() {
    let started = Instant::now();
    let mut chaos: Vec<Chaos> = (0..SEEDS).map(|s| Chaos::of_seed(s, TASKS)).collect();
    // The first seed again: the same seed, the same run.
    chaos.push(Chaos::of_seed(0, TASKS));
    let mut runs = run_all(&chaos);
    let again = runs.pop().expect("the repeated seed's run");
    let wall = started.elapsed();

    for r in &runs {
        eprintln!(
            "virtual chaos: {}, {:.1} s wall",
            r.figures(),
            r.wall.as_secs_f64()
        );
    }
    let sum = |f: &dyn Fn(&ChaosRun) -> u64| runs.iter().map(f).sum::<u64>();
    let tasks = sum(&|r| r.created as u64);
    let processors = |n| runs.iter().filter(|r| r.chaos.processors == n).count();
    let raced = runs.iter().filter(|r| r.chaos.racing > 0).count();
    let (lost, stuck, duplicated) = (
        sum(&|r| r.verdict.lost as u64),
        sum(&|r| r.verdict.stuck as u64),
        sum(&|r| r.verdict.duplicates as u64),
    );
    let at_once = runs
        .iter()
        .map(|r| r.invocation_faults.most_at_once)
        .max()
        .unwrap_or(0);
    let stale = sum(&|r| {
        let v = &r.verdict;
        (v.late_starts + v.starts_after_answer + v.stale_commits) as u64
    });
    let newest_unrun = sum(&|r| r.verdict.newest_unrun as u64);
    eprintln!(
        "virtual chaos: {} seeds (processors 1/2/3: {}/{}/{}, {raced} of the single ones raced by a second invocation, at most {at_once} invocations at once), tasks {tasks} (keyed {}, expired backlog {}), \
         succeeded {}, failed {}, superseded {}, shed {} (live tasks past their TTL {}); faults: store calls refused {}, applied then failed {}, \
         applied and resent {}, invocations cut short {}, SNS deliveries made twice {}; \
         create resends {}, invocations {} (errors {}), reclaims {}; \
         lost {lost}, stuck {stuck}, duplicated {duplicated}, stale {stale}, keys whose newest task did not run {newest_unrun}; {:.1} s wall in all \
         (seed 0 twice: the same figures)",
        runs.len(),
        processors(1),
        processors(2),
        processors(3),
        sum(&|r| r.keyed as u64),
        sum(&|r| r.chaos.backlog as u64),
        sum(&|r| r.verdict.succeeded as u64),
        sum(&|r| r.verdict.failed as u64),
        sum(&|r| r.verdict.superseded as u64),
        sum(&|r| r.verdict.shed as u64),
        sum(&|r| r.shed_live as u64),
        sum(&|r| r.store_faults.before),
        sum(&|r| r.store_faults.after),
        sum(&|r| r.store_faults.resent),
        sum(&|r| r.invocation_faults.cut_short),
        sum(&|r| r.invocation_faults.duplicated),
        sum(&|r| r.create_resends as u64),
        sum(&|r| r.pipeline.process_invocations as u64),
        sum(&|r| r.invocation_errors as u64),
        sum(&|r| r.verdict.reclaims as u64),
        wall.as_secs_f64(),
    );

    assert_eq!(
        again.figures(),
        runs[0].figures(),
        "the same seed, the same run"
    );
    assert!(tasks >= 100_000, "{tasks} tasks");
    for r in &runs {
        assert!(r.clean(), "seed {}: {}", r.chaos.seed, r.figures());
    }
    assert_eq!(lost + stuck + duplicated + stale + newest_unrun, 0);
    // Each fault happened, over the seeds.
    for (what, n) in [
        ("store calls refused", sum(&|r| r.store_faults.before)),
        (
            "store calls applied then failed",
            sum(&|r| r.store_faults.after),
        ),
        (
            "store calls applied and resent",
            sum(&|r| r.store_faults.resent),
        ),
        (
            "invocations cut short",
            sum(&|r| r.invocation_faults.cut_short),
        ),
        (
            "SNS deliveries made twice",
            sum(&|r| r.invocation_faults.duplicated),
        ),
        ("reclaims", sum(&|r| r.verdict.reclaims as u64)),
        (
            "keyed tasks superseded",
            sum(&|r| r.verdict.superseded as u64),
        ),
    ] {
        assert!(n > 0, "no {what}");
    }
    assert!(at_once >= 2, "processors at once: {at_once} at most");
    let raced_at_once = runs
        .iter()
        .filter(|r| r.chaos.racing > 0)
        .map(|r| r.invocation_faults.most_at_once)
        .max()
        .unwrap_or(0);
    assert!(
        raced_at_once >= 2,
        "a second invocation raced the only processor"
    );
}
