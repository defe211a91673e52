//! The adaptive limit against real parts (issue 54): the http runner
//! against a real HTTP server whose capacity drops and comes back
//! ([`lifo_local::http_downstream`]), and the lambda runner (the real
//! aws-sdk-lambda client) against the local Lambda API throttling the
//! worker at its reserved concurrency, as AWS does. Each keeps as many
//! runs in flight as its limit allows (what the claim loop does) and
//! shows the limit fall and recover.

use lifo_core::Task;
use lifo_local::http_downstream::HttpDownstream;
use lifo_local::lambda_api::{LambdaApi, Reply, handler};
use process::runner::downstream::{Downstream, Schedule};
use process::runner::{Concurrency, HttpRunner, LambdaRunner, Limited, Slots, TaskRunner};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

fn task() -> Task {
    Task::new_pending("t".into(), lifo_core::Payload::new(), 0, 60, 1)
}

/// Keeps `slots.limit()` runs of `runner` in flight for `secs`, calling
/// `at(second)` at each whole second; the limit every 100 ms.
async fn closed_loop<R: TaskRunner>(
    runner: Arc<R>,
    slots: &Arc<Slots>,
    millis: u64,
    mut at: impl FnMut(u64),
) -> Vec<usize> {
    let limited = Arc::new(Limited::new(runner, Arc::clone(slots)));
    let mut running = JoinSet::new();
    let mut limits = Vec::new();
    let start = Instant::now();
    let mut next = Duration::ZERO;
    while start.elapsed() < Duration::from_millis(millis) {
        while running.try_join_next().is_some() {}
        while running.len() < slots.limit() {
            let r = Arc::clone(&limited);
            running.spawn(async move {
                r.run(&task()).await;
            });
        }
        if start.elapsed() >= next {
            at(next.as_millis() as u64);
            limits.push(slots.limit());
            next += Duration::from_millis(100);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    running.abort_all();
    limits
}

#[tokio::test]
async fn the_http_runners_limit_falls_with_a_real_servers_capacity_and_recovers() {
    // 8 at once, 2 from 2 s to 5 s, 8 again; runs of 50 ms; 4 waiting
    // at most, then 429.
    let schedule = Schedule::parse("8,2@2s,8@5s").unwrap();
    let server = HttpDownstream::start(
        Downstream::new(schedule, 4, Duration::from_secs(30)),
        Duration::from_millis(50),
    )
    .await
    .unwrap();
    let runner = Arc::new(HttpRunner::new(server.url.clone(), 16, Duration::from_secs(5)).unwrap());
    let slots = Arc::new(Slots::new(Concurrency::Adaptive, 16, None));
    let limits = closed_loop(runner, &slots, 8000, |_| {}).await;
    let high = |from: usize, to: usize| *limits[from..to].iter().max().unwrap();
    // Capacity 2 (and 4 queued): it falls to 6 or less, and stays there.
    assert!(high(35, 50) <= 6, "{limits:?}");
    // It was higher before, and is again once the capacity came back (it
    // saws there, halving when the server's queue is full).
    assert!(high(5, 20) >= 9, "{limits:?}");
    assert!(high(60, 80) >= 9, "{limits:?}");
    let refused = server
        .downstream()
        .runs()
        .iter()
        .filter(|r| r.served != process::runner::downstream::Served::Done)
        .count();
    assert!(
        refused < server.downstream().runs().len() / 10,
        "{refused} refused"
    );
}

#[tokio::test]
async fn the_lambda_runners_limit_falls_at_the_workers_reserved_concurrency_and_recovers() {
    let api = LambdaApi::start().await.unwrap();
    api.register(
        "worker",
        handler(|_| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Reply::Ok(serde_json::json!({"outcome": "success"}))
        }),
    );
    api.reserve("worker", Some(2));
    let runner = Arc::new(LambdaRunner::new(
        &lifo_local::stack::sdk_config(&api.endpoint).await,
        "arn:aws:lambda:us-east-1:000000000000:function:worker".into(),
        8,
        Duration::from_secs(5),
    ));
    let slots = Arc::new(Slots::new(Concurrency::Adaptive, 8, None));
    // Reserved 2 for 3 s, then 8 (PutFunctionConcurrency).
    let limits = closed_loop(runner, &slots, 6000, |ms| {
        if ms == 3000 {
            api.reserve("worker", Some(8));
        }
    })
    .await;
    assert!(api.throttled() > 0);
    let low = *limits[5..30].iter().min().unwrap();
    let late = *limits[50..60].iter().min().unwrap();
    // Throttled at 2: the limit halves down to the reserved concurrency or
    // under it; once 8 are reserved, it climbs back to 6 or more.
    assert!(low <= 2, "{limits:?}");
    assert!(late >= 6, "{limits:?}");
}

/// An adaptive processor that met refusals records its last limit in the
/// `#downstream` item through the stack's processor, and `lifo stats` (its
/// JSON, as the API serves it) shows it; a fixed one records nothing.
#[tokio::test]
async fn stats_show_the_last_adaptive_limit() {
    let h = lifo_tests::Harness::start(1).await;
    let out = h
        .plain_creator()
        .handle(serde_json::json!({"count": 6}))
        .await
        .unwrap();
    assert_eq!(out.created.len(), 6);
    let settings = lifo_ops::Settings {
        shards: 1,
        due_shards: 1,
        max_ttl_seconds: lifo_tests::MAX_TTL,
        task_ttl_seconds: 3600,
        retention_seconds: 0,
    };
    let queue = lifo_ops::Queue::new(h.store.clone(), settings);
    let fixed = h.processor_custom(
        process::runner::SimulatedRunner::new(8, Duration::ZERO, 0.0, 1.0),
        3,
    );
    let deadline = std::time::SystemTime::now() + Duration::from_secs(30);
    fixed
        .handle(&process::Wakeups::one(), deadline)
        .await
        .unwrap();
    let now = lifo_core::now_ms();
    let stats = lifo_ops::stats::collect(&queue, now, 0, 0).await.unwrap();
    assert_eq!(stats.downstream, None);
    assert!(stats.json(now)["downstreamLimit"].is_null());

    // New tasks (the first rest), every run refused: the limit halves
    // from 8.
    h.plain_creator()
        .handle(serde_json::json!({"count": 6}))
        .await
        .unwrap();
    let adaptive = h.stack.processor(
        h.store.clone(),
        Arc::new(process::runner::SimulatedRunner::new(
            8,
            Duration::ZERO,
            0.0,
            1.0,
        )),
        process::ProcessConfig {
            concurrency: Concurrency::Adaptive,
            rest: process::rest::RestPolicy {
                base: Duration::ZERO,
            },
            ..fixed.config().clone()
        },
    );
    let report = adaptive
        .handle(&process::Wakeups::one(), deadline)
        .await
        .unwrap();
    assert!(report.limit_halvings > 0, "{report:?}");
    let now = lifo_core::now_ms();
    let stats = lifo_ops::stats::collect(&queue, now, 0, 0).await.unwrap();
    let last = stats.downstream.expect("the last limit");
    assert_eq!(
        (last.limit, last.ceiling, last.group),
        (report.downstream_limit as u64, 8, 0)
    );
    assert_eq!(
        stats.json(now)["downstreamLimit"]["limit"],
        report.downstream_limit as u64
    );
}
