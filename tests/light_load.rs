//! A rate limit at light load (issue 34): a processor polling an empty
//! queue spends nothing from its bucket. Before, each read took a start
//! for every free slot before it knew there was a candidate, so an idle
//! poll every 50 ms drained the bucket, and the first tasks after a quiet
//! spell waited a second each.

use lifo_tests::{Harness, deadline};
use process::runner::SimulatedRunner;
use process::{ProcessConfig, RateLimit};
use serde_json::json;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_reads_leave_the_burst_for_the_tasks_that_come() {
    let h = Harness::start(1).await;
    let p = Arc::new(h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(3, Duration::ZERO, 0.0, 0.0)),
        ProcessConfig {
            rate_limit: Some(RateLimit {
                per_second: NonZeroU32::new(1).unwrap(),
                burst: NonZeroU32::new(3).unwrap(),
            }),
            linger: Duration::from_secs(3),
            idle_poll: Duration::from_millis(50),
            time_budget: Duration::from_secs(8),
            ..h.process_config()
        },
    ));
    let run = {
        let p = p.clone();
        tokio::spawn(async move { p.handle(&process::Wakeups::one(), deadline()).await })
    };
    // A quiet spell: about 30 empty reads.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let created = lifo_core::now_ms();
    h.plain_creator()
        .handle(json!({"tasks": [
            {"taskId": "a", "payload": {"n": 1}},
            {"taskId": "b", "payload": {"n": 2}},
            {"taskId": "c", "payload": {"n": 3}},
        ]}))
        .await
        .unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.succeeded, 3, "{report:?}");
    let tasks = h.tasks().await;
    let last_start = tasks.iter().filter_map(|t| t.started_at).max().unwrap();
    let waited = last_start.saturating_sub(created);
    assert!(
        waited < 700,
        "the burst of 3 was spent by idle reads: the last start came {waited} ms after the tasks"
    );
}
