//! Payload numbers keep every digit (issue 50, item 8): DynamoDB keeps 38
//! significant digits, so a number it can hold comes back the same number,
//! digit for digit, and one it cannot is refused naming its path, never
//! rounded. Checked through create's Lambda handler, the HTTP API, a read
//! and a run, for a payload on its task item (under 256 bytes) and one in
//! its own deflated item.

use crate::common;

use common::serve;
use lifo_core::Task;
use lifo_tests::{Harness, deadline};
use process::runner::{RunOutcome, TaskRunner};
use reqwest::StatusCode;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What DynamoDB can hold, at its edges: 2^64, 38 significant digits,
/// both ends of its range, a negative decimal of 38 digits.
const NUMBERS: [&str; 6] = [
    "18446744073709551616",
    "12345678901234567890123456789012345678",
    "1e-130",
    "9.9e125",
    "-1234567890123456789.0123456789012345678",
    "9.9999999999999999999999999999999999999e125",
];

/// A number's value as (sign, significant digits, power of ten of the
/// first digit): the same for `1e-130` and `1E-130`, different for any
/// change of a digit.
fn value(text: &str) -> (bool, String, i64) {
    let negative = text.starts_with('-');
    let text = text.trim_start_matches('-');
    let (mantissa, exp) = text.split_once(['e', 'E']).map_or((text, 0), |(m, e)| {
        (m, e.trim_start_matches('+').parse().unwrap())
    });
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let significant = digits.trim_start_matches('0');
    let leading = (digits.len() - significant.len()) as i64;
    (
        negative,
        significant.trim_end_matches('0').to_owned(),
        exp + int.len() as i64 - 1 - leading,
    )
}

/// The numbers of `n` in a payload's JSON text.
fn numbers_in(payload: &str) -> Vec<String> {
    match lifo_core::exact::Json::parse(payload).unwrap() {
        lifo_core::exact::Json::Object(m) => match &m["n"] {
            lifo_core::exact::Json::Array(items) => items
                .iter()
                .map(|v| match v {
                    lifo_core::exact::Json::Number(n) => n.clone(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn assert_exact(what: &str, payload: &str) {
    let got = numbers_in(payload);
    assert_eq!(got.len(), NUMBERS.len(), "{what}: {payload}");
    for (sent, got) in NUMBERS.iter().zip(&got) {
        assert_eq!(value(got), value(sent), "{what}: sent {sent}, got {got}");
        if !sent.contains(['.', 'e']) {
            assert_eq!(got, sent, "{what}: an integer comes back as written");
        }
    }
}

/// A payload holding [`NUMBERS`], padded to `pad` more bytes.
fn payload(pad: usize) -> String {
    format!(
        r#"{{"n":[{}],"pad":"{}"}}"#,
        NUMBERS.join(","),
        "x".repeat(pad)
    )
}

/// Records the payload text each task ran with.
#[derive(Default)]
struct Seen(Mutex<HashMap<String, String>>);

impl TaskRunner for Seen {
    fn capacity(&self) -> usize {
        4
    }
    fn max_duration(&self) -> Duration {
        Duration::from_secs(1)
    }
    async fn run(&self, task: &Task) -> RunOutcome {
        // What the Lambda runner sends its worker.
        let request = serde_json::to_string(&process::runner::lambda::WorkerRequest::of(task))
            .unwrap_or_default();
        if let Ok(mut seen) = self.0.lock() {
            seen.insert(task.task_id.clone(), task.payload.json().to_owned());
            seen.insert(format!("{}/lambda", task.task_id), request);
        }
        RunOutcome::Success
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_numbers_keep_every_digit_through_create_the_api_a_read_and_a_run() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let small = payload(0);
    let large = payload(400);
    assert!(small.len() < 256 && large.len() > 256);

    // Create's Lambda handler, the event as the runtime hands it over.
    let event: Box<RawValue> = serde_json::from_str(&format!(
        r#"{{"tasks":[{{"taskId":"lambda-small","payload":{small}}},{{"taskId":"lambda-large","payload":{large}}}]}}"#
    ))
    .unwrap();
    let out = create::handle(&h.creator(), &event).await.unwrap();
    assert_eq!(out.created.len(), 2);
    // The API.
    let body = format!(
        r#"{{"tasks":[{{"taskId":"api-small","payload":{small}}},{{"taskId":"api-large","payload":{large}}}]}}"#
    );
    let (st, r) = s
        .raw("POST", "/tasks", "application/json", body.into_bytes())
        .await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    let ids = ["lambda-small", "lambda-large", "api-small", "api-large"];
    // Stored: the large ones deflated in their payload items.
    for id in ids {
        let t = h.store.get_item(id).await.unwrap().unwrap();
        assert_eq!(t.payload_bytes.is_some(), id.ends_with("large"), "{id}");
    }
    // Read over the API, as its text (not through a JSON parser's f64).
    for id in ids {
        let res = s
            .request("GET", &format!("/tasks/{id}"), None, Vec::new())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let text = res.text().await.unwrap();
        let at = text.find(r#""payload":"#).unwrap() + r#""payload":"#.len();
        let payload: &RawValue = serde_json::Deserializer::from_str(&text[at..])
            .into_iter::<&RawValue>()
            .next()
            .unwrap()
            .unwrap();
        assert_exact(&format!("GET {id}"), payload.get());
    }
    // Run: what the runner receives, and what a worker Lambda would.
    let seen = Arc::new(Seen::default());
    let p = h.stack.processor(
        h.store.clone(),
        seen.clone(),
        process::ProcessConfig {
            linger: Duration::ZERO,
            ..process::ProcessConfig::new(h.stack.table.clone(), h.stack.trigger_topic_arn.clone())
        },
    );
    let report = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 4);
    let seen = seen.0.lock().unwrap().clone();
    for id in ids {
        assert_exact(&format!("run {id}"), &seen[id]);
        let request: serde_json::Value =
            serde_json::from_str(&seen[&format!("{id}/lambda")]).unwrap();
        let raw = &seen[&format!("{id}/lambda")];
        assert_eq!(request["taskId"], id);
        let at = raw.find(r#""payload":"#).unwrap() + r#""payload":"#.len();
        let payload: &RawValue = serde_json::Deserializer::from_str(&raw[at..])
            .into_iter::<&RawValue>()
            .next()
            .unwrap()
            .unwrap();
        assert_exact(&format!("worker request {id}"), payload.get());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_dynamodb_cannot_hold_is_refused_naming_its_path() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    for (number, why) in [
        (
            "123456789012345678901234567890123456789",
            "39 significant digits",
        ),
        (
            "1.23456789012345678901234567890123456789",
            "39 significant digits",
        ),
        ("1e126", "outside the range"),
        ("9.999999999999999e-131", "outside the range"),
        ("-1e-131", "outside the range"),
    ] {
        let payload = format!(r#"{{"a":{{"b":[0,1,{number}]}}}}"#);
        let body = format!(r#"{{"tasks":[{{"taskId":"refused","payload":{payload}}}]}}"#);
        let (st, p) = s
            .raw(
                "POST",
                "/tasks",
                "application/json",
                body.clone().into_bytes(),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{number}: {p}");
        assert_eq!(p["field"], "tasks[0].payload.a.b[2]", "{number}: {p}");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains(number) && detail.contains(why.split(' ').next().unwrap()),
            "{detail}"
        );
        let event: Box<RawValue> = serde_json::from_str(&body).unwrap();
        let e = create::handle(&h.creator(), &event).await.unwrap_err();
        let d: lambda_runtime::Diagnostic = e.into();
        assert_eq!(d.error_type, "InvalidRequest");
        assert!(
            d.error_message.contains("tasks[0].payload.a.b[2]: "),
            "{}",
            d.error_message
        );
    }
    assert!(h.tasks().await.is_empty(), "nothing written");
    // The document's inclusive minimum is accepted, as written.
    let body = r#"{"tasks":[{"taskId":"edge","payload":{"min":1e-130,"neg":-1e-130}}]}"#;
    let (st, p) = s
        .raw(
            "POST",
            "/tasks",
            "application/json",
            body.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{p}");
}
