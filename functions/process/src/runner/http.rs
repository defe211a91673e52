//! A downstream behind an HTTP endpoint.

use super::{RunOutcome, TaskRunner};
use lifo_core::Task;
use lifo_core::config::ConfigError;
use std::time::Duration;

/// POSTs each task's payload (JSON) to `url`: 2xx → success, 429 / 503 →
/// retry later (after its `Retry-After`, if it gives one in seconds),
/// anything else or a timeout → failure. Headers `X-Task-Id` and
/// `X-Task-Attempt` let the downstream deduplicate.
#[derive(Debug, Clone)]
pub struct HttpRunner {
    client: reqwest::Client,
    url: String,
    max_concurrency: usize,
    timeout: Duration,
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
            .build()
            .map_err(|e| ConfigError::Invalid {
                name: "RUNNER_URL",
                value: url.clone(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            client,
            url,
            max_concurrency,
            timeout,
        })
    }
}

impl TaskRunner for HttpRunner {
    fn capacity(&self) -> usize {
        self.max_concurrency
    }

    fn max_duration(&self) -> Duration {
        self.timeout
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        let response = self
            .client
            .post(&self.url)
            .header("X-Task-Id", &task.task_id)
            .header("X-Task-Attempt", task.attempts.to_string())
            .json(&task.payload)
            .send()
            .await;
        match response {
            Ok(r) if r.status().is_success() => RunOutcome::Success,
            Ok(r) if matches!(r.status().as_u16(), 429 | 503) => {
                let why = format!("HTTP {}", r.status().as_u16());
                // Retry-After in seconds (the HTTP-date form is rare for
                // APIs; it falls back to RetryBackoffSeconds).
                match r
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                {
                    Some(s) => RunOutcome::RetryAfter(why, Duration::from_secs(s.min(3600))),
                    None => RunOutcome::RetryLater(why),
                }
            }
            Ok(r) => {
                let status = r.status().as_u16();
                let body = r.text().await.unwrap_or_default();
                let snippet: String = body.chars().take(200).collect();
                RunOutcome::Failure(format!("HTTP {status}: {snippet}"))
            }
            // The request never reached the downstream: safe to retry.
            Err(e) if e.is_connect() => {
                RunOutcome::RetryLater(format!("downstream unreachable: {e}"))
            }
            Err(e) if e.is_timeout() => {
                RunOutcome::Failure(format!("timed out after {:?}", self.timeout))
            }
            Err(e) => RunOutcome::Failure(format!("request failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::new_pending("t".into(), Default::default(), 0, 60, 1)
    }

    /// A one-shot HTTP server on loopback answering with `status`.
    async fn serve_once(status: u16) -> String {
        serve_once_with(status, "").await
    }

    /// As [`serve_once`], with `headers` (`name: value\r\n` lines).
    async fn serve_once_with(status: u16, headers: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let body = "nope";
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
            RunOutcome::RetryAfter("HTTP 429".into(), Duration::from_secs(30))
        );
    }
}
