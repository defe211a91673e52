use super::*;
use crate::runner::SimulatedRunner;
use aws_sdk_dynamodb::Client as Ddb;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::error::{ConditionalCheckFailedException, InternalServerError};
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock, mock_client};
use lifo_core::testing::{control, control_read, deadline};
use lifo_core::{Store, StoreError, now_ms};
use lifo_core::{Task, TaskStatus};
use lifo_lambda::Notifier;
use lifo_lambda::testing::publish;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

mod adaptive;
mod corpus;
mod events;
mod limit;
mod logs;
mod pause;
pub(crate) mod select;
mod stack;
mod virtual_time;

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

/// Task `id` as a claim leaves it: TAKEN, first attempt.
fn taken_task(id: &str) -> Task {
    let mut t = Task::new_pending(id.into(), lifo_core::Payload::new(), now_ms(), 60, 1);
    t.task_status = TaskStatus::Taken;
    t.claimable_at = None;
    t.started_at = Some(now_ms());
    t.attempts = 1;
    t
}

fn taken(id: &str) -> HashMap<String, AttributeValue> {
    lifo_core::store::item::to_item(&taken_task(id)).unwrap()
}

/// The value a request binds to `key` (`:now`, `:lease`, `:claimedBy`…).
fn bound<'a>(
    r: &'a aws_sdk_dynamodb::operation::update_item::UpdateItemInput,
    key: &str,
) -> Option<&'a AttributeValue> {
    r.expression_attribute_values().and_then(|v| v.get(key))
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
        linger: Duration::ZERO,
        pause_poll: Duration::from_millis(20),
        rest: crate::rest::RestPolicy::default(),
        rate_limit: None,
        processors: 1,
        max_attempts: 3,
        lease_margin: Duration::from_millis(100),
        order: lifo_core::Order::Lifo,
        fair_share: true,
        tenant_max_in_flight: None,
        concurrency: crate::runner::Concurrency::Fixed,
        clamps: Vec::new(),
        tuning: Default::default(),
    };
    let runner = Arc::new(SimulatedRunner::new(2, Duration::from_millis(5), 0.0, 0.0));
    Processor::new(
        Store::new(ddb, "t"),
        Notifier::new(sns, "arn:trigger"),
        runner,
        config,
    )
}

#[tokio::test]
async fn claims_newest_runs_and_stops_on_an_empty_queue() {
    let query = one_page(&[("b", 20), ("a", 10)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .handle(&crate::Wakeups::one(), deadline())
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
        .handle(&crate::Wakeups::one(), deadline())
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
        .handle(&crate::Wakeups::one(), deadline())
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
    .handle(&crate::Wakeups::one(), deadline())
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
        .handle(&crate::Wakeups::one(), deadline())
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
        .handle(&crate::Wakeups::one(), deadline())
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
        .handle(&crate::Wakeups::one(), deadline())
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
        .handle(
            &crate::Wakeups::one(),
            SystemTime::now() + Duration::from_millis(5),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProcessError::NoTimeToRun { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("no run fits before the deadline")
    );
    assert_eq!((query.num_calls(), sns.num_calls()), (0, 0));
}

#[tokio::test]
async fn the_claims_of_one_refill_carry_one_start_time() {
    // Sent together, so started in LIFO order. Were each claim to read the
    // clock itself, the older task's could come first (here the mock holds
    // the thread 5 ms while answering the first claim) and rank it before
    // the newer one it was claimed beside.
    let query = one_page(&[("c", 30), ("b", 20)]);
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&starts);
    let claim = mock!(Ddb::update_item)
        .match_requests(is_claim)
        .then_compute_output(move |r| {
            let now = bound(r, ":now").and_then(|v| v.as_n().ok()).cloned();
            if let Ok(mut s) = seen.lock() {
                s.push((key_of(r), now));
            }
            std::thread::sleep(Duration::from_millis(5));
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    let (_, finish) = updates();
    let sns = publish();
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .handle(&crate::Wakeups::one(), deadline())
        .await
        .unwrap();
    // Two slots, two tasks: one refill.
    assert_eq!(report.claimed, vec!["c", "b"]);
    let starts = starts.lock().unwrap().clone();
    let at = |id: &str| {
        starts
            .iter()
            .find(|(k, _)| k == id)
            .and_then(|(_, n)| n.clone())
    };
    assert!(at("c").is_some(), "{starts:?}");
    assert_eq!(at("c"), at("b"), "{starts:?}");
}

/// A claim whose answer was lost: the SDK's retry fails the condition and
/// DynamoDB returns the item, holding the claim `claimed_by` made with the
/// request's start time and lease (what this claim would have written).
fn lost_answer(claimed_by: Option<&'static str>) -> Rule {
    mock!(Ddb::update_item)
        .match_requests(is_claim)
        .then_compute_response(move |r| {
            let num = |k: &str| bound(r, k).and_then(|v| v.as_n().ok()?.parse::<u64>().ok());
            let mut t = taken_task(&key_of(r));
            t.token = 1;
            t.started_at = num(":now");
            t.lease_until = num(":lease");
            t.claimed_by = match claimed_by {
                Some(o) => Some(o.to_owned()),
                None => bound(r, ":claimedBy").and_then(|v| v.as_s().ok().cloned()),
            };
            MockResponse::Error(UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .set_item(lifo_core::store::item::to_item(&t).ok())
                    .build(),
            ))
        })
}

#[tokio::test]
async fn a_claim_whose_answer_was_lost_is_run_only_if_it_names_this_invocation() {
    // This invocation's own claim: run it, as the claim it is.
    let query = one_page(&[("x", 20)]);
    let (_, finish) = updates();
    let ours = lost_answer(None);
    let sns = publish();
    let report = processor(&[&query, &ours, &finish], &sns, Duration::from_secs(10))
        .handle(&crate::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        (report.claimed.clone(), report.succeeded),
        (vec!["x".to_owned()], 1)
    );
    // Another processor's claim sent in the same millisecond with the same
    // lease: identical but for `claimedBy`. A conflict, never run twice.
    let query = one_page(&[("x", 20)]);
    let (_, finish) = updates();
    let theirs = lost_answer(Some("process-other"));
    let report = processor(&[&query, &theirs, &finish], &sns, Duration::from_secs(10))
        .handle(&crate::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        (report.claimed.len(), report.conflicts, finish.num_calls()),
        (0, 1, 0)
    );
}

/// Under a paused runtime and a clock that follows it, the processor
/// claims at the clock's time (virtual time, however far from the system's)
/// and measures its deadline against it.
#[tokio::test(start_paused = true)]
async fn it_claims_at_the_time_of_the_clock_it_was_given() {
    const T: u64 = 1_900_000_000_000;
    let clock = lifo_core::clock::TokioClock::starting_at(T);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let query = one_page(&[("b", 20), ("a", 10)]);
    let claim = mock!(Ddb::update_item)
        .match_requests(|r| {
            let now = bound(r, ":now").and_then(|v| v.as_n().ok());
            let now: u64 = now.and_then(|n| n.parse().ok()).unwrap_or(0);
            is_claim(r) && (T + 3_000..T + 13_000).contains(&now)
        })
        .then_compute_output(|r| {
            UpdateItemOutput::builder()
                .set_attributes(Some(taken(&key_of(r))))
                .build()
        });
    let (_, finish) = updates();
    let sns = publish();
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(T + 3_000 + 60_000);
    let report = processor(&[&query, &claim, &finish], &sns, Duration::from_secs(10))
        .with_clock(Arc::new(clock))
        .handle(&crate::Wakeups::one(), deadline)
        .await
        .unwrap();
    assert_eq!(report.claimed, vec!["b", "a"]);
    assert_eq!(claim.num_calls(), 2);
}
