//! The claimable index lags its writes, as AWS's global secondary indexes
//! do (issue 50, item 2; [`lifo_local::index_lag`]): a task shows up in a
//! claim read some time after its write. (That a processor woken by its
//! create still claims it, lingering for it (`LINGER_MS`), is timed in
//! virtual time: process's `tests/virtual_time.rs`.)

use lifo_core::{Order, now_ms};
use lifo_local::index_lag::IndexLagMode;
use lifo_local::stack::StackOptions;
use lifo_tests::Harness;
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
