//! The console (`lifo local up --ui`) in a real browser: Debian's chromium
//! driven through chromedriver with fantoccini, against the local stack and
//! its pipeline. Screenshots go to target/console-screenshots/.
//!
//! Also, with plain HTTP requests, what the browser never sends: no token,
//! another Host, another Origin, a POST without the CSRF token.

mod common;
use common::*;

#[path = "console/browser.rs"]
mod browser;
use browser::{browser, chromedriver, click, screenshot, text, wait_text};

use fantoccini::{Client, Locator};
use lifo_core::{Move, Step, Task, TaskStatus, now_ms};
use std::process::Command;
use std::time::{Duration, Instant};

/// Task data that would run if it were ever markup.
const HOSTILE: &str =
    "\"><img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>";

/// Nothing hostile ran and no element came from task data.
async fn nothing_ran(b: &Client) {
    let pwned = b
        .execute("return [window.__pwned === undefined, document.images.length, document.scripts.length];", vec![])
        .await
        .unwrap();
    assert_eq!(
        pwned,
        serde_json::json!([true, 0, 1]),
        "only the console's own script"
    );
}

/// A task that failed with `error` as its last error (claimed and failed
/// the way process does it).
async fn failed_task(store: &lifo_core::Store, id: &str, error: &str) {
    let payload = serde_json::json!({"note": HOSTILE, "n": 1})
        .as_object()
        .cloned()
        .unwrap();
    let task = Task::new_pending(id.into(), payload, now_ms(), 3600, 1);
    store.put_new(&[task]).await.unwrap();
    let now = now_ms();
    let claim = Step {
        now_ms: now,
        token: 0,
        attempts: 1,
    };
    let lease = Move::Claim {
        lease_until: now + 60_000,
        claimed_by: "test",
    };
    let claimed = store
        .apply(id, &lease, TaskStatus::Pending, &claim)
        .await
        .unwrap();
    let fail = Step {
        now_ms: now_ms(),
        token: claimed.token,
        attempts: 1,
    };
    let failure = Move::Fail {
        reason: error,
        history: &claimed.history,
    };
    store
        .record(id, &failure, TaskStatus::Taken, &fail)
        .await
        .unwrap();
}

/// The `name=value` of the console's cookie that `r` sets.
fn cookie_of(r: &reqwest::Response) -> String {
    r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// The CSRF token of a page's forms.
fn csrf_in(html: &str) -> String {
    html.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned()
}

fn console_url(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("console"))
        .map(|l| l.trim().to_owned())
        .unwrap_or_else(|| panic!("no console line in {lines:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_queue_and_acts_on_it_in_a_real_browser() {
    let (_up, _rx, lines) = tokio::task::block_in_place(|| {
        local_up(
            &["--ui", "--ui-listen", "127.0.0.1:0", "--retry-backoff", "0"],
            &[
                ("RUNNER_LATENCY_MS", "300"),
                ("RUNNER_MAX_CONCURRENCY", "3"),
                ("AWS_REGION", "us-east-1"),
            ],
        )
    });
    let url = console_url(&lines);
    let base = url.split("/?token=").next().unwrap().to_owned();
    let endpoint = endpoint_in(&lines);
    let store = lifo_core::Store::new(
        aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(&endpoint).await),
        "QueueTable",
    );

    // What a browser on another page, or without the URL, would send.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 401, "no token");
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(
        r.status(),
        303,
        "the token's URL sets the cookie and drops the token"
    );
    let cookie = cookie_of(&r);
    let r = http
        .get(&url)
        .header("host", "rebound.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421, "DNS rebinding: another Host");
    let page = http
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.starts_with("default-src 'none'; script-src 'self'"),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    let csrf = csrf_in(&html);
    let post = |origin: &str, body: String| {
        http.post(format!("{base}/pause"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    assert_eq!(
        post(&base, String::new()).await.unwrap().status(),
        403,
        "no CSRF token"
    );
    assert_eq!(
        post(&base, "csrf=wrong".into()).await.unwrap().status(),
        403,
        "a wrong one"
    );
    let r = post("http://evil.example", format!("csrf={csrf}"))
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "another Origin, with the right token");
    assert!(
        !store.control(true).await.unwrap().paused,
        "nothing refused was done"
    );

    // The browser.
    let driver = chromedriver().await;
    let profile = scratch("console-browser");
    let b = browser(&driver, &profile).await;
    b.goto(&url).await.unwrap();
    assert_eq!(b.current_url().await.unwrap().as_str(), format!("{base}/"));
    assert_eq!(text(&b, "p.running strong").await, "Running");

    // Pause from the page; nothing is claimed while paused.
    click(&b, "Pause").await;
    wait_text(&b, "p.paused strong", 10, |t| t == "Paused").await;
    assert!(store.control(true).await.unwrap().paused);
    let payload = serde_json::json!({"html": HOSTILE})
        .as_object()
        .cloned()
        .unwrap();
    let pending: Vec<Task> = (0..6)
        .map(|i| {
            Task::new_pending(
                format!("console-{i}"),
                payload.clone(),
                now_ms() - i,
                3600,
                1,
            )
        })
        .collect();
    store.put_new(&pending).await.unwrap();
    failed_task(&store, "failed-1", &format!("HTTP 500: {HOSTILE}")).await;

    // The live overview's counts are the table's (within a refresh, 3 s).
    let tasks = lifo_local::stack::scan_tasks(&store).await.unwrap();
    let count = |s: TaskStatus| {
        tasks
            .iter()
            .filter(|t| t.task_status == s)
            .count()
            .to_string()
    };
    wait_text(&b, "[data-field=pending]", 10, |t| {
        t == count(TaskStatus::Pending)
    })
    .await;
    assert_eq!(
        text(&b, "[data-field=failed]").await,
        count(TaskStatus::Failure)
    );
    assert_eq!(
        text(&b, "[data-field=running]").await,
        count(TaskStatus::Taken)
    );
    assert_eq!(
        text(&b, "[data-field=shard-0-pending]").await,
        count(TaskStatus::Pending)
    );
    assert_eq!(count(TaskStatus::Pending), "6");
    screenshot(&b, "overview-paused").await;

    // The failed list and the task page show hostile data as text.
    b.goto(&format!("{base}/tasks?failed=1&since=1h"))
        .await
        .unwrap();
    assert_eq!(
        text(&b, "table.failed td.error").await,
        format!("HTTP 500: {HOSTILE}")
    );
    nothing_ran(&b).await;
    screenshot(&b, "failed").await;
    b.find(Locator::LinkText("failed-1"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        text(&b, "pre.payload")
            .await
            .contains(&HOSTILE.replace('"', "\\\""))
    );
    assert_eq!(text(&b, "pre.error").await, format!("HTTP 500: {HOSTILE}"));
    nothing_ran(&b).await;

    // Resume from the overview: the pipeline runs the six.
    b.goto(&format!("{base}/")).await.unwrap();
    click(&b, "Resume").await;
    wait_text(&b, "p.running strong", 10, |t| t == "Running").await;
    assert!(!store.control(true).await.unwrap().paused);
    wait_text(&b, "[data-field=pending]", 30, |t| t == "0").await;

    // Retry the failed task from its page: PENDING again, then SUCCESS.
    b.goto(&format!("{base}/tasks/failed-1")).await.unwrap();
    click(&b, "Retry").await;
    wait_text(&b, "p.notice", 10, |t| t.starts_with("Retried")).await;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        b.refresh().await.unwrap();
        if text(&b, "h1 .badge").await == "SUCCESS" {
            break;
        }
        assert!(
            Instant::now() < until,
            "failed-1 did not succeed after its retry"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let history = text(&b, "table.history").await;
    assert!(history.contains("retried from the console"), "{history}");
    let t = store.get("failed-1").await.unwrap().unwrap();
    assert_eq!(t.task_status, TaskStatus::Success);
    screenshot(&b, "task").await;

    // Cancel a scheduled task from its page, found through the scheduled list.
    let dir = scratch("console-scheduled");
    let request = dir.join("later.json");
    std::fs::write(
        &request,
        r#"{"tasks": [{"taskId": "later", "dueInDays": 3, "payload": {"n": 2}}]}"#,
    )
    .unwrap();
    run_ok(
        Command::new(LIFO)
            .args(["--endpoint-url", &endpoint, "tasks", "create", "--file"])
            .arg(&request),
    );
    b.goto(&format!("{base}/scheduled")).await.unwrap();
    let due = (chrono::Utc::now().date_naive() + chrono::Duration::days(3))
        .format("%Y-%m-%d")
        .to_string();
    b.find(Locator::LinkText(&due))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find(Locator::LinkText("later"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    click(&b, "Cancel").await;
    wait_text(&b, "p.notice", 10, |t| t == "Cancelled.").await;
    assert_eq!(text(&b, "h1 .badge").await, "CANCELLED");

    // Delete a finished task from its page.
    b.goto(&format!("{base}/tasks/console-0")).await.unwrap();
    click(&b, "Delete").await;
    wait_text(&b, "p.notice", 10, |t| t == "Deleted.").await;
    assert!(store.get("console-0").await.unwrap().is_none());

    // Retry every failure of a window whose error starts with a prefix
    // (written while paused, so that the pipeline can't claim them first).
    store.set_paused(true, "test", now_ms()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    failed_task(&store, "failed-2", "HTTP 503: busy").await;
    failed_task(&store, "failed-3", "HTTP 400: bad").await;
    b.goto(&format!("{base}/")).await.unwrap();
    b.find(Locator::Css("input[name=error_prefix]"))
        .await
        .unwrap()
        .send_keys("HTTP 503")
        .await
        .unwrap();
    click(&b, "Retry failed").await;
    wait_text(&b, "p.notice", 40, |t| t == "Retried 1 failed task(s).").await;
    let still = store.get("failed-3").await.unwrap().unwrap();
    assert_eq!(still.task_status, TaskStatus::Failure, "outside the prefix");
    let retried = store.get("failed-2").await.unwrap().unwrap();
    assert_eq!(
        retried.task_status,
        TaskStatus::Pending,
        "retried; runs after resume"
    );
    store.set_paused(false, "test", now_ms()).await.unwrap();
    store.nudge(now_ms()).await.unwrap();

    // A burst of work, for the overview's screenshot (docs/console-overview.png).
    let burst: Vec<Task> = (0..60)
        .map(|i| Task::new_pending(format!("burst-{i}"), payload.clone(), now_ms() - i, 3600, 1))
        .collect();
    store.put_new(&burst).await.unwrap();
    b.goto(&format!("{base}/")).await.unwrap();
    // The wake-up goes through the stream, SNS and Lambda's throttle retries with AWS's timings
    // (1, 2, 4, 8, 16 s apart while the last invocation holds the one slot), and a busy machine
    // slows each hop: a minute covers five retries.
    wait_text(&b, "[data-field=running]", 60, |t| t != "0").await;
    screenshot(&b, "overview").await;
    b.close().await.unwrap();
}

/// What a hostile client or hostile task data tries against the console:
/// an open redirect, windows that overflow, idle and half-open connections,
/// text that reverses itself, ids long enough to squeeze the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_and_task_data_cannot_break_the_console() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_up, _rx, lines) = tokio::task::block_in_place(|| {
        local_up(
            &["--ui", "--ui-listen", "127.0.0.1:0"],
            &[("AWS_REGION", "us-east-1")],
        )
    });
    let url = console_url(&lines);
    let (base, token) = url.split_once("/?token=").unwrap();
    let (base, token) = (base.to_owned(), token.to_owned());
    let endpoint = endpoint_in(&lines);
    let store = lifo_core::Store::new(
        aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(&endpoint).await),
        "QueueTable",
    );
    store.set_paused(true, "test", now_ms()).await.unwrap();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // The token's redirect stays on this origin and keeps the query.
    let r = http
        .get(format!("{base}//evil.example/?token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/evil.example/");
    let r = http
        .get(format!("{base}/tasks?failed=1&token={token}&since=2h"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "/tasks?failed=1&since=2h");
    let cookie = cookie_of(&r);

    // Windows too large are a 400 page naming the input, not a dropped
    // connection (the multiplication used to overflow).
    for since in ["213503982334602d", "18446744073709552s"] {
        let r = http
            .get(format!("{base}/tasks?failed=1&since={since}"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{since}");
        let page = r.text().await.unwrap();
        assert!(
            page.contains(&format!("since: &quot;{since}&quot; is too far back")),
            "{page}"
        );
    }
    let html = http
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_in(&html);
    let r = http
        .post(format!("{base}/retry-failed"))
        .header("cookie", &cookie)
        .header("origin", &base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&since=213503982334602d"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Hostile task data: a payload and an error that reverse the text
    // around them, and an id of 128 characters.
    let long_id = format!("device:{}", "a1b2c3d4".repeat(16));
    let long_id = &long_id[..128];
    let reversing = "invoice \u{202e}fdp.exe\u{202c} paid";
    let payload = serde_json::json!({"name": reversing})
        .as_object()
        .cloned()
        .unwrap();
    store
        .put_new(&[Task::new_pending("rtl".into(), payload, now_ms(), 3600, 1)])
        .await
        .unwrap();
    // A failed task whose error is 20,000 characters (a stack trace, a
    // body echoed back): failed before the long id's, so it is the list's
    // second row.
    let huge = format!("HTTP 500: {}", "at frame::call (frame.rs:1)\n".repeat(720));
    failed_task(&store, "huge-error", &huge).await;
    failed_task(&store, long_id, &format!("HTTP 500: {reversing}")).await;
    let driver = chromedriver().await;
    let profile = scratch("console-hostile");
    let b = browser(&driver, &profile).await;
    b.goto(&url).await.unwrap();
    b.goto(&format!("{base}/tasks/rtl")).await.unwrap();
    let shown = text(&b, "pre.payload").await;
    assert!(
        shown.contains("invoice \\u{202e}fdp.exe\\u{202c} paid"),
        "{shown}"
    );
    assert!(!shown.contains('\u{202e}'));
    b.goto(&format!("{base}/tasks?failed=1&since=1h"))
        .await
        .unwrap();
    assert_eq!(
        text(&b, "table.failed td.error").await,
        "HTTP 500: invoice \\u{202e}fdp.exe\\u{202c} paid"
    );
    // The id wraps; the error column keeps a readable width.
    let widths = b
        .execute(
            "const r = document.querySelector('table.failed tbody tr');
             return [r.cells[0].getBoundingClientRect().width,
                     r.cells[2].getBoundingClientRect().width,
                     document.documentElement.scrollWidth <= window.innerWidth,
                     r.getBoundingClientRect().width];",
            vec![],
        )
        .await
        .unwrap();
    screenshot(&b, "failed-long-id").await;
    let id_px = widths[0].as_f64().unwrap_or_else(|| panic!("{widths}"));
    let error_px = widths[1].as_f64().unwrap_or_else(|| panic!("{widths}"));
    let row_px = widths[3].as_f64().unwrap_or_else(|| panic!("{widths}"));
    assert!(
        id_px <= row_px * 0.45,
        "the id column is {id_px} of {row_px} px"
    );
    assert!(
        error_px >= row_px * 0.35,
        "the error column is {error_px} of {row_px} px"
    );
    assert_eq!(widths[2], true, "no horizontal scroll");
    // Issue 51, item 17: the list shows a long error's start, its title
    // says how long it is, and its task's page shows it whole (the item
    // keeps an error's first MAX_REASON_LEN bytes).
    let stored = &huge[..lifo_core::expr::MAX_REASON_LEN];
    let huge_row = b
        .execute(
            "const r = [...document.querySelectorAll('table.failed tbody tr')]
                 .find(r => r.cells[0].textContent === 'huge-error');
             return [r.cells[2].textContent, r.cells[2].title, r.getBoundingClientRect().height];",
            vec![],
        )
        .await
        .unwrap();
    let shown = huge_row[0].as_str().unwrap_or_else(|| panic!("{huge_row}"));
    let limit = lifo_cli::ui::text::LIST_ERROR_CHARS;
    assert_eq!(shown.chars().count(), limit + 1, "{shown}");
    assert!(shown.ends_with('…') && stored.starts_with(shown.trim_end_matches('…')));
    assert_eq!(
        huge_row[1].as_str(),
        Some(
            format!(
                "{} characters; the task's page shows it whole",
                stored.len()
            )
            .as_str()
        )
    );
    let row_height = huge_row[2].as_f64().unwrap_or_else(|| panic!("{huge_row}"));
    assert!(row_height < 300.0, "the row is {row_height} px tall");
    screenshot(&b, "failed-huge-error").await;
    b.goto(&format!("{base}/tasks/huge-error")).await.unwrap();
    let whole = b
        .execute(
            "return document.querySelector('pre.error').textContent;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(whole.as_str(), Some(stored), "whole on its page");
    b.close().await.unwrap();
    drop(driver);

    // Idle connections: 64 that never send a request hold every slot; a
    // real request waits until the header-read timeout closes them (10 s),
    // then is served.
    drop(http); // its pooled connections would hold slots too
    let addr = base.trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for _ in 0..lifo_cli::ui::serve::MAX_CONNECTIONS {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let mut late = tokio::net::TcpStream::connect(&addr).await.unwrap();
    late.write_all(
        format!("GET /assets/console.css HTTP/1.1\r\nhost: {addr}\r\ncookie: {cookie}\r\nconnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), late.read_to_end(&mut answer))
        .await
        .expect("served once the idle connections were closed")
        .unwrap();
    let waited = started.elapsed();
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let timeout = lifo_cli::ui::serve::HEADER_READ_TIMEOUT;
    assert!(
        waited >= timeout - Duration::from_secs(1) && waited < timeout * 2,
        "served after {waited:?}"
    );
    for mut s in idle {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(timeout + Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("the idle connection was closed")
            .unwrap_or(0);
        assert_eq!(n, 0, "the idle connection was closed without an answer");
    }
}
