//! The console test's browser: chromedriver on a free port, a headless
//! chromium session through fantoccini, and the few moves the test makes.

use fantoccini::{Client, ClientBuilder, Locator};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// chromedriver on a free port, killed (by its pid) when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    /// Stops chromedriver and every browser it started: they share its
    /// process group (a test that panics before closing its session would
    /// otherwise leave chromium running).
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals that process
            // group, which chromedriver leads (process_group(0) at spawn).
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
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

pub async fn chromedriver() -> Driver {
    let port = free_port();
    use std::os::unix::process::CommandExt;
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .process_group(0)
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

pub async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
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
pub async fn text(b: &Client, css: &str) -> String {
    b.find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits up to `secs` for `css`'s text to satisfy `ok`; returns it.
pub async fn wait_text(b: &Client, css: &str, secs: u64, ok: impl Fn(&str) -> bool) -> String {
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

pub async fn screenshot(b: &Client, name: &str) {
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
pub async fn click(b: &Client, label: &str) {
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
