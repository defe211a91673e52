//! What runs a task: the throughput-limited downstream behind the queue.
//!
//! A team plugs its own work in here: a worker Lambda in any language
//! ([`lambda::LambdaRunner`], `RUNNER=lambda`), an HTTP endpoint
//! ([`http::HttpRunner`], `RUNNER=http`), or Rust code of its own (implement
//! [`TaskRunner`] and call [`crate::serve`]). [`simulated::SimulatedRunner`]
//! is the reference demo's legacy system.

pub mod downstream;
pub mod http;
pub mod lambda;
pub mod limit;
pub mod simulated;
pub mod slots;

pub use http::HttpRunner;
pub use lambda::{LambdaRunner, WorkerRequest};
pub use simulated::SimulatedRunner;
pub use slots::{Concurrency, Limited, Slots};

use lifo_core::Task;
use lifo_lambda::config::{self, ConfigError, Source};
use std::future::Future;
use std::time::Duration;

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Success,
    /// The task failed; the reason is recorded on the item. With attempts
    /// left it is put back, resting first (`RetryBackoffSeconds`, doubling
    /// each attempt); else it ends FAILURE.
    Failure(String),
    /// The downstream is busy: put the task back, the attempt given back,
    /// resting `RetryBackoffSeconds` before it is claimable again.
    RetryLater(String),
    /// As [`RunOutcome::RetryLater`], resting as long as the downstream
    /// asked (`Retry-After`).
    RetryAfter(String, Duration),
    /// No answer in time: a failed run (the downstream may have run it),
    /// and to the adaptive limit a sign of overload, as a refusal is.
    TimedOut(String),
}

impl RunOutcome {
    /// The X-Ray flag a run's subsegment gets: a refusal is a throttle, a
    /// failure an error, a success none.
    pub fn xray_flag(&self) -> Option<&'static str> {
        match self {
            RunOutcome::Success => None,
            RunOutcome::RetryLater(_) | RunOutcome::RetryAfter(..) => Some("throttle"),
            RunOutcome::Failure(_) | RunOutcome::TimedOut(_) => Some("error"),
        }
    }

    /// Why it did not succeed (empty for a success).
    pub fn reason(&self) -> &str {
        match self {
            RunOutcome::Success => "",
            RunOutcome::Failure(r)
            | RunOutcome::RetryLater(r)
            | RunOutcome::RetryAfter(r, _)
            | RunOutcome::TimedOut(r) => r,
        }
    }
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

/// The runner chosen by configuration (`RUNNER=simulated|http|lambda`).
#[derive(Debug)]
pub enum AnyRunner {
    Simulated(SimulatedRunner),
    Http(HttpRunner),
    Lambda(LambdaRunner),
}

impl AnyRunner {
    /// `RUNNER`, `RUNNER_MAX_CONCURRENCY`, `RUNNER_LATENCY_MS`,
    /// `RUNNER_FAILURE_RATE`, `RUNNER_BUSY_RATE`, `RUNNER_URL`,
    /// `RUNNER_TIMEOUT_MS`, `WORKER_FUNCTION_ARN`. `aws`: the SDK
    /// configuration the lambda runner invokes the worker with.
    pub fn from_source(
        src: &impl Source,
        aws: &aws_config::SdkConfig,
    ) -> Result<Self, ConfigError> {
        let capacity = config::parsed(src, "RUNNER_MAX_CONCURRENCY", 3usize, 1..=1000)?;
        match src.get("RUNNER").unwrap_or_default().trim() {
            "" | "simulated" => Ok(Self::Simulated(SimulatedRunner::new(
                capacity,
                config::millis(
                    src,
                    "RUNNER_LATENCY_MS",
                    15_000,
                    config::bounds::RUNNER_LATENCY_MS,
                )?,
                config::parsed(src, "RUNNER_FAILURE_RATE", 0.0f64, 0.0..=1.0)?,
                config::parsed(src, "RUNNER_BUSY_RATE", 0.0f64, 0.0..=1.0)?,
            ))),
            "http" => Ok(Self::Http(HttpRunner::new(
                config::required(src, "RUNNER_URL")?,
                capacity,
                config::millis(src, "RUNNER_TIMEOUT_MS", 10_000, 100..=240_000)?,
            )?)),
            "lambda" => Ok(Self::Lambda(LambdaRunner::new(
                aws,
                config::required(src, "WORKER_FUNCTION_ARN")?,
                capacity,
                config::millis(src, "RUNNER_TIMEOUT_MS", 10_000, 100..=240_000)?,
            ))),
            other => Err(ConfigError::Invalid {
                name: "RUNNER",
                value: other.into(),
                reason: "must be simulated, http or lambda".into(),
            }),
        }
    }
}

impl TaskRunner for AnyRunner {
    fn capacity(&self) -> usize {
        match self {
            Self::Simulated(r) => r.capacity(),
            Self::Http(r) => r.capacity(),
            Self::Lambda(r) => r.capacity(),
        }
    }

    fn max_duration(&self) -> Duration {
        match self {
            Self::Simulated(r) => r.max_duration(),
            Self::Http(r) => r.max_duration(),
            Self::Lambda(r) => r.max_duration(),
        }
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        match self {
            Self::Simulated(r) => r.run(task).await,
            Self::Http(r) => r.run(task).await,
            Self::Lambda(r) => r.run(task).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    impl AnyRunner {
        fn from_source_for_test(src: &HashMap<String, String>) -> Result<Self, ConfigError> {
            let aws = aws_config::SdkConfig::builder()
                .behavior_version(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new("us-east-1"))
                .build();
            AnyRunner::from_source(src, &aws)
        }
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
            matches!(AnyRunner::from_source_for_test(&src(&[])), Ok(AnyRunner::Simulated(r)) if r.max_concurrency == 3)
        );
        assert_eq!(
            AnyRunner::from_source_for_test(&src(&[("RUNNER", "http")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER_URL is required"
        );
        assert_eq!(
            AnyRunner::from_source_for_test(&src(&[("RUNNER", "http"), ("RUNNER_URL", "ftp://x")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER_URL=\"ftp://x\" is invalid: must start with http:// or https://"
        );
        assert_eq!(
            AnyRunner::from_source_for_test(&src(&[("RUNNER", "magic")]))
                .unwrap_err()
                .to_string(),
            "environment variable RUNNER=\"magic\" is invalid: must be simulated, http or lambda"
        );
        assert_eq!(
            AnyRunner::from_source_for_test(&src(&[("RUNNER", "lambda")]))
                .unwrap_err()
                .to_string(),
            "environment variable WORKER_FUNCTION_ARN is required"
        );
        assert!(matches!(
            AnyRunner::from_source_for_test(&src(&[
                ("RUNNER", "lambda"),
                ("WORKER_FUNCTION_ARN", "arn:aws:lambda:us-east-1:123456789012:function:w"),
                ("RUNNER_TIMEOUT_MS", "30000"),
            ])),
            Ok(AnyRunner::Lambda(r)) if r.max_duration() == Duration::from_secs(30)
        ));
    }
}
