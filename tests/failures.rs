//! A failed invocation still says what it did (issue 34): its successes
//! are counted and its `process.end` line is written, with the error, even
//! when its tail call cannot be published or its last read fails. Before,
//! those paths returned before the metrics and the end line.

use lifo_lambda::Notifier;
use lifo_tests::{Captured, Harness, deadline};
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

// Current thread: the runs the processor spawns log on this thread, under
// the test's subscriber.
#[tokio::test]
async fn a_failed_tail_call_still_logs_the_end_with_what_ran() {
    let h = Harness::start(1).await;
    let tasks: Vec<Value> = (0..5)
        .map(|i| json!({"taskId": format!("t-{i}"), "payload": {"n": i}}))
        .collect();
    h.plain_creator()
        .handle(json!({ "tasks": tasks }))
        .await
        .unwrap();
    // SNS where nothing listens: the tail call fails after its retries.
    let conf = lifo_local::stack::sdk_config("http://127.0.0.1:9").await;
    let dead = Notifier::new(
        aws_sdk_sns::Client::new(&conf),
        "arn:aws:sns:us-east-1:000000000000:gone",
    );
    let p = process::Processor::new(
        h.store.clone(),
        dead,
        Arc::new(SimulatedRunner::new(
            1,
            Duration::from_millis(300),
            0.0,
            0.0,
        )),
        ProcessConfig {
            time_budget: Duration::from_millis(500),
            ..h.process_config()
        },
    );
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let e = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .expect_err("the tail call cannot be published");
    assert!(
        lifo_core::error::chain(&e).contains("publishing a wake-up"),
        "{e}"
    );
    let text = captured.text();
    let end: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["event"] == "process.end")
        .unwrap_or_else(|| panic!("no process.end line in {text}"));
    assert!(end["succeeded"].as_u64().unwrap() >= 1, "{end}");
    assert!(
        end["error"]
            .as_str()
            .unwrap_or("")
            .contains("publishing a wake-up"),
        "{end}"
    );
    assert_eq!(end["tailCall"], false);
}
