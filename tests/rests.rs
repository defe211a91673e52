//! Retries on time (issue 33): against a downstream that fails every call,
//! with an otherwise idle queue, each attempt starts within 1.5 × its rest
//! plus 1 s of the failure before it, through the local pipeline with the
//! template's timings and no sweep. The invocation that put the task back
//! waits for a rest that ends within two seconds (reading again once a
//! second meanwhile); for a later one it ends, and its rest alarm (a
//! message on the rest-wake queue, delayed until the rest ends) wakes the
//! queue through trigger. A task with a 40 s TTL reaches FAILURE after its
//! attempts, instead of being shed.

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
            rest: process::select::rest::RestPolicy { base },
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

/// Each task's gaps between a put-back and its next claim, past the rest's
/// bound (1.5 × base × 2^(attempt − 2), its jitter included), printed; each
/// task must have ended FAILURE after its 3 attempts. Sorted, with the p95.
fn gaps_past_the_bound(tasks: &[lifo_core::Task], base: Duration) -> (Vec<i64>, i64) {
    let mut over = Vec::new();
    for t in tasks {
        assert_eq!(t.task_status, TaskStatus::Failure, "{t:#?}");
        assert_eq!(t.attempts, 3);
        let mut n = 0;
        for w in t.history.windows(2) {
            if w[0].status == TaskStatus::Pending && w[1].status == TaskStatus::Taken {
                let bound = base.as_millis() as u64 * (1 << n) * 3 / 2;
                let gap = w[1].at - w[0].at;
                println!(
                    "{} attempt {}: rest up to {bound} ms, gap {gap} ms",
                    t.task_id,
                    n + 2
                );
                over.push(gap as i64 - bound as i64);
                n += 1;
            }
        }
        assert_eq!(n, 2, "{:#?}", t.history);
    }
    over.sort_unstable();
    let p95 = over[(over.len() * 95).div_ceil(100) - 1];
    (over, p95)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_starts_within_a_second_of_its_rest_and_the_task_ends_failure() {
    let h = Harness::own_dynamodb(1).await;
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
    let (over, p95) = gaps_past_the_bound(&tasks, base);
    println!(
        "gap beyond the rest's bound: p95 {p95} ms, worst {} ms",
        over[over.len() - 1]
    );
    assert!(p95 <= 1000, "p95 {p95} ms past the rest");
}

/// A task that arrives while another rests (4–6 s here) starts within
/// about a second, not when the rest ends: the invocation that put the
/// first back has ended with an alarm set (or, waiting for a short rest,
/// reads again every second), so the new task's wake-up starts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_arrives_during_a_rest_wait_starts_within_a_second() {
    let h = Harness::own_dynamodb(1).await;
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

/// Rests longer than an invocation waits (5–7.5 s, then 10–15 s) through
/// the rest alarm alone: each attempt starts within 1.5 × its rest + 1 s,
/// every put-back set an alarm that trigger received, and nothing else
/// woke the queue (no sweep).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_rests_end_on_time_through_the_rest_alarm() {
    let h = Harness::own_dynamodb(1).await;
    let base = Duration::from_secs(5);
    let pipeline = failing(&h, base).await;
    let ids: Vec<String> = (0..3).map(|i| format!("slow-{i}")).collect();
    let specs: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| json!({"taskId": id, "payload": {"n": 1}, "ttlSeconds": 60}))
        .collect();
    h.creator().handle(json!({ "tasks": specs })).await.unwrap();
    let tasks = h
        .wait_for("the tasks end", Duration::from_secs(60), |t| {
            t.iter().filter(|t| t.task_status.is_terminal()).count() == ids.len()
        })
        .await;
    let alarms = lifo_local::pipeline::PipelineStats::get(&pipeline.stats.rest_alarms);
    pipeline.stop().await;
    let (over, p95) = gaps_past_the_bound(&tasks, base);
    println!(
        "through the alarm: {alarms} alarms delivered; gap beyond the rest's bound: p95 {p95} ms, worst {} ms",
        over[over.len() - 1]
    );
    assert!(p95 <= 1000, "p95 {p95} ms past the rest");
    assert!(alarms >= 2, "the alarm woke the queue: {alarms}");
}
