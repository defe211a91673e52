use super::*;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemOutput;
use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemOutput};
use aws_sdk_dynamodb::types::error::ConditionalCheckFailedException;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use lifo_core::model::MAX_PAYLOAD_BYTES;
use serde_json::json;
use std::collections::HashSet;

fn config() -> CreateConfig {
    CreateConfig {
        table_name: "t".into(),
        shard_count: 4,
        default_ttl_seconds: 3600,
        max_ttl_seconds: 86_400,
        ..CreateConfig::new("t")
    }
}

fn batch() -> Rule {
    mock!(Client::batch_write_item)
        .sequence()
        .output(|| BatchWriteItemOutput::builder().build())
        .repeatedly()
        .build()
}

fn put() -> Rule {
    mock!(Client::put_item)
        .sequence()
        .output(|| PutItemOutput::builder().build())
        .repeatedly()
        .build()
}

fn creator(rules: &[&Rule]) -> Creator {
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules);
    Creator::new(Store::new(client, "t"), config())
}

/// Runs a request that must be refused; checks the message and that no
/// request reached DynamoDB.
async fn refused(event: Value) -> String {
    let (b, p) = (batch(), put());
    let err = creator(&[&b, &p]).handle(event).await.unwrap_err();
    assert_eq!(
        b.num_calls() + p.num_calls(),
        0,
        "a refused request wrote something"
    );
    err.to_string()
}

#[tokio::test]
async fn bad_input_names_the_field_and_writes_nothing() {
    let cases = [
        (
            json!([1, 2]),
            "invalid request: (request): must be a JSON object with \"count\" or \"tasks\"",
        ),
        (
            json!({}),
            "invalid request: (request): missing \"count\" (demo tasks) or \"tasks\"",
        ),
        (
            json!({"count": 0}),
            "invalid request: count: must be between 1 and 1000, got 0",
        ),
        (
            json!({"count": 1001}),
            "invalid request: count: must be between 1 and 1000, got 1001",
        ),
        (
            json!({"count": "3"}),
            "invalid request: count: invalid type: string \"3\", expected a whole number",
        ),
        (
            json!({"count": 2, "tasks": []}),
            "invalid request: count: give either \"count\" or \"tasks\", not both",
        ),
        (
            json!({"count": 2, "ttlSeconds": 0}),
            "invalid request: ttlSeconds: must be between 1 and 86400 seconds, got 0",
        ),
        (
            json!({"tasks": []}),
            "invalid request: tasks: must hold between 1 and 1000 tasks, got 0",
        ),
        (
            json!({"tasks": [{"payload": {}}, {"payload": "x"}]}),
            "invalid request: tasks[1].payload: invalid type: string \"x\", expected a map",
        ),
        (
            json!({"tasks": [{}]}),
            "invalid request: tasks[0]: missing field `payload`",
        ),
        (
            json!({"tasks": [{"payload": {}, "colour": 1}]}),
            "invalid request: tasks[0].colour: unknown field `colour`, expected one of `taskId`, `payload`, `ttlSeconds`, `userId`, `dueDate`, `dueInDays`, `supersedeKey`, `priority`, `tenant`",
        ),
        (
            json!({"tasks": [{"payload": {}, "ttlSeconds": 90000}]}),
            "invalid request: tasks[0].ttlSeconds: must be between 1 and 86400 seconds, got 90000",
        ),
        (
            json!({"tasks": [{"payload": {}, "ttlSeconds": -5}]}),
            "invalid request: tasks[0].ttlSeconds: invalid value: integer `-5`, expected a non-negative whole number",
        ),
        (
            json!({"tasks": [{"taskId": "", "payload": {}}]}),
            "invalid request: tasks[0].taskId: must not be empty",
        ),
        (
            json!({"tasks": [{"taskId": "a b", "payload": {}}]}),
            "invalid request: tasks[0].taskId: contains ' '; allowed are letters, digits and - _ . : @",
        ),
        (
            json!({"tasks": [{"taskId": "order/1", "payload": {}}]}),
            "invalid request: tasks[0].taskId: contains '/'; allowed are letters, digits and - _ . : @ \
             ('/' cannot travel in a URL path: API Gateway decodes %2F before the function sees it)",
        ),
        (
            json!({"tasks": [{"taskId": "x", "userId": "team/a", "payload": {}}]}),
            "invalid request: tasks[0].userId: contains '/'; allowed are letters, digits and - _ . : @ \
             ('/' cannot travel in a URL path: API Gateway decodes %2F before the function sees it)",
        ),
        (
            json!({"tasks": [{"taskId": "..", "payload": {}}]}),
            "invalid request: tasks[0].taskId: \"..\" is only dots, which no URL can name",
        ),
        (
            json!({"tasks": [{"taskId": "retry", "payload": {}}]}),
            "invalid request: tasks[0].taskId: \"retry\" is a word of the API's routes \
             (POST /tasks/retry), so /tasks/retry could not name the task",
        ),
        (
            json!({"tasks": [{"taskId": ".", "payload": {}}]}),
            "invalid request: tasks[0].taskId: \".\" is only dots, which no URL can name",
        ),
        (
            json!({"tasks": [{"taskId": "x".repeat(129), "payload": {}}]}),
            "invalid request: tasks[0].taskId: is 129 characters; the limit is 128",
        ),
        (
            json!({"tasks": [{"taskId": "a", "payload": {}}, {"taskId": "a", "payload": {}}]}),
            "invalid request: tasks[1].taskId: \"a\" appears twice in this request",
        ),
        (
            json!({"tasks": [{"payload": {}, "supersedeKey": "dev ice"}]}),
            "invalid request: tasks[0].supersedeKey: contains ' '; allowed are letters, digits and - _ . : / @",
        ),
        (
            json!({"tasks": [{"payload": {}, "supersedeKey": ""}]}),
            "invalid request: tasks[0].supersedeKey: must not be empty",
        ),
        (
            json!({"tasks": [{"payload": {}, "supersedeKey": "d", "dueInDays": 2}]}),
            "invalid request: tasks[0].supersedeKey: cannot be combined with dueDate or dueInDays: \
             latest wins among tasks that can start now",
        ),
        (
            json!({"tasks": [{"payload": {}, "priority": "urgent"}]}),
            "invalid request: tasks[0].priority: \"urgent\" is not a priority; use \"high\", \"normal\" or \"low\"",
        ),
        (
            json!({"tasks": [{"payload": {}, "priority": 1}]}),
            "invalid request: tasks[0].priority: invalid type: integer `1`, expected a string",
        ),
        (
            json!({"tasks": [{"payload": {}, "tenant": "a/b c"}]}),
            "invalid request: tasks[0].tenant: contains ' '; allowed are letters, digits and - _ . : / @",
        ),
        (
            json!({"tasks": [{"payload": {}}], "ttlSeconds": 5}),
            "invalid request: ttlSeconds: only allowed with \"count\"; give ttlSeconds per task",
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(refused(event.clone()).await, expected, "for {event}");
    }
}

#[tokio::test]
async fn oversized_payload_is_refused() {
    let big = "x".repeat(MAX_PAYLOAD_BYTES);
    let msg = refused(json!({"tasks": [{"payload": {"ok": 1}}, {"payload": {"blob": big}}]})).await;
    assert!(
        msg.starts_with("invalid request: tasks[1].payload: is 65547 bytes; the limit is 65536"),
        "{msg}"
    );
}

/// 100 tasks of 63 KB each are each under the payload limit, and 6.3 MB
/// together: more than a synchronous Lambda invoke carries. Refused whole,
/// naming the request, on every path (`handle` and `handle_raw`).
#[tokio::test]
async fn a_request_over_a_synchronous_invokes_6_mb_is_refused_whole() {
    let payload = "y".repeat(63 * 1024);
    let tasks: Vec<Value> = (0..100)
        .map(|_| json!({"payload": {"blob": payload}}))
        .collect();
    let request = json!({ "tasks": tasks });
    let bytes = serde_json::to_vec(&request).unwrap().len();
    assert!(bytes > MAX_REQUEST_BYTES);
    let expected = format!(
        "invalid request: (request): is {bytes} bytes; a create request is at most 6291456 \
         (a synchronous Lambda invoke's 6 MB): send fewer or smaller tasks per call"
    );
    assert_eq!(refused(request.clone()).await, expected);
    let raw = serde_json::value::to_raw_value(&request).unwrap();
    let (b, p) = (batch(), put());
    let err = creator(&[&b, &p]).handle_raw(&raw).await.unwrap_err();
    assert_eq!(err.to_string(), expected);
    assert_eq!(b.num_calls() + p.num_calls(), 0);
    // Just under the limit is fine.
    assert!(check_request_size(MAX_REQUEST_BYTES).is_ok());
}

#[tokio::test]
async fn too_many_tasks_is_refused() {
    let tasks: Vec<Value> = (0..1001).map(|_| json!({"payload": {}})).collect();
    let msg = refused(json!({ "tasks": tasks })).await;
    assert_eq!(
        msg,
        "invalid request: tasks: must hold between 1 and 1000 tasks, got 1001"
    );
}

#[tokio::test]
async fn demo_count_is_written_in_batches_of_25() {
    let b = batch();
    let c = creator(&[&b]);
    let out = c.handle(json!({"count": 60})).await.unwrap();
    assert_eq!(out.created.len(), 60);
    assert_eq!(b.num_calls(), 3);
    let unique: HashSet<&String> = out.created.iter().collect();
    assert_eq!(unique.len(), 60);
}

#[tokio::test]
async fn supplied_ids_use_conditional_puts_and_report_existing_ones() {
    let exists = mock!(Client::put_item)
        .match_requests(|r| {
            r.condition_expression() == Some("attribute_not_exists(#taskId)")
                && r.item()
                    .and_then(|i| i.get("taskId"))
                    .and_then(|v| v.as_s().ok())
                    .map(String::as_str)
                    == Some("dup")
        })
        .then_error(|| {
            PutItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder().build(),
            )
        });
    let fresh = mock!(Client::put_item)
        .match_requests(|r| r.condition_expression() == Some("attribute_not_exists(#taskId)"))
        .then_output(|| PutItemOutput::builder().build());
    let b = batch();
    let c = creator(&[&exists, &fresh, &b]);
    let out = c
        .handle(json!({"tasks": [
            {"taskId": "dup", "payload": {"a": 1}},
            {"taskId": "new-1", "payload": {"a": 2}, "ttlSeconds": 60},
            {"payload": {"a": 3}}
        ]}))
        .await
        .unwrap();
    assert_eq!(out.existing, vec!["dup".to_owned()]);
    assert_eq!(out.created.len(), 2);
    assert_eq!(out.created[1], "new-1");
    assert_eq!(
        (exists.num_calls(), fresh.num_calls(), b.num_calls()),
        (1, 1, 1)
    );
}

#[test]
fn config_errors_name_the_variable() {
    let src: std::collections::HashMap<String, String> =
        [("TABLE_NAME", "t"), ("SHARD_COUNT", "0")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert_eq!(
        CreateConfig::from_source(&src).unwrap_err().to_string(),
        "environment variable SHARD_COUNT=\"0\" is invalid: must be between 1 and 100"
    );
}

#[tokio::test]
async fn payloads_dynamodb_would_refuse_are_refused_first() {
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!({ "a": deep });
    }
    let msg = refused(json!({"tasks": [{"payload": {"ok": 1}}, {"payload": deep}]})).await;
    assert!(
        msg.starts_with("invalid request: tasks[1].payload.a.a."),
        "{msg}"
    );
    assert!(msg.ends_with("is nested more than 31 levels deep"), "{msg}");
    assert_eq!(
        refused(json!({"tasks": [{"payload": {"x": {"y": [1, 1e300]}}}]})).await,
        "invalid request: tasks[0].payload.x.y[1]: 1e+300 is outside the range DynamoDB stores \
         (magnitude 1e-130 to 9.9999999999999999999999999999999999999e125)"
    );
    assert_eq!(
        refused(json!({"tasks": [{"payload": {"x": {"": 1}}}]})).await,
        "invalid request: tasks[0].payload.x: has an empty key"
    );
}

#[tokio::test]
async fn scheduling_input_is_validated() {
    let cases = [
        (
            json!({"tasks": [{"payload": {}, "dueDate": "2020-01-01"}]}),
            "invalid request: tasks[0].dueDate: 2020-01-01 is in the past (today is ",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueDate": "2026-13-01"}]}),
            "invalid request: tasks[0].dueDate: \"2026-13-01\" is not a valid date: ",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueDate": "6 Dec"}]}),
            "invalid request: tasks[0].dueDate: \"6 Dec\" is not a date of the form YYYY-MM-DD",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueDate": "2099-01-01"}]}),
            "invalid request: tasks[0].dueDate: is more than 365 days ahead",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueInDays": 400}]}),
            "invalid request: tasks[0].dueInDays: must be between 0 and 365, got 400",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueInDays": -1}]}),
            "invalid request: tasks[0].dueInDays: invalid value: integer `-1`, expected a non-negative whole number",
        ),
        (
            json!({"tasks": [{"payload": {}, "dueInDays": 3, "dueDate": "2030-01-01"}]}),
            "invalid request: tasks[0].dueDate: give either dueDate or dueInDays, not both",
        ),
        (
            json!({"tasks": [{"payload": {}, "userId": ""}]}),
            "invalid request: tasks[0].userId: must not be empty",
        ),
    ];
    for (event, expected) in cases {
        let msg = refused(event.clone()).await;
        assert!(msg.starts_with(expected), "for {event}: {msg}");
    }
}

#[tokio::test]
async fn scheduled_tasks_are_written_scheduled_in_a_due_shard_and_not_claimable() {
    let scheduled = mock!(Client::batch_write_item)
        .match_requests(|r| {
            let items = r
                .request_items()
                .and_then(|m| m.get("t"))
                .cloned()
                .unwrap_or_default();
            items.iter().all(|w| {
                let item = w
                    .put_request()
                    .map(|p| p.item().clone())
                    .unwrap_or_default();
                let s = |k: &str| {
                    item.get(k)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                s("taskStatus") == "SCHEDULED"
                    && s("userId") == "1234"
                    && s("dueKey").starts_with(&s("dueDate"))
                    && s("dueKey").len() == "2026-12-06#00".len()
                    && !item.contains_key("claimableAt")
            })
        })
        .then_output(|| BatchWriteItemOutput::builder().build());
    let c = creator(&[&scheduled]);
    let out = c
        .handle(json!({"tasks": [{"userId": "1234", "dueInDays": 15, "payload": {"report": "monthly"}}]}))
        .await
        .unwrap();
    assert_eq!(out.created.len(), 1);
    assert_eq!(scheduled.num_calls(), 1);
}

/// With wake-ups, create marks its claimable tasks `announced` (the
/// stream's filter then passes them by), publishes one wake-up to the
/// process topic after the write, and none for a second call within
/// `WAKE_DEBOUNCE` (the processor it woke is still looking); a scheduled
/// task is neither announced nor woken for.
#[tokio::test]
async fn create_wakes_the_processor_once_per_call_and_marks_its_tasks() {
    use aws_sdk_sns::operation::publish::PublishOutput;
    let announced = mock!(Client::batch_write_item)
        .match_requests(|r| {
            r.request_items().is_some_and(|m| {
                m["t"].iter().all(|w| {
                    let item = w.put_request().unwrap().item();
                    item.contains_key("claimableAt")
                        == (item.get("announced")
                            == Some(&aws_sdk_dynamodb::types::AttributeValue::Bool(true)))
                })
            })
        })
        .sequence()
        .output(|| BatchWriteItemOutput::builder().build())
        .repeatedly()
        .build();
    let publish = mock!(aws_sdk_sns::Client::publish)
        .match_requests(|r| {
            r.topic_arn() == Some("arn:process")
                && r.message()
                    .is_some_and(|m| m.contains("\"source\":\"create\""))
        })
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build();
    let ddb = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&announced]);
    let sns = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [&publish]);
    let c = Creator::new(Store::new(ddb, "t"), config()).with_wakeups(
        lifo_lambda::notify::Fanout::new(lifo_lambda::Notifier::new(sns, "arn:process"), 1),
    );
    let first = c
        .handle(json!({"tasks": [{"payload": {"n": 1}}, {"payload": {"n": 2}, "dueInDays": 3}]}))
        .await
        .unwrap();
    assert_eq!(first.created.len(), 2);
    assert_eq!(
        announced.num_calls(),
        1,
        "every claimable task announced, no scheduled one"
    );
    assert_eq!(publish.num_calls(), 1, "one wake-up for the call");
    c.handle(json!({"count": 3})).await.unwrap();
    assert_eq!(
        publish.num_calls(),
        1,
        "within WAKE_DEBOUNCE of the last: none"
    );
    // Only scheduled tasks: nothing to wake for.
    let quiet = Creator::new(
        Store::new(
            mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&announced]),
            "t",
        ),
        config(),
    )
    .with_wakeups(lifo_lambda::notify::Fanout::new(
        lifo_lambda::Notifier::new(
            mock_client!(aws_sdk_sns, RuleMode::MatchAny, [&publish]),
            "arn:process",
        ),
        1,
    ));
    quiet
        .handle(json!({"tasks": [{"payload": {"n": 1}, "dueInDays": 2}]}))
        .await
        .unwrap();
    assert_eq!(publish.num_calls(), 1);
}

/// A task is created at the time of the clock it was given: under a paused
/// runtime, virtual time.
#[tokio::test(start_paused = true)]
async fn a_task_is_created_at_the_injected_clocks_time() {
    let clock = lifo_core::clock::TokioClock::starting_at(1_800_000_000_000);
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let stamped = mock!(Client::put_item)
        .match_requests(|r| {
            r.item()
                .and_then(|i| i.get("taskCreated"))
                .and_then(|v| v.as_n().ok())
                == Some(&"1800000007000".to_owned())
        })
        .then_output(|| PutItemOutput::builder().build());
    let c = creator(&[&stamped]).with_clock(std::sync::Arc::new(clock));
    let out = c
        .handle(json!({"tasks": [{"taskId": "a", "payload": {}}]}))
        .await
        .unwrap();
    assert_eq!(out.created, ["a"]);
    assert_eq!(stamped.num_calls(), 1);
}
