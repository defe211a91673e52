//! The Lambda binaries as Lambda runs them (a local Runtime API), fed an
//! event nested deeper than the JSON parser allows. lambda_runtime would
//! refuse such an event itself, with errorType
//! `&lambda_runtime::deserializer::DeserializeError`; each function must
//! answer with its own error type and a message that says what is wrong.
//! `make test` builds the debug binaries first (`cargo build --bins`).

use lifo_core::testing::nested_json;
use lifo_lambda::event::MAX_EVENT_DEPTH;
use lifo_local::runtime_api::{Answer, RuntimeApi, lambda_env, offline_function_env};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

fn binary(name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_lifo"))
        .parent()
        .unwrap()
        .to_owned();
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --bins` first",
        path.display()
    );
    path
}

/// Runs `function`'s binary and answers what it says to `event`.
async fn invoke(function: &str, event: serde_json::Value) -> Answer {
    let mut api = RuntimeApi::start(Duration::from_secs(30)).await.unwrap();
    // Nothing listens at its AWS endpoint: the refusal must come before any call.
    let mut child = tokio::process::Command::new(binary(function))
        .envs(lambda_env(&api, function))
        .envs(offline_function_env())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let answer = api.invoke(event, Duration::from_secs(20)).await.unwrap();
    let _ = child.kill().await;
    answer
}

/// `{"a": {"a": … 1}}`, one level deeper than the JSON parser takes. Built
/// as a value (no parser involved); the Runtime API sends it as JSON text.
fn too_deep() -> serde_json::Value {
    let mut v = serde_json::json!(1);
    for _ in 0..=MAX_EVENT_DEPTH {
        v = serde_json::json!({ "a": v });
    }
    assert_eq!(v.to_string(), nested_json(MAX_EVENT_DEPTH + 1));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_nested_too_deeply_gets_each_functions_own_error() {
    for (function, error_type, message) in [
        (
            "create",
            "InvalidRequest",
            "invalid request: (request): nested deeper than 127 levels of objects and arrays",
        ),
        (
            "trigger",
            "MalformedEvent",
            "malformed invocation event: the event is nested deeper than 127 levels",
        ),
        (
            "process",
            "MalformedEvent",
            "malformed SNS event: the event is nested deeper than 127 levels",
        ),
        (
            "scheduler-start",
            "InvalidEvent",
            "invalid event: the event is nested deeper than 127 levels",
        ),
    ] {
        let answer = invoke(function, too_deep()).await;
        let Answer::Error(body) = answer else {
            panic!("{function}: expected an error, got {answer:?}");
        };
        assert_eq!(body["errorType"], error_type, "{function}: {body}");
        let got = body["errorMessage"].as_str().unwrap_or_default();
        assert!(got.starts_with(message), "{function}: {got}");
    }
}

/// The Rust runner example (`examples/rust-runner`: a team's own
/// `TaskRunner` behind `process::serve`) runs as Lambda runs it, against
/// DynamoDB Local and moto: it claims the tasks, runs them with its own
/// code, and records what its code said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_runner_example_is_a_complete_process_function() {
    let h = lifo_tests::Harness::start(1).await;
    h.creator()
        .handle(serde_json::json!({"tasks": [
            {"taskId": "inv-1", "payload": {"invoiceId": "2026-0001"}},
            {"taskId": "inv-2", "payload": {"invoiceId": "2026-0002"}},
            {"taskId": "no-id", "payload": {"customer": "c-9"}},
            {"taskId": "over-quota", "payload": {"invoiceId": "2026-0003", "quotaExceeded": true}}
        ]}))
        .await
        .unwrap();
    let mut api = RuntimeApi::start(Duration::from_secs(30)).await.unwrap();
    let mut child = tokio::process::Command::new(binary("lifo-example-rust-runner"))
        .envs(lambda_env(&api, "process"))
        .envs([
            ("TABLE_NAME", h.stack.table.as_str()),
            ("TRIGGER_TOPIC_ARN", h.stack.trigger_topic_arn.as_str()),
            (
                "AWS_ENDPOINT_URL_DYNAMODB",
                h.stack.dynamodb_local.endpoint.as_str(),
            ),
            ("AWS_ENDPOINT_URL_SNS", h.stack.moto.endpoint.as_str()),
            ("MAX_ATTEMPTS", "1"),
            ("TIME_BUDGET_SECONDS", "5"),
        ])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let event: serde_json::Value =
        serde_json::from_str(include_str!("../../../events/process-wakeup.json")).unwrap();
    let answer = api.invoke(event, Duration::from_secs(25)).await.unwrap();
    let _ = child.kill().await;
    let Answer::Response(report) = answer else {
        panic!("expected a report, got {answer:?}");
    };
    assert_eq!(report["succeeded"], 2, "{report}");
    assert_eq!(report["failed"], 1, "{report}");
    // Refused as busy each time it is claimed: the invocation waits for its
    // 2 s rest (within its 5 s budget) and offers it again.
    let offers = report["claimed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| *c == "over-quota")
        .count();
    assert!(offers >= 2, "{report}");
    assert_eq!(report["retriedLater"], offers, "{report}");
    let get = |id: &'static str| {
        let store = h.store.clone();
        async move { store.get(id).await.unwrap().unwrap() }
    };
    assert_eq!(
        get("inv-1").await.task_status,
        lifo_core::TaskStatus::Success
    );
    let no_id = get("no-id").await;
    assert_eq!(
        (no_id.task_status, no_id.last_error.as_deref()),
        (
            lifo_core::TaskStatus::Failure,
            Some("payload has no invoiceId")
        )
    );
    // Refused as busy: back to PENDING with no attempt burned, resting 2 s
    // (the runner's own hint) before it is claimable again.
    let quota = get("over-quota").await;
    assert_eq!(
        (quota.task_status, quota.attempts),
        (lifo_core::TaskStatus::Pending, 0)
    );
    assert!(
        quota
            .retry_at
            .is_some_and(|at| at >= quota.task_updated + 2_000)
    );
}
