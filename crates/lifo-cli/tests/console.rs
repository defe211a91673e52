//! The console (`lifo local up --ui`) in a real browser: Debian's chromium
//! driven through chromedriver with fantoccini, against the local stack and
//! its pipeline. Screenshots go to target/console-screenshots/.
//!
//! Also, with plain HTTP requests, what the browser never sends: no token,
//! another Host, another Origin, a POST without the CSRF token.

mod common;
use common::*;

use fantoccini::{Client, ClientBuilder, Locator};
use lifo_core::{Step, Task, TaskStatus, Transition, now_ms};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Task data that would run if it were ever markup.
const HOSTILE: &str =
    "\"><img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>";

/// chromedriver on a free port, killed (by its pid) when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn chromedriver() -> Driver {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian's chromium-driver; scripts/setup-tools installs it)");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let started = Instant::now();
    loop {
        if let Ok(r) = reqwest::get(format!("{}/status", driver.url)).await
            && r.status().is_success()
        {
            return driver;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    // The real binary: /usr/bin/chromium is Debian's launcher script.
    let binary = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("chromium");
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": binary,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", format!("--user-data-dir={}", profile.display()),
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run",
            ],
        },
        "unhandledPromptBehavior": "ignore",
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a chromium session")
}

/// The text of the first element matching `css`.
async fn text(b: &Client, css: &str) -> String {
    b.find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits up to `secs` for `css`'s text to satisfy `ok`; returns it.
async fn wait_text(b: &Client, css: &str, secs: u64, ok: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let t = match b.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if ok(&t) {
            return t;
        }
        assert!(Instant::now() < until, "{css}: still {t:?} after {secs} s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn screenshot(b: &Client, name: &str) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.png")),
        b.screenshot().await.unwrap(),
    )
    .unwrap();
}

/// Clicks the submit button whose text is `label`, accepting its confirm.
async fn click(b: &Client, label: &str) {
    let button = b
        .find(Locator::XPath(&format!(
            "//button[normalize-space()='{label}']"
        )))
        .await
        .unwrap_or_else(|e| panic!("no button {label}: {e}"));
    button.click().await.unwrap();
    // Buttons with data-confirm open a dialog; the others don't.
    let _ = b.accept_alert().await;
}

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
        attempts: 1,
        lease_until: now + 60_000,
        max_attempts: 3,
        ..Step::default()
    };
    let claimed = store
        .apply(id, Transition::Claim, TaskStatus::Pending, &claim)
        .await
        .unwrap();
    let fail = Step {
        now_ms: now_ms(),
        token: claimed.token,
        attempts: 1,
        reason: error,
        history: &claimed.history,
        ..Step::default()
    };
    store
        .record(id, Transition::Fail, TaskStatus::Taken, &fail)
        .await
        .unwrap();
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
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
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
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
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
    let request = scratch("console-scheduled").join("later.json");
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
    wait_text(&b, "[data-field=running]", 10, |t| t != "0").await;
    screenshot(&b, "overview").await;
    b.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}
