//! The claimable index lags its writes, as AWS's global secondary indexes
//! do (issue 50, item 2; [`lifo_local::index_lag`]): a task shows up in a
//! claim read some time after its write, and a processor woken by its
//! create still claims it, lingering for it (`LINGER_MS`).

use lifo_core::{Order, now_ms};
use lifo_local::index_lag::IndexLagMode;
use lifo_local::stack::StackOptions;
use lifo_tests::{Harness, deadline};
use serde_json::json;
use std::time::{Duration, Instant};

async fn lagging(lag: Duration) -> Harness {
    Harness::start_with(
        1,
        StackOptions {
            index_lag: IndexLagMode::Fixed(lag),
            ..StackOptions::default()
        },
    )
    .await
}

async fn visible(h: &Harness) -> usize {
    let now = now_ms();
    let heads = h
        .store
        .claimable_heads(Order::Lifo, &[0], 8, now, now - 3_600_000)
        .await
        .unwrap();
    heads[0].0.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_task_shows_up_in_a_claim_read_only_after_its_lag() {
    let h = lagging(Duration::from_millis(700)).await;
    h.creator()
        .handle(json!({"tasks": [{"taskId": "late", "payload": {}}]}))
        .await
        .unwrap();
    assert_eq!(
        visible(&h).await,
        0,
        "not in the index right after its write"
    );
    assert_eq!(h.tasks().await.len(), 1, "but in the table");
    // Its lag runs from the write's answer.
    let written = Instant::now();
    tokio::time::sleep(Duration::from_millis(750).saturating_sub(written.elapsed())).await;
    assert_eq!(visible(&h).await, 1, "in the index once its lag has passed");
    assert!(h.stack.index_lag.as_ref().unwrap().hidden() >= 1);
}

/// The invocation a create wakes reads before the index shows the task:
/// its linger (the template's 1 s) keeps it looking until the task shows
/// up. With no linger, the same invocation ends with nothing claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invocation_a_create_wakes_lingers_for_a_task_the_index_shows_late() {
    let h = lagging(Duration::from_millis(400)).await;
    let woken = |linger| {
        h.processor_with(
            3,
            Duration::ZERO,
            process::ProcessConfig {
                linger,
                time_budget: Duration::from_secs(5),
                ..h.process_config()
            },
        )
    };
    h.creator()
        .handle(json!({"tasks": [{"taskId": "a", "payload": {}}]}))
        .await
        .unwrap();
    let report = woken(Duration::ZERO)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(report.claimed.is_empty(), "{report:?}");
    h.creator()
        .handle(json!({"tasks": [{"taskId": "b", "payload": {}}]}))
        .await
        .unwrap();
    let report = woken(Duration::from_secs(1))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let mut claimed = report.claimed.clone();
    claimed.sort();
    assert_eq!(claimed, ["a", "b"]);
}
