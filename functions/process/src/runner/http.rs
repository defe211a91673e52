//! A downstream behind an HTTP endpoint.
//!
//! What it reads of an answer is bounded: the status and headers, then at
//! most [`BODY_LIMIT`] bytes of the body within [`BODY_TIME`]; the
//! connection is dropped after that (a body read to its end within the
//! bound lets the connection be reused). A body that never ends, or
//! trickles, costs one slot for at most `BODY_TIME` and 1 KB of memory.

use super::{RunOutcome, TaskRunner};
use lifo_core::Task;
use lifo_core::clock::SharedClock;
use lifo_lambda::config::ConfigError;
use std::time::{Duration, SystemTime};

/// Most bytes of an answer's body read (the start of an error body goes
/// into `lastError`).
pub const BODY_LIMIT: usize = 1024;
/// Longest time spent reading an answer's body once its status arrived
/// (within the run's own `RUNNER_TIMEOUT_MS`).
pub const BODY_TIME: Duration = Duration::from_secs(1);
/// Longest part of a body or header shown in `lastError`.
const SHOWN: usize = 200;

/// POSTs each task's payload (JSON) to `url`: 2xx → success, 429 / 503 →
/// retry later (after its `Retry-After`, in seconds or as an HTTP date),
/// a redirect → failure (never followed: the POST did not reach the
/// endpoint), anything else or a timeout → failure. Headers `X-Task-Id`
/// and `X-Task-Attempt` let the downstream deduplicate.
#[derive(Debug, Clone)]
pub struct HttpRunner {
    client: reqwest::Client,
    url: String,
    /// The URL's host: the X-Ray subsegment's name.
    host: String,
    max_concurrency: usize,
    timeout: Duration,
    /// Where a `Retry-After` date is read against (the system's time, or a
    /// simulation's).
    clock: SharedClock,
}

impl HttpRunner {
    pub fn new(
        url: String,
        max_concurrency: usize,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::Invalid {
                name: "RUNNER_URL",
                value: url,
                reason: "must start with http:// or https://".into(),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ConfigError::Invalid {
                name: "RUNNER_URL",
                value: url.clone(),
                reason: e.to_string(),
            })?;
        let host = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', '?', '#']).next())
            .map(|authority| authority.rsplit('@').next().unwrap_or(authority).to_owned())
            .unwrap_or_default();
        Ok(Self {
            client,
            url,
            host,
            max_concurrency,
            timeout,
            clock: lifo_core::clock::system(),
        })
    }

    /// The same, reading a `Retry-After` date against `clock`.
    pub fn with_clock(self, clock: SharedClock) -> Self {
        Self { clock, ..self }
    }
}

/// At most [`BODY_LIMIT`] bytes of `r`'s body, read for at most
/// [`BODY_TIME`]; `true` when that was the whole body.
async fn body_prefix(mut r: reqwest::Response) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let read = async {
        loop {
            match r.chunk().await {
                Ok(Some(chunk)) => {
                    let room = BODY_LIMIT - buf.len();
                    buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if chunk.len() > room {
                        return false;
                    }
                }
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    };
    let complete = tokio::time::timeout(BODY_TIME, read).await.unwrap_or(false);
    (buf, complete)
}

/// `s` cut to [`SHOWN`] characters, control characters escaped.
fn shown(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().take(SHOWN) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if s.chars().nth(SHOWN).is_some() {
        out.push('…');
    }
    out
}

/// The rest a `Retry-After` value asks for: delay-seconds (a fraction is
/// accepted), or an HTTP date (a past date asks for none). `None` for a
/// value that is neither, or negative: the queue's own rest applies. The
/// floor and the cap are the rest policy's ([`crate::rest`]).
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(1e9)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

impl TaskRunner for HttpRunner {
    fn capacity(&self) -> usize {
        self.max_concurrency
    }

    fn max_duration(&self) -> Duration {
        self.timeout
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        // One X-Ray subsegment per call (`remote`), flagged by the outcome.
        let mut segment = lifo_lambda::xray::Subsegment::start(&self.host);
        if let Some(s) = &mut segment {
            s.namespace("remote").field(
                "http",
                "request",
                serde_json::json!({"method": "POST", "url": self.url}),
            );
        }
        let outcome = self.call(task).await;
        if let Some(mut s) = segment {
            if let Some(flag) = outcome.xray_flag() {
                s.flag(flag);
            }
            s.end();
        }
        outcome
    }
}

impl HttpRunner {
    /// The runner's clock as a `SystemTime`.
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.clock.now_ms())
    }

    async fn call(&self, task: &Task) -> RunOutcome {
        let response = self
            .client
            .post(&self.url)
            .header("X-Task-Id", &task.task_id)
            .header("X-Task-Attempt", task.attempts.to_string())
            .json(&task.payload)
            .send()
            .await;
        let r = match response {
            Ok(r) => r,
            // The request never reached the downstream: safe to retry.
            Err(e) if e.is_connect() => {
                return RunOutcome::RetryLater(format!(
                    "downstream unreachable: {}",
                    lifo_core::error::chain(&e)
                ));
            }
            Err(e) if e.is_timeout() => {
                return RunOutcome::TimedOut(format!("timed out after {:?}", self.timeout));
            }
            Err(e) => {
                return RunOutcome::Failure(shown(&format!(
                    "request failed: {}",
                    lifo_core::error::chain(&e)
                )));
            }
        };
        let status = r.status().as_u16();
        let header = |name: reqwest::header::HeaderName| {
            r.headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        if r.status().is_success() {
            // Read (a bounded prefix) only so that the connection can be
            // reused; the status decides.
            let _ = body_prefix(r).await;
            return RunOutcome::Success;
        }
        if r.status().is_redirection() {
            let to = header(reqwest::header::LOCATION).map_or_else(
                || "no Location".to_owned(),
                |l| format!("Location {}", shown(&l)),
            );
            return RunOutcome::Failure(format!(
                "HTTP {status} redirect ({to}), not followed: the POST did not reach the endpoint"
            ));
        }
        if matches!(status, 429 | 503) {
            let hint = header(reqwest::header::RETRY_AFTER);
            let _ = body_prefix(r).await;
            return match hint {
                Some(v) => match retry_after(&v, self.now()) {
                    Some(rest) => RunOutcome::RetryAfter(
                        format!("HTTP {status} (Retry-After: {})", shown(&v)),
                        rest,
                    ),
                    None => RunOutcome::RetryLater(format!(
                        "HTTP {status} (Retry-After {} unreadable: the queue's own rest)",
                        shown(&v)
                    )),
                },
                None => RunOutcome::RetryLater(format!("HTTP {status}")),
            };
        }
        let (body, complete) = body_prefix(r).await;
        let text = String::from_utf8_lossy(&body);
        let cut = if complete {
            ""
        } else {
            " (body cut: only the first 1 KB or 1 s is read)"
        };
        RunOutcome::Failure(format!("HTTP {status}: {}{cut}", shown(&text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::new_pending("t".into(), lifo_core::Payload::new(), 0, 60, 1)
    }

    /// A one-shot HTTP server on loopback answering with `status`.
    async fn serve_once(status: u16) -> String {
        serve_once_with(status, "").await
    }

    /// As [`serve_once`], with `headers` (`name: value\r\n` lines).
    async fn serve_once_with(status: u16, headers: &'static str) -> String {
        serve_reply(status, headers, "nope").await
    }

    /// A one-shot server answering `status`, `headers` and `body`.
    async fn serve_reply(status: u16, headers: &'static str, body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 {status} X\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
            }
        });
        format!("http://{addr}/run")
    }

    #[tokio::test]
    async fn http_runner_maps_status_codes() {
        for (status, expected) in [
            (200, RunOutcome::Success),
            (204, RunOutcome::Success),
            (429, RunOutcome::RetryLater("HTTP 429".into())),
            (503, RunOutcome::RetryLater("HTTP 503".into())),
            (500, RunOutcome::Failure("HTTP 500: nope".into())),
            (400, RunOutcome::Failure("HTTP 400: nope".into())),
        ] {
            let url = serve_once(status).await;
            let r = HttpRunner::new(url, 1, Duration::from_secs(5)).unwrap();
            assert_eq!(r.run(&task()).await, expected, "status {status}");
        }
    }

    #[tokio::test]
    async fn http_runner_retries_later_when_unreachable() {
        // Bind then drop: nothing listens on this port any more.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = HttpRunner::new(
            format!("http://127.0.0.1:{port}/"),
            1,
            Duration::from_secs(2),
        )
        .unwrap();
        assert!(
            matches!(r.run(&task()).await, RunOutcome::RetryLater(m) if m.starts_with("downstream unreachable"))
        );
    }

    #[tokio::test]
    async fn a_busy_downstreams_retry_after_is_honoured() {
        let url = serve_once_with(429, "retry-after: 30\r\n").await;
        let r = HttpRunner::new(url, 1, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r.run(&task()).await,
            RunOutcome::RetryAfter("HTTP 429 (Retry-After: 30)".into(), Duration::from_secs(30))
        );
    }

    /// A `Retry-After` date is read against the runner's clock: a simulated
    /// one as well as the system's.
    #[tokio::test]
    async fn a_retry_after_date_is_read_against_the_runners_clock() {
        let url = serve_once_with(503, "retry-after: Sun, 06 Nov 1994 08:49:37 GMT\r\n").await;
        // 30 s before the date, by a clock that then runs on.
        let clock = std::sync::Arc::new(lifo_core::clock::TokioClock::starting_at(784_111_747_000));
        let r = HttpRunner::new(url, 1, Duration::from_secs(5))
            .unwrap()
            .with_clock(clock);
        let outcome = r.run(&task()).await;
        let RunOutcome::RetryAfter(reason, rest) = &outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(
            reason,
            "HTTP 503 (Retry-After: Sun, 06 Nov 1994 08:49:37 GMT)"
        );
        assert!(
            *rest > Duration::from_secs(25) && *rest <= Duration::from_secs(30),
            "{rest:?}"
        );
    }

    #[test]
    fn retry_after_in_seconds_as_a_date_or_unreadable() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        let secs = |v| retry_after(v, now);
        assert_eq!(secs("30"), Some(Duration::from_secs(30)));
        assert_eq!(secs(" 0 "), Some(Duration::ZERO));
        assert_eq!(secs("0.001"), Some(Duration::from_millis(1)));
        assert_eq!(
            secs("99999999999999999999"),
            Some(Duration::from_secs(1_000_000_000))
        );
        // IMF-fixdate, RFC 850 and asctime, 60 s after `now`; a past date.
        for date in [
            "Sun, 06 Nov 1994 08:50:37 GMT",
            "Sunday, 06-Nov-94 08:50:37 GMT",
            "Sun Nov  6 08:50:37 1994",
        ] {
            assert_eq!(secs(date), Some(Duration::from_secs(60)), "{date}");
        }
        assert_eq!(secs("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO));
        for bad in ["-5", "soon", "", "NaN", "inf", "1e400x"] {
            assert_eq!(secs(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_redirect_is_a_failed_run_naming_where_it_pointed() {
        let url = serve_once_with(302, "location: http://elsewhere.example/login\r\n").await;
        let r = HttpRunner::new(url, 1, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r.run(&task()).await,
            RunOutcome::Failure(
                "HTTP 302 redirect (Location http://elsewhere.example/login), not followed: \
                 the POST did not reach the endpoint"
                    .into()
            )
        );
    }

    /// Answers `head`, then writes `chunk` every `every` without end.
    async fn serve_endless(head: &'static str, chunk: &'static str, every: Duration) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(head.as_bytes()).await;
                let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                while sock.write_all(framed.as_bytes()).await.is_ok() {
                    if !every.is_zero() {
                        tokio::time::sleep(every).await;
                    }
                }
            }
        });
        format!("http://{addr}/run")
    }

    const CHUNKED_500: &str = "HTTP/1.1 500 X\r\ntransfer-encoding: chunked\r\n\r\n";

    #[tokio::test]
    async fn an_endless_error_body_is_cut_at_the_bound() {
        let url = serve_endless(CHUNKED_500, "error error error ", Duration::ZERO).await;
        let r = HttpRunner::new(url, 1, Duration::from_secs(30)).unwrap();
        let started = std::time::Instant::now();
        let outcome = r.run(&task()).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let RunOutcome::Failure(why) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(why.starts_with("HTTP 500: error error error "), "{why}");
        assert!(
            why.ends_with("… (body cut: only the first 1 KB or 1 s is read)"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn a_trickling_body_costs_at_most_the_body_time() {
        let url = serve_endless(CHUNKED_500, "e", Duration::from_millis(50)).await;
        let r = HttpRunner::new(url, 1, Duration::from_secs(30)).unwrap();
        let started = std::time::Instant::now();
        let outcome = r.run(&task()).await;
        let took = started.elapsed();
        assert!(took >= BODY_TIME && took < BODY_TIME * 3, "{took:?}");
        assert!(
            matches!(&outcome, RunOutcome::Failure(w) if w.starts_with("HTTP 500: eeee") && w.contains("body cut")),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn control_characters_in_a_body_are_escaped() {
        let url = serve_reply(400, "", "line1\nline2\u{1b}[31m").await;
        let r = HttpRunner::new(url, 1, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r.run(&task()).await,
            RunOutcome::Failure("HTTP 400: line1\\nline2\\u{1b}[31m".into())
        );
    }
}
