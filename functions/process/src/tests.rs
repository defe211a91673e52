use super::*;
use crate::runner::SimulatedRunner;
use aws_sdk_dynamodb::Client as Ddb;
use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::error::{ConditionalCheckFailedException, InternalServerError};
use aws_sdk_sns::Client as Sns;
use aws_sdk_sns::operation::publish::PublishOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use lifo_core::{Task, TaskStatus};
use std::collections::HashMap;

fn index_entry(id: &str, at: u64) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("taskId".to_owned(), AttributeValue::S(id.into())),
        ("lifoShard".to_owned(), AttributeValue::N("0".into())),
        ("claimableAt".to_owned(), AttributeValue::N(at.to_string())),
        (
            "expiresAt".to_owned(),
            AttributeValue::N("99999999999".into()),
        ),
    ])
}

fn taken(id: &str) -> HashMap<String, AttributeValue> {
    let mut t = Task::new_pending(id.into(), Default::default(), now_ms(), 60, 1);
    t.task_status = TaskStatus::Taken;
    t.claimable_at = None;
    t.started_at = Some(now_ms());
    t.attempts = 1;
    serde_dynamo::to_item(t).unwrap()
}

fn is_claim(r: &aws_sdk_dynamodb::operation::update_item::UpdateItemInput) -> bool {
    r.update_expression()
        .is_some_and(|e| e.contains("#leaseUntil = :lease"))
}

fn key_of(r: &aws_sdk_dynamodb::operation::update_item::UpdateItemInput) -> String {
    r.key()
        .and_then(|k| k.get("taskId"))
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// Claims and finishes answer with the item (ReturnValues ALL_NEW).
/// The claim query: one page of index entries (`(id, claimableAt)`, newest
/// first), then an empty queue.
fn one_page(entries: &'static [(&'static str, u64)]) -> Rule {
    mock!(Ddb::query)
        .sequence()
        .output(move || {
            entries
                .iter()
                .fold(QueryOutput::builder(), |b, (id, at)| {
                    b.items(index_entry(id, *at))
                })
                .build()
        })
        .output(|| QueryOutput::builder().build())
        .repeatedly()
        .build()
}

fn updates() -> (Rule, Rule) {
    let claim = mock!(Ddb::update_item)
        .match_requests(is_claim)
        .then_compute_output(|r| {
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    let finish = mock!(Ddb::update_item)
        .match_requests(|r| !is_claim(r))
        .then_compute_output(|r| {
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    (claim, finish)
}

fn publish() -> Rule {
    mock!(Sns::publish)
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build()
}

/// The control item as GetItem answers it: absent (not paused), or paused.
fn control_read(paused: bool) -> GetItemOutput {
    let item = HashMap::from([
        ("taskId".to_owned(), AttributeValue::S("#control".into())),
        ("paused".to_owned(), AttributeValue::Bool(true)),
    ]);
    GetItemOutput::builder()
        .set_item(paused.then_some(item))
        .build()
}

fn control(paused: bool) -> Rule {
    mock!(Ddb::get_item).then_output(move || control_read(paused))
}

fn processor(ddb: &[&Rule], sns: &Rule, budget: Duration) -> Processor<SimulatedRunner> {
    processor_with(ddb, &control(false), sns, budget)
}

fn processor_with(
    ddb: &[&Rule],
    control: &Rule,
    sns: &Rule,
    budget: Duration,
) -> Processor<SimulatedRunner> {
    let mut rules: Vec<&Rule> = ddb.to_vec();
    rules.push(control);
    let ddb = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, &rules, |c| {
        c.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
    });
    let sns = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [sns]);
    let config = ProcessConfig {
        table_name: "t".into(),
        trigger_topic_arn: "arn:trigger".into(),
        shard_count: 1,
        max_ttl_seconds: 3600,
        time_budget: budget,
        deadline_margin: Duration::from_millis(10),
        idle_poll: Duration::from_millis(10),
        pause_poll: Duration::from_millis(20),
        retry: lifo_core::retry::RetryPolicy::default(),
        rate_limit: None,
        processors: 1,
        max_attempts: 3,
        lease_margin: Duration::from_millis(100),
        order: lifo_core::Order::Lifo,
    };
    let runner = Arc::new(SimulatedRunner::new(2, Duration::from_millis(5), 0.0, 0.0));
    Processor::new(
        Store::new(ddb, "t"),
        Notifier::new(sns, "arn:trigger"),
        runner,
        config,
    )
}

fn deadline() -> SystemTime {
    SystemTime::now() + Duration::from_secs(30)
}

#[tokio::test]
async fn claims_newest_runs_and_stops_on_an_empty_queue() {
    let query = one_page(&[("b", 20), ("a", 10)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!(report.claimed, vec!["b", "a"]);
    assert_eq!(
        (
            report.succeeded,
            report.conflicts,
            report.stop,
            report.tail_call
        ),
        (2, 0, StopReason::Empty, false)
    );
    assert_eq!(
        (claim.num_calls(), finish.num_calls(), sns.num_calls()),
        (2, 2, 0)
    );
}

#[tokio::test]
async fn a_lost_claim_is_a_conflict_not_an_error() {
    let query = one_page(&[("gone", 20)]);
    // Another worker holds it now: DynamoDB returns the item (ALL_OLD).
    let lost = mock!(Ddb::update_item).then_error(|| {
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .set_item(Some(taken("gone")))
                .build(),
        )
    });
    let sns = publish();
    let report = processor(&[&query, &lost], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!(
        (
            report.claimed.len(),
            report.conflicts,
            report.skipped,
            report.stop
        ),
        (0, 1, 0, StopReason::Empty)
    );
}

#[tokio::test]
async fn items_with_unknown_status_are_skipped_not_retried_forever() {
    // The index keeps returning the odd item; the claim condition fails and
    // the item does not parse (status WEIRD): skipped once, loop ends.
    let query = mock!(Ddb::query)
        .then_compute_output(|_| QueryOutput::builder().items(index_entry("odd", 20)).build());
    let odd = mock!(Ddb::update_item).then_error(|| {
        let mut item = taken("odd");
        item.insert("taskStatus".into(), AttributeValue::S("WEIRD".into()));
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .set_item(Some(item))
                .build(),
        )
    });
    let sns = publish();
    let report = processor(&[&query, &odd], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!(
        (report.skipped, report.conflicts, report.stop),
        (1, 0, StopReason::Empty)
    );
    assert_eq!(odd.num_calls(), 1);
}

fn expired_lease_entry(id: &str, attempts: u32) -> HashMap<String, AttributeValue> {
    let mut e = index_entry(id, 20);
    e.insert("leaseUntil".into(), AttributeValue::N("1".into()));
    e.insert("token".into(), AttributeValue::N("4".into()));
    e.insert("attempts".into(), AttributeValue::N(attempts.to_string()));
    e
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_while_attempts_remain_and_abandoned_after() {
    let query = mock!(Ddb::query)
        .sequence()
        .output(|| {
            QueryOutput::builder()
                .items(expired_lease_entry("again", 1))
                .items(expired_lease_entry("poison", 3))
                .build()
        })
        .output(|| QueryOutput::builder().build())
        .repeatedly()
        .build();
    let reclaim = mock!(Ddb::update_item)
        .match_requests(|r| {
            r.condition_expression()
                .is_some_and(|c| c.contains("#attempts < :maxAttempts"))
                && r.expression_attribute_values()
                    .and_then(|v| v.get(":token"))
                    == Some(&AttributeValue::N("4".into()))
        })
        .then_compute_output(|r| {
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    let abandon = mock!(Ddb::update_item)
        .match_requests(|r| {
            key_of(r) == "poison"
                && r.condition_expression()
                    == Some("#status = :from AND #token = :token AND #leaseUntil < :now")
                && r.expression_attribute_values()
                    .and_then(|v| v.get(":reason"))
                    == Some(&AttributeValue::S("lease expired after 3 attempts".into()))
        })
        .then_compute_output(|r| {
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    let (_, finish) = updates();
    let sns = publish();
    let report = processor(
        &[&query, &reclaim, &abandon, &finish],
        &sns,
        Duration::from_secs(10),
    )
    .handle(1, deadline())
    .await
    .unwrap();
    assert_eq!(report.claimed, vec!["again"]);
    assert_eq!(
        (report.reclaimed, report.abandoned, report.succeeded),
        (1, 1, 1)
    );
    assert_eq!((reclaim.num_calls(), abandon.num_calls()), (1, 1));
}

#[tokio::test]
async fn a_stale_finish_is_rejected_and_counted() {
    let query = one_page(&[("t", 20)]);
    let (claim, _) = updates();
    // By the time the run ends, another claim (token 2) owns the task.
    let newer = mock!(Ddb::update_item)
        .match_requests(|r| !is_claim(r))
        .then_error(|| {
            let mut item = taken("t");
            item.insert("token".into(), AttributeValue::N("2".into()));
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .set_item(Some(item))
                    .build(),
            )
        });
    let sns = publish();
    let report = processor(&[&query, &claim, &newer], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!((report.succeeded, report.stale_rejected), (0, 1));
    assert_eq!(newer.num_calls(), 1, "a stale finish is not retried");
}

#[tokio::test]
async fn a_failed_query_is_an_error_not_an_empty_queue() {
    let query = mock!(Ddb::query).then_error(|| {
        aws_sdk_dynamodb::operation::query::QueryError::InternalServerError(
            InternalServerError::builder().message("boom").build(),
        )
    });
    let sns = publish();
    let err = processor(&[&query], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProcessError::Store(StoreError::Other {
                operation: "Query",
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(sns.num_calls(), 0);
}

#[tokio::test]
async fn work_left_at_the_end_of_the_budget_is_tail_called() {
    // The index never empties: every query returns a fresh task.
    let query = mock!(Ddb::query).then_compute_output(|_| {
        QueryOutput::builder()
            .items(index_entry(&now_ms().to_string(), now_ms()))
            .build()
    });
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_millis(60))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!(report.stop, StopReason::Budget);
    assert!(report.tail_call);
    assert_eq!(sns.num_calls(), 1);
    assert_eq!(
        report.succeeded,
        report.claimed.len(),
        "every claimed task was finished"
    );
}

#[tokio::test]
async fn never_claims_past_the_deadline() {
    let query = mock!(Ddb::query)
        .then_compute_output(|_| QueryOutput::builder().items(index_entry("x", 1)).build());
    let sns = publish();
    // Deadline already inside the margin + longest run: nothing is claimed,
    // and no tail call either (it would find the same too-short time, and
    // loop): an error that says why, so Lambda retries once and the
    // processor-errors alarm fires.
    let err = processor(&[&query], &sns, Duration::from_secs(60))
        .handle(1, SystemTime::now() + Duration::from_millis(5))
        .await
        .unwrap_err();
    assert!(matches!(err, ProcessError::NoTimeToRun { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("no run fits before the deadline")
    );
    assert_eq!((query.num_calls(), sns.num_calls()), (0, 0));
}

#[test]
fn the_wakeup_fixture_parses_and_garbage_is_an_error() {
    let path = format!(
        "{}/../../events/process-wakeup.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(wakeups_in(event).unwrap(), 1);
    let err = wakeups_in(serde_json::json!({"Records": [{"Sns": 3}]})).unwrap_err();
    assert!(
        err.to_string().starts_with("malformed SNS event: "),
        "{err}"
    );
}

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn log_lines_are_json_with_the_documented_fields_and_metrics_are_valid_emf() {
    // A global subscriber (a thread-local one misses events whose callsite
    // interest another test thread cached first); lines of other tests may
    // interleave, so task lines are picked by this test's own task id.
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    let captured = CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let sink = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_writer(move || sink.clone())
                .finish();
            let _ = tracing::subscriber::set_global_default(subscriber);
            captured
        })
        .clone();

    let query = one_page(&[("log-test-task", 20)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .handle(1, deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 1);

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let find = |name: &str| {
        lines
            .iter()
            .find(|l| {
                l["event"] == name && (l.get("taskId").is_none() || l["taskId"] == "log-test-task")
            })
            .unwrap_or_else(|| panic!("no {name} line in {text}"))
    };
    let claimed = find("task.claimed");
    for field in ["taskId", "shard", "attempt", "token", "ageMs"] {
        assert!(
            claimed.get(field).is_some(),
            "task.claimed lacks {field}: {claimed}"
        );
    }
    let finished = find("task.finished");
    for field in ["taskId", "fromStatus", "toStatus", "attempt", "token"] {
        assert!(
            finished.get(field).is_some(),
            "task.finished lacks {field}: {finished}"
        );
    }
    assert_eq!(finished["toStatus"], "SUCCESS");
    let end = find("process.end");
    for field in [
        "claimed",
        "succeeded",
        "conflicts",
        "staleRejected",
        "tailCall",
        "elapsedMs",
    ] {
        assert!(end.get(field).is_some(), "process.end lacks {field}: {end}");
    }
    assert!(
        !text.contains("payload"),
        "payloads are never logged at info"
    );

    let emf = report.metrics().to_emf("LifoQueue", "stack", 1);
    let directive = &emf["_aws"]["CloudWatchMetrics"][0];
    let names: Vec<&str> = directive["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    for name in [
        "TasksClaimed",
        "TasksSucceeded",
        "TasksFailed",
        "TasksRetried",
        "ClaimConflicts",
        "StaleFinishRejected",
        "TailCalls",
        "AgeAtStartMs",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
        assert!(emf.get(name).is_some(), "{name} has no value");
    }
    assert_eq!(emf["TasksSucceeded"], 1.0);
}

#[tokio::test]
async fn a_paused_queue_claims_nothing_and_makes_no_tail_call() {
    let query = one_page(&[("b", 20), ("a", 10)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor_with(
        &[&query, &claim, &finish],
        &control(true),
        &sns,
        Duration::from_secs(10),
    )
    .handle(1, deadline())
    .await
    .unwrap();
    assert_eq!(report.stop, StopReason::Paused);
    assert!(report.claimed.is_empty() && !report.tail_call);
    assert_eq!(
        (query.num_calls(), claim.num_calls(), sns.num_calls()),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn a_pause_seen_mid_invocation_stops_claiming_and_finishes_what_runs() {
    // An endless queue: every refill finds two more tasks.
    let query = mock!(Ddb::query)
        .sequence()
        .output(|| {
            QueryOutput::builder()
                .items(index_entry("x", 20))
                .items(index_entry("y", 10))
                .build()
        })
        .repeatedly()
        .build();
    let (claim, finish) = updates();
    let sns = publish();
    // Not paused when the invocation starts, paused from the second read.
    let control = mock!(Ddb::get_item)
        .sequence()
        .output(|| control_read(false))
        .output(|| control_read(true))
        .repeatedly()
        .build();
    let started = Instant::now();
    let report = processor_with(
        &[&query, &claim, &finish],
        &control,
        &sns,
        Duration::from_secs(10),
    )
    .handle(1, deadline())
    .await
    .unwrap();
    assert_eq!(report.stop, StopReason::Paused);
    assert!(!report.claimed.is_empty(), "it claimed before the pause");
    assert_eq!(report.succeeded, report.claimed.len(), "and finished those");
    assert!(!report.tail_call && sns.num_calls() == 0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped long before the budget"
    );
}

#[test]
fn a_wakeup_that_names_a_group_is_read() {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../../../events/process-wakeup.json")).unwrap();
    event["Records"][0]["Sns"]["Message"] =
        serde_json::json!(r#"{"source":"trigger","reason":"sweep","at":1,"group":2}"#);
    assert_eq!(
        wake_in(event).unwrap(),
        Wake {
            records: 1,
            groups: vec![2]
        }
    );
}
