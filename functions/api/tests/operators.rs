//! The API as operators read it (issue 51): a refused permission is named
//! as one, every request leaves a log line, route words cannot shadow a
//! task, a repeated query parameter is refused, a body that stops or is
//! declared too large does not hold a connection, and a control character
//! in a path names `taskId`.

use crate::common;

use api::Api;
use common::{serve, serve_api};
use lifo_local::api_gateway::{ApiGateway, sigv4};
use lifo_ops::{Queue, Settings};
use lifo_tests::{Captured, Harness};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The log lines so far, as JSON, of every test of this binary (one
/// global subscriber: a thread-local one misses callsites another thread
/// registered first).
fn logged() -> Vec<Value> {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    let captured = CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || sink.clone())
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        captured
    });
    captured.json_lines()
}

/// The API over `h`'s table, its store under the API function's policy
/// less `dynamodb:PutItem`.
fn api_without_put_item(h: &Harness) -> Arc<Api> {
    let deployed = &h.stack.policies["ApiFunction"];
    let policy = lifo_local::iam::Policy {
        function: deployed.function.clone(),
        allowed: deployed
            .allowed
            .iter()
            .filter(|(action, _)| action != "dynamodb:PutItem")
            .cloned()
            .collect(),
        table: deployed.table.clone(),
        topics: deployed.topics.clone(),
        queues: deployed.queues.clone(),
        encrypted: deployed.encrypted.clone(),
    };
    let conf = h.store.client().config().clone();
    let guard = lifo_local::iam::IamGuard::new(conf.http_client(), Arc::new(policy));
    let client = aws_sdk_dynamodb::Client::from_conf(conf.to_builder().http_client(guard).build());
    let store = h.store.with_client(client);
    let settings = Settings {
        shards: h.shards,
        ..Settings::default()
    };
    let creator = lifo_ops::create::Creator::new(
        store.clone(),
        lifo_ops::create::CreateConfig::new(h.stack.table.clone()),
    );
    Arc::new(Api {
        queue: Queue::new(store, settings).with_producer(Arc::new(creator)),
    })
}

/// Issue 51, item 15: with PutItem taken from the API's policy, a create
/// is a 500 naming the refused action and resource, not a 502 holding the
/// SDK's Debug text; and its log line names them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_permission_is_a_500_naming_the_action_and_resource() {
    logged();
    let h = Harness::start(1).await;
    let s = serve_api(api_without_put_item(&h), ApiGateway::default()).await;
    let (st, p) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "denied-1", "payload": {}}]})),
        )
        .await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{p}");
    assert_eq!(p["type"], "/problems/access-denied", "{p}");
    let detail = p["detail"].as_str().unwrap();
    let table = format!(":table/{}", h.stack.table);
    assert!(
        detail.starts_with("the function's role does not allow dynamodb:PutItem on arn:aws:")
            && detail.contains(&format!("{table} (AccessDeniedException for arn:aws:sts::"))
            && detail.contains(":assumed-role/ApiFunctionRole/"),
        "{detail}"
    );
    assert!(!detail.contains("Error {"), "no Debug text: {detail}");
    let line = logged()
        .into_iter()
        .find(|l| l["event"] == "api.request" && l["problem"] == "/problems/access-denied")
        .expect("the refusal is logged");
    assert_eq!(line["level"], "ERROR", "{line}");
    assert_eq!(line["action"], "dynamodb:PutItem", "{line}");
    assert!(
        line["resource"].as_str().unwrap().ends_with(&table),
        "{line}"
    );
    assert_eq!(line["route"], "/tasks", "{line}");
}

/// Item 16: every answer leaves one JSON line with its route, status,
/// caller and duration: a read that finds nothing, one that finds
/// something, a method the path does not take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_logs_its_route_status_caller_and_duration() {
    logged();
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let before = logged().len();
    let (st, _) = s.call("GET", "/tasks/no-such-task-16", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s.call("GET", "/queue?days=0", None).await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = s.call("PUT", "/queue", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
    let lines: Vec<Value> = logged()
        .into_iter()
        .skip(before)
        .filter(|l| l["event"] == "api.request")
        .collect();
    let caller = format!("arn:aws:iam::{}:user/local", lifo_local::aws::ACCOUNT);
    for (method, route, status, level) in [
        ("GET", "/tasks/{taskId}", 404, "WARN"),
        ("GET", "/queue", 200, "INFO"),
        ("PUT", "/queue", 405, "WARN"),
    ] {
        let line = lines
            .iter()
            .find(|l| l["method"] == method && l["route"] == route && l["status"] == status)
            .unwrap_or_else(|| panic!("{method} {route} {status}: {lines:?}"));
        assert_eq!(line["caller"], caller.as_str(), "{line}");
        assert_eq!(line["level"], level, "{line}");
        assert!(
            line["durationMs"].as_f64().is_some_and(|d| d >= 0.0),
            "{line}"
        );
    }
}

/// Item 20: `retry` is a route word (`POST /tasks/retry`), so it is
/// refused as a new id; a task stored with it by other means is reached
/// by its encoded form, and `GET /tasks/retry` says which that is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_word_cannot_shadow_a_task() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let (st, p) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "retry", "payload": {}}]})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{p}");
    assert_eq!(p["field"], "tasks[0].taskId", "{p}");
    assert!(h.tasks().await.is_empty());
    // Stored by a producer writing the table directly.
    let t = lifo_core::Task::new_pending(
        "retry".into(),
        serde_json::Map::new(),
        lifo_core::now_ms(),
        3600,
        1,
    );
    h.store.put_new(&[t]).await.unwrap();
    let (st, p) = s.call("GET", "/tasks/retry", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("/tasks/~cmV0cnk"),
        "{p}"
    );
    let (st, t) = s.call("GET", "/tasks/~cmV0cnk", None).await;
    assert_eq!((st, t["taskId"].as_str()), (StatusCode::OK, Some("retry")));
    let (st, p) = s.call("DELETE", "/tasks/~cmV0cnk", None).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert!(h.store.get("retry").await.unwrap().is_none());
}

/// Item 21: a query parameter given twice is refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_query_parameter_is_refused_naming_it() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    for (path, field) in [
        ("/users/u1/tasks?limit=abc&limit=1", "limit"),
        ("/users/u1/tasks?limit=1&limit=1", "limit"),
        ("/users/u1/tasks?cursor=a&limit=2&cursor=b", "cursor"),
        ("/queue?days=1&days=2", "days"),
    ] {
        let (st, p) = s.call("GET", path, None).await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{path}: {p}"
        );
    }
    let (st, _) = s.call("GET", "/users/u1/tasks?limit=1", None).await;
    assert_eq!(st, StatusCode::OK);
}

/// Sends `head` (a request's start line and headers, signed for IAM) and
/// then `body`, and returns the status line's code, or `None` when no
/// answer came within 5 s.
async fn answer_to(base: &str, head: String, body: &[u8]) -> Option<String> {
    let addr = base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    let mut answer = [0u8; 12];
    match tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut answer)).await {
        Ok(Ok(_)) => Some(String::from_utf8_lossy(&answer[9..12]).into_owned()),
        _ => None,
    }
}

/// A POST /tasks head declaring `length` bytes, signed as an SDK would
/// (the signature's body is not the one sent, which the header checks do
/// not see).
fn signed_head(base: &str, length: usize) -> String {
    let url = format!("{base}/tasks");
    let signing = sigv4::sign(
        "POST",
        &url,
        &[("content-type", "application/json")],
        b"{}",
        &lifo_local::stack::credentials(),
        lifo_local::stack::REGION,
        std::time::SystemTime::now(),
    )
    .unwrap();
    let host = base.trim_start_matches("http://");
    let mut head = format!(
        "POST /tasks HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n"
    );
    for (k, v) in signing {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// Item 22: a body declared over the function's limit (and under what an
/// event carries) is refused by its length before a byte is read; one
/// under it that stops coming is answered 408 once it has been idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_or_is_declared_too_large_does_not_hold_the_connection() {
    let h = Harness::start(1).await;
    let s = serve_api(
        common::api(&h),
        ApiGateway {
            body_idle_timeout: Some(Duration::from_millis(300)),
            ..ApiGateway::default()
        },
    )
    .await;
    for length in [api::MAX_BODY_BYTES + 1, 5_000_000, 6 * 1024 * 1024] {
        let code = answer_to(&s.base, signed_head(&s.base, length), b"{").await;
        assert_eq!(code.as_deref(), Some("413"), "{length} bytes declared");
    }
    let code = answer_to(&s.base, signed_head(&s.base, 1000), b"{\"tasks\"").await;
    assert_eq!(code.as_deref(), Some("408"), "a body that stopped");
    // Unsigned, it is refused before anything else, as API Gateway does.
    let head = format!(
        "POST /tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        api::MAX_BODY_BYTES + 1
    );
    assert_eq!(answer_to(&s.base, head, b"{").await.as_deref(), Some("403"));
    assert!(h.tasks().await.is_empty(), "nothing written");
}

/// Item 23: a control character in a path is part of the task id, which
/// is refused naming `taskId`; the URL parser of `lambda_http` (and of the
/// local API Gateway) would have dropped it, routing `/tasks/%00` to no
/// route and `/tasks/a%0Ab` to the task `ab`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_character_in_a_path_names_task_id() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let (st, _) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "ab", "payload": {}}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    for path in [
        "/tasks/%00",
        "/tasks/a%00b",
        "/tasks/a%0Ab",
        "/tasks/ab%09",
        "/tasks/ab%20",
        "/tasks/%00/history",
    ] {
        let (st, p) = s.call("GET", path, None).await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("taskId")),
            "{path}: {p}"
        );
    }
    let (st, _) = s.call("GET", "/tasks/ab", None).await;
    assert_eq!(st, StatusCode::OK);
}
