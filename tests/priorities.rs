//! Priorities on DynamoDB Local: high, then normal, then low, newest
//! first within each; a priority survives a redrive and a scheduled start; the
//! reaper sheds every priority from its own oldest end; and a priority costs
//! nothing.

use lifo_core::store::RedriveSettings;
use lifo_core::{Priority, Task, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use process::runner::SimulatedRunner;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priorities_drain_first_newest_first_within_each() {
    let h = Harness::start(2).await;
    // Interleaved: every priority gets older and newer tasks.
    for round in 0..3 {
        for p in ["low", "high", "normal"] {
            h.creator()
                .handle(json!({"tasks": [{"taskId": format!("{p}-{round}"), "priority": p, "payload": {}}]}))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
    let report = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        report.claimed,
        [
            "high-2", "high-1", "high-0", "normal-2", "normal-1", "normal-0", "low-2", "low-1",
            "low-0"
        ]
    );
    let tasks = h.tasks().await;
    let high = tasks.iter().find(|t| t.task_id == "high-0").unwrap();
    assert_eq!(high.priority(), Priority::High);
    let plain = h.tasks().await;
    assert!(plain.iter().all(|t| t.task_status == TaskStatus::Success));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_and_a_scheduled_start_keep_the_priority() {
    let h = Harness::start(1).await;
    h.creator()
        .handle(json!({"tasks": [
            {"taskId": "fails", "priority": "high", "payload": {}},
            {"taskId": "later", "priority": "low", "dueInDays": 1, "payload": {}}
        ]}))
        .await
        .unwrap();
    let failing = h.processor_custom(SimulatedRunner::new(1, Duration::ZERO, 1.0, 0.0), 1);
    failing
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let now = now_ms();
    let redriven = h
        .store
        .redrive(
            "fails",
            RedriveSettings {
                now_ms: now,
                default_ttl_seconds: 3600,
                retention_seconds: 3600,
                reason: "the test",
            },
        )
        .await
        .unwrap();
    assert_eq!(redriven.task_status, TaskStatus::Pending);
    assert_eq!(
        redriven.claimable_at,
        Some(Priority::High.key(redriven.ready_at))
    );
    let started = h.store.start("later", now, 3600, 3600).await.unwrap();
    assert_eq!(
        started.claimable_at,
        Some(Priority::Low.key(started.ready_at))
    );
    assert!(
        started.claimable_at < Some(0),
        "the low band is below every normal key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_sheds_every_priority_from_its_own_oldest_end() {
    let h = Harness::start(1).await;
    let now = now_ms();
    let mut tasks = Vec::new();
    for (priority, name) in [
        (Priority::High, "high"),
        (Priority::Normal, "normal"),
        (Priority::Low, "low"),
    ] {
        // Expired long ago, and live ones older than the next priority's.
        for i in 0..5 {
            tasks.push(
                Task::new_pending(
                    format!("{name}-expired-{i}"),
                    lifo_core::Payload::new(),
                    now - 600_000 + i,
                    60,
                    1,
                )
                .with_priority(priority),
            );
            tasks.push(
                Task::new_pending(
                    format!("{name}-live-{i}"),
                    lifo_core::Payload::new(),
                    now - 300_000 + i,
                    3600,
                    1,
                )
                .with_priority(priority),
            );
        }
    }
    h.store.put_new(&tasks).await.unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let reaped = h
        .store
        .reap(&[0], now, now - 3_600_000, until)
        .await
        .unwrap();
    assert_eq!(reaped.shed, 15, "{reaped:?}");
    let all = h.tasks().await;
    for t in &all {
        let expired = t.task_id.contains("-expired-");
        assert_eq!(
            t.task_status == TaskStatus::Expired,
            expired,
            "{}",
            t.task_id
        );
    }
}

const LANES: [&str; 3] = ["high", "normal", "low"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_costs_nothing() {
    let h = Harness::start(1).await;
    let tasks: Vec<serde_json::Value> = (0..18)
        .map(|i| json!({"priority": LANES[i % 3], "payload": {"n": i}}))
        .collect();
    let units = h.write_units_per_task(tasks, 3).await;
    assert_eq!(units, 6.0, "a task in any priority: 6.00 write units");
}
