//! The fair share per tenant on DynamoDB Local: a tenant flooding the
//! queue with newer tasks gets its share, the others' tasks start first;
//! with the share off, newest first across tenants; the tenant defaults to
//! the userId; and a tenant costs nothing.

use lifo_core::TaskStatus;
use lifo_tests::{Harness, deadline};
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Three tasks of a small tenant, then 30 newer ones of a big tenant.
async fn flood(h: &Harness) {
    let small: Vec<serde_json::Value> = (0..3)
        .map(|i| json!({"taskId": format!("small-{i}"), "tenant": "small", "payload": {}}))
        .collect();
    h.creator().handle(json!({ "tasks": small })).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let big: Vec<serde_json::Value> = (0..30)
        .map(|i| json!({"taskId": format!("big-{i:02}"), "tenant": "big", "payload": {}}))
        .collect();
    h.creator().handle(json!({ "tasks": big })).await.unwrap();
}

fn processor(h: &Harness, fair_share: bool) -> process::Processor<SimulatedRunner> {
    let base = h.processor(2, Duration::from_millis(20), Duration::from_secs(10));
    h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(2, Duration::from_millis(20), 0.0, 0.0)),
        ProcessConfig {
            fair_share,
            ..base.config().clone()
        },
    )
}

fn position(claimed: &[String], id: &str) -> usize {
    claimed
        .iter()
        .position(|c| c == id)
        .unwrap_or_else(|| panic!("{id} not claimed: {claimed:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_gets_its_share_and_the_others_start_first() {
    let h = Harness::start(1).await;
    flood(&h).await;
    let report = processor(&h, true)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 33);
    // Two slots, two tenants: one each, so the small tenant's three tasks
    // start among the first six claims, newest first.
    let small: Vec<usize> = (0..3)
        .map(|i| position(&report.claimed, &format!("small-{i}")))
        .collect();
    assert!(small.iter().all(|p| *p < 6), "{:?}", report.claimed);
    assert!(
        small[2] < small[1] && small[1] < small[0],
        "newest first within a tenant"
    );
    // The big tenant's newest still came first among its own.
    assert!(position(&report.claimed, "big-29") < position(&report.claimed, "big-00"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_share_the_newest_of_any_tenant_starts_first() {
    let h = Harness::start(1).await;
    flood(&h).await;
    let report = processor(&h, false)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 33);
    for i in 0..3 {
        assert!(
            position(&report.claimed, &format!("small-{i}")) >= 30,
            "{:?}",
            report.claimed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_defaults_to_the_user_and_costs_nothing() {
    let h = Harness::start(1).await;
    let n = 12;
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"tenant": format!("tenant-{}", i % 4), "payload": {"n": i}}))
        .collect();
    let units = h.write_units_per_task(tasks, 3).await;
    assert_eq!(units, 6.0, "a task with a tenant: 6.00 write units");

    // No tenant given: the user is the tenant.
    h.creator()
        .handle(json!({"tasks": [{"taskId": "by-user", "userId": "user-7", "payload": {}}]}))
        .await
        .unwrap();
    let tasks = h.tasks().await;
    let by_user = tasks.iter().find(|t| t.task_id == "by-user").unwrap();
    assert_eq!(by_user.tenant.as_deref(), Some("user-7"));
    let others = tasks.iter().filter(|t| t.task_id != "by-user");
    assert!(others.clone().all(|t| t.task_status == TaskStatus::Success));
    assert_eq!(others.count(), n);
}
