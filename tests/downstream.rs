//! A hostile downstream, as an attacker or a broken proxy would be: the
//! released `process` binary (as Lambda runs it, through a local Runtime
//! API) against a loopback server that streams endless bodies, trickles,
//! redirects (also to itself), answers 429 with every kind of
//! `Retry-After`, closes connections without answering, and, behind the
//! lambda runner, sends garbage refusals and function errors.
//!
//! For each case: the task's final state and `lastError`, and the number
//! of requests the downstream saw, bounded by the rest schedule; for the
//! whole run, the processor's peak RSS (from /proc) under
//! [`RSS_BOUND_MB`].
//!
//! The binaries are the ones `cargo build --workspace --bins` put next to
//! this test (`make test` builds them first).

use lifo_core::{Task, TaskStatus, now_ms};
use lifo_local::LocalStack;
use lifo_local::runtime_api::{Answer, RuntimeApi, Usage, lambda_env};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The processor's peak resident memory, whatever the downstream does.
const RSS_BOUND_MB: f64 = 64.0;
/// Claims before a task ends FAILURE.
const MAX_ATTEMPTS: u32 = 3;
/// The queue's own rest (`RETRY_BACKOFF_SECONDS`), shortened from the
/// template's 10 s so that the failing cases end within seconds.
const BASE_REST_S: u64 = 2;
/// TTL of the tasks that are bounced until they expire.
const BOUNCE_TTL_S: u64 = 10;

/// A `process` binary built beside this test.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// Requests the downstream saw, by task id (and by path for the ones that
/// carry none).
#[derive(Default)]
struct Seen {
    by_task: Mutex<HashMap<String, u32>>,
}

impl Seen {
    fn count(&self, id: &str) -> u32 {
        self.by_task.lock().unwrap().get(id).copied().unwrap_or(0)
    }
    fn add(&self, id: &str) {
        *self
            .by_task
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_insert(0) += 1;
    }
}

/// One request: its path, headers (lower-case names) and body.
struct Request {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

async fn read_request(sock: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        path,
        headers,
        body,
    })
}

/// Writes `head` (status line and headers, chunked), then `piece` every
/// `every` until the peer goes away.
async fn stream_without_end(sock: &mut TcpStream, head: &str, piece: &str, every: Duration) {
    if sock.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let framed = format!("{:x}\r\n{piece}\r\n", piece.len());
    while sock.write_all(framed.as_bytes()).await.is_ok() {
        if !every.is_zero() {
            tokio::time::sleep(every).await;
        }
    }
}

async fn answer(sock: &mut TcpStream, status: &str, headers: &str, body: &str) {
    let reply = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(reply.as_bytes()).await;
}

/// Something a log line of a broken service looks like: varied text, so
/// that nothing compresses it away.
fn noise() -> String {
    let mut rng = fastrand::Rng::with_seed(7);
    (0..512)
        .map(|_| format!("{:08x} at frame {} ", rng.u32(..), rng.u16(..)))
        .collect()
}

/// How the HTTP downstream treats a task, by the prefix of its id.
async fn http_case(sock: &mut TcpStream, req: &Request, port: u16, noise: &str) {
    let id = req.headers.get("x-task-id").cloned().unwrap_or_default();
    let chunked_500 = "HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\n\r\n";
    match id.split('-').next().unwrap_or("") {
        "endless" => stream_without_end(sock, chunked_500, noise, Duration::ZERO).await,
        "trickle" => stream_without_end(sock, chunked_500, "e", Duration::from_millis(50)).await,
        "redirect" => {
            let to = format!("location: http://127.0.0.1:{port}/elsewhere\r\n");
            answer(sock, "302 Found", &to, "").await;
        }
        "loop" => {
            let to = format!("location: http://127.0.0.1:{port}{}\r\n", req.path);
            answer(sock, "302 Found", &to, "").await;
        }
        "ra0" => answer(sock, "429 Slow Down", "retry-after: 0\r\n", "").await,
        "rafrac" => answer(sock, "429 Slow Down", "retry-after: 0.001\r\n", "").await,
        "rabad" => answer(sock, "429 Slow Down", "retry-after: soon\r\n", "").await,
        "radate" => {
            let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
            answer(sock, "503 Busy", &format!("retry-after: {at}\r\n"), "").await;
        }
        // Reads the request and hangs up without a word.
        "close" => {}
        _ => answer(sock, "200 OK", "", "").await,
    }
}

/// How the worker Lambda's endpoint treats a task, by the prefix of the
/// task id in the request.
async fn lambda_case(sock: &mut TcpStream, id: &str, noise: &str) {
    match id.split('-').next().unwrap_or("") {
        "endless" => {
            let ok = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
            stream_without_end(sock, ok, noise, Duration::ZERO).await;
        }
        "endlesserr" => {
            let err = "HTTP/1.1 200 OK\r\nx-amz-function-error: Unhandled\r\ntransfer-encoding: chunked\r\n\r\n";
            stream_without_end(sock, err, noise, Duration::ZERO).await;
        }
        "throttle" => answer(sock, "429 Too Many", "", "<html>slow down</html>").await,
        "oops" => answer(sock, "500 Oops", "", "\u{0}\u{1}garbage").await,
        "moved" => {
            let to = "location: http://elsewhere.example/\r\n";
            answer(sock, "307 Moved", to, "").await;
        }
        "badfn" => {
            let h = "x-amz-function-error: Unhandled\r\n";
            answer(
                sock,
                "200 OK",
                h,
                "Traceback (most recent call last):\n  boom",
            )
            .await;
        }
        "frac" => {
            let body = r#"{"outcome": "retry-later", "retryAfterSeconds": 0.001}"#;
            answer(sock, "200 OK", "", body).await;
        }
        _ => answer(sock, "200 OK", "", "{}").await,
    }
}

/// The hostile server on a free loopback port.
async fn hostile(lambda: bool, seen: Arc<Seen>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let noise: Arc<str> = noise().into();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (seen, noise) = (seen.clone(), noise.clone());
            tokio::spawn(async move {
                let Some(req) = read_request(&mut sock).await else {
                    return;
                };
                if req.path == "/elsewhere" {
                    seen.add("/elsewhere");
                    return answer(&mut sock, "200 OK", "", "").await;
                }
                if lambda {
                    let id = serde_json::from_slice::<serde_json::Value>(&req.body)
                        .ok()
                        .and_then(|v| v["taskId"].as_str().map(str::to_owned))
                        .unwrap_or_default();
                    seen.add(&id);
                    lambda_case(&mut sock, &id, &noise).await;
                } else {
                    seen.add(req.headers.get("x-task-id").map_or("", String::as_str));
                    http_case(&mut sock, &req, port, &noise).await;
                }
            });
        }
    });
    port
}

/// Runs the process binary with `runner_env` over `tasks` until every task
/// is final or expired; returns the tasks and the processor's peak RSS (MB).
async fn run_process(
    stack: &LocalStack,
    tasks: &[Task],
    runner_env: &[(&str, String)],
) -> (Vec<Task>, f64) {
    let store = stack.store();
    store.put_new(tasks).await.unwrap();
    let mut api = RuntimeApi::start(Duration::from_secs(60)).await.unwrap();
    let mut child = tokio::process::Command::new(binary("process"))
        .envs(lambda_env(&api, "process"))
        .envs(stack.function_env())
        .envs([
            ("RUNNER_MAX_CONCURRENCY", "3"),
            ("RUNNER_TIMEOUT_MS", "5000"),
            ("MAX_ATTEMPTS", &MAX_ATTEMPTS.to_string()),
            ("RETRY_BACKOFF_SECONDS", &BASE_REST_S.to_string()),
            ("TIME_BUDGET_SECONDS", "50"),
        ])
        .envs(runner_env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let event: serde_json::Value = lifo_tests::fixture("process-wakeup.json");
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        // As the sweep would: wake the processor again while work remains.
        match api
            .invoke(event.clone(), Duration::from_secs(70))
            .await
            .unwrap()
        {
            Answer::Response(_) => {}
            other => panic!("process failed: {other:?}"),
        }
        let now = now_ms();
        let all = stack.scan_tasks().await.unwrap();
        let done = all
            .iter()
            .all(|t| t.task_status.is_terminal() || t.is_expired(now));
        if done {
            let rss = Usage::of(pid).unwrap().peak_rss_bytes as f64 / 1_048_576.0;
            let _ = child.kill().await;
            return (all, rss);
        }
        assert!(Instant::now() < until, "tasks not done in 90 s: {all:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn task(id: &str, ttl: u64) -> Task {
    let payload = serde_json::json!({"order": id, "lines": [1, 2, 3]})
        .as_object()
        .cloned()
        .unwrap();
    Task::new_pending(id.into(), payload, now_ms(), ttl, 1)
}

fn by_id(tasks: Vec<Task>) -> HashMap<String, Task> {
    tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect()
}

/// At most this many requests for a task bounced for `ttl` seconds with
/// rests of at least `rest` seconds: ⌈ttl / rest⌉ + 1.
fn bounce_bound(ttl: u64, rest: u64) -> u32 {
    u32::try_from(ttl.div_ceil(rest) + 1).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_http_downstream_cannot_hurt_the_processor_or_fake_an_outcome() {
    let stack = LocalStack::start().await.unwrap();
    let seen = Arc::new(Seen::default());
    let port = hostile(false, seen.clone()).await;
    let failing = [
        "endless-1",
        "endless-2",
        "endless-3",
        "trickle-1",
        "redirect-1",
        "loop-1",
        "close-1",
    ];
    let bouncing = ["ra0-1", "rafrac-1", "rabad-1", "radate-1"];
    let mut tasks: Vec<Task> = failing.iter().map(|id| task(id, 120)).collect();
    tasks.extend(bouncing.iter().map(|id| task(id, BOUNCE_TTL_S)));
    let (after, rss) = run_process(
        &stack,
        &tasks,
        &[
            ("RUNNER", "http".into()),
            ("RUNNER_URL", format!("http://127.0.0.1:{port}/run")),
        ],
    )
    .await;
    let after = by_id(after);
    let report: Vec<String> = failing
        .iter()
        .chain(&bouncing)
        .map(|id| {
            format!(
                "{id}: {} requests, {:?}",
                seen.count(id),
                after[*id].last_error
            )
        })
        .collect();
    println!("peak RSS {rss:.1} MB\n{}", report.join("\n"));

    assert!(rss < RSS_BOUND_MB, "peak RSS {rss:.1} MB");
    for id in failing {
        let t = &after[id];
        assert_eq!(t.task_status, TaskStatus::Failure, "{id}: {t:?}");
        assert_eq!(
            seen.count(id),
            MAX_ATTEMPTS,
            "{id}: one request per attempt"
        );
    }
    let error = |id: &str| after[id].last_error.clone().unwrap_or_default();
    for id in ["endless-1", "endless-2", "endless-3"] {
        assert!(error(id).starts_with("HTTP 500: "), "{}", error(id));
        assert!(
            error(id).ends_with("(body cut: only the first 1 KB or 1 s is read)"),
            "{}",
            error(id)
        );
    }
    assert!(
        error("trickle-1").starts_with("HTTP 500: eeee"),
        "{}",
        error("trickle-1")
    );
    assert_eq!(
        error("redirect-1"),
        format!(
            "HTTP 302 redirect (Location http://127.0.0.1:{port}/elsewhere), not followed: \
             the POST did not reach the endpoint"
        )
    );
    assert_eq!(seen.count("/elsewhere"), 0, "a redirect is never followed");
    assert!(
        error("loop-1").starts_with("HTTP 302 redirect (Location http://127.0.0.1:"),
        "{}",
        error("loop-1")
    );
    assert!(
        error("close-1").starts_with("request failed: "),
        "{}",
        error("close-1")
    );

    // Bounced until expiry: never more often than the rest allows, and
    // never a false outcome.
    for (id, rest) in [
        ("ra0-1", 1),
        ("rafrac-1", 1),
        ("rabad-1", BASE_REST_S),
        ("radate-1", 3),
    ] {
        let t = &after[id];
        assert_eq!(
            t.task_status,
            TaskStatus::Expired,
            "{id}: shed by expiry: {t:?}"
        );
        let n = seen.count(id);
        assert!(
            n >= 2 && n <= bounce_bound(BOUNCE_TTL_S, rest),
            "{id}: {n} requests with rests of {rest} s"
        );
        assert_eq!(t.attempts, 0, "{id}: a bounce burns no attempt");
    }
    assert_eq!(error("ra0-1"), "HTTP 429 (Retry-After: 0)");
    assert_eq!(error("rafrac-1"), "HTTP 429 (Retry-After: 0.001)");
    assert_eq!(
        error("rabad-1"),
        "HTTP 429 (Retry-After soon unreadable: the queue's own rest)"
    );
    assert!(
        error("radate-1").starts_with("HTTP 503 (Retry-After: "),
        "{}",
        error("radate-1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_worker_endpoint_cannot_hurt_the_processor_or_burn_attempts_for_refusals() {
    let stack = LocalStack::start().await.unwrap();
    let seen = Arc::new(Seen::default());
    let port = hostile(true, seen.clone()).await;
    let ids = [
        "endless-1",
        "endless-2",
        "endlesserr-1",
        "moved-1",
        "badfn-1",
        "throttle-1",
        "oops-1",
        "frac-1",
    ];
    let tasks: Vec<Task> = ids
        .iter()
        .map(|id| {
            task(
                id,
                if id.starts_with("endless") || *id == "moved-1" || *id == "badfn-1" {
                    120
                } else {
                    BOUNCE_TTL_S
                },
            )
        })
        .collect();
    let (after, rss) = run_process(
        &stack,
        &tasks,
        &[
            ("RUNNER", "lambda".into()),
            ("WORKER_FUNCTION_ARN", "worker".into()),
            (
                "AWS_ENDPOINT_URL_LAMBDA",
                format!("http://127.0.0.1:{port}"),
            ),
        ],
    )
    .await;
    let after = by_id(after);
    let report: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "{id}: {} requests, {:?} {:?}",
                seen.count(id),
                after[*id].task_status,
                after[*id].last_error
            )
        })
        .collect();
    println!("peak RSS {rss:.1} MB\n{}", report.join("\n"));
    assert!(rss < RSS_BOUND_MB, "peak RSS {rss:.1} MB");

    let error = |id: &str| after[id].last_error.clone().unwrap_or_default();
    for id in ["endless-1", "endless-2"] {
        assert_eq!(
            after[id].task_status,
            TaskStatus::Success,
            "{id}: the worker returned"
        );
        assert_eq!(seen.count(id), 1);
    }
    assert_eq!(after["endlesserr-1"].task_status, TaskStatus::Failure);
    assert_eq!(
        error("endlesserr-1"),
        "Unhandled error; its answer is over 64 KB and was not read"
    );
    assert_eq!(after["moved-1"].task_status, TaskStatus::Failure);
    assert_eq!(seen.count("moved-1"), MAX_ATTEMPTS);
    assert_eq!(
        error("moved-1"),
        "Lambda answered HTTP 307 (Location http://elsewhere.example/) with no error code it documents"
    );
    assert_eq!(after["badfn-1"].task_status, TaskStatus::Failure);
    assert_eq!(
        error("badfn-1"),
        "Unhandled error, and its answer is not Lambda's error JSON: Traceback (most recent call last):\\n  boom"
    );
    // Refusals the worker never ran: no attempt burned, bounced at most
    // once per rest until expiry.
    for (id, rest, why) in [
        (
            "throttle-1",
            BASE_REST_S,
            "Lambda answered HTTP 429 with no error code it documents",
        ),
        (
            "oops-1",
            BASE_REST_S,
            "Lambda answered HTTP 500 with no error code it documents",
        ),
        ("frac-1", 1, "worker asked to retry later"),
    ] {
        let t = &after[id];
        assert_eq!(
            t.task_status,
            TaskStatus::Expired,
            "{id}: shed by expiry: {t:?}"
        );
        assert_eq!(t.attempts, 0, "{id}");
        let n = seen.count(id);
        assert!(
            n >= 2 && n <= bounce_bound(BOUNCE_TTL_S, rest),
            "{id}: {n} requests"
        );
        assert_eq!(error(id), why);
    }
}
