//! Retries on time (issue 33): against a downstream that fails every call,
//! with an otherwise idle queue, each attempt starts within 1.5 × its rest
//! plus 1 s of the failure before it, through the local pipeline with the
//! template's timings and no sweep. The invocation that put the task back
//! waits for a rest that ends within two seconds (reading again once a
//! second meanwhile); for a later one it ends, and its rest alarm (a
//! message on the rest-wake queue, delayed until the rest ends) wakes the
//! queue through trigger. A task with a 40 s TTL reaches FAILURE after its
//! attempts, instead of being shed.

use lifo_core::TaskStatus;
use lifo_tests::Harness;
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A pipeline (the template's timings and process budget, no sweep) over
/// a downstream that fails every call, resting `base` after a failure.
async fn failing(h: &Harness, base: Duration) -> lifo_local::Pipeline {
    let budget: u64 = h
        .stack
        .template
        .parameter_default("TimeBudgetSeconds")
        .unwrap()
        .parse()
        .unwrap();
    let runner = SimulatedRunner::new(3, Duration::from_millis(50), 1.0, 0.0);
    pipeline(h, runner, base, Duration::from_secs(budget)).await
}

/// A pipeline (the template's timings, no sweep: nothing else wakes the
/// processor) over `runner`, resting `base` after a failure, claiming for
/// `budget` an invocation.
async fn pipeline(
    h: &Harness,
    runner: impl process::runner::TaskRunner,
    base: Duration,
    budget: Duration,
) -> lifo_local::Pipeline {
    let processor = Arc::new(h.stack.processor(
        h.store.clone(),
        Arc::new(runner),
        ProcessConfig {
            max_attempts: 3,
            rest: process::rest::RestPolicy { base },
            time_budget: budget,
            ..h.process_config()
        },
    ));
    lifo_local::Pipeline::start(
        &h.stack,
        Arc::new(h.trigger()),
        processor,
        lifo_local::PipelineOptions {
            sweep: lifo_local::pipeline::SweepRate::Off,
            ..lifo_local::PipelineOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Each task's gaps between a put-back and its next claim, past the rest's
/// bound (1.5 × base × 2^(attempt − 2), its jitter included), printed; each
/// task must have ended FAILURE after its 3 attempts. Sorted, with the p95.
fn gaps_past_the_bound(tasks: &[lifo_core::Task], base: Duration) -> (Vec<i64>, i64) {
    let mut over = Vec::new();
    for t in tasks {
        assert_eq!(t.task_status, TaskStatus::Failure, "{t:#?}");
        assert_eq!(t.attempts, 3);
        let mut n = 0;
        for w in t.history.windows(2) {
            if w[0].status == TaskStatus::Pending && w[1].status == TaskStatus::Taken {
                let bound = base.as_millis() as u64 * (1 << n) * 3 / 2;
                let gap = w[1].at - w[0].at;
                println!(
                    "{} attempt {}: rest up to {bound} ms, gap {gap} ms",
                    t.task_id,
                    n + 2
                );
                over.push(gap as i64 - bound as i64);
                n += 1;
            }
        }
        assert_eq!(n, 2, "{:#?}", t.history);
    }
    over.sort_unstable();
    let p95 = over[(over.len() * 95).div_ceil(100) - 1];
    (over, p95)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_starts_within_a_second_of_its_rest_and_the_task_ends_failure() {
    let h = Harness::as_deployed(1).await;
    let base = Duration::from_secs(1);
    let pipeline = failing(&h, base).await;
    let ids: Vec<String> = (0..5).map(|i| format!("flaky-{i}")).collect();
    let specs: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| json!({"taskId": id, "payload": {"n": 1}, "ttlSeconds": 40}))
        .collect();
    h.creator().handle(json!({ "tasks": specs })).await.unwrap();
    let tasks = h
        .wait_for("the tasks end", Duration::from_secs(45), |t| {
            t.iter().filter(|t| t.task_status.is_terminal()).count() == ids.len()
        })
        .await;
    pipeline.stop().await;
    let (over, p95) = gaps_past_the_bound(&tasks, base);
    println!(
        "gap beyond the rest's bound: p95 {p95} ms, worst {} ms",
        over[over.len() - 1]
    );
    assert!(p95 <= 1000, "p95 {p95} ms past the rest");
}

/// A task that arrives while another rests (4–6 s here) starts within
/// about a second, not when the rest ends: the invocation that put the
/// first back has ended with an alarm set (or, waiting for a short rest,
/// reads again every second), so the new task's wake-up starts it. The
/// bound is that second plus the index's lag, whose tail reaches about a
/// second (p99), still well before the rest ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_arrives_during_a_rest_wait_starts_long_before_the_rest_ends() {
    let h = Harness::as_deployed(1).await;
    let pipeline = failing(&h, Duration::from_secs(4)).await;
    h.creator()
        .handle(json!({"tasks": [{"taskId": "resting", "payload": {"n": 1}}]}))
        .await
        .unwrap();
    h.wait_for("the first failure", Duration::from_secs(20), |t| {
        t.iter().any(|t| {
            t.task_id == "resting" && t.task_status == TaskStatus::Pending && t.attempts == 1
        })
    })
    .await;
    let created = lifo_core::now_ms();
    h.creator()
        .handle(json!({"tasks": [{"taskId": "new", "payload": {"n": 2}}]}))
        .await
        .unwrap();
    let tasks = h
        .wait_for("the new task starts", Duration::from_secs(20), |t| {
            t.iter().any(|t| t.task_id == "new" && t.attempts >= 1)
        })
        .await;
    pipeline.stop().await;
    let new = tasks.iter().find(|t| t.task_id == "new").unwrap();
    let first_start = new
        .history
        .iter()
        .find(|e| e.status == TaskStatus::Taken)
        .map(|e| e.at)
        .unwrap();
    let waited = first_start.saturating_sub(created);
    println!("a task that arrived during a rest wait started after {waited} ms");
    assert!(
        waited <= 2500,
        "started {waited} ms after it arrived: {new:#?}"
    );
}

/// Rests longer than an invocation waits (5–7.5 s, then 10–15 s) through
/// the rest alarm alone: each attempt starts within 1.5 × its rest + 1 s,
/// every put-back set an alarm that trigger received, and nothing else
/// woke the queue (no sweep).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_rests_end_on_time_through_the_rest_alarm() {
    let h = Harness::as_deployed(1).await;
    let base = Duration::from_secs(5);
    let pipeline = failing(&h, base).await;
    let ids: Vec<String> = (0..3).map(|i| format!("slow-{i}")).collect();
    let specs: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| json!({"taskId": id, "payload": {"n": 1}, "ttlSeconds": 60}))
        .collect();
    h.creator().handle(json!({ "tasks": specs })).await.unwrap();
    let tasks = h
        .wait_for("the tasks end", Duration::from_secs(60), |t| {
            t.iter().filter(|t| t.task_status.is_terminal()).count() == ids.len()
        })
        .await;
    let alarms = lifo_local::pipeline::PipelineStats::get(&pipeline.stats.rest_alarms);
    pipeline.stop().await;
    let (over, p95) = gaps_past_the_bound(&tasks, base);
    println!(
        "through the alarm: {alarms} alarms delivered; gap beyond the rest's bound: p95 {p95} ms, worst {} ms",
        over[over.len() - 1]
    );
    assert!(p95 <= 1000, "p95 {p95} ms past the rest");
    assert!(alarms >= 2, "the alarm woke the queue: {alarms}");
}

/// The attributes of queue `url` that count its messages: visible, in
/// flight (received, not yet deleted) and delayed.
async fn queue_counts(sqs: &aws_sdk_sqs::Client, url: &str) -> (u64, u64, u64) {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::All)
        .send()
        .await
        .unwrap();
    let attrs = out.attributes.unwrap_or_default();
    let n = |a: A| {
        attrs
            .get(&a)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
    };
    (
        n(A::ApproximateNumberOfMessages),
        n(A::ApproximateNumberOfMessagesNotVisible),
        n(A::ApproximateNumberOfMessagesDelayed),
    )
}

/// One wake-up of a batch of rest alarms cannot be published: only its
/// alarm comes back (after the visibility timeout), and the long rest's
/// alarm, set again for what is left, is not set a second time by the
/// batch's return (`ReportBatchItemFailures` on the mapping; issue 50,
/// item 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_wake_up_returns_its_own_alarm_and_no_other() {
    use lifo_lambda::Wakeup;
    use lifo_local::pipeline::rest_wake;
    let h = Harness::start(1).await;
    let (sqs, url) = (&h.stack.sqs, &h.stack.rest_wake_queue_url);
    let now = lifo_core::now_ms();
    for at in [now, now + 600_000] {
        let w = Wakeup {
            wake_at: Some(at),
            ..Wakeup::new("process", "rest-end", now)
        };
        sqs.send_message()
            .queue_url(url)
            .message_body(serde_json::to_string(&w).unwrap())
            .send()
            .await
            .unwrap();
    }
    let mut batch = Vec::new();
    while batch.len() < 2 {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        batch.extend(out.messages.unwrap_or_default());
    }
    // Its wake-ups go to a topic that does not exist: every publish fails.
    let missing = format!(
        "arn:aws:sns:{}:{}:no-such-topic",
        lifo_local::aws::REGION,
        lifo_local::aws::ACCOUNT
    );
    let trigger = trigger::Trigger::new(lifo_lambda::Notifier::new(h.stack.sns.clone(), missing))
        .with_rest_alarm(h.stack.rest_alarm_as("TriggerFunction"));
    let source = h
        .stack
        .template
        .stream_source(lifo_local::stack::TRIGGER_REST_WAKE)
        .unwrap();
    let mapping = rest_wake::Mapping {
        batch_size: 10,
        report_batch_item_failures: source.report_batch_item_failures,
    };
    let stats = lifo_local::pipeline::PipelineStats::default();
    let arn = "arn:aws:sqs:us-east-1:000000000000:rest-wake";
    rest_wake::deliver(sqs, url, arn, mapping, &trigger, batch, &stats).await;
    let (visible, in_flight, delayed) = queue_counts(sqs, url).await;
    assert_eq!(
        (visible, in_flight, delayed),
        (0, 1, 1),
        "the due alarm in flight (back after its visibility timeout), the long one set again once"
    );
}

/// Fails the task `fails` at once, every time; runs the others for 300 ms.
struct FailsOne;

impl process::runner::TaskRunner for FailsOne {
    fn capacity(&self) -> usize {
        3
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(300)
    }
    async fn run(&self, task: &lifo_core::Task) -> process::runner::RunOutcome {
        if task.task_id == "fails" {
            return process::runner::RunOutcome::Failure("HTTP 500".into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        process::runner::RunOutcome::Success
    }
}

/// A task put back by an invocation that then tail-calls, in a chain that
/// ends before its rest does: its next attempt still starts within 1.5 ×
/// the rest + 1 s, through the alarm that invocation set (issue 50, item
/// 3). The backlog (60 tasks of 300 ms on 3 slots, 6 s) outlasts the 5 s
/// budget, so the first invocation tail-calls; the second drains it in
/// about a second and ends, knowing nothing of the rest (6–9 s). No sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_started_before_a_tail_call_ends_on_time_after_the_chain_ends() {
    let h = Harness::as_deployed(1).await;
    let base = Duration::from_secs(6);
    let pipeline = pipeline(&h, FailsOne, base, Duration::from_secs(5)).await;
    let backlog: Vec<serde_json::Value> = (0..60)
        .map(|i| json!({"taskId": format!("backlog-{i:02}"), "payload": {"n": i}, "ttlSeconds": 120}))
        .collect();
    h.creator()
        .handle(json!({ "tasks": backlog }))
        .await
        .unwrap();
    // Near the first invocation's budget's end: the newest, so claimed next.
    tokio::time::sleep(Duration::from_secs(4)).await;
    h.creator()
        .handle(json!({"tasks": [{"taskId": "fails", "payload": {}, "ttlSeconds": 120}]}))
        .await
        .unwrap();
    let tasks = h
        .wait_for("the second attempt", Duration::from_secs(30), |t| {
            t.iter().any(|t| t.task_id == "fails" && t.attempts >= 2)
        })
        .await;
    let tail_calls = lifo_local::pipeline::PipelineStats::get(&pipeline.stats.tail_calls);
    pipeline.stop().await;
    let fails = tasks.iter().find(|t| t.task_id == "fails").unwrap();
    let gap = fails
        .history
        .windows(2)
        .find(|w| w[0].status == TaskStatus::Pending && w[1].status == TaskStatus::Taken)
        .map(|w| w[1].at - w[0].at)
        .unwrap();
    let bound = base.as_millis() as u64 * 3 / 2 + 1000;
    println!(
        "rest before a tail call: {tail_calls} tail calls, next attempt {gap} ms after the put-back (bound {bound} ms)"
    );
    assert!(tail_calls >= 1, "the first invocation tail-called");
    assert!(gap <= bound, "{gap} ms: {:#?}", fails.history);
}
