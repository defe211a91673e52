use super::*;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_sns::Client;
use aws_sdk_sns::operation::publish::PublishOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use lifo_core::testing::{control, fixture};
use serde_json::json;

fn ok_publish() -> Rule {
    mock!(Client::publish)
        .match_requests(|r| r.topic_arn() == Some("arn:process"))
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build()
}

/// SNS answering every publish with a 500 (what the SDK retries).
fn failing_publish() -> Rule {
    mock!(Client::publish)
        .sequence()
        .http_status(
            500,
            Some(
                "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalError</Code>\
                 <Message>down</Message></Error><RequestId>r</RequestId></ErrorResponse>"
                    .into(),
            ),
        )
        .repeatedly()
        .build()
}

fn trigger(rule: &Rule) -> Trigger {
    let client = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [rule]);
    Trigger::new(Notifier::new(client, "arn:process"))
}

fn sequence_numbers(event: &Value) -> Vec<String> {
    event["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["dynamodb"]["SequenceNumber"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn stream_fixture_publishes_one_wakeup() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(fixture("trigger-stream-insert.json"))
        .await
        .unwrap();
    assert_eq!((out.signals, out.ignored, out.wakeups > 0), (2, 0, true));
    assert!(out.failed_items.is_empty());
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn tail_call_fixture_publishes_one_wakeup() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(fixture("trigger-tail-call.json"))
        .await
        .unwrap();
    assert_eq!((out.signals, out.wakeups > 0), (1, true));
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn modify_and_unclaimable_inserts_do_not_wake() {
    let mut event = fixture("trigger-stream-insert.json");
    event["Records"][0]["eventName"] = json!("MODIFY");
    event["Records"][1]["dynamodb"]["NewImage"]
        .as_object_mut()
        .unwrap()
        .remove("claimableAt");
    let rule = ok_publish();
    let out = trigger(&rule).handle_outcome(event).await.unwrap();
    assert_eq!((out.signals, out.ignored, out.wakeups > 0), (0, 2, false));
    assert_eq!(rule.num_calls(), 0);
}

#[tokio::test]
async fn a_malformed_record_is_reported_alone_and_the_rest_still_wakes() {
    let mut event = fixture("trigger-stream-insert.json");
    let bad_seq = event["Records"][1]["dynamodb"]["SequenceNumber"].clone();
    event["Records"][1]["eventName"] = json!(42);
    let rule = ok_publish();
    let response = trigger(&rule).handle(event).await.unwrap();
    let failed: Vec<Option<String>> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert_eq!(failed, vec![bad_seq.as_str().map(str::to_owned)]);
    assert_eq!(
        rule.num_calls(),
        1,
        "the good record still woke the processor"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_publish_reports_the_signals_for_retry() {
    let event = fixture("trigger-stream-insert.json");
    let expected = sequence_numbers(&event);
    let rule = failing_publish();
    let out = trigger(&rule).handle_outcome(event).await.unwrap();
    assert_eq!(out.wakeups, 0);
    assert_eq!(out.failed_items, expected);
    assert_eq!(
        rule.num_calls(),
        lifo_lambda::notify::PUBLISH_ATTEMPTS as usize,
        "publish is retried (by the SDK's policy) before giving up"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_tail_call_publish_fails_the_invocation() {
    let rule = failing_publish();
    let err = trigger(&rule)
        .handle(fixture("trigger-tail-call.json"))
        .await
        .unwrap_err();
    assert!(matches!(err, TriggerError::Publish(_)), "{err}");
    let diag: lambda_runtime::Diagnostic = err.into();
    assert_eq!(diag.error_type, "PublishFailed");
}

fn sweeping(rule: &Rule, query: &Rule) -> Trigger {
    sweeping_with(rule, query, &control(false))
}

/// The reaper's read of a shard's oldest end: nothing there.
fn nothing_to_reap() -> Rule {
    mock!(aws_sdk_dynamodb::Client::query)
        .match_requests(|r| r.scan_index_forward() == Some(true) && r.select().is_none())
        .then_output(|| QueryOutput::builder().build())
}

fn sweeping_with(rule: &Rule, query: &Rule, control: &Rule) -> Trigger {
    let reap = nothing_to_reap();
    let ddb = mock_client!(
        aws_sdk_dynamodb,
        RuleMode::MatchAny,
        [&reap, query, control]
    );
    let sweep = Sweep {
        store: Store::new(ddb, "t"),
        shard_count: 2,
        max_ttl_seconds: 3600,
    };
    trigger(rule).with_sweep(sweep)
}

fn scheduled() -> Value {
    json!({"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events",
           "account": "123456789012", "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
           "resources": ["arn:aws:events:us-east-1:123456789012:rule/sweep"], "detail": {}})
}

#[tokio::test]
async fn the_sweep_wakes_only_when_claimable_tasks_exist() {
    let empty = mock!(aws_sdk_dynamodb::Client::query)
        .match_requests(|r| r.select() == Some(&aws_sdk_dynamodb::types::Select::Count))
        .then_output(|| QueryOutput::builder().build());
    let rule = ok_publish();
    let out = sweeping(&rule, &empty)
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!((out.signals, out.wakeups > 0), (0, false));
    assert_eq!(empty.num_calls(), 2, "one COUNT query per shard");
    assert_eq!(rule.num_calls(), 0);

    let count = mock!(aws_sdk_dynamodb::Client::query)
        .match_requests(|r| r.select() == Some(&aws_sdk_dynamodb::types::Select::Count))
        .then_output(|| QueryOutput::builder().count(7).scanned_count(7).build());
    let rule = ok_publish();
    let out = sweeping(&rule, &count)
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!(
        (out.signals, out.wakeups > 0, out.depth, out.paused),
        (1, true, Some(14), Some(false)),
        "depth sums the shards"
    );
    assert_eq!(rule.num_calls(), 1);
    assert_eq!(
        count.num_calls(),
        2,
        "one COUNT query per shard, nothing else"
    );
}

/// The sweep reaps first: the expired entries at a shard's oldest end are
/// shed (one conditional update each, the shed move's), and counted as
/// `TasksShed` in this run; a live entry ends the reaper's read.
#[tokio::test]
async fn the_sweep_sheds_what_expired_at_the_oldest_end_and_counts_it() {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    let now_s = lifo_core::now_ms() / 1000;
    let entry = |id: &str, expires: u64| {
        std::collections::HashMap::from([
            ("taskId".to_owned(), Av::S(id.into())),
            ("lifoShard".to_owned(), Av::N("0".into())),
            ("claimableAt".to_owned(), Av::N("1".into())),
            ("expiresAt".to_owned(), Av::N(expires.to_string())),
            ("token".to_owned(), Av::N("0".into())),
        ])
    };
    let old_end = mock!(aws_sdk_dynamodb::Client::query)
        .match_requests(|r| {
            r.scan_index_forward() == Some(true)
                && r.select().is_none()
                && r.expression_attribute_values()
                    .and_then(|v| v.get(":shard"))
                    == Some(&Av::N("0".into()))
                // The normal priority's band (the reaper reads each priority's).
                && r.expression_attribute_values()
                    .and_then(|v| v.get(":to"))
                    == Some(&Av::N("4999999999999".into()))
        })
        .then_output(move || {
            QueryOutput::builder()
                .items(entry("gone-1", now_s - 60))
                .items(entry("gone-2", now_s - 30))
                .items(entry("live", now_s + 600))
                .build()
        });
    let other_shard = nothing_to_reap();
    let shed = mock!(aws_sdk_dynamodb::Client::update_item)
        .match_requests(|r| {
            r.condition_expression()
                == Some(
                    "(#status = :from OR (#status = :taken AND #leaseUntil < :now)) \
                     AND #token = :token AND #expiresAt <= :nowSec",
                )
        })
        .then_output(|| {
            aws_sdk_dynamodb::operation::update_item::UpdateItemOutput::builder().build()
        });
    let count = mock!(aws_sdk_dynamodb::Client::query)
        .match_requests(|r| r.select() == Some(&aws_sdk_dynamodb::types::Select::Count))
        .then_output(|| QueryOutput::builder().count(1).build());
    let ddb = mock_client!(
        aws_sdk_dynamodb,
        RuleMode::MatchAny,
        [&old_end, &other_shard, &shed, &count, &control(false)]
    );
    let rule = ok_publish();
    let sweep = Sweep {
        store: Store::new(ddb, "t"),
        shard_count: 2,
        max_ttl_seconds: 3600,
    };
    let out = trigger(&rule)
        .with_sweep(sweep)
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!(out.shed, 2, "the two expired entries were shed");
    assert_eq!(shed.num_calls(), 2);
    assert_eq!(old_end.num_calls(), 1, "the shard's one page");
    assert_eq!(
        other_shard.num_calls(),
        5,
        "shard 0's other two bands, and shard 1's three"
    );
    assert_eq!((out.depth, out.wakeups > 0), (Some(2), true));
}

/// A task that may wait as long as the largest TTL allowed leaves the
/// window `now - MAX_TTL_SECONDS` of the claim reads as it expires, and one
/// claimed just before its expiry whose invocation died leaves it before its
/// lease lapses: the reaper reads each band from its oldest end, so it
/// still sheds both (they stayed PENDING and TAKEN until DynamoDB's TTL
/// deleted them, days later).
#[tokio::test(start_paused = true)]
async fn the_sweep_sheds_tasks_older_than_the_largest_ttl() {
    use lifo_core::memory::{Lag, Memory};
    use lifo_core::{Move, Step, Task, TaskStatus};
    let t0 = 1_800_000_000_000;
    let memory = Memory::new(Lag::Off);
    let task = |id: &str| Task::new_pending(id.into(), lifo_core::Payload::new(), t0, 60, 1);
    memory
        .put_new(&[task("waited"), task("claimed")])
        .await
        .unwrap();
    // Claimed a second before its expiry, by an invocation that dies: its
    // lease runs 15 minutes on.
    let claim = Move::Claim {
        lease_until: t0 + 59_000 + 900_000,
        claimed_by: "process-dead",
    };
    let step = Step {
        now_ms: t0 + 59_000,
        token: 0,
        attempts: 1,
    };
    memory
        .record("claimed", &claim, TaskStatus::Pending, &step)
        .await
        .unwrap();
    let rule = ok_publish();
    let sweep_at = |ms: u64| {
        let clock: lifo_core::clock::SharedClock =
            std::sync::Arc::new(lifo_core::clock::TokioClock::starting_at(ms));
        trigger(&rule)
            .with_sweep(Sweep {
                store: memory.clone(),
                shard_count: 1,
                max_ttl_seconds: 60,
            })
            .with_clock(clock)
    };
    let status = |id: &str| memory.task(id).map(|t| t.task_status);
    let out = sweep_at(t0 + 61_000)
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!(out.shed, 1);
    assert_eq!(status("waited"), Some(TaskStatus::Expired));
    assert_eq!(status("claimed"), Some(TaskStatus::Taken), "its lease runs");
    let out = sweep_at(t0 + 59_000 + 900_000 + 60_000)
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!(out.shed, 1);
    assert_eq!(status("claimed"), Some(TaskStatus::Expired));
    assert_eq!(rule.num_calls(), 0, "nothing claimable: no wake-up");
}

#[tokio::test]
async fn malformed_events_are_errors_not_panics() {
    let rule = ok_publish();
    let t = trigger(&rule);
    for (event, expected) in [
        (json!({}), "unrecognised event: expected a Records array"),
        (
            json!({"Records": [{"eventSource": "aws:s3"}]}),
            "unrecognised event: Records[0] has event source \"aws:s3\"",
        ),
        (
            json!({"Records": [{"eventSource": "aws:dynamodb", "eventName": 5}]}),
            "malformed DynamoDB stream event: Records[0]: ",
        ),
        (
            json!({"Records": [{"EventSource": "aws:sns", "Sns": "x"}]}),
            "malformed SNS event: ",
        ),
        (
            scheduled(),
            "unrecognised event: a scheduled event, but the sweep is not configured",
        ),
    ] {
        let err = t.handle(event.clone()).await.unwrap_err().to_string();
        assert!(err.starts_with(expected), "{event} gave {err}");
    }
    assert_eq!(rule.num_calls(), 0);
}

#[tokio::test]
async fn ttl_deletions_of_never_started_tasks_count_as_expired() {
    let mut event = fixture("trigger-stream-insert.json");
    for (i, started) in [(0usize, false), (1, true)] {
        let r = &mut event["Records"][i];
        r["eventName"] = json!("REMOVE");
        r["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
        let image = r["dynamodb"]["NewImage"].take();
        r["dynamodb"]["OldImage"] = image;
        if started {
            r["dynamodb"]["OldImage"]["startedAt"] = json!({"N": "1"});
        }
    }
    let rule = ok_publish();
    let out = trigger(&rule).handle_outcome(event).await.unwrap();
    assert_eq!((out.shed, out.ignored, out.wakeups > 0), (1, 1, false));
    assert_eq!(rule.num_calls(), 0);
}

#[tokio::test]
async fn a_paused_queue_is_counted_but_not_woken_by_the_sweep() {
    let count = mock!(aws_sdk_dynamodb::Client::query)
        .then_output(|| QueryOutput::builder().count(3).scanned_count(3).build());
    let rule = ok_publish();
    let out = sweeping_with(&rule, &count, &control(true))
        .handle_outcome(scheduled())
        .await
        .unwrap();
    assert_eq!(
        (out.wakeups > 0, out.depth, out.paused),
        (false, Some(6), Some(true))
    );
    assert_eq!(rule.num_calls(), 0);
}

/// A stream record of the control item, as the event source mapping's
/// filter passes it.
fn control_record(paused: bool) -> Value {
    json!({"eventID": "c1", "eventName": "MODIFY", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
           "awsRegion": "us-east-1", "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/t/stream/x",
           "dynamodb": {"Keys": {"taskId": {"S": "#control"}}, "SequenceNumber": "900",
                        "NewImage": {"taskId": {"S": "#control"}, "paused": {"BOOL": paused},
                                     "reason": {"S": "test"}},
                        "SizeBytes": 40, "StreamViewType": "NEW_AND_OLD_IMAGES"}})
}

#[tokio::test]
async fn resume_and_nudges_wake_the_processor_and_a_pause_does_not() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(json!({"Records": [control_record(false)]}))
        .await
        .unwrap();
    assert_eq!((out.signals, out.wakeups > 0), (1, true));
    assert_eq!(rule.num_calls(), 1);

    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(json!({"Records": [control_record(true)]}))
        .await
        .unwrap();
    assert_eq!((out.signals, out.ignored, out.wakeups > 0), (0, 1, false));
    assert_eq!(rule.num_calls(), 0);
}

/// A publishing client that keeps what it published.
fn recording() -> (Rule, std::sync::Arc<std::sync::Mutex<Vec<Wakeup>>>) {
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = sent.clone();
    let rule = mock!(Client::publish)
        .match_requests(move |r| {
            if let Some(w) = r
                .message()
                .and_then(|m| serde_json::from_str::<Wakeup>(m).ok())
            {
                seen.lock().unwrap().push(w);
            }
            true
        })
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build();
    (rule, sent)
}

fn groups_of(sent: &std::sync::Mutex<Vec<Wakeup>>) -> Vec<Option<u32>> {
    let mut g: Vec<Option<u32>> = sent.lock().unwrap().iter().map(|w| w.group).collect();
    g.sort();
    g
}

#[tokio::test]
async fn with_three_processors_each_wakeup_names_the_group_with_work() {
    // The fixture's two inserts, on shards 4 and 5: groups 1 and 2 of 3.
    let mut event = fixture("trigger-stream-insert.json");
    event["Records"][0]["dynamodb"]["NewImage"]["lifoShard"] = json!({"N": "4"});
    event["Records"][1]["dynamodb"]["NewImage"]["lifoShard"] = json!({"N": "5"});
    let (rule, sent) = recording();
    let t = trigger(&rule).with_processors(3);
    t.handle_outcome(event).await.unwrap();
    assert_eq!(groups_of(&sent), vec![Some(1), Some(2)]);

    // A tail call carries its group on.
    let (rule, sent) = recording();
    let mut tail = fixture("trigger-tail-call.json");
    tail["Records"][0]["Sns"]["Message"] =
        json!(r#"{"source":"process","reason":"tail-call","at":1,"group":2}"#);
    trigger(&rule)
        .with_processors(3)
        .handle_outcome(tail)
        .await
        .unwrap();
    assert_eq!(groups_of(&sent), vec![Some(2)]);

    // A resume wakes every group.
    let (rule, sent) = recording();
    trigger(&rule)
        .with_processors(3)
        .handle_outcome(json!({"Records": [control_record(false)]}))
        .await
        .unwrap();
    assert_eq!(groups_of(&sent), vec![Some(0), Some(1), Some(2)]);

    // With one processor, one wake-up naming none (the message as before).
    let (rule, sent) = recording();
    trigger(&rule)
        .handle_outcome(fixture("trigger-stream-insert.json"))
        .await
        .unwrap();
    assert_eq!(groups_of(&sent), vec![None]);
}

/// The one wake-up the trigger publishes for a tail call of group 1 (of
/// two processors) whose message is `message`.
async fn forwarded_to_group_1(message: String) -> Wakeup {
    let (rule, sent) = recording();
    let mut tail = fixture("trigger-tail-call.json");
    tail["Records"][0]["Sns"]["Message"] = json!(message);
    trigger(&rule)
        .with_processors(2)
        .handle_outcome(tail)
        .await
        .unwrap();
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].group, Some(1));
    sent[0].clone()
}

/// What a tail call handed over reaches the processor of its group as it
/// was sent: the trigger neither reads nor changes it.
#[tokio::test]
async fn a_tail_calls_handover_is_forwarded_to_its_group_as_it_came() {
    let handover = json!({"someLayer": {"at": 1, "list": [{"id": "q-1"}], "n": [0, 900]}});
    let message = json!({"source": "process", "reason": "tail-call", "at": 1, "group": 1, "handover": handover});
    let sent = forwarded_to_group_1(message.to_string()).await;
    assert_eq!(sent.handover, Some(handover));
    // A tail call of the version before (its own fields) wakes the group
    // with none.
    let old = r#"{"source":"process","reason":"tail-call","at":1,"group":1,"served":{"a":[0]}}"#;
    let sent = forwarded_to_group_1(old.to_owned()).await;
    assert_eq!(sent.handover, None);
}

/// A rest alarm that went off: the processor is woken (the fixture's rest
/// ended long ago).
#[tokio::test]
async fn a_rest_alarm_wakes_the_processor() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(fixture("trigger-rest-alarm.json"))
        .await
        .unwrap();
    assert_eq!((out.signals, out.wakeups > 0), (1, true));
    assert_eq!(rule.num_calls(), 1);
}

/// SQS delays a message by 15 minutes at most: an alarm for a longer rest
/// arrives early, and is set again for what is left instead of waking
/// anyone; a message that is not a wake-up wakes nobody.
#[tokio::test]
async fn an_early_alarm_is_set_again_and_a_stranger_is_dropped() {
    let mut event = fixture("trigger-rest-alarm.json");
    let far = lifo_core::now_ms() + 3_600_000;
    let body =
        json!({"source": "process", "reason": "rest-end", "at": 1, "wakeAt": far, "group": 2});
    event["Records"][0]["body"] = json!(body.to_string());
    let stranger = {
        let mut r = event["Records"][0].clone();
        r["body"] = json!("hello");
        r
    };
    event["Records"].as_array_mut().unwrap().push(stranger);
    let sent = mock!(aws_sdk_sqs::Client::send_message)
        .match_requests(move |r| {
            r.delay_seconds() == Some(900)
                && r.message_body().is_some_and(|b| {
                    serde_json::from_str::<Wakeup>(b)
                        .is_ok_and(|w| w.wake_at == Some(far) && w.group == Some(2))
                })
        })
        .then_output(|| aws_sdk_sqs::operation::send_message::SendMessageOutput::builder().build());
    let sqs = mock_client!(aws_sdk_sqs, RuleMode::Sequential, [&sent]);
    let rule = ok_publish();
    let out = trigger(&rule)
        .with_rest_alarm(RestAlarm::new(sqs, "q"))
        .handle_outcome(event)
        .await
        .unwrap();
    assert_eq!((out.signals, out.ignored, out.wakeups > 0), (0, 2, false));
    assert_eq!(sent.num_calls(), 1);
    assert_eq!(rule.num_calls(), 0);
}

/// `WakeupsPublished` counts messages, as create's does: a tail call for
/// every group with three processors is three wake-ups (it counted one).
#[tokio::test]
async fn wakeups_published_counts_each_group_s_message() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .with_processors(3)
        .handle_outcome(fixture("trigger-tail-call.json"))
        .await
        .unwrap();
    assert_eq!((out.signals, out.wakeups), (1, 3));
    assert_eq!(rule.num_calls(), 3);
}

/// The wake-up it publishes carries the time of the clock it was given:
/// under a paused runtime, virtual time, however long ago that began.
#[tokio::test(start_paused = true)]
async fn a_wakeup_is_stamped_by_the_injected_clock() {
    let clock = lifo_core::clock::TokioClock::starting_at(1_800_000_000_000);
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let rule = mock!(Client::publish)
        .match_requests(|r| {
            r.message()
                .is_some_and(|m| m.contains(r#""at":1800000005000"#))
        })
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build();
    let out = trigger(&rule)
        .with_clock(std::sync::Arc::new(clock))
        .handle_outcome(fixture("trigger-stream-insert.json"))
        .await
        .unwrap();
    assert!(out.wakeups > 0);
    assert_eq!(rule.num_calls(), 1);
}
