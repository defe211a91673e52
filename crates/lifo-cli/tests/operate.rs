//! Operating in an incident, end to end on DynamoDB Local + moto with the
//! real pipeline (stream → trigger → SNS → process): the downstream goes
//! down and 200 tasks end FAILURE; `lifo pause`; nothing starts while
//! paused; the downstream is fixed; `lifo resume`; `lifo tasks retry
//! --failed --since …` → every task SUCCESS.

mod common;
use common::*;

use lifo_core::{HistoryEntry, Task, TaskStatus, now_ms};
use lifo_local::{Pipeline, PipelineOptions};
use lifo_tests::{Harness, fixture_path as fixture};
use process::ProcessConfig;
use process::runner::{RunOutcome, TaskRunner};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

async fn lifo(h: &Harness, args: &[&str]) -> Result<String, String> {
    lifo_in(h, args).await
}

/// A downstream that fails every run while `down`.
struct Flaky {
    down: Arc<AtomicBool>,
}

impl TaskRunner for Flaky {
    fn capacity(&self) -> usize {
        8
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(20)
    }
    async fn run(&self, _task: &Task) -> RunOutcome {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if self.down.load(Ordering::Relaxed) {
            RunOutcome::Failure("HTTP 503: downstream unavailable".into())
        } else {
            RunOutcome::Success
        }
    }
}

async fn wait_for(h: &Harness, what: &str, done: impl Fn(&[Task]) -> bool) -> Vec<Task> {
    h.wait_for(what, Duration::from_secs(90), done).await
}

fn count(tasks: &[Task], status: TaskStatus) -> usize {
    tasks.iter().filter(|t| t.task_status == status).count()
}

/// Claims recorded in the histories in `(from, to)` (epoch ms).
fn starts_between(tasks: &[Task], from: u64, to: u64) -> usize {
    tasks
        .iter()
        .flat_map(|t| t.history.iter())
        .filter(|e: &&HistoryEntry| e.status == TaskStatus::Taken && e.at > from && e.at < to)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_paused_fixed_resumed_and_redriven_ends_with_every_task_run() {
    let h = Harness::own_dynamodb(2).await;
    let down = Arc::new(AtomicBool::new(true));
    let pause_poll = Duration::from_millis(500);
    let processor = Arc::new(h.stack.processor(
        h.store.clone(),
        Arc::new(Flaky { down: down.clone() }),
        ProcessConfig {
            shard_count: h.shards,
            max_ttl_seconds: lifo_tests::MAX_TTL,
            time_budget: Duration::from_secs(5),
            deadline_margin: Duration::from_millis(500),
            idle_poll: Duration::from_millis(50),
            linger: Duration::ZERO,
            pause_poll,
            max_attempts: 2,
            lease_margin: Duration::from_millis(500),
            ..ProcessConfig::new(h.stack.table.clone(), h.stack.trigger_topic_arn.clone())
        },
    ));
    let options = PipelineOptions {
        sweep: lifo_local::SweepRate::Every(Duration::from_secs(2)),
        process_timeout: Some(Duration::from_secs(10)),
        ..PipelineOptions::fast()
    };
    let pipeline = Pipeline::start(&h.stack, Arc::new(h.trigger()), processor, options)
        .await
        .unwrap();

    // 1. The downstream is down: 200 tasks, created with the CLI, all fail.
    let outage_began = now_ms();
    for _ in 0..2 {
        let out = lifo(&h, &["tasks", "create", "--count", "100"])
            .await
            .unwrap();
        assert!(out.starts_with("created 100"), "{out}");
    }
    let tasks = wait_for(&h, "200 failures", |t| count(t, TaskStatus::Failure) == 200).await;
    assert!(
        tasks
            .iter()
            .all(|t| t.last_error.as_deref() == Some("HTTP 503: downstream unavailable"))
    );
    let listed = lifo(
        &h,
        &["--json", "tasks", "list", "--failed", "--limit", "500"],
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&listed)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        200
    );

    // 2. Pause; the stats say so.
    let out = lifo(&h, &["pause", "--reason", "downstream is down"])
        .await
        .unwrap();
    assert!(out.starts_with("paused (downstream is down)"), "{out}");
    let stats = lifo(&h, &["stats"]).await.unwrap();
    assert!(stats.contains("PAUSED for "), "{stats}");
    assert!(stats.contains("(downstream is down)"), "{stats}");
    // Processors see the pause within their poll.
    tokio::time::sleep(pause_poll * 2).await;
    let paused_from = now_ms();

    // 3. While paused, new work arrives (and wakes the pipeline): nothing
    //    starts. The downstream is fixed meanwhile.
    lifo(
        &h,
        &["tasks", "create", "--file", &fixture("create-tasks.json")],
    )
    .await
    .unwrap();
    down.store(false, Ordering::Relaxed);
    // A retry while paused is refused nothing, but waits for resume.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let paused_until = now_ms();
    let tasks = h.tasks().await;
    assert_eq!(
        starts_between(&tasks, paused_from, paused_until),
        0,
        "a task started while paused"
    );
    let waiting = count(&tasks, TaskStatus::Pending);
    assert!(waiting > 0, "the tasks created while paused wait");

    // 4. Resume: the processor is woken and runs what arrived meanwhile.
    let out = lifo(&h, &["resume"]).await.unwrap();
    assert!(out.starts_with("running"), "{out}");
    wait_for(&h, "the waiting tasks run", |t| {
        count(t, TaskStatus::Pending) == 0
    })
    .await;

    // 5. Redrive the failures of the outage: a dry run first, then for real.
    let since = outage_began.to_string();
    let dry = lifo(
        &h,
        &["tasks", "retry", "--failed", "--since", &since, "--dry-run"],
    )
    .await
    .unwrap();
    assert!(
        dry.starts_with("would retry 200 task(s) (dry run, nothing written)"),
        "{dry}"
    );
    let out = lifo(
        &h,
        &[
            "tasks",
            "retry",
            "--failed",
            "--since",
            &since,
            "--error-prefix",
            "HTTP 503",
            "--rate",
            "200",
        ],
    )
    .await
    .unwrap();
    assert!(out.starts_with("retried 200 failed task(s)"), "{out}");
    let tasks = wait_for(&h, "every task SUCCESS", |t| {
        !t.is_empty() && t.iter().all(|t| t.task_status == TaskStatus::Success)
    })
    .await;
    assert_eq!(tasks.len(), 200 + waiting);
    // Each redriven task says so in its history.
    assert!(
        tasks
            .iter()
            .filter(|t| t
                .history
                .iter()
                .any(|e| e.reason.as_deref() == Some("retried with lifo tasks retry")))
            .count()
            == 200
    );
    pipeline.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_one_precise_error_and_writes_nothing() {
    let h = Harness::start(1).await;
    lifo(
        &h,
        &["tasks", "create", "--file", &fixture("create-tasks.json")],
    )
    .await
    .unwrap();
    let before = h.tasks().await.len();
    for (args, expected) in [
        (
            vec!["tasks", "create", "--file", &fixture("create-invalid.json")][..].to_vec(),
            "invalid request: ",
        ),
        // Refused where it is parsed, naming the flag and its range.
        (
            vec!["tasks", "create", "--count", "0"],
            "error: invalid value '0' for '--count <COUNT>': 0 is not in 1..=1000",
        ),
        (
            vec!["tasks", "retry", "nope"],
            "retried 0 of 1; no task nope",
        ),
        (
            vec!["tasks", "delete", "nope"],
            "deleted 0 of 1; no task nope",
        ),
        (vec!["tasks", "retry"], "give the ids to retry, or --failed"),
    ] {
        let err = lifo(&h, &args).await.unwrap_err();
        assert!(err.starts_with(expected), "{args:?}: {err}");
    }
    assert_eq!(h.tasks().await.len(), before, "nothing was written");
    // A task that is not failed: retry names its status, delete works.
    let id = h.tasks().await[0].task_id.clone();
    let err = lifo(&h, &["tasks", "retry", &id]).await.unwrap_err();
    assert!(
        err.contains(&format!(
            "task {id} is PENDING: it is claimable for another "
        )),
        "{err}"
    );
    assert_eq!(
        lifo(&h, &["--json", "tasks", "delete", &id]).await.unwrap(),
        serde_json::json!({"done": [id], "refused": []}).to_string()
    );
    // Clap refuses what makes no sense, naming the flag.
    let err = lifo(&h, &["tasks", "list"]).await.unwrap_err();
    assert!(err.contains("--user"), "{err}");
    let err = lifo(&h, &["tasks", "list", "--failed", "--since", "3w"])
        .await
        .unwrap_err();
    assert!(err.contains("unknown unit \"w\""), "{err}");
}
