//! The `lifo` command against endpoints that fail (issue 51): every
//! subcommand that reaches a queue, against an endpoint that refuses
//! connections, one that answers what is not HTTP, one that answers an
//! HTML page and one that accepts and never answers, and against a table
//! that is not there. Each must exit non-zero within its timeouts, with one
//! line on stderr naming the endpoint and what was wrong, and no panic.
//!
//! `LIFO_BIN=target/release/lifo cargo test -p lifo-cli --test probe` runs
//! the same probe against a release build (`make bench` builds one).

use crate::common;
use common::*;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every subcommand that acts on a queue (`local`, `simulate` and `bench`
/// start stacks of their own). `ui` checks the queue before it serves.
const COMMANDS: &[&[&str]] = &[
    &["tasks", "create", "--count", "2"],
    &["tasks", "create", "--file", "FILE"],
    &["tasks", "get", "x"],
    &["tasks", "list", "--user", "u"],
    &["tasks", "list", "--failed", "--since", "1h"],
    &["tasks", "cancel", "x"],
    &["tasks", "history", "x"],
    &["tasks", "retry", "x"],
    &["tasks", "retry", "--failed"],
    &["tasks", "delete", "x"],
    &["pause", "--reason", "probe"],
    &["resume"],
    &["stats"],
    &["stats", "--tenants"],
    &["ui", "--listen", "127.0.0.1:0"],
];

/// A loopback server that answers every connection with `answer` (after
/// reading the request), or never answers when `None`; it lives as long as
/// the test process.
fn server(answer: Option<&'static [u8]>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { return };
            match answer {
                Some(bytes) => {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 65_536];
                        let _ = sock.read(&mut buf);
                        let _ = sock.write_all(bytes);
                    });
                }
                // Accepted, read by nobody, never answered.
                None => held.push(sock),
            }
        }
    });
    endpoint
}

/// A loopback port that refuses connections (bound, then released).
fn refusing() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// One run of `lifo`: exit code, stderr, how long it took.
struct Run {
    code: Option<i32>,
    stderr: String,
    took: Duration,
}

/// A command line: its arguments and environment.
type Invocation = (Vec<String>, Vec<(String, String)>);

/// Runs each of `runs` at once, each killed after 60 s.
fn run_all(runs: Vec<Invocation>) -> Vec<Run> {
    let started: Vec<_> = runs
        .into_iter()
        .map(|(args, envs)| {
            let child = Command::new(lifo_bin())
                .args(&args)
                .envs(envs)
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, Instant::now())
        })
        .collect();
    started
        .into_iter()
        .map(|(mut child, at)| {
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if at.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let took = at.elapsed();
            let mut stderr = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
            Run {
                code: status.and_then(|s| s.code()),
                stderr,
                took,
            }
        })
        .collect()
}

/// The checks every failing run must pass: non-zero, in time, one line,
/// naming `endpoint` (and `what` went wrong), no panic.
fn check(label: &str, run: &Run, limit: Duration, endpoint: &str, what: &str) {
    assert!(
        run.code.is_some_and(|c| c != 0 && c != 101),
        "{label}: exit {:?} after {:?}: {}",
        run.code,
        run.took,
        run.stderr
    );
    assert!(run.took < limit, "{label}: took {:?}", run.took);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{label}: {}", run.stderr);
    assert!(lines[0].starts_with("error: "), "{label}: {}", run.stderr);
    assert!(
        lines[0].contains(endpoint) && lines[0].contains(what),
        "{label}: not naming {endpoint} and {what:?}: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("backtrace"),
        "{label}: {}",
        run.stderr
    );
}

#[test]
fn every_command_fails_in_one_line_against_a_refusing_a_garbage_and_a_silent_endpoint() {
    let dir = scratch("probe");
    let file = dir.join("create.json");
    std::fs::write(&file, r#"{"tasks": [{"payload": {"n": 1}}]}"#).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let endpoints = [
        (refusing(), "cannot reach"),
        (
            server(Some(b"SSH-2.0-OpenSSH_9.2\r\nnot HTTP at all\r\n")),
            "did not answer as DynamoDB does",
        ),
        (
            server(Some(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 18\r\n\r\n<html>hi</html>\r\n",
            )),
            "answered something that is not DynamoDB's answer",
        ),
        (server(None), "did not answer within 2 s"),
    ];
    // 1 s to connect, 1 s to answer: every command ends within both, and
    // the process's own start and stop.
    let limit = Duration::from_secs(2 + 8);
    for (endpoint, what) in &endpoints {
        let runs = COMMANDS
            .iter()
            .map(|cmd| {
                let mut args: Vec<String> = [
                    "--endpoint-url",
                    endpoint,
                    "--connect-timeout",
                    "1",
                    "--read-timeout",
                    "1",
                ]
                .map(str::to_owned)
                .to_vec();
                args.extend(cmd.iter().map(|a| match *a {
                    "FILE" => file.clone(),
                    a => a.to_owned(),
                }));
                (args, Vec::new())
            })
            .collect();
        for (cmd, run) in COMMANDS.iter().zip(run_all(runs)) {
            check(&format!("{endpoint} {cmd:?}"), &run, limit, endpoint, what);
        }
    }
    // A stack's outputs, from a CloudFormation that is not there.
    let cfn = refusing();
    let runs = run_all(vec![(
        ["--stack", "probe", "--connect-timeout", "1", "stats"]
            .map(str::to_owned)
            .to_vec(),
        [
            ("AWS_ENDPOINT_URL_CLOUDFORMATION", cfn.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "probe"),
            ("AWS_SECRET_ACCESS_KEY", "probe"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec(),
    )]);
    check(
        "--stack",
        &runs[0],
        limit,
        &cfn,
        "reading stack probe: cannot reach CloudFormation",
    );
}

/// `--endpoint-url not-a-url` dumped the SDK's request (1,400 bytes of
/// body and headers); now it is refused before any request.
#[test]
fn an_endpoint_that_is_not_a_url_is_refused_in_one_line() {
    for bad in ["not-a-url", "ftp://127.0.0.1:8000", "http://"] {
        let run = &run_all(vec![(
            vec!["--endpoint-url".into(), bad.into(), "stats".into()],
            Vec::new(),
        )])[0];
        assert_eq!(run.code, Some(2), "{bad}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("--endpoint-url")
                && run
                    .stderr
                    .contains("expected http://HOST[:PORT] or https://HOST[:PORT]"),
            "{bad}: {}",
            run.stderr
        );
    }
}

/// A table that is not there is named (it was "ResourceNotFoundException:
/// Cannot do operations on a non-existent table", twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_is_named_once() {
    let h = lifo_tests::Harness::start(1).await;
    let endpoint = h.stack.dynamodb_local.endpoint.clone();
    let runs = tokio::task::spawn_blocking(move || {
        run_all(
            [
                &["stats"][..],
                &["tasks", "get", "x"],
                &["tasks", "list", "--failed"],
            ]
            .iter()
            .map(|cmd| {
                let mut args: Vec<String> = ["--endpoint-url", &endpoint, "--table", "NoSuchTable"]
                    .map(str::to_owned)
                    .to_vec();
                args.extend(cmd.iter().map(|a| (*a).to_owned()));
                (args, Vec::new())
            })
            .collect(),
        )
    })
    .await
    .unwrap();
    for run in &runs {
        check(
            "missing table",
            run,
            Duration::from_secs(30),
            &h.stack.dynamodb_local.endpoint,
            "table NoSuchTable (or one of its indexes) does not exist in DynamoDB at",
        );
        assert_eq!(
            run.stderr.matches("does not exist").count(),
            1,
            "{}",
            run.stderr
        );
    }
}
