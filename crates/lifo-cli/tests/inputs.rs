//! What a user can type or a producer can store, taken by the `lifo`
//! command (issue 51): every number bounded where it is parsed, with one
//! line naming the flag or field and its range; times that are not times,
//! or in the future, named; text from the table escaped on the terminal.
//!
//! The overflow cases once panicked in a debug build and wrapped silently
//! in a release one. A debug build checks every operation for overflow, so
//! a run here without a panic means no operation on these paths
//! overflowed, which is what a release build (the same code without the
//! checks) needs; `LIFO_BIN=target/release/lifo` runs them on one too.

use crate::common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `lifo ARGS` against an endpoint that refuses connections (a command
/// refused at its flags never reaches it): exit code and stderr.
fn lifo_err(args: &[&str]) -> (Option<i32>, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let out = Command::new(lifo_bin())
        .args(["--endpoint-url", &format!("http://127.0.0.1:{port}")])
        .args(["--connect-timeout", "1", "--read-timeout", "1"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{args:?} took {:?}",
        started.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each number out of its range is refused at once, in one line naming the
/// flag and the range (the template's own bounds: template.yaml's
/// MinValue/MaxValue, `lifo_lambda::config::bounds`).
#[test]
fn every_number_out_of_range_is_refused_naming_the_flag_and_its_range() {
    let max = "18446744073709551615";
    for (args, names) in [
        // Panicked ("attempt to multiply with overflow") in stats.rs.
        (
            &["--max-ttl-seconds", max, "stats"][..],
            "'--max-ttl-seconds <MAX_TTL_SECONDS>': 18446744073709551615 is not in 60..=31536000",
        ),
        // Panicked in model.rs (with a file's ttlSeconds, below).
        (
            &[
                "--retention-seconds",
                max,
                "tasks",
                "create",
                "--count",
                "1",
            ],
            "'--retention-seconds <RETENTION_SECONDS>': 18446744073709551615 is not in 0..=31536000",
        ),
        (
            &["--task-ttl-seconds", "0", "stats"],
            "'--task-ttl-seconds <TASK_TTL_SECONDS>': 0 is not in 60..=604800",
        ),
        // Ran for minutes (700,000 queries); 0 was accepted.
        (
            &["--shards", "100000", "stats"],
            "'--shards <SHARDS>': 100000 is not in 1..=100",
        ),
        (
            &["--shards", "0", "stats"],
            "'--shards <SHARDS>': 0 is not in 1..=100",
        ),
        (
            &["--due-shards", "0", "stats"],
            "'--due-shards <DUE_SHARDS>': 0 is not in 1..=100",
        ),
        // 100,007 days × 50 due shards of COUNT queries.
        (
            &["stats", "--days", "100000"],
            "'--days <DAYS>': 100000 is not in 0..=365",
        ),
        (
            &["tasks", "create", "--count", "0"],
            "'--count <COUNT>': 0 is not in 1..=1000",
        ),
        (
            &["simulate", "--latency-ms", max],
            "'--latency-ms <LATENCY_MS>': 18446744073709551615 is not in 0..=240000",
        ),
        (
            &["simulate", "--seed", max],
            "'--seed <SEED>': 18446744073709551615 is not in 0..=4294967295",
        ),
    ] {
        let (code, stderr) = lifo_err(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// A file's numbers are bounded where create reads them: a `ttlSeconds`
/// near u64::MAX once panicked in model.rs (with the flag above at its
/// largest); now create names the field and its range, and writes nothing.
#[test]
fn a_files_numbers_are_bounded_by_create_naming_the_field() {
    let dir = scratch("inputs-file");
    let file = dir.join("tasks.json");
    // The issue's own case: the largest TTL and a file asking for it.
    std::fs::write(
        &file,
        r#"{"tasks":[{"payload":{},"ttlSeconds":18446744073709551615}]}"#,
    )
    .unwrap();
    let (code, stderr) = lifo_err(&[
        "--max-ttl-seconds",
        "18446744073709551615",
        "tasks",
        "create",
        "--file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "'--max-ttl-seconds <MAX_TTL_SECONDS>': 18446744073709551615 is not in 60..=31536000"
        ),
        "{stderr}"
    );
    for (body, names) in [
        (
            r#"{"tasks":[{"payload":{},"ttlSeconds":18446744073709551615}]}"#,
            "tasks[0].ttlSeconds: must be between 1 and 31536000 seconds, got 18446744073709551615",
        ),
        (
            r#"{"count":18446744073709551615}"#,
            "count: must be between 1 and 1000, got 18446744073709551615",
        ),
        (
            r#"{"tasks":[{"payload":{},"dueInDays":99999999999}]}"#,
            "tasks[0].dueInDays",
        ),
    ] {
        std::fs::write(&file, body).unwrap();
        let (code, stderr) = lifo_err(&[
            "--max-ttl-seconds",
            "31536000",
            "tasks",
            "create",
            "--file",
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1), "{body}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{body}: {stderr}");
        assert!(stderr.contains(names), "{body}: {stderr}");
    }
}

/// `--since 2026-13-45T00:00:00Z` was "unknown unit \"-13-45T00:00:00Z\"",
/// and a time in the future an empty list.
#[test]
fn a_since_that_is_no_time_or_in_the_future_is_refused() {
    let (code, stderr) = lifo_err(&[
        "tasks",
        "list",
        "--failed",
        "--since",
        "2026-13-45T00:00:00Z",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("'--since <SINCE>': \"2026-13-45T00:00:00Z\" is not an RFC 3339 time (input is out of range)"),
        "{stderr}"
    );
    for args in [
        &[
            "tasks",
            "list",
            "--failed",
            "--since",
            "2999-01-01T00:00:00Z",
        ][..],
        &[
            "tasks",
            "retry",
            "--failed",
            "--since",
            "2999-01-01T00:00:00Z",
            "--dry-run",
        ],
    ] {
        let (code, stderr) = lifo_err(args);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--since: 2999-01-01T00:00:00Z is in the future (now is "),
            "{stderr}"
        );
    }
}

/// A `lastError` holding U+202E (RIGHT-TO-LEFT OVERRIDE) was printed raw by
/// `tasks list --failed` and reversed the text around it; an ESC sequence
/// could clear the screen and a newline forge a row. Every text from the
/// table is shown escaped, as the console shows it; `--json` is the same
/// value with those characters as JSON escapes (`\u202e`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_the_table_reaches_the_terminal_escaped() {
    let h = lifo_tests::Harness::start(1).await;
    let error = "HTTP 503\u{202e}txet desrever\u{1b}[2J\nforged-row\u{85}";
    let id = "task\u{202e}\u{1b}]0;title\u{7}";
    lifo_tests::failed_task(&h.store, id, error).await;
    let hostile = |text: &str| {
        text.chars()
            .any(|c| c.is_control() && c != '\n' || lifo_cli::terminal::is_bidi_control(c))
    };
    for args in [
        &["tasks", "list", "--failed"][..],
        &["tasks", "get", id],
        &["tasks", "history", id],
        &["--json", "tasks", "list", "--failed"],
        &["--json", "tasks", "get", id],
    ] {
        let out = run_ok(
            Command::new(lifo_bin())
                .args(["--endpoint-url", &h.stack.dynamodb_local.endpoint])
                .args(["--table", &h.stack.table])
                .args(args),
        );
        let out = out.trim_end();
        assert!(!hostile(out), "{args:?}: raw controls in {out:?}");
        if args[0] == "--json" {
            assert!(out.contains(r"\u202e"), "{args:?}: {out}");
            let v: serde_json::Value = serde_json::from_str(out).unwrap();
            assert!(v.to_string().contains('\u{202e}'), "the same value: {v}");
        } else {
            assert!(out.contains(r"\u{202e}"), "{args:?}: {out}");
            assert!(!out.contains("\nforged-row"), "{args:?}: {out}");
        }
    }
    let list = lifo_in(&h, &["tasks", "list", "--failed"]).await.unwrap();
    // In-process too (what the binary prints is this text).
    assert!(
        list.contains(r"HTTP 503\u{202e}txet desrever\u{1b}[2J\nforged-row\u{85}"),
        "{list}"
    );
    assert!(list.ends_with("1 failed task(s), newest first"), "{list}");
    // An error line quoting a task: escaped, one line.
    let out = Command::new(lifo_bin())
        .args(["--endpoint-url", &h.stack.dynamodb_local.endpoint])
        .args(["--table", &h.stack.table, "tasks", "cancel", id])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!hostile(&stderr), "{stderr:?}");
    assert!(
        stderr.contains(r"task task\u{202e}\u{1b}]0;title\u{7} is FAILURE"),
        "{stderr}"
    );
}
