//! What runs a task: the throughput-limited downstream behind the queue.

use lifo_core::Task;
use lifo_core::config::{self, ConfigError, Source};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Success,
    /// The task failed; the reason is recorded on the item.
    Failure(String),
    /// The downstream is busy: put the task back, claimable again.
    RetryLater(String),
}

/// A downstream that runs tasks.
pub trait TaskRunner: Send + Sync + 'static {
    /// Tasks it can run at once; the processor never has more in flight, so
    /// it never claims a task only to bounce it.
    fn capacity(&self) -> usize;
    /// Longest one run may take; the processor stops claiming when a run
    /// started now could end past the invocation deadline.
    fn max_duration(&self) -> Duration;
    fn run(&self, task: &Task) -> impl Future<Output = RunOutcome> + Send;
}

/// A simulated legacy system: at most `max_concurrency` tasks at once (more
/// are answered "busy"), each taking `latency`, failing with probability
/// `failure_rate` and answering "busy" with probability `busy_rate`.
#[derive(Debug)]
pub struct SimulatedRunner {
    pub max_concurrency: usize,
    pub latency: Duration,
    pub failure_rate: f64,
    pub busy_rate: f64,
    in_flight: AtomicUsize,
}

impl SimulatedRunner {
    pub fn new(
        max_concurrency: usize,
        latency: Duration,
        failure_rate: f64,
        busy_rate: f64,
    ) -> Self {
        Self {
            max_concurrency,
            latency,
            failure_rate,
            busy_rate,
            in_flight: AtomicUsize::new(0),
        }
    }
}

struct Slot<'a>(&'a AtomicUsize);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl TaskRunner for SimulatedRunner {
    fn capacity(&self) -> usize {
        self.max_concurrency
    }

    fn max_duration(&self) -> Duration {
        self.latency
    }

    async fn run(&self, _task: &Task) -> RunOutcome {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _slot = Slot(&self.in_flight);
        if before >= self.max_concurrency {
            return RunOutcome::RetryLater(format!("busy: {} tasks already running", before));
        }
        if fastrand::f64() < self.busy_rate {
            return RunOutcome::RetryLater("busy: downstream asked to retry later".into());
        }
        tokio::time::sleep(self.latency).await;
        if fastrand::f64() < self.failure_rate {
            return RunOutcome::Failure("simulated failure".into());
        }
        RunOutcome::Success
    }
}

/// POSTs each task's payload (JSON) to `url`: 2xx → success, 429 / 503 →
/// retry later, anything else or a timeout → failure. Headers `X-Task-Id` and
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
                RunOutcome::RetryLater(format!("HTTP {}", r.status().as_u16()))
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

/// The runner chosen by configuration (`RUNNER=simulated|http`).
#[derive(Debug)]
pub enum AnyRunner {
    Simulated(SimulatedRunner),
    Http(HttpRunner),
}

impl AnyRunner {
    /// `RUNNER`, `RUNNER_MAX_CONCURRENCY`, `RUNNER_LATENCY_MS`,
    /// `RUNNER_FAILURE_RATE`, `RUNNER_BUSY_RATE`, `RUNNER_URL`, `RUNNER_TIMEOUT_MS`.
    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        let capacity = config::parsed(src, "RUNNER_MAX_CONCURRENCY", 3usize, 1..=1000)?;
        match src.get("RUNNER").unwrap_or_default().trim() {
            "" | "simulated" => Ok(Self::Simulated(SimulatedRunner::new(
                capacity,
                config::millis(src, "RUNNER_LATENCY_MS", 15_000, 0..=240_000)?,
                config::parsed(src, "RUNNER_FAILURE_RATE", 0.0f64, 0.0..=1.0)?,
                config::parsed(src, "RUNNER_BUSY_RATE", 0.0f64, 0.0..=1.0)?,
            ))),
            "http" => Ok(Self::Http(HttpRunner::new(
                config::required(src, "RUNNER_URL")?,
                capacity,
                config::millis(src, "RUNNER_TIMEOUT_MS", 10_000, 100..=240_000)?,
            )?)),
            other => Err(ConfigError::Invalid {
                name: "RUNNER",
                value: other.into(),
                reason: "must be simulated or http".into(),
            }),
        }
    }
}

impl TaskRunner for AnyRunner {
    fn capacity(&self) -> usize {
        match self {
            Self::Simulated(r) => r.capacity(),
            Self::Http(r) => r.capacity(),
        }
    }

    fn max_duration(&self) -> Duration {
        match self {
            Self::Simulated(r) => r.max_duration(),
            Self::Http(r) => r.max_duration(),
        }
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        match self {
            Self::Simulated(r) => r.run(task).await,
            Self::Http(r) => r.run(task).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn task() -> Task {
        Task::new_pending("t".into(), Default::default(), 0, 60, 1)
    }

    #[tokio::test]
    async fn simulated_runner_answers_busy_beyond_its_capacity() {
        let r = std::sync::Arc::new(SimulatedRunner::new(2, Duration::from_millis(50), 0.0, 0.0));
        let t = task();
        let outs = futures::future::join_all((0..3).map(|_| r.run(&t))).await;
        assert_eq!(
            outs.iter().filter(|o| **o == RunOutcome::Success).count(),
            2
        );
        assert!(matches!(outs[2], RunOutcome::RetryLater(ref m) if m.starts_with("busy")));
        // slots are released afterwards
        assert_eq!(r.run(&t).await, RunOutcome::Success);
    }

    #[tokio::test]
    async fn simulated_failure_and_busy_rates_apply() {
        let fail = SimulatedRunner::new(1, Duration::ZERO, 1.0, 0.0);
        assert_eq!(
            fail.run(&task()).await,
            RunOutcome::Failure("simulated failure".into())
        );
        let busy = SimulatedRunner::new(1, Duration::ZERO, 0.0, 1.0);
        assert!(matches!(busy.run(&task()).await, RunOutcome::RetryLater(_)));
    }

    #[test]
    fn runner_config_is_validated() {
        let src = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(
            matches!(AnyRunner::from_source(&src(&[])), Ok(AnyRunner::Simulated(r)) if r.max_concurrency == 3)
        );
        assert_eq!(
            AnyRunner::from_source(&src(&[("RUNNER", "http")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER_URL is required"
        );
        assert_eq!(
            AnyRunner::from_source(&src(&[("RUNNER", "http"), ("RUNNER_URL", "ftp://x")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER_URL=\"ftp://x\" is invalid: must start with http:// or https://"
        );
        assert_eq!(
            AnyRunner::from_source(&src(&[("RUNNER", "magic")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER=\"magic\" is invalid: must be simulated or http"
        );
    }

    /// A one-shot HTTP server on loopback answering with `status`.
    async fn serve_once(status: u16) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let body = "nope";
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
}
