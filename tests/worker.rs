//! Plugging work in: the example Python worker Lambda behind the lambda
//! runner (the real aws-sdk-lambda client, a local Invoke API running the
//! example's handler as Lambda's Python runtime would), end to end through
//! the pipeline on DynamoDB Local + moto; and the rest a failed task takes
//! before each retry.

use lifo_core::{HistoryEntry, Task, TaskStatus};
use lifo_local::lambda_api::{LambdaApi, python_handler};
use lifo_local::{Pipeline, PipelineOptions};
use lifo_tests::Harness;
use process::rest::RestPolicy;
use process::runner::{LambdaRunner, RunOutcome, TaskRunner};
use process::{ProcessConfig, Processor};
use std::sync::Arc;
use std::time::Duration;

fn config(h: &Harness, max_attempts: u32, backoff: Duration) -> ProcessConfig {
    ProcessConfig {
        shard_count: h.shards,
        max_ttl_seconds: lifo_tests::MAX_TTL,
        time_budget: Duration::from_secs(5),
        deadline_margin: Duration::from_millis(500),
        idle_poll: Duration::from_millis(50),
        linger: Duration::ZERO,
        max_attempts,
        rest: RestPolicy { base: backoff },
        lease_margin: Duration::from_millis(500),
        ..ProcessConfig::new(h.stack.table.clone(), h.stack.trigger_topic_arn.clone())
    }
}

async fn run_until<R: TaskRunner>(
    h: &Harness,
    processor: Processor<R>,
    done: impl Fn(&[Task]) -> bool,
) -> Vec<Task> {
    let options = PipelineOptions {
        // A task resting after a failure is woken by the sweep once its
        // rest is over (or by a processor still running other work).
        sweep: lifo_local::SweepRate::Every(Duration::from_millis(250)),
        process_timeout: Some(Duration::from_secs(10)),
        ..PipelineOptions::fast()
    };
    let pipeline = Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        Arc::new(processor),
        options,
    )
    .await
    .unwrap();
    let tasks = h
        .wait_for("the pipeline's work", Duration::from_secs(60), done)
        .await;
    pipeline.stop().await;
    tasks
}

fn find<'a>(tasks: &'a [Task], id: &str) -> &'a Task {
    tasks.iter().find(|t| t.task_id == id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_python_worker_runs_tasks_through_the_lambda_runner() {
    let h = Harness::as_deployed(1).await;
    let api = LambdaApi::start().await.unwrap();
    let worker = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/python-worker/worker.py");
    api.register(
        "thumbnails",
        python_handler(worker, "handler", Duration::from_secs(5)),
    );
    let runner = LambdaRunner::new(
        &lifo_local::stack::sdk_config(&api.endpoint).await,
        "arn:aws:lambda:us-east-1:000000000000:function:thumbnails".into(),
        4,
        Duration::from_secs(6),
    );
    let processor = h.stack.processor(
        h.store.clone(),
        Arc::new(runner),
        config(&h, 2, Duration::from_millis(200)),
    );
    // Long enough that the first run meets the quota even on a loaded
    // machine (CI once took over 4 s from here to the first run); the
    // retry waits only for what is left of it.
    let busy_until = lifo_core::now_ms() + 12_000;
    let mut tasks: Vec<serde_json::Value> = (0..5)
        .map(|i| serde_json::json!({"taskId": format!("img-{i}"), "payload": {"imageUrl": format!("https://x/{i}.jpg")}}))
        .collect();
    tasks.push(serde_json::json!({"taskId": "no-image", "payload": {"kind": "thumbnail"}}));
    tasks.push(serde_json::json!({"taskId": "over-quota",
        "payload": {"imageUrl": "https://x/q.jpg", "busyUntilMs": busy_until}}));
    h.creator()
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .unwrap();

    let tasks = run_until(&h, processor, |t| {
        t.len() == 7 && t.iter().all(|t| t.task_status.is_terminal())
    })
    .await;
    for i in 0..5 {
        assert_eq!(
            find(&tasks, &format!("img-{i}")).task_status,
            TaskStatus::Success
        );
    }
    // Raised: a failed run with the error's type and message, retried once
    // (MaxAttempts 2), then FAILURE.
    let failed = find(&tasks, "no-image");
    assert_eq!(failed.task_status, TaskStatus::Failure);
    assert_eq!(failed.attempts, 2);
    assert_eq!(
        failed.last_error.as_deref(),
        Some("ValueError: task no-image: payload has no imageUrl")
    );
    // "retry-later": put back with no attempt burned, until the quota lifts.
    let quota = find(&tasks, "over-quota");
    assert_eq!(
        (quota.task_status, quota.attempts),
        (TaskStatus::Success, 1)
    );
    assert!(
        quota.history.iter().any(|e| e.status == TaskStatus::Pending
            && e.reason.as_deref() == Some("image service over quota")),
        "no retry-later in {:?}",
        quota.history
    );
    assert!(api.invocations() >= 8, "{} invocations", api.invocations());
}

/// Always fails.
struct Down;

impl TaskRunner for Down {
    fn capacity(&self) -> usize {
        4
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(100)
    }
    async fn run(&self, _task: &Task) -> RunOutcome {
        RunOutcome::Failure("HTTP 503".into())
    }
}

/// The gaps between one claim's failure and the next claim of the task.
fn rests(history: &[HistoryEntry]) -> Vec<u64> {
    history
        .windows(2)
        .filter(|w| w[0].status == TaskStatus::Pending && w[1].status == TaskStatus::Taken)
        .map(|w| w[1].at - w[0].at)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tasks_claims_are_spaced_by_its_doubling_backoff() {
    let h = Harness::as_deployed(1).await;
    let base = Duration::from_millis(800);
    let processor = h
        .stack
        .processor(h.store.clone(), Arc::new(Down), config(&h, 3, base));
    h.creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "flaky", "payload": {"n": 1}}]}))
        .await
        .unwrap();
    let tasks = run_until(&h, processor, |t| {
        t.len() == 1 && t[0].task_status == TaskStatus::Failure
    })
    .await;
    let rests = rests(&tasks[0].history);
    assert_eq!(rests.len(), 2, "{:#?}", tasks[0].history);
    // At least the backoff, doubling: 800 ms, then 1.6 s (and at most half
    // again, plus a sweep's period to notice).
    assert!(rests[0] >= 800 && rests[0] <= 1_200 + 500, "{rests:?}");
    assert!(rests[1] >= 1_600 && rests[1] <= 2_400 + 500, "{rests:?}");
}

/// Fails once, then succeeds.
struct OnceFlaky;

impl TaskRunner for OnceFlaky {
    fn capacity(&self) -> usize {
        1
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(100)
    }
    async fn run(&self, task: &Task) -> RunOutcome {
        if task.attempts == 1 {
            RunOutcome::Failure("HTTP 500".into())
        } else {
            RunOutcome::Success
        }
    }
}

/// The retry path's cost, measured: putting a failed task back (with its
/// rest) writes the item and its claimable index entry, 2 units; its next claim
/// is an ordinary claim, 2 more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_costs_two_write_units_and_a_claim() {
    let h = Harness::as_deployed(1).await;
    h.creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "twice", "payload": {"n": 1}}]}))
        .await
        .unwrap();
    let processor = h.stack.processor(
        h.store.clone(),
        Arc::new(OnceFlaky),
        config(&h, 3, Duration::from_millis(100)),
    );
    // Clones of a store share its meter.
    let meter = h.store.meter();
    let tasks = run_until(&h, processor, |t| {
        t.len() == 1 && t[0].task_status == TaskStatus::Success
    })
    .await;
    assert_eq!(tasks[0].attempts, 2);
    let (claim, requeue, finish) = (
        meter.spent(lifo_core::Op::Claim),
        meter.spent(lifo_core::Op::Requeue),
        meter.spent(lifo_core::Op::Finish),
    );
    assert_eq!(
        (claim.requests, requeue.requests, finish.requests),
        (2, 1, 1)
    );
    assert_eq!((claim.units, requeue.units, finish.units), (4.0, 2.0, 2.0));
}
