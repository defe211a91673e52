//! Retries on time (issue 33): against a downstream that fails every call,
//! with `RetryBackoffSeconds` 1 and an otherwise idle queue, each attempt
//! starts within 1.5 × its rest + 1 s of the failure before it, through the
//! local pipeline with the template's timings and no sweep: the invocation
//! that put the task back waits for its rest to end when it ends within
//! the invocation's budget, reading again once a second meanwhile. A task with a 40 s TTL
//! reaches FAILURE after its attempts, instead of being shed.

use lifo_core::TaskStatus;
use lifo_tests::Harness;
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A pipeline (the template's timings and process budget, no sweep) over
/// a downstream that fails every call, resting `base` after a failure.
async fn failing(h: &Harness, base: Duration) -> lifo_local::Pipeline {
    let budget: u64 = h
        .stack
        .template
        .parameter_default("TimeBudgetSeconds")
        .unwrap()
        .parse()
        .unwrap();
    let processor = Arc::new(h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(3, Duration::from_millis(50), 1.0, 0.0)),
        ProcessConfig {
            max_attempts: 3,
            rest: lifo_core::rest::RestPolicy { base },
            time_budget: Duration::from_secs(budget),
            ..h.process_config()
        },
    ));
    lifo_local::Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        processor,
        lifo_local::PipelineOptions {
            // Nothing else wakes the processor: no sweep.
            sweep: lifo_local::pipeline::SweepRate::Off,
            ..lifo_local::PipelineOptions::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_starts_within_a_second_of_its_rest_and_the_task_ends_failure() {
    let h = Harness::start(1).await;
    let base = Duration::from_secs(1);
    let pipeline = failing(&h, base).await;
    let ids: Vec<String> = (0..5).map(|i| format!("flaky-{i}")).collect();
    let specs: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| json!({"taskId": id, "payload": {"n": 1}, "ttlSeconds": 40}))
        .collect();
    h.creator().handle(json!({ "tasks": specs })).await.unwrap();
    let tasks = h
        .wait_for("the tasks end", Duration::from_secs(45), |t| {
            t.iter().filter(|t| t.task_status.is_terminal()).count() == ids.len()
        })
        .await;
    pipeline.stop().await;
    // Each put-back, then the next claim: the gap over the rest's bound
    // (1.5 × base × 2^(attempt − 2), its jitter included).
    let mut over = Vec::new();
    for t in &tasks {
        assert_eq!(t.task_status, TaskStatus::Failure, "{t:#?}");
        assert_eq!(t.attempts, 3);
        let mut n = 0;
        for w in t.history.windows(2) {
            if w[0].status == TaskStatus::Pending && w[1].status == TaskStatus::Taken {
                let rest = base.as_millis() as u64 * (1 << n);
                let gap = w[1].at - w[0].at;
                println!(
                    "{} attempt {}: rest up to {} ms, gap {gap} ms",
                    t.task_id,
                    n + 2,
                    rest * 3 / 2
                );
                over.push(gap as i64 - (rest * 3 / 2) as i64);
                n += 1;
            }
        }
        assert_eq!(n, 2, "{:#?}", t.history);
    }
    over.sort_unstable();
    let p95 = over[(over.len() * 95).div_ceil(100) - 1];
    println!(
        "gap beyond the rest's bound: p95 {p95} ms, worst {} ms",
        over[over.len() - 1]
    );
    assert!(p95 <= 1000, "p95 {p95} ms past the rest");
}

/// While the invocation waits for a rest (4–6 s here), a task that arrives
/// cannot wake another (the reserved concurrency is held): the waiting
/// invocation reads again every second, so the new task starts within
/// about a second, not when the rest ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_arrives_during_a_rest_wait_starts_within_a_second() {
    let h = Harness::start(1).await;
    let pipeline = failing(&h, Duration::from_secs(4)).await;
    h.creator()
        .handle(json!({"tasks": [{"taskId": "resting", "payload": {"n": 1}}]}))
        .await
        .unwrap();
    h.wait_for("the first failure", Duration::from_secs(20), |t| {
        t.iter().any(|t| {
            t.task_id == "resting" && t.task_status == TaskStatus::Pending && t.attempts == 1
        })
    })
    .await;
    let created = lifo_core::now_ms();
    h.creator()
        .handle(json!({"tasks": [{"taskId": "new", "payload": {"n": 2}}]}))
        .await
        .unwrap();
    let tasks = h
        .wait_for("the new task starts", Duration::from_secs(20), |t| {
            t.iter().any(|t| t.task_id == "new" && t.attempts >= 1)
        })
        .await;
    pipeline.stop().await;
    let new = tasks.iter().find(|t| t.task_id == "new").unwrap();
    let first_start = new
        .history
        .iter()
        .find(|e| e.status == TaskStatus::Taken)
        .map(|e| e.at)
        .unwrap();
    let waited = first_start.saturating_sub(created);
    println!("a task that arrived during a rest wait started after {waited} ms");
    assert!(
        waited <= 1500,
        "started {waited} ms after it arrived: {new:#?}"
    );
}
