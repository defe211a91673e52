//! The HTTP API as deployed behind API Gateway, on DynamoDB Local + moto:
//! API Gateway v2 events through the Lambda handler's router (JWT scopes
//! included), the local API's authorizers, a Python client nobody here
//! wrote, a transaction conflict, stored ids in decoded paths, and bodies
//! over Lambda's invoke limit.

use crate::common;

use api::{Api, router};
use common::{answer, api, ids, serve};
use lifo_core::TaskStatus;
use lifo_local::api_gateway::sigv4;
use lifo_tests::{Harness, fixture_text as fixture};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt as _;

/// An API Gateway v2 event through the router, as `lambda_http::run` does.
async fn invoke(api: Arc<Api>, event: &str) -> (StatusCode, Value) {
    let req = lambda_http::request::from_str(event).unwrap();
    let res = router(api).oneshot(req).await.unwrap();
    let status = StatusCode::from_u16(res.status().as_u16()).unwrap();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_gateway_events_run_through_the_handler_and_jwt_scopes_hold() {
    let h = Harness::start(1).await;
    let a = api(&h);
    let (st, r) = invoke(a.clone(), &fixture("api-create.json")).await;
    assert_eq!(
        (st, ids(&r["created"])),
        (StatusCode::CREATED, vec!["order-2001".to_owned()]),
        "{r}"
    );
    let (st, t) = invoke(a.clone(), &fixture("api-get-task.json")).await;
    assert_eq!(
        (st, t["payload"]["orderId"].as_u64()),
        (StatusCode::OK, Some(2001)),
        "{t}"
    );
    let (st, p) = invoke(a.clone(), &fixture("api-user-tasks.json")).await;
    assert_eq!(
        (st, p["items"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1)),
        "{p}"
    );
    // A token with only the read scope reads, and may not write.
    let (st, _) = invoke(a.clone(), &fixture("api-jwt-read-scope-get.json")).await;
    assert_eq!(st, StatusCode::OK);
    let (st, p) = invoke(a.clone(), &fixture("api-jwt-read-scope-create.json")).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("lifo/write"), "{p}");
    assert!(h.store.get("order-2002").await.unwrap().is_none());
    // `scopes` null, as API Gateway passes it when the route names none: the
    // token's own scopes are read from its claims (issue 32, item 6).
    let (st, p) = invoke(a.clone(), &fixture("api-jwt-null-scopes-get.json")).await;
    assert_eq!(st, StatusCode::OK, "{p}");
}

/// Issue 51, item 23, as deployed: API Gateway hands over `rawPath`
/// decoded, and `lambda_http`'s URL parser would drop or trim a control
/// character in it (`/tasks/\u0000` became `/tasks/`, no route; a tab
/// inside an id vanished). The router routes the raw path: the character
/// is part of the id, refused naming `taskId`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_character_in_an_api_gateway_path_names_task_id() {
    let h = Harness::start(1).await;
    let a = api(&h);
    let event: Value = serde_json::from_str(&fixture("api-get-task.json")).unwrap();
    for raw in [
        "/tasks/\u{0}",
        "/tasks/order-2001\t",
        "/tasks/order\n-2001",
        "/tasks/ /history",
    ] {
        let mut e = event.clone();
        e["rawPath"] = json!(raw);
        let (st, p) = invoke(a.clone(), &e.to_string()).await;
        assert_eq!(
            (st, p["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("taskId")),
            "{raw:?}: {p}"
        );
    }
}

/// The example producer (examples/python-producer), signed with botocore's
/// SigV4 as against a deployed stack, through the local API Gateway with
/// IAM on: its tasks are written, and the function saw each request with
/// its caller under `requestContext.authorizer.iam`. The same producer
/// with a wrong secret is refused with 403 and writes nothing: botocore's
/// signer and the local verifier agree on what a signature is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_producer_example_creates_tasks_over_the_local_api() {
    let h = Harness::start(1).await;
    let callers = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = callers.clone();
    let app = router(api(&h)).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let seen = seen.clone();
            async move {
                let caller = match req
                    .extensions()
                    .get::<lambda_http::request::RequestContext>()
                {
                    Some(lambda_http::request::RequestContext::ApiGatewayV2(ctx)) => ctx
                        .authorizer
                        .as_ref()
                        .and_then(|a| a.iam.as_ref())
                        .and_then(|iam| iam.user_arn.clone())
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                seen.lock().unwrap().push(caller);
                next.run(req).await
            }
        },
    ));
    const KEY: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let iam = sigv4::IamAuthorizer::new("eu-west-1").with_key(
        aws_credential_types::Credentials::new(KEY, SECRET, None, None, "test"),
        "producer",
    );
    let gateway = lifo_local::api_gateway::ApiGateway {
        auth: lifo_local::api_gateway::Auth::Iam(Arc::new(iam)),
        ..Default::default()
    };
    let app = gateway.wrap(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let producer = |secret: &str| {
        let mut cmd = tokio::process::Command::new(root.join(".tools/venv/bin/python"));
        cmd.arg(root.join("examples/python-producer/producer.py"))
            .args(["--url", &format!("http://{addr}"), "--region", "eu-west-1"])
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE");
        cmd
    };
    let refused = producer("not-the-secret")
        .output()
        .await
        .expect("run `make test` once: it installs .tools/venv (botocore comes with moto)");
    let out = producer(SECRET).output().await.unwrap();
    server.abort();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("The request signature we calculated does not match"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("created 3, already there 0"), "{stdout}");
    assert!(
        stdout.contains("device-42-connect-3 is PENDING"),
        "{stdout}"
    );
    let t = h.store.get("device-42-connect-1").await.unwrap().unwrap();
    assert_eq!(t.user_id.as_deref(), Some("device-42"));
    let callers = callers.lock().unwrap().clone();
    assert_eq!(
        callers,
        vec!["arn:aws:iam::000000000000:user/producer"; 2],
        "only the signed run's two requests reached the function"
    );
}

/// Authentication on, as deployed (issue 33): under IAM an unsigned
/// request, a bad signature, a stale one and an unknown key get API
/// Gateway's 403 and never reach the function; under the JWT API a missing
/// or forged token gets 401, a read-only token may read and not write
/// (403 from API Gateway, before the function's own check), and a method
/// no route names is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_api_refuses_what_api_gateways_authorizers_refuse() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let url = format!("{}/queue", s.base);
    let gateway = |res: reqwest::Response| async move {
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        (status, body["message"].as_str().unwrap_or("").to_owned())
    };
    let (st, m) = gateway(s.client.get(&url).send().await.unwrap()).await;
    assert_eq!((st, m.as_str()), (StatusCode::FORBIDDEN, "Forbidden"));
    let (st, _) = s.call("GET", "/queue", None).await;
    assert_eq!(st, StatusCode::OK, "signed");
    let body = br#"{"tasks": [{"taskId": "t-1", "payload": {}}]}"#.to_vec();
    // Signed for one body, sent with another.
    let res = s
        .request("POST", "/tasks", Some("application/json"), body.clone())
        .body(br#"{"tasks": [{"taskId": "t-2", "payload": {}}]}"#.to_vec())
        .send()
        .await
        .unwrap();
    let (st, m) = gateway(res).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(m.starts_with("The request signature we calculated"), "{m}");
    let signed_by = |credentials: aws_credential_types::Credentials, at: std::time::SystemTime| {
        let signing = sigv4::sign(
            "GET",
            &url,
            &[],
            b"",
            &credentials,
            lifo_local::stack::REGION,
            at,
        )
        .unwrap();
        signing
            .into_iter()
            .fold(s.client.get(&url), |req, (k, v)| req.header(k, v))
            .send()
    };
    let now = std::time::SystemTime::now();
    let ten_minutes_ago = now - Duration::from_secs(600);
    let (st, m) = gateway(
        signed_by(lifo_local::stack::credentials(), ten_minutes_ago)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert!(m.starts_with("Signature expired"), "{m}");
    let stranger = aws_credential_types::Credentials::new("AKIDSTRANGER", "x", None, None, "t");
    let (st, m) = gateway(signed_by(stranger, now).await.unwrap()).await;
    assert_eq!(
        (st, m.as_str()),
        (
            StatusCode::FORBIDDEN,
            "The security token included in the request is invalid."
        )
    );
    assert!(h.tasks().await.is_empty(), "nothing refused was written");

    // The JWT API.
    let issuer =
        lifo_local::api_gateway::jwt::LocalIssuer::new("https://issuer.local", "lifo").unwrap();
    let app = lifo_local::api_gateway::ApiGateway::jwt(&issuer)
        .unwrap()
        .wrap(router(api(&h)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let hour = Duration::from_secs(3600);
    let read = issuer.mint(&["lifo/read"], hour).unwrap();
    let write = issuer.mint(&["lifo/read", "lifo/write"], hour).unwrap();
    let forged = lifo_local::api_gateway::jwt::LocalIssuer::new("https://issuer.local", "lifo")
        .unwrap()
        .mint(&["lifo/write"], hour)
        .unwrap();
    let c = reqwest::Client::new();
    let post = |token: Option<&str>| {
        let mut r = c
            .post(format!("{base}/tasks"))
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let res = post(None).await.unwrap();
    assert!(res.headers().contains_key("www-authenticate"));
    assert_eq!(
        gateway(res).await,
        (StatusCode::UNAUTHORIZED, "Unauthorized".to_owned())
    );
    let (st, _) = gateway(post(Some(&forged)).await.unwrap()).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, m) = gateway(post(Some(&read)).await.unwrap()).await;
    assert_eq!((st, m.as_str()), (StatusCode::FORBIDDEN, "Forbidden"));
    assert!(h.tasks().await.is_empty(), "nothing refused was written");
    let res = post(Some(&write)).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = c
        .get(format!("{base}/tasks/t-1"))
        .bearer_auth(&read)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = c
        .put(format!("{base}/tasks/t-1"))
        .bearer_auth(&write)
        .send()
        .await
        .unwrap();
    assert_eq!(
        gateway(res).await,
        (StatusCode::NOT_FOUND, "Not Found".to_owned())
    );
    server.abort();
}

/// A supersede transaction holding the task through the store's resends
/// (issue 32, item 1): 503 with `Retry-After`, not a 502; the same request
/// goes through once the transaction ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_meets_a_transaction_answers_503_with_retry_after() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let (st, _) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "s", "payload": {"n": 1}, "dueInDays": 2}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let held = h
        .stack
        .contention
        .as_ref()
        .expect("conflicts on by default")
        .hold("s");
    for (method, path) in [("POST", "/tasks/s/cancel"), ("DELETE", "/tasks/s")] {
        let res = s
            .request(method, path, None, Vec::new())
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..]),
            "{method} {path}"
        );
        let (st, p) = answer(res).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{method} {path}: {p}");
        assert_eq!(p["type"], "/problems/contention", "{p}");
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("TransactionConflictException"),
            "{p}"
        );
    }
    drop(held);
    let (st, p) = s.call("POST", "/tasks/s/cancel", None).await;
    assert_eq!(st, StatusCode::OK, "{p}");
}

/// Ids with `/` behind API Gateway (issue 32, item 2), and ids outside
/// create's rules that an older version or a producer writing straight to
/// the table stored: create refuses `/` in a new id; API Gateway decodes
/// `%2F`, so `x%2Fhistory` names `x`'s history once deployed; every stored
/// id is reached, retried and deleted through its path form
/// ([`lifo_ops::path_id`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stored_id_is_reached_retried_and_deleted_over_http_as_deployed() {
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    let (st, p) = s
        .call(
            "POST",
            "/tasks",
            Some(json!({"tasks": [{"taskId": "order/1", "payload": {}}]})),
        )
        .await;
    assert_eq!(
        (st, p["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("tasks[0].taskId")),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("%2F"), "{p}");

    lifo_tests::failed_task(&h.store, "x", "boom").await;
    lifo_tests::failed_task(&h.store, "x/history", "boom").await;
    // What the old docs promised, as API Gateway delivers it: x's history.
    let (st, p) = s.call("GET", "/tasks/x%2Fhistory", None).await;
    assert_eq!(
        (st, p["taskId"].as_str()),
        (StatusCode::OK, Some("x")),
        "{p}"
    );

    let long = "z".repeat(1500);
    for id in [
        ".",
        "..",
        "sp ace",
        "x#frag",
        "a/b",
        "x/history",
        long.as_str(),
    ] {
        if id != "x/history" {
            lifo_tests::failed_task(&h.store, id, "boom").await;
        }
        let at = format!("/tasks/{}", lifo_ops::path_id::encode(id));
        let (st, p) = s.call("GET", &at, None).await;
        assert_eq!(
            (st, p["taskId"].as_str()),
            (StatusCode::OK, Some(id)),
            "{at}: {p}"
        );
        let (st, p) = s.call("GET", &format!("{at}/history"), None).await;
        assert_eq!(
            (st, p["taskId"].as_str()),
            (StatusCode::OK, Some(id)),
            "{p}"
        );
        let (st, p) = s.call("POST", &format!("{at}/retry"), None).await;
        assert_eq!(st, StatusCode::OK, "{id}: {p}");
        let t = h.store.get(id).await.unwrap().unwrap();
        assert_eq!(t.task_status, TaskStatus::Pending, "{id} retried");
        let (st, p) = s.call("DELETE", &at, None).await;
        assert_eq!(st, StatusCode::OK, "{id}: {p}");
        let (st, _) = s.call("GET", &at, None).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{id} deleted");
    }
}

/// Bodies over what Lambda's 6 MB invoke can carry inside API Gateway's
/// event (issue 32, item 7): refused with a 413 problem by their declared
/// length, at once, even when the client sends one byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_real_limit_is_refused_by_its_declared_length() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = Harness::start(1).await;
    let s = serve(&h).await;
    // 4 MiB of JSON: under the old 6 MiB limit, over the real one.
    let big = json!({"tasks": [{"payload": {"blob": "y".repeat(4 << 20)}}]});
    let (st, p) = s
        .raw(
            "POST",
            "/tasks",
            "application/json",
            big.to_string().into_bytes(),
        )
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{p}");
    assert_eq!(p["type"], "/problems/too-large");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains(&api::MAX_BODY_BYTES.to_string()),
        "{p}"
    );
    // Declares 7 MB, sends one byte: no Lambda event can carry it, so it is
    // answered at once with what API Gateway answers once Lambda refuses
    // the invoke (the function never sees it).
    let addr = s.base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        b"POST /tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 7000000\r\n\r\n{",
    )
    .await
    .unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut head))
        .await
        .expect("answered within 5 s")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 500");
    assert!(h.tasks().await.is_empty(), "nothing written");
}
