//! Integration tests on Amazon DynamoDB Local and moto: the real handlers,
//! the real table definition from template.yaml.

use lifo_core::store::Op;
use lifo_core::{Task, TaskStatus, now_ms};
use lifo_local::{Pipeline, PipelineOptions, pipeline::PipelineStats};
use lifo_tests::{Harness, deadline, fixture};
use process::StopReason;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_trigger_process_end_to_end_at_six_write_units_per_task() {
    let h = Harness::as_deployed(2).await;
    let processor = Arc::new(h.processor(3, Duration::from_millis(20), Duration::from_secs(3)));
    let pipeline = Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        processor,
        PipelineOptions::fast(),
    )
    .await
    .unwrap();

    // Through create (it wakes the processor itself), and through a
    // producer that writes the table directly (the stream wakes it).
    let real = h
        .creator()
        .handle(fixture("create-tasks.json"))
        .await
        .unwrap();
    let demo = h
        .plain_creator()
        .handle(fixture("create-demo.json"))
        .await
        .unwrap();
    let total = real.created.len() + demo.created.len();
    assert_eq!(demo.created.len(), 20);

    wait_until("every task to succeed", Duration::from_secs(60), || async {
        h.count(TaskStatus::Success).await == total
    })
    .await;
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    assert!(
        PipelineStats::get(&stats.trigger_invocations) >= 1,
        "the stream woke the trigger for the direct writes"
    );
    assert!(
        PipelineStats::get(&stats.published) >= 2,
        "create and the trigger each published a wake-up"
    );
    assert!(
        PipelineStats::get(&stats.process_invocations) >= 1,
        "the wake-ups woke the processor"
    );
    assert_eq!(PipelineStats::get(&stats.errors), 0);

    let m = h.store.meter();
    let put = m.spent(Op::Put).units / total as f64;
    let claim = m.spent(Op::Claim).units / m.spent(Op::Claim).requests as f64;
    let finish = m.spent(Op::Finish).units / m.spent(Op::Finish).requests as f64;
    println!(
        "write units per successful task: put {put:.2} + claim {claim:.2} + finish {finish:.2} = {:.2}",
        put + claim + finish
    );
    // put 2 (table + index) + claim 2 (table + index update of the lease)
    // + finish 2 (table + index delete): the lease costs one unit per task.
    assert!(
        put + claim + finish <= 6.0 + 1e-9,
        "cost target with leases is 6 write units, got {}",
        put + claim + finish
    );
    assert_eq!(m.spent(Op::Requeue).requests, 0, "no bounce writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processors_racing_finish_each_task_exactly_once() {
    let h = Harness::start(4).await;
    let created = h
        .creator()
        .handle(serde_json::json!({"count": 80}))
        .await
        .unwrap()
        .created;
    let a = h.processor_on(
        h.stack.store(),
        4,
        Duration::from_millis(5),
        Duration::from_secs(30),
    );
    let b = h.processor_on(
        h.stack.store(),
        4,
        Duration::from_millis(5),
        Duration::from_secs(30),
    );
    let wake = process::Wakeups::one();
    let (ra, rb) = tokio::join!(a.handle(&wake, deadline()), b.handle(&wake, deadline()));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let sa: HashSet<&String> = ra.claimed.iter().collect();
    let sb: HashSet<&String> = rb.claimed.iter().collect();
    println!(
        "processor A claimed {}, B claimed {}, conflicts {} + {}",
        sa.len(),
        sb.len(),
        ra.conflicts,
        rb.conflicts
    );
    assert!(sa.is_disjoint(&sb), "a task was claimed by both");
    assert_eq!(sa.len() + sb.len(), created.len());
    assert_eq!(ra.succeeded + rb.succeeded, created.len());
    assert_eq!(ra.finish_errors + rb.finish_errors, 0);
    assert_eq!(h.count(TaskStatus::Success).await, created.len());
    for t in h.tasks().await {
        assert_eq!(t.attempts, 1, "{} ran more than once", t.task_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_tasks_are_never_claimed() {
    let h = Harness::start(2).await;
    let now = now_ms();
    // Expired 5 s ago, newer than the fresh ones: LIFO would pick them first.
    let expired: Vec<Task> = (0..5)
        .map(|i| {
            Task::new_pending(
                format!("expired-{i}"),
                lifo_core::Payload::new(),
                now - 6_000 + i,
                1,
                2,
            )
        })
        .collect();
    let fresh: Vec<Task> = (0..3)
        .map(|i| {
            Task::new_pending(
                format!("fresh-{i}"),
                lifo_core::Payload::new(),
                now - 60_000 + i,
                3600,
                2,
            )
        })
        .collect();
    for t in expired.iter().chain(&fresh) {
        let mut t = t.clone();
        // keep "expired" the newest in the index
        if t.task_id.starts_with("expired") {
            t.claimable_at = Some(lifo_core::Priority::Normal.key(now + 1_000));
            t.ready_at = now + 1_000;
        }
        h.store.put_new(&[t]).await.unwrap();
    }
    let report = h
        .processor(2, Duration::from_millis(5), Duration::from_secs(10))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let claimed: HashSet<&str> = report.claimed.iter().map(String::as_str).collect();
    assert_eq!(claimed, HashSet::from(["fresh-0", "fresh-1", "fresh-2"]));
    assert_eq!(report.stop, StopReason::Empty);
    for t in h
        .tasks()
        .await
        .iter()
        .filter(|t| t.task_id.starts_with("expired"))
    {
        // Never started: shed (EXPIRED) by the claim read that met it.
        assert_eq!(
            (t.task_status, t.started_at, t.claimable_at),
            (TaskStatus::Expired, None, None),
            "{} was started",
            t.task_id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_create_input_writes_nothing() {
    let h = Harness::start(1).await;
    let err = h
        .creator()
        .handle(fixture("create-invalid.json"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid request: tasks[0].payload: "),
        "{err}"
    );
    // 49 good tasks and one bad one at the end: still nothing written.
    let mut tasks: Vec<serde_json::Value> = (0..49)
        .map(|i| serde_json::json!({"payload": {"i": i}}))
        .collect();
    tasks.push(serde_json::json!({"payload": {}, "ttlSeconds": 0}));
    let err = h
        .creator()
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid request: tasks[49].ttlSeconds: must be between 1 and 604800 seconds, got 0"
    );
    assert!(h.tasks().await.is_empty(), "a refused request wrote tasks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_are_idempotent() {
    let h = Harness::start(1).await;
    let first = h
        .creator()
        .handle(fixture("create-tasks.json"))
        .await
        .unwrap();
    assert!(first.created.contains(&"order-1001".to_owned()));
    let second = h
        .creator()
        .handle(fixture("create-tasks.json"))
        .await
        .unwrap();
    assert_eq!(second.existing, vec!["order-1001".to_owned()]);
    assert!(!second.created.contains(&"order-1001".to_owned()));
    let copies = h
        .tasks()
        .await
        .iter()
        .filter(|t| t.task_id == "order-1001")
        .count();
    assert_eq!(copies, 1);
}

/// 40 tasks over 4 shards, then one processor that runs them one at a time
/// in `order`; returns the created tasks (oldest first) and the claim order.
async fn claim_order(order: lifo_core::Order) -> (Vec<Task>, Vec<String>) {
    claim_in(order, Duration::ZERO, |now| {
        (0..40)
            .map(|i| lifo_core::testing::pending_on_4_shards(now - 10_000 + i * 10, 3600))
            .collect()
    })
    .await
}

/// The tasks `make` gives for the time the stack is up (over 4 shards),
/// claimed by one processor that runs them one at a time, each for
/// `latency`, in `order`: the tasks and the claim order.
async fn claim_in(
    order: lifo_core::Order,
    latency: Duration,
    make: impl FnOnce(u64) -> Vec<Task>,
) -> (Vec<Task>, Vec<String>) {
    let h = Harness::start(4).await;
    let tasks = make(now_ms());
    let shards: HashSet<u32> = tasks.iter().map(|t| t.lifo_shard).collect();
    assert_eq!(shards.len(), 4, "the tasks span every shard");
    h.store.put_new(&tasks).await.unwrap();
    let config = process::ProcessConfig {
        order,
        time_budget: Duration::from_secs(30),
        ..h.process_config()
    };
    let report = h
        .processor_with(1, latency, config)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    (tasks, report.claimed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_newest_first_across_shards() {
    let (tasks, claimed) = claim_order(lifo_core::Order::Lifo).await;
    let newest_first: Vec<String> = tasks.iter().rev().map(|t| t.task_id.clone()).collect();
    assert_eq!(claimed, newest_first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifo_comparison_order_claims_oldest_first_across_shards() {
    let (tasks, claimed) = claim_order(lifo_core::Order::Fifo).await;
    let oldest_first: Vec<String> = tasks.iter().map(|t| t.task_id.clone()).collect();
    assert_eq!(claimed, oldest_first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_run_through_their_handlers_and_budget_overruns_tail_call() {
    let h = Harness::start(1).await;
    // trigger fixtures publish a wake-up to the process topic (moto → SQS).
    for name in [
        "trigger-stream-insert.json",
        "trigger-tail-call.json",
        "trigger-rest-alarm.json",
    ] {
        let out = h.trigger().handle_outcome(fixture(name)).await.unwrap();
        assert_eq!(out.wakeups, 1, "{name}");
    }
    let received = h
        .stack
        .sqs
        .receive_message()
        .queue_url(&h.stack.process_queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap();
    assert!(
        !received.messages().is_empty(),
        "wake-ups reached the process topic"
    );

    // The process fixture on an empty queue: nothing to do, no tail call.
    let wakeups = process::Wakeups::parse(fixture("process-wakeup.json")).unwrap();
    let report = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&wakeups, deadline())
        .await
        .unwrap();
    assert_eq!((report.stop, report.tail_call), (StopReason::Empty, false));

    // More work than one budget: the processor hands over through the trigger topic.
    h.creator()
        .handle(serde_json::json!({"count": 30}))
        .await
        .unwrap();
    let report = h
        .processor(1, Duration::from_millis(50), Duration::from_millis(300))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.stop, StopReason::Budget);
    assert!(report.tail_call);
    let tail = h
        .stack
        .sqs
        .receive_message()
        .queue_url(&h.stack.trigger_queue_url)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap();
    let body = tail
        .messages()
        .first()
        .and_then(|m| m.body())
        .unwrap_or_default()
        .to_owned();
    assert!(body.contains("tail-call"), "tail call message: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deepest_and_largest_payloads_create_accepts_are_stored() {
    let h = Harness::start(1).await;
    // lifo_ops::create::MAX_PAYLOAD_DEPTH levels of maps, and numbers at the range ends.
    let mut deep = serde_json::json!({"small": 1e-130, "big": 9.99e125, "neg": -1e125});
    for _ in 1..lifo_ops::create::MAX_PAYLOAD_DEPTH {
        deep = serde_json::json!({ "a": deep });
    }
    let big = "x".repeat(lifo_core::model::MAX_PAYLOAD_BYTES - 20);
    let out = h
        .creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "deep", "payload": deep}, {"taskId": "big", "payload": {"blob": big}}]}))
        .await
        .unwrap();
    assert_eq!(out.created, vec!["deep".to_owned(), "big".to_owned()]);
    let stored = h.store.get("deep").await.unwrap().unwrap();
    // The same numbers (DynamoDB may write 1e-130 as 1E-130), read as serde_json reads them.
    let sent = lifo_core::Payload::from(deep.as_object().cloned().unwrap_or_default());
    assert_eq!(stored.payload.to_map(), sent.to_map());
    // one level more is refused before anything is written
    let too_deep = serde_json::json!({ "a": deep });
    let err = h
        .creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "deeper", "payload": too_deep}]}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("is nested more than 31 levels deep"),
        "{err}"
    );
    assert!(h.store.get("deeper").await.unwrap().is_none());
}

/// DynamoDB Local writes an empty map into stream records as a bare `{}`,
/// which the SDK cannot parse; the local streams client rewrites it
/// (`lifo_local::empty_maps`). With the sweep off, only the stream can
/// wake the processor: tasks whose payload is `{}` or holds an empty map
/// are served through it, and no poll fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_map_payloads_are_served_through_the_local_stream() {
    // The index current with its writes: with the sweep off, a task the index showed after
    // the stream's one invocation stopped looking (its linger: process's virtual-time tests)
    // would wait here for nothing.
    let h = Harness::own_dynamodb(1).await;
    let processor = Arc::new(h.processor(3, Duration::from_millis(10), Duration::from_secs(3)));
    let pipeline = Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        processor,
        PipelineOptions {
            sweep: lifo_local::SweepRate::Off,
            ..PipelineOptions::fast()
        },
    )
    .await
    .unwrap();
    // A producer writing the table directly: only the stream announces it.
    let created = h
        .plain_creator()
        .handle(serde_json::json!({"tasks": [
            {"taskId": "empty", "payload": {}},
            {"taskId": "nested", "payload": {"a": {}, "l": [{}, {"b": {}}]}},
            {"taskId": "after", "payload": {"n": 1}},
        ]}))
        .await
        .unwrap();
    assert_eq!(created.created.len(), 3);
    wait_until(
        "the three tasks to succeed",
        Duration::from_secs(30),
        || async { h.count(TaskStatus::Success).await == 3 },
    )
    .await;
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    assert_eq!(PipelineStats::get(&stats.sweeps), 0);
    assert_eq!(PipelineStats::get(&stats.errors), 0, "a stream poll failed");
    assert!(PipelineStats::get(&stats.stream_records) >= 3);
}

/// A stack in the test binary's shared DynamoDB Local cannot have its
/// stream read: DynamoDB Local numbers stream records across its tables,
/// and a read fails once another table is written, so its tables are made
/// without a stream, and the pipeline says why at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_refuses_a_stream_in_a_shared_dynamodb_local() {
    let h = Harness::start(1).await;
    let described = h
        .stack
        .ddb
        .describe_table()
        .table_name(&h.stack.table)
        .send()
        .await
        .unwrap();
    assert_eq!(h.stack.stream_arn, None);
    assert_eq!(described.table.and_then(|t| t.stream_specification), None);
    let processor = Arc::new(h.processor(1, Duration::ZERO, Duration::from_secs(3)));
    let refused = Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        processor,
        PipelineOptions::fast(),
    )
    .await
    .err()
    .map(|e| format!("{e:#}"));
    let text = refused.expect("no pipeline on a shared DynamoDB Local");
    assert!(
        text.contains(&format!("the stream of {}", h.stack.table))
            && text.contains("TrimmedDataAccessException")
            && text.contains("Servers::SharedMoto"),
        "{text}"
    );
}

/// `lifo simulate` warms each run's fresh DynamoDB Local on the run's own
/// table before tasks arrive, then reads the stream from after it: nothing
/// the warm-up wrote is left in the table, and the stream carries the run's
/// own tasks and none of the warm-up's records (four per warm-up task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_warm_up_the_stream_carries_only_the_runs_own_tasks() {
    let h = Harness::as_deployed(2).await;
    let written = lifo_lab::warm_up::warm_up(&h.stack.store(), 2, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(written >= 25, "one round at least: {written}");
    assert!(h.stack.scan_tasks().await.unwrap().is_empty());
    assert_eq!(h.store.claimable_depth(2, now_ms(), 0).await.unwrap(), 0);

    let processor = Arc::new(h.processor(4, Duration::from_millis(5), Duration::from_secs(5)));
    let options = PipelineOptions {
        stream_from_latest: true,
        ..PipelineOptions::fast()
    };
    let pipeline = Pipeline::start(&h.stack, Arc::new(h.trigger()), processor, options)
        .await
        .unwrap();
    // Written directly: a producer that wakes nobody, so the stream must.
    let ids = h
        .plain_creator()
        .handle(serde_json::json!({"count": 3}))
        .await
        .unwrap()
        .created;
    wait_until(
        "the run's tasks to succeed",
        Duration::from_secs(30),
        || async { h.count(TaskStatus::Success).await == ids.len() },
    )
    .await;
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    assert!(
        PipelineStats::get(&stats.trigger_invocations) >= 1,
        "the stream announced them"
    );
    // Each task's insert, claim and finish: three records, not the
    // warm-up's 4 × {written}.
    let records = PipelineStats::get(&stats.stream_records);
    assert!(
        (ids.len()..=3 * ids.len()).contains(&records),
        "{records} stream records after a warm-up of {written} tasks"
    );
}
