//! What every crate's tests share (the `test-util` feature): fixtures from
//! `events/`, a deadline far enough away for any test invocation, and SDK
//! mocks of the queue's own items (SNS's are `lifo_lambda::testing`'s).

use crate::store::CONTROL_ID;
use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_mocks::{Rule, mock};
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The path of a fixture in `events/`.
pub fn fixture_path(name: &str) -> String {
    format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A fixture from `events/`, as text.
pub fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).expect("the fixture exists")
}

/// A fixture from `events/`, as JSON.
pub fn fixture(name: &str) -> serde_json::Value {
    serde_json::from_str(&fixture_text(name)).expect("the fixture is JSON")
}

/// A deadline far enough away for any test invocation.
pub fn deadline() -> SystemTime {
    SystemTime::now() + Duration::from_secs(120)
}

/// The control item as GetItem answers it: absent (running), or paused.
pub fn control_read(paused: bool) -> GetItemOutput {
    let item = HashMap::from([
        ("taskId".to_owned(), AttributeValue::S(CONTROL_ID.into())),
        ("paused".to_owned(), AttributeValue::Bool(true)),
    ]);
    GetItemOutput::builder()
        .set_item(paused.then_some(item))
        .build()
}

/// Every read of the control item answers [`control_read`].
pub fn control(paused: bool) -> Rule {
    mock!(aws_sdk_dynamodb::Client::get_item).then_output(move || control_read(paused))
}

/// `{"a": {"a": … }}` nested `depth` levels deep, as text.
pub fn nested_json(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

/// A PENDING task with a fresh id and no payload, created at `created_ms`,
/// living `ttl_seconds`, on one of 4 shards (by its id).
pub fn pending_on_4_shards(created_ms: u64, ttl_seconds: u64) -> crate::Task {
    crate::Task::new_pending(
        crate::new_task_id(),
        crate::Payload::new(),
        created_ms,
        ttl_seconds,
        4,
    )
}
