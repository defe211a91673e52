//! The HTTP API on DynamoDB Local + moto: every route over a real HTTP
//! client with the CLI's semantics, hostile requests (each a problem
//! document, nothing written), bulk retries, retention, stats and the
//! refusals docs/api.md promises. As deployed behind API Gateway:
//! `deployed.rs`.

use crate::common;

use api::{Api, router};
use common::{api, ids, serve};
use lifo_core::TaskStatus;
use lifo_ops::{Queue, Settings};
use lifo_tests::{Harness, deadline};
use process::runner::SimulatedRunner;
use reqwest::StatusCode;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_read_retry_cancel_and_delete_over_http() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;

    // Create, with producer-chosen ids: 201, then an idempotent replay: 200.
    let request = json!({"tasks": [
        {"taskId": "a", "userId": "u1", "payload": {"n": 1}},
        {"taskId": "b", "userId": "u1", "payload": {"n": 2}},
        {"taskId": "s", "userId": "u1", "payload": {"n": 3}, "dueInDays": 3},
    ]});
    let (st, r) = s.call("POST", "/tasks", Some(request.clone())).await;
    assert_eq!(
        (st, ids(&r["created"])),
        (
            StatusCode::CREATED,
            vec!["a".into(), "b".into(), "s".into()]
        )
    );
    let (st, r) = s.call("POST", "/tasks", Some(request)).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(ids(&r["existing"]).len(), 3, "{r}");
    assert!(ids(&r["created"]).is_empty(), "{r}");

    // One task, its history.
    let (st, t) = s.call("GET", "/tasks/a", None).await;
    assert_eq!(
        (st, t["taskId"].as_str(), t["payload"]["n"].as_u64()),
        (StatusCode::OK, Some("a"), Some(1))
    );
    let (st, hist) = s.call("GET", "/tasks/a/history", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(hist["taskStatus"], "PENDING");
    assert!(hist["history"].is_array(), "{hist}");

    // A user's tasks, newest first, paged by an opaque cursor; no payloads.
    let (st, p1) = s.call("GET", "/users/u1/tasks?limit=2", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(p1["items"].as_array().unwrap().len(), 2, "{p1}");
    assert!(p1["items"][0].get("payload").is_none(), "{p1}");
    let cursor = p1["nextCursor"].as_str().unwrap().to_owned();
    let (st, p2) = s
        .call(
            "GET",
            &format!("/users/u1/tasks?limit=2&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(p2["items"].as_array().unwrap().len(), 1, "{p2}");
    assert!(p2["nextCursor"].is_null(), "{p2}");
    let mut seen: Vec<String> = p1["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(p2["items"].as_array().unwrap())
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    assert_eq!(seen, ["a", "b", "s"]);
    // The cursor is bound to its user: another user's list has no such
    // page.
    let (st, p) = s
        .call("GET", &format!("/users/u2/tasks?cursor={cursor}"), None)
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::NOT_FOUND, Some("cursor"))
    );

    // Cancel the scheduled one; a second cancel is a conflict.
    let (st, c) = s.call("POST", "/tasks/s/cancel", None).await;
    assert_eq!(
        (st, c["taskStatus"].as_str()),
        (StatusCode::OK, Some("CANCELLED"))
    );
    let (st, _) = s.call("POST", "/tasks/s/cancel", None).await;
    assert_eq!(st, StatusCode::CONFLICT);

    // A and b fail (a downstream that fails every run, one attempt).
    let failing = h.processor_custom(SimulatedRunner::new(2, Duration::ZERO, 1.0, 0.0), 1);
    let report = failing
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.failed, 2);
    // Retry a by id; b by the window of failures, a dry run first.
    let (st, r) = s
        .call(
            "POST",
            "/tasks/a/retry",
            Some(json!({"reason": "downstream fixed"})),
        )
        .await;
    assert_eq!(
        (st, ids(&r["done"])),
        (StatusCode::OK, vec!["a".to_owned()])
    );
    let a = h.store.get("a").await.unwrap().unwrap();
    assert_eq!(a.task_status, TaskStatus::Pending);
    assert_eq!(
        a.history.last().and_then(|e| e.reason.as_deref()),
        Some("downstream fixed")
    );
    let (st, r) = s
        .call(
            "POST",
            "/tasks/retry",
            Some(json!({"dryRun": true, "since": "1h"})),
        )
        .await;
    assert_eq!(
        (st, ids(&r["done"]), r["dryRun"].as_bool()),
        (StatusCode::OK, vec!["b".to_owned()], Some(true))
    );
    assert_eq!(
        h.store.get("b").await.unwrap().unwrap().task_status,
        TaskStatus::Failure
    );
    let (st, r) = s
        .call(
            "POST",
            "/tasks/retry",
            Some(json!({"errorPrefix": "simulated"})),
        )
        .await;
    assert_eq!(
        (st, ids(&r["done"])),
        (StatusCode::OK, vec!["b".to_owned()])
    );
    // Retrying a pending task is a conflict that names its state.
    let (st, p) = s.call("POST", "/tasks/a/retry", None).await;
    assert_eq!(st, StatusCode::CONFLICT);
    assert!(p["detail"].as_str().unwrap().contains("is PENDING"), "{p}");

    // Pause, stats, resume.
    let (st, c) = s
        .call(
            "POST",
            "/queue/pause",
            Some(json!({"reason": "downstream is down"})),
        )
        .await;
    assert_eq!((st, c["paused"].as_bool()), (StatusCode::OK, Some(true)));
    let (st, stats) = s.call("GET", "/queue", None).await;
    assert_eq!(
        (st, stats["paused"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    assert_eq!(stats["totals"]["pending"], 2, "{stats}");
    let (st, c) = s.call("POST", "/queue/resume", None).await;
    assert_eq!((st, c["paused"].as_bool()), (StatusCode::OK, Some(false)));

    // Delete, then it is gone.
    let (st, r) = s.call("DELETE", "/tasks/b", None).await;
    assert_eq!(
        (st, ids(&r["done"])),
        (StatusCode::OK, vec!["b".to_owned()])
    );
    // A task that isn't there is 404 for every move, not a conflict.
    for (method, path) in [("DELETE", "/tasks/nope"), ("POST", "/tasks/nope/retry")] {
        let (st, _) = s.call(method, path, None).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{method} {path}");
    }
    let (st, p) = s.call("GET", "/tasks/b", None).await;
    assert_eq!(
        (st, p["detail"].as_str()),
        (StatusCode::NOT_FOUND, Some("no task b"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_a_problem_document_and_write_nothing() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let (st, _) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "keep", "userId": "u1", "payload": {"n": 1}}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let before = h.tasks().await;

    // Bodies: over the limit (refused by length), malformed, not JSON,
    // valid JSON with one bad field (the whole request refused).
    let big = format!(
        "{{\"tasks\": [{{\"payload\": {{\"x\": \"{}\"}}}}]}}",
        "a".repeat(api::MAX_BODY_BYTES)
    );
    let (st, _) = s
        .raw("POST", "/tasks", "application/json", big.into_bytes())
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    let (st, p) = s
        .raw(
            "POST",
            "/tasks",
            "application/json",
            b"{\"tasks\": [".to_vec(),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("(body)"))
    );
    let (st, _) = s.raw("POST", "/tasks", "text/plain", b"{}".to_vec()).await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (st, p) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [
                {"taskId": "fine", "payload": {"n": 1}},
                {"taskId": "bad", "payload": {"n": 2}, "ttlSeconds": -5},
            ]})),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("tasks[1].ttlSeconds")),
        "{p}"
    );
    let (st, p) = s
        .call(
            "POST",
            "/queue/pause",
            Some(json!({"reason": "x", "extra": 1})),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("extra")),
        "{p}"
    );
    let (st, p) = s
        .call(
            "POST",
            "/tasks/retry",
            Some(json!({"perSecond": 1, "limit": 10_001})),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("limit")),
        "{p}"
    );

    // Ids: any key the table can hold may name a stored task (one an older
    // version or a producer writing straight to the table wrote), in one of
    // the two forms of a path id: only dots is neither (it travels as
    // `~Li4u`), nor is one too long for a key, or a bad encoded id: each is
    // refused naming the field. Traversal is resolved before routing: no
    // such route.
    let (st, p) = s.call("GET", "/tasks/...", None).await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("taskId")),
        "{p}"
    );
    let (st, p) = s.call("GET", "/tasks/~a!b", None).await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("taskId")),
        "{p}"
    );
    let (st, p) = s.call("GET", "/tasks/..%2F..%2Fetc%2Fpasswd", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{p}");
    let long = "x".repeat(5000);
    let (st, p) = s.call("DELETE", &format!("/tasks/{long}"), None).await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("taskId")),
        "{p}"
    );
    let (st, _) = s.call("GET", "/tasks/%FF%FE", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);

    // Page sizes and cursors.
    for limit in ["-1", "0", "101", "99999999999999999999999", "ten"] {
        let (st, p) = s
            .call("GET", &format!("/users/u1/tasks?limit={limit}"), None)
            .await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("limit")),
            "{limit}: {p}"
        );
    }
    // A forged cursor: not a cursor's shape (400), or one that names no
    // page of the list (404: an extra field, a made-up document, another
    // list's); either way naming `cursor`.
    for (cursor, status) in [
        ("forged!", StatusCode::BAD_REQUEST),
        (&"A".repeat(6000), StatusCode::BAD_REQUEST),
        ("forged", StatusCode::NOT_FOUND),
        (
            "eyJ1IjoidTEiLCJ0Ijoia2VlcCIsImMiOjEsIngiOjF9",
            StatusCode::NOT_FOUND,
        ),
        (&"A".repeat(5000), StatusCode::NOT_FOUND),
    ] {
        let (st, p) = s
            .call("GET", &format!("/users/u1/tasks?cursor={cursor}"), None)
            .await;
        assert_eq!((st, p["field"].as_str()), (status, Some("cursor")), "{p}");
    }
    let (st, p) = s.call("GET", "/users/u1/tasks?sort=asc", None).await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("sort")),
        "{p}"
    );

    // Routes and methods.
    let (st, _) = s.call("GET", "/nothing/here", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s.call("PUT", "/tasks", Some(json!({}))).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
    let (st, _) = s.call("PATCH", "/tasks/keep", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);

    assert_eq!(h.tasks().await, before, "nothing was written");
}

/// A bulk retry stops at its deadline, whatever each redrive takes, and
/// answers what it did and what is left (issue 32, item 8): the HTTP API
/// gives it API Gateway's budget; here, half a second at 10 a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_retry_stops_at_its_deadline_and_says_what_is_left() {
    let h = Harness::start(1).await;
    for i in 0..20 {
        lifo_tests::failed_task(&h.store, &format!("f-{i:02}"), "boom").await;
    }
    let q = api(&h).queue.clone();
    let r = lifo_ops::redrive::Redrive {
        selection: lifo_ops::redrive::Selection::Failed(lifo_ops::tasks::FailedFilter {
            since_ms: 0,
            error_prefix: String::new(),
            limit: 100,
        }),
        per_second: std::num::NonZeroU32::new(10).unwrap(),
        until: Some(std::time::Instant::now() + Duration::from_millis(500)),
        ..lifo_ops::redrive::Redrive::ids(Vec::new(), "test")
    };
    let started = std::time::Instant::now();
    let report = lifo_ops::redrive::redrive(&q, &r, &|_, _| {})
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(report.interrupted, "{report:?}");
    assert!(
        !report.done.is_empty() && report.done.len() < 20,
        "{report:?}"
    );
    assert_eq!(report.done.len() + report.remaining.len(), 20);
    for id in &report.remaining {
        let t = h.store.get(id).await.unwrap().unwrap();
        assert_eq!(
            t.task_status,
            TaskStatus::Failure,
            "{id} was left as it was"
        );
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(
        json["remaining"].as_array().unwrap().len(),
        report.remaining.len()
    );
    // The same request again goes on with what is left.
    let again = lifo_ops::redrive::Redrive { until: None, ..r };
    let rest = lifo_ops::redrive::redrive(&q, &again, &|_, _| {})
        .await
        .unwrap();
    assert_eq!(rest.done.len(), report.remaining.len());
}

/// DynamoDB's TTL deletes a task and its payload item each on its own,
/// within days (issue 32, item 10): a task past its deletion time whose
/// payload item is already gone answers 410 with what is known, not 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_retention_answers_410_even_when_its_payload_went_first() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let payload = lifo_local::payloads::realistic(1, 4096);
    let mut t = lifo_core::Task::new_pending("old".into(), payload, lifo_core::now_ms(), 60, 1);
    // Its deletion time passed a minute ago; TTL has not deleted it yet.
    t.delete_at = lifo_core::now_ms() / 1000 - 60;
    h.store.put_new(&[t]).await.unwrap();
    let stored = h.store.get_item("old").await.unwrap().unwrap();
    assert!(
        stored.payload_bytes.is_some(),
        "the payload has an item of its own"
    );
    // TTL deleted the payload item first.
    h.store.delete_payload("old").await.unwrap();
    let (st, p) = s.call("GET", "/tasks/old", None).await;
    assert_eq!(st, StatusCode::GONE, "{p}");
    assert_eq!(p["type"], "/problems/gone");
    assert!(p["detail"].as_str().unwrap().contains("PENDING"), "{p}");
    let (st, _) = s.call("GET", "/tasks/old/history", None).await;
    assert_eq!(st, StatusCode::GONE);
}

/// `GET /queue?days=0` reads one day's due shards, not the eight days
/// (`lifo stats`'s catch-up week) it read before (issue 33): the store's
/// meter counts every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_for_today_read_only_todays_due_shards() {
    let h = Harness::start(1).await;
    let store = h.stack.store_as("ApiFunction", &h.store).with_fresh_meter();
    let settings = Settings {
        shards: 1,
        due_shards: 4,
        ..Settings::default()
    };
    let app = router(Arc::new(Api {
        queue: Queue::new(store.clone(), settings),
    }));
    let res = app
        .oneshot(
            axum::http::Request::get("/queue?days=0")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let m = store.meter();
    let requests: u64 = lifo_core::Op::ALL
        .iter()
        .map(|op| m.spent(*op).requests)
        .sum();
    // The control item (1), the last adaptive limit's item (1), seven reads
    // of the one LIFO shard, and one COUNT per due shard of today (4);
    // before: 8 days × 4 = 32 of those.
    assert_eq!(requests, 1 + 1 + 7 + 4, "requests of GET /queue?days=0");
}

/// What docs/api.md promises (issue 33): an unknown query parameter on any
/// route is a 400 naming it (and nothing runs); every 400 names its field;
/// a key given twice is refused by its path; too deep is said as too deep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_names_its_field_and_unknown_parameters_are_refused_everywhere() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    for (method, path) in [
        ("POST", "/queue/pause?foo=1"),
        ("GET", "/tasks/x?foo=1"),
        ("DELETE", "/tasks/x?foo=1"),
        ("GET", "/tasks/x/history?foo=1"),
        ("POST", "/tasks/x/retry?foo=1"),
        ("POST", "/tasks/x/cancel?foo=1"),
        ("POST", "/tasks/retry?foo=1"),
        ("POST", "/queue/resume?foo=1"),
        ("GET", "/queue?foo=1"),
    ] {
        let (st, p) = s.call(method, path, None).await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("foo")),
            "{method} {path}: {p}"
        );
    }
    assert!(!h.store.control(true).await.unwrap().paused, "nothing ran");
    let (st, p) = s.call("GET", "/tasks/%FF", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{p}");
    assert!(p["field"].is_string(), "{p}");
    let (st, p) = s
        .raw(
            "POST",
            "/tasks",
            "application/json",
            br#"{"tasks": [{"payload": {}}], "tasks": [{"payload": {}}, {"payload": {}}]}"#
                .to_vec(),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("tasks")),
        "{p}"
    );
    let deep = format!(
        r#"{{"tasks": [{{"payload": {}}}]}}"#,
        lifo_core::testing::nested_json(1000)
    );
    let (st, p) = s
        .raw("POST", "/tasks", "application/json", deep.into_bytes())
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("nested deeper than"), "{detail}");
    assert!(!detail.contains("not valid JSON"), "{detail}");
    assert!(h.tasks().await.is_empty(), "nothing written");
}

/// What docs/openapi.yaml says and the server now does (issue 33): a
/// field given as null is refused, an integer may be written 60.0, a body
/// must be an object, one shape of create's request at a time; a path id
/// outside both forms is a bad request while a well-formed one that can
/// name no stored id is not found; a cursor that is not base64url is a bad
/// request while a well-formed one this API did not give out names no page;
/// a bulk retry's limit may exceed its 25 seconds, and what is left is
/// listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_reads_requests_as_the_openapi_document_says() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    for (path, body, field) in [
        ("/queue/pause", json!({"reason": null}), "reason"),
        ("/tasks", json!({"tasks": null, "count": 1}), "tasks"),
        (
            "/tasks",
            json!({"tasks": [{"payload": {}, "tenant": null}]}),
            "tasks[0].tenant",
        ),
        (
            "/tasks",
            json!({"tasks": [{"payload": {}, "ttlSeconds": null}]}),
            "tasks[0].ttlSeconds",
        ),
        (
            "/tasks",
            json!({"tasks": [{"payload": {}, "ttlSeconds": 60.5}]}),
            "tasks[0].ttlSeconds",
        ),
        ("/tasks", json!({}), "(request)"),
        (
            "/tasks",
            json!({"tasks": [{"payload": {}}], "ttlSeconds": 60}),
            "ttlSeconds",
        ),
        (
            "/tasks",
            json!({"tasks": [{"payload": {"": 1}}]}),
            "tasks[0].payload",
        ),
        ("/queue/resume", json!([]), "(body)"),
        ("/tasks/retry", json!({"perSecond": null}), "perSecond"),
        ("/tasks/retry", json!({"limit": 10001}), "limit"),
    ] {
        let (st, p) = s.call("POST", path, Some(body.clone())).await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field)),
            "{path} {body}: {p}"
        );
    }
    assert!(h.tasks().await.is_empty(), "nothing refused was written");
    assert!(!h.store.control(true).await.unwrap().paused);
    let (st, p) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "w", "payload": {}, "ttlSeconds": 60.0, "dueInDays": 1.0}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "60.0 is an integer: {p}");
    let t = h.store.get("w").await.unwrap().unwrap();
    assert_eq!(t.task_status, TaskStatus::Scheduled);
    // Path ids: neither form (400), a form that names nothing (404).
    for (path, status) in [
        ("/tasks/sp%20ace", StatusCode::BAD_REQUEST),
        ("/tasks/~A", StatusCode::BAD_REQUEST),
        ("/tasks/~_w", StatusCode::NOT_FOUND),
        ("/users/~_w/tasks", StatusCode::OK),
        ("/users/~_w/tasks?cursor=e30", StatusCode::NOT_FOUND),
        ("/users/u/tasks?cursor=e30", StatusCode::NOT_FOUND),
        ("/users/u/tasks?cursor=%C3%8B", StatusCode::BAD_REQUEST),
    ] {
        let (st, p) = s.call("GET", path, None).await;
        assert_eq!(st, status, "{path}: {p}");
        if path.contains("cursor") {
            assert_eq!(p["field"], "cursor", "{p}");
        }
    }
    // A limit past what 25 s hold at this pace is allowed (a dry run lists
    // the window), where it used to be refused.
    let (st, p) = s
        .call(
            "POST",
            "/tasks/retry",
            Some(json!({"limit": 5000, "perSecond": 1, "dryRun": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{p}");
}
