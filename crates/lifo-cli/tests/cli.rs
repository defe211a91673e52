//! The `lifo` commands against the local stack (DynamoDB Local).

use crate::common;
use common::*;

use clap::CommandFactory;
use lifo_cli::cli::Cli;
use lifo_tests::{Harness, deadline};
use std::sync::Arc;
use std::time::Duration;

async fn lifo(h: &Harness, args: &[&str]) -> Result<String, String> {
    lifo_in(h, args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_against_the_local_stack() {
    let h = Harness::start(2).await;
    let created = h
        .creator()
        .handle(serde_json::json!({"tasks": [
            {"taskId": "run-me", "userId": "1234", "payload": {"n": 1}},
            {"taskId": "later", "userId": "1234", "dueInDays": 3, "payload": {"n": 2}},
            {"taskId": "also-later", "userId": "1234", "dueInDays": 4, "payload": {"n": 3}}
        ]}))
        .await
        .unwrap();
    assert_eq!(created.created.len(), 3);

    let stats = lifo(&h, &["stats"]).await.unwrap();
    assert!(
        stats.ends_with(&format!(
            "1 pending, 0 running, 0 backing off, 0 shed by expiry and 0 superseded \
             in the last hour, 2 scheduled (due from 7 days ago to 7 days ahead) in table {}",
            h.stack.table
        )),
        "{stats}"
    );
    let stats: serde_json::Value =
        serde_json::from_str(&lifo(&h, &["--json", "stats"]).await.unwrap()).unwrap();
    assert_eq!(stats["shards"].as_array().unwrap().len(), 2);
    assert_eq!(
        stats["totals"],
        serde_json::json!({"pending": 1, "running": 0, "backingOff": 0, "expiredLastHour": 0, "supersededLastHour": 0, "scheduled": 2})
    );
    let due = |days: i64| {
        (chrono::Utc::now().date_naive() + chrono::Duration::days(days))
            .format("%Y-%m-%d")
            .to_string()
    };
    assert_eq!(
        stats["scheduled"],
        serde_json::json!([{"dueDate": due(3), "count": 1}, {"dueDate": due(4), "count": 1}])
    );
    let near: serde_json::Value =
        serde_json::from_str(&lifo(&h, &["--json", "stats", "--days", "3"]).await.unwrap())
            .unwrap();
    assert_eq!(
        near["totals"]["scheduled"], 1,
        "only due dates within --days"
    );
    // Who waits: "1234" (the userId is the tenant) with its one task.
    let who: serde_json::Value =
        serde_json::from_str(&lifo(&h, &["--json", "stats", "--tenants"]).await.unwrap()).unwrap();
    assert_eq!(who["tenants"]["tenants"][0]["tenant"], "1234", "{who}");
    assert_eq!(who["tenants"]["tenants"][0]["waiting"], 1, "{who}");
    assert_eq!(who["tenants"]["tenants"][0]["flooding"], false, "{who}");
    let text = lifo(&h, &["stats", "--tenants"]).await.unwrap();
    assert!(
        text.contains("flooding tenants hold 0% of the waiting tasks; the others' oldest waits"),
        "{text}"
    );

    h.processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let got = lifo(&h, &["tasks", "get", "run-me"]).await.unwrap();
    assert!(got.contains("status      SUCCESS"), "{got}");
    assert!(
        !got.contains("lease"),
        "a finished task holds no lease: {got}"
    );

    // A running task shows its lease, and whether it is still live.
    h.creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "running", "payload": {"n": 4}}]}))
        .await
        .unwrap();
    let now = lifo_core::now_ms();
    let claim = lifo_core::Step {
        now_ms: now,
        token: 0,
        attempts: 1,
    };
    h.store
        .apply(
            "running",
            &lifo_core::Move::Claim {
                lease_until: now + 60_000,
                claimed_by: "test",
            },
            lifo_core::TaskStatus::Pending,
            &claim,
        )
        .await
        .unwrap();
    let got = lifo(&h, &["tasks", "get", "running"]).await.unwrap();
    assert!(got.contains("lease       live for another "), "{got}");
    let history = lifo(&h, &["tasks", "history", "run-me"]).await.unwrap();
    assert!(
        history.contains("TAKEN") && history.ends_with("task run-me is SUCCESS (2 transitions)"),
        "{history}"
    );

    assert_eq!(
        lifo(&h, &["tasks", "cancel", "later"]).await.unwrap(),
        "cancelled later"
    );
    let err = lifo(&h, &["tasks", "cancel", "run-me"]).await.unwrap_err();
    assert_eq!(
        err,
        "task run-me is SUCCESS; only SCHEDULED tasks can be cancelled"
    );
    assert_eq!(
        lifo(&h, &["tasks", "get", "nope"]).await.unwrap_err(),
        "no task nope"
    );

    let list = lifo(&h, &["tasks", "list", "--user", "1234"])
        .await
        .unwrap();
    assert!(
        list.ends_with("3 task(s) of user 1234, newest first"),
        "{list}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &lifo(&h, &["--json", "tasks", "list", "--user", "1234"])
            .await
            .unwrap(),
    )
    .unwrap();
    let statuses: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskStatus"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 3);
    assert!(
        statuses.contains(&"CANCELLED")
            && statuses.contains(&"SCHEDULED")
            && statuses.contains(&"SUCCESS")
    );
}

#[test]
fn every_command_has_help_with_an_example() {
    let mut cmd = Cli::command();
    cmd.build();
    let mut missing = Vec::new();
    fn walk(c: &clap::Command, path: String, missing: &mut Vec<String>) {
        let subs: Vec<&clap::Command> = c
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .collect();
        if subs.is_empty() {
            let help = c
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !(help.starts_with("Example: lifo") || help.starts_with("Examples: lifo")) {
                missing.push(path.clone());
            }
        }
        for s in subs {
            walk(s, format!("{path} {}", s.get_name()), missing);
        }
    }
    walk(&cmd, "lifo".into(), &mut missing);
    assert!(
        missing.is_empty(),
        "commands without an example: {missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_counts_running_and_recently_shed_tasks_per_shard() {
    use lifo_core::{Step, Task, now_ms};
    let h = Harness::start(1).await;
    let now = now_ms();
    let payload = || serde_json::json!({"n": 1}).as_object().cloned().unwrap();
    // Expired 20 minutes ago, never started: shed in the last hour (below).
    let shed = Task::new_pending("shed".into(), payload(), now - 1_800_000, 600, 1);
    // Expired and shed 2 hours ago: not in the last hour.
    let old = Task::new_pending("old".into(), payload(), now - 10_800_000, 3_600, 1);
    let running = Task::new_pending("running".into(), payload(), now - 1_000, 3_600, 1);
    let waiting = Task::new_pending("waiting".into(), payload(), now - 500, 3_600, 1);
    // Failed once, resting until a minute from now.
    let mut resting = Task::new_pending("resting".into(), payload(), now - 800, 3_600, 1);
    resting.retry_at = Some(now + 60_000);
    let old_candidate = lifo_core::Candidate {
        task_id: old.task_id.clone(),
        lifo_shard: 0,
        claimable_at: old.claimable_at.unwrap(),
        expires_at: old.expires_at,
        lease_until: None,
        token: 0,
        attempts: 0,
        tenant: None,
    };
    h.store
        .put_new(&[shed, old, running, waiting, resting])
        .await
        .unwrap();
    // "old" was shed (by some reader) two hours ago; "shed" is shed by the
    // sweep's reaper now.
    assert!(
        h.store
            .shed(&old_candidate, old_candidate.expires_at * 1000 + 1_000)
            .await
            .unwrap()
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let reaped = h
        .store
        .reap(&[0], now, now - 604_800_000, until)
        .await
        .unwrap();
    assert_eq!(reaped.shed, 1);
    let step = Step {
        now_ms: now,
        token: 0,
        attempts: 1,
    };
    let claim = lifo_core::Move::Claim {
        lease_until: now + 60_000,
        claimed_by: "test",
    };
    h.store
        .apply("running", &claim, lifo_core::TaskStatus::Pending, &step)
        .await
        .unwrap();

    let stats: serde_json::Value =
        serde_json::from_str(&lifo(&h, &["--json", "stats"]).await.unwrap()).unwrap();
    assert_eq!(
        stats["totals"],
        serde_json::json!({"pending": 1, "running": 1, "backingOff": 1, "expiredLastHour": 1, "supersededLastHour": 0, "scheduled": 0})
    );
    let shard = &stats["shards"][0];
    let newest = shard["newestAgeMs"].as_u64().unwrap();
    assert!((500..60_000).contains(&newest), "{shard}");
    assert_eq!(
        shard["newestAgeMs"], shard["oldestAgeMs"],
        "one claimable task"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_outputs_name_the_table_and_its_settings() {
    // moto's CloudFormation holds a stack with this project's outputs; the
    // table itself is DynamoDB Local's, created under another name.
    let h = Harness::start(1).await;
    let moto = h.stack.moto.endpoint.clone();
    moto_stack(
        &h,
        "lifo-queue",
        &[
            ("TableName", &h.stack.table),
            ("ShardCount", "3"),
            ("DueShardCount", "4"),
            ("MaxTaskTtlSeconds", "86400"),
        ],
    )
    .await;
    h.creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "t1", "payload": {"n": 1}}]}))
        .await
        .unwrap();

    // As a user would: the stack's region and the CloudFormation endpoint
    // from the environment, --endpoint-url for DynamoDB.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lifo"))
        .env("AWS_ENDPOINT_URL_CLOUDFORMATION", &moto)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .args([
            "--stack",
            "lifo-queue",
            "--endpoint-url",
            &h.stack.dynamodb_local.endpoint,
            "--json",
            "stats",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["shards"].as_array().unwrap().len(), 3, "ShardCount 3");
    assert_eq!(stats["totals"]["pending"], 1);

    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_lifo"))
        .env("AWS_ENDPOINT_URL_CLOUDFORMATION", &moto)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .args(["--stack", "nope", "stats"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.starts_with("error: reading stack nope:") && err.lines().count() == 1,
        "{err}"
    );
}

/// `lifo --stack … tasks create` invokes the stack's CreateFunction (the
/// real aws-sdk-lambda client against a local Invoke API running create's
/// handler), as the console does: its validation and its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_against_a_stack_invokes_its_create_function() {
    use lifo_local::lambda_api::{LambdaApi, Reply, handler};
    let h = Harness::start(1).await;
    let moto = h.stack.moto.endpoint.clone();
    moto_stack(
        &h,
        "with-create",
        &[
            ("TableName", &h.stack.table),
            ("ShardCount", "1"),
            ("DueShardCount", "4"),
            ("MaxTaskTtlSeconds", "86400"),
            ("CreateFunctionName", "lifo-queue-CreateFunction-abc"),
        ],
    )
    .await;
    let lambda = LambdaApi::start().await.unwrap();
    let creator = Arc::new(h.creator());
    lambda.register(
        "lifo-queue-CreateFunction-abc",
        handler(move |event| {
            let creator = creator.clone();
            async move {
                match creator.handle(event).await {
                    Ok(out) => Reply::Ok(serde_json::to_value(out).unwrap_or_default()),
                    Err(e) => {
                        let d: lambda_runtime::Diagnostic = create::Failure(e).into();
                        Reply::FunctionError {
                            handled: true,
                            error_type: d.error_type,
                            error_message: d.error_message,
                        }
                    }
                }
            }
        }),
    );
    let fixture = |name: &str| format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    let lifo = |file: String| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lifo"))
            .env("AWS_ENDPOINT_URL_CLOUDFORMATION", &moto)
            .env("AWS_ENDPOINT_URL_LAMBDA", &lambda.endpoint)
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_REGION", "us-east-1")
            .args(["--stack", "with-create", "--endpoint-url"])
            .arg(&h.stack.dynamodb_local.endpoint)
            .args(["tasks", "create", "--file", &file])
            .output()
            .unwrap()
    };
    let ok = lifo(fixture("create-tasks.json"));
    assert!(ok.status.success(), "{ok:?}");
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(
        said.starts_with("created 2: ") && said.contains("order-1001"),
        "{said}"
    );
    assert_eq!(lambda.invocations(), 1);
    assert!(h.store.get("order-1001").await.unwrap().is_some());

    let bad = lifo(fixture("create-invalid.json"));
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.starts_with("error: invalid request: tasks[0].payload: ")
            && err.trim_end().ends_with("(InvalidRequest)"),
        "{err}"
    );
    assert_eq!(h.tasks().await.len(), 2, "the bad request wrote nothing");
}

/// An endpoint that answers 200 and then never stops: `lifo` reads at
/// most `lifo_lambda::bounded::AWS_ANSWER_LIMIT` bytes of it (8 MB) per
/// answer, fails with a one-line error, and its memory stays bounded
/// (peak RSS from /proc while it runs).
#[test]
fn an_endless_answer_cannot_fill_the_clis_memory() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let _ = sock.read(&mut buf);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                            transfer-encoding: chunked\r\n\r\n";
                if sock.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let piece = "{\"Item\": {\"taskId\": {\"S\": \"x\"}}, ".repeat(2048);
                let framed = format!("{:x}\r\n{piece}\r\n", piece.len());
                while sock.write_all(framed.as_bytes()).is_ok() {}
            });
        }
    });
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(LIFO)
        .args(["--endpoint-url", &endpoint, "tasks", "get", "x"])
        .env("AWS_MAX_ATTEMPTS", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak_kb = 0u64;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "lifo still reading after 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("length limit exceeded"), "{stderr}");
    let peak_mb = peak_kb as f64 / 1024.0;
    assert!(peak_mb < 128.0, "peak RSS {peak_mb:.1} MB");
}

/// A create request over a synchronous invoke's 6 MB is refused by the CLI
/// before anything is sent (with a stack it would go to Lambda, which
/// refuses it without naming anything), with create's own message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_request_over_6_mb_is_refused_before_it_is_sent() {
    let h = Harness::start(1).await;
    let payload = "z".repeat(63 * 1024);
    let tasks: Vec<serde_json::Value> = (0..100)
        .map(|i| serde_json::json!({"taskId": format!("big-{i}"), "payload": {"blob": payload}}))
        .collect();
    let dir = scratch("big-create");
    let file = dir.join("big.json");
    std::fs::write(&file, serde_json::json!({ "tasks": tasks }).to_string()).unwrap();
    let err = lifo(&h, &["tasks", "create", "--file", file.to_str().unwrap()])
        .await
        .unwrap_err();
    assert!(
        err.contains("(request): is ") && err.contains("a create request is at most 6291456"),
        "{err}"
    );
    assert!(h.tasks().await.is_empty(), "nothing was written");
}

/// `lifo tasks create --file` sends the file's text as it is: a payload
/// number past what a float holds keeps every digit through the table and
/// back (issue 50, item 8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_s_payload_numbers_keep_every_digit() {
    let h = Harness::start(1).await;
    let dir = scratch("exact-create");
    let file = dir.join("exact.json");
    std::fs::write(
        &file,
        r#"{"tasks": [{"taskId": "order-2p64", "payload": {"n": 18446744073709551616, "d": 0.1000000000000000000000000000000000001}}]}"#,
    )
    .unwrap();
    lifo(&h, &["tasks", "create", "--file", file.to_str().unwrap()])
        .await
        .unwrap();
    let shown = lifo(&h, &["--json", "tasks", "get", "order-2p64"])
        .await
        .unwrap();
    assert!(shown.contains("18446744073709551616"), "{shown}");
    assert!(
        shown.contains("0.1000000000000000000000000000000000001"),
        "{shown}"
    );
}

/// `lifo tasks get ID | head -1` (issue 33): the reader closes the pipe
/// before `lifo` writes; it exits 0 without a panic or a backtrace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_closes_the_pipe_early_is_not_an_error() {
    use std::io::Read;
    let h = Harness::start(1).await;
    h.creator()
        .handle(serde_json::json!({"tasks": [{"taskId": "piped", "payload": {"n": 1}}]}))
        .await
        .unwrap();
    let mut child = std::process::Command::new(LIFO)
        .args([
            "--endpoint-url",
            &h.stack.dynamodb_local.endpoint,
            "--table",
            &h.stack.table,
            "tasks",
            "get",
            "piped",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `head -1` that has read nothing yet and goes away.
    drop(child.stdout.take());
    let status = tokio::task::spawn_blocking(move || {
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        (child.wait().unwrap(), err)
    })
    .await
    .unwrap();
    let (status, err) = status;
    assert!(status.success(), "{status:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}

/// Every task is reachable, whatever its id (issue 33): ids that create
/// refuses today, stored by an older version or a producer writing straight
/// to the table, are read, retried and deleted through the CLI and the
/// console (the HTTP API's side: api's `every_stored_id_is_reached…`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stored_id_is_reached_retried_and_deleted_through_the_cli_and_the_console() {
    let h = Harness::start(1).await;
    let long = "z".repeat(1500);
    let ids = [".", "..", "sp ace", "x#frag", "a/b", long.as_str()];
    for id in ids {
        lifo_tests::failed_task(&h.store, id, "boom").await;
        let shown = lifo(&h, &["tasks", "get", id]).await.unwrap();
        assert!(shown.contains("FAILURE"), "{id}: {shown}");
        lifo(&h, &["tasks", "retry", id]).await.unwrap();
        assert_eq!(
            h.store.get(id).await.unwrap().unwrap().task_status,
            lifo_core::TaskStatus::Pending,
            "{id} retried by the CLI"
        );
        lifo(&h, &["tasks", "delete", id]).await.unwrap();
        assert!(
            h.store.get(id).await.unwrap().is_none(),
            "{id} deleted by the CLI"
        );
    }

    // The console, over HTTP as a browser sends it (links in the path form).
    let queue = lifo_ops::Queue::new(h.store.clone(), lifo_ops::Settings::default());
    let console = lifo_cli::ui::start(
        queue,
        &lifo_cli::ui::console::UiArgs {
            listen: "127.0.0.1:0".parse().unwrap(),
            read_only: false,
        },
        lifo_cli::ui::console::FreshnessSource::Table,
    )
    .await
    .unwrap();
    let (base, _) = console.url.split_once("/?token=").unwrap();
    let base = base.to_owned();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(&console.url).send().await.unwrap();
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = |path: String| {
        let (http, cookie) = (http.clone(), cookie.clone());
        async move {
            let r = http
                .get(path)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let post = |path: String, csrf: String| {
        let (http, cookie, base) = (http.clone(), cookie.clone(), base.clone());
        async move {
            http.post(path)
                .header("cookie", cookie)
                .header("origin", base)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    for id in ids {
        lifo_tests::failed_task(&h.store, id, "boom").await;
        let at = format!("{base}/tasks/{}", lifo_ops::path_id::encode(id));
        let (status, html) = page(at.clone()).await;
        assert_eq!(status, 200, "{id}: {html}");
        let csrf = html
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap()
            .to_owned();
        assert_eq!(post(format!("{at}/retry"), csrf.clone()).await, 303, "{id}");
        assert_eq!(
            h.store.get(id).await.unwrap().unwrap().task_status,
            lifo_core::TaskStatus::Pending,
            "{id} retried by the console"
        );
        assert_eq!(post(format!("{at}/delete"), csrf).await, 303, "{id}");
        assert!(
            h.store.get(id).await.unwrap().is_none(),
            "{id} deleted by the console"
        );
    }
    console.stop().await;
}
