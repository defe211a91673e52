//! The Lambda binaries as Lambda runs them (a local Runtime API), fed an
//! event nested deeper than the JSON parser allows. lambda_runtime would
//! refuse such an event itself, with errorType
//! `&lambda_runtime::deserializer::DeserializeError`; each function must
//! answer with its own error type and a message that says what is wrong.
//! `make test` builds the debug binaries first (`cargo build --bins`).

use lifo_core::event::{MAX_EVENT_DEPTH, nested_json};
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
