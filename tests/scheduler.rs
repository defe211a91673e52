//! Scheduled tasks on DynamoDB Local: the due-date index, scheduler-start,
//! cancel and the per-user history.

use chrono::{Days, Utc};
use lifo_core::{CancelError, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use std::collections::HashSet;
use std::time::Duration;

fn in_days(n: u64) -> chrono::NaiveDate {
    Utc::now().date_naive() + Days::new(n)
}

async fn schedule(h: &Harness, user: &str, days: u32, count: usize) -> Vec<String> {
    let tasks: Vec<serde_json::Value> = (0..count)
        .map(|i| serde_json::json!({"userId": user, "dueInDays": days, "payload": {"i": i}}))
        .collect();
    h.creator()
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .unwrap()
        .created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_tasks_are_not_claimable_before_they_are_started() {
    let h = Harness::start(2).await;
    let ids = schedule(&h, "u1", 2, 5).await;
    let report = h
        .processor(4, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(
        report.claimed.is_empty(),
        "a scheduled task was claimed: {:?}",
        report.claimed
    );
    // A run for today does not start tasks due in two days.
    let today = h.scheduler().run(in_days(0), deadline()).await.unwrap();
    assert_eq!(today.started, 0);
    for id in &ids {
        let t = h.store.get(id).await.unwrap().unwrap();
        assert_eq!(t.task_status, TaskStatus::Scheduled);
        assert!(
            t.due_key
                .as_deref()
                .is_some_and(|k| k.starts_with(&in_days(2).to_string()))
        );
    }
    // On the due date they start and the processor runs them.
    let due = h.scheduler().run(in_days(2), deadline()).await.unwrap();
    assert_eq!((due.started, due.woke_processor), (5, true));
    let report = h
        .processor(8, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_and_overlapping_runs_start_each_task_exactly_once() {
    let h = Harness::start(2).await;
    let mut ids = schedule(&h, "u2", 1, 300).await;
    ids.extend(schedule(&h, "u2", 1, 300).await);
    let (one, two) = (h.scheduler(), h.scheduler());
    let (a, b) = tokio::join!(
        one.run(in_days(1), deadline()),
        two.run(in_days(1), deadline())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let again = h.scheduler().run(in_days(1), deadline()).await.unwrap();
    println!(
        "overlapping runs started {} + {}, skipped {} + {}; repeat run started {}",
        a.started, b.started, a.skipped, b.skipped, again.started
    );
    assert_eq!(
        a.started + b.started,
        ids.len(),
        "every task started once in all"
    );
    assert_eq!(again.started, 0, "a repeated run finds nothing left");
    for t in h.tasks().await {
        assert_eq!(t.task_status, TaskStatus::Pending);
        assert_eq!(t.due_key, None, "left the due index");
        let starts = t
            .history
            .iter()
            .filter(|e| e.status == TaskStatus::Pending)
            .count();
        assert_eq!(starts, 1, "{} started {starts} times", t.task_id);
        assert!(
            t.expires_at > now_ms() / 1000 + 3000,
            "the ttl counts from the start"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_tasks_are_never_started_and_cancel_is_precise() {
    let h = Harness::start(1).await;
    let ids = schedule(&h, "u3", 1, 10).await;
    for id in &ids[..4] {
        let t = h.store.cancel(id, now_ms()).await.unwrap();
        assert_eq!(t.task_status, TaskStatus::Cancelled);
    }
    let report = h.scheduler().run(in_days(1), deadline()).await.unwrap();
    assert_eq!(report.started, 6);
    for id in &ids[..4] {
        assert_eq!(
            h.store.get(id).await.unwrap().unwrap().task_status,
            TaskStatus::Cancelled
        );
    }
    // Now PENDING: it can no longer be cancelled.
    let err = h.store.cancel(&ids[5], now_ms()).await.unwrap_err();
    assert!(
        matches!(
            err,
            CancelError::NotScheduled {
                status: TaskStatus::Pending,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "task {} is PENDING; only SCHEDULED tasks can be cancelled",
            ids[5]
        )
    );
    let err = h.store.cancel("no-such-task", now_ms()).await.unwrap_err();
    assert_eq!(err.to_string(), "no task no-such-task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_days_are_caught_up() {
    let h = Harness::start(1).await;
    let mut ids = schedule(&h, "u4", 1, 3).await;
    ids.extend(schedule(&h, "u4", 2, 3).await);
    ids.extend(schedule(&h, "u4", 9, 2).await);
    // The runs of the next three days were missed; the fourth day's run
    // covers them (catch-up 7 days) but not tasks due later.
    let report = h.scheduler().run(in_days(4), deadline()).await.unwrap();
    assert_eq!(report.started, 6);
    assert_eq!(report.dates.len(), 8);
    let started: HashSet<String> = h
        .tasks()
        .await
        .into_iter()
        .filter(|t| t.task_status == TaskStatus::Pending)
        .map(|t| t.task_id)
        .collect();
    assert_eq!(started, ids[..6].iter().cloned().collect());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_history_lists_every_task_newest_first() {
    let h = Harness::start(1).await;
    let mut created = Vec::new();
    let create = async |spec: serde_json::Value| {
        let id = h
            .creator()
            .handle(serde_json::json!({ "tasks": [spec] }))
            .await
            .unwrap()
            .created[0]
            .clone();
        tokio::time::sleep(Duration::from_millis(5)).await;
        id
    };
    // failed, executed, expired, cancelled, scheduled: created in that order
    created.push(create(serde_json::json!({"userId": "1234", "payload": {"kind": "fails"}})).await);
    let failing = h.processor_custom(
        process::runner::SimulatedRunner::new(1, Duration::ZERO, 1.0, 0.0),
        1,
    );
    assert_eq!(
        failing
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .failed,
        1
    );
    created.push(create(serde_json::json!({"userId": "1234", "payload": {"kind": "runs"}})).await);
    assert_eq!(
        h.processor(1, Duration::ZERO, Duration::from_secs(5))
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .succeeded,
        1
    );
    created.push(
        create(
            serde_json::json!({"userId": "1234", "payload": {"kind": "expires"}, "ttlSeconds": 1}),
        )
        .await,
    );
    created.push(
        create(
            serde_json::json!({"userId": "1234", "payload": {"kind": "cancelled"}, "dueInDays": 3}),
        )
        .await,
    );
    created.push(
        create(serde_json::json!({"userId": "1234", "payload": {"kind": "later"}, "dueInDays": 5}))
            .await,
    );
    create(serde_json::json!({"userId": "someone-else", "payload": {}})).await;
    h.store.cancel(&created[3], now_ms()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await; // "expires" expires unrun
    let later = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(
        !later.claimed.contains(&created[2]),
        "the expired task is never claimed"
    );
    let mut pages = Vec::new();
    let mut start = None;
    loop {
        let (tasks, next) = h.store.user_tasks("1234", 2, start).await.unwrap();
        pages.push(tasks);
        start = next;
        if start.is_none() {
            break;
        }
    }
    let listed: Vec<String> = pages.into_iter().flatten().map(|t| t.task_id).collect();
    let expected: Vec<String> = created[..5].iter().rev().cloned().collect();
    assert_eq!(
        listed, expected,
        "all five of the user's tasks, newest first, across pages of 2"
    );
    let statuses: Vec<TaskStatus> = {
        let mut v = Vec::new();
        for id in &listed {
            v.push(h.store.get(id).await.unwrap().unwrap().task_status);
        }
        v
    };
    assert_eq!(
        statuses,
        vec![
            TaskStatus::Scheduled,
            TaskStatus::Cancelled,
            // Expired unrun: shed by the processor's claim read that met it.
            TaskStatus::Expired,
            TaskStatus::Success,
            TaskStatus::Failure
        ]
    );
    let expired = h.store.get(&created[2]).await.unwrap().unwrap();
    assert!(
        expired.is_expired(now_ms()) && expired.started_at.is_none(),
        "the expired task is listed, never started"
    );
}
