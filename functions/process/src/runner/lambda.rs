//! A worker Lambda, in any language: process invokes it synchronously
//! (Invoke, `RequestResponse`) once per task.
//!
//! The request is a [`WorkerRequest`] (`events/worker-request.json`). The
//! answer maps as follows:
//!
//! | the worker | outcome |
//! |---|---|
//! | returns anything (`{"outcome": "success"}` or any other value) | SUCCESS |
//! | returns `{"outcome": "retry-later", "reason"?: …, "retryAfterSeconds"?: n}` | retry later: put back, attempt given back, resting `n` s (else `RetryBackoffSeconds`) |
//! | returns `{"outcome": …}` with anything else | a failed run, naming it |
//! | raises (`X-Amz-Function-Error: Unhandled`, or `Handled`) | a failed run: `lastError` = `errorType: errorMessage` (first 400 bytes) |
//! | times out (`Sandbox.Timedout`) | a failed run |
//!
//! Lambda's own refusals never ran the worker, so they burn no attempt:
//! throttling (429 `TooManyRequestsException`, honouring its
//! `retryAfterSeconds`), a function not ready (`ResourceNotReadyException`,
//! `ResourceConflictException` while it updates, ENI and EC2 throttles,
//! SnapStart not ready) and Lambda's 5xx (`ServiceException`) are retry
//! later; anything else Lambda refuses (no such function, payload too
//! large, a KMS or permissions problem) is a failed run, with Lambda's
//! error code. A request that never reached Lambda (a connection refused)
//! is retry later; one that got no answer within the runner's
//! `max_duration` is a failed run (the worker may have run).
//!
//! The SDK's own retries are off: a retried synchronous invoke could run
//! the worker twice; the queue retries instead (attempts and rests).

use super::{RunOutcome, TaskRunner};
use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_lambda::operation::invoke::InvokeError;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use lifo_core::Task;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// Longest part of a worker's error message kept in `lastError`.
const ERROR_SNIPPET: usize = 400;

/// What the worker receives for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRequest {
    pub task_id: String,
    /// This run's attempt, from 1 (a retry after "retry later" keeps the
    /// number; a retry after a failure adds one).
    pub attempt: u32,
    /// The producer's payload, as given.
    pub payload: Map<String, Value>,
    /// When the task was created, epoch ms.
    pub task_created: u64,
    /// When the task would have been shed, epoch s: a worker may refuse
    /// work that is too old for it.
    pub expires_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

impl WorkerRequest {
    pub fn of(task: &Task) -> Self {
        Self {
            task_id: task.task_id.clone(),
            attempt: task.attempts,
            payload: task.payload.clone(),
            task_created: task.task_created,
            expires_at: task.expires_at,
            user_id: task.user_id.clone(),
        }
    }
}

/// What a worker may answer instead of a plain result.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerAnswer {
    outcome: Option<String>,
    reason: Option<String>,
    retry_after_seconds: Option<f64>,
}

/// Invokes a worker function per task.
#[derive(Debug, Clone)]
pub struct LambdaRunner {
    client: aws_sdk_lambda::Client,
    function: String,
    max_concurrency: usize,
    timeout: Duration,
}

impl LambdaRunner {
    /// `config`: the SDK configuration (region, credentials, endpoint);
    /// `function`: the worker's name or ARN; `timeout`: the longest a run
    /// may take (at least the worker's own Timeout), which bounds the
    /// invocation.
    pub fn new(
        config: &aws_config::SdkConfig,
        function: String,
        max_concurrency: usize,
        timeout: Duration,
    ) -> Self {
        let conf = aws_sdk_lambda::config::Builder::from(config)
            .retry_config(aws_sdk_lambda::config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
                    .operation_timeout(timeout)
                    .build(),
            )
            .build();
        Self::with_client(
            aws_sdk_lambda::Client::from_conf(conf),
            function,
            max_concurrency,
            timeout,
        )
    }

    /// With a client built elsewhere (tests: a mock, a local Invoke API).
    pub fn with_client(
        client: aws_sdk_lambda::Client,
        function: String,
        max_concurrency: usize,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            function,
            max_concurrency,
            timeout,
        }
    }
}

fn snippet(s: &str) -> String {
    let mut end = s.len().min(ERROR_SNIPPET);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The outcome of a worker that answered (HTTP 200).
fn answered(function_error: Option<&str>, body: &[u8]) -> RunOutcome {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(kind) = function_error {
        let field = |k: &str| {
            value
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (error_type, message) = (field("errorType"), field("errorMessage"));
        if error_type == "Sandbox.Timedout" || message.contains("Task timed out after") {
            return RunOutcome::Failure(format!("worker timed out: {}", snippet(&message)));
        }
        let error_type = if error_type.is_empty() {
            format!("{kind} error")
        } else {
            error_type
        };
        return RunOutcome::Failure(snippet(&format!("{error_type}: {message}")));
    }
    let answer = value
        .filter(Value::is_object)
        .and_then(|v| serde_json::from_value::<WorkerAnswer>(v).ok());
    match answer.as_ref().and_then(|a| a.outcome.as_deref()) {
        None | Some("success") => RunOutcome::Success,
        Some("retry-later") => {
            let reason = answer
                .as_ref()
                .and_then(|a| a.reason.clone())
                .unwrap_or_else(|| "worker asked to retry later".to_owned());
            match answer
                .and_then(|a| a.retry_after_seconds)
                .filter(|s| s.is_finite() && *s > 0.0)
            {
                Some(s) => RunOutcome::RetryAfter(reason, Duration::from_secs_f64(s.min(3600.0))),
                None => RunOutcome::RetryLater(reason),
            }
        }
        Some(other) => RunOutcome::Failure(snippet(&format!(
            "worker answered outcome {other:?}; expected \"success\" or \"retry-later\""
        ))),
    }
}

/// The outcome of an invocation Lambda refused (the worker did not run).
fn refused(err: &InvokeError) -> RunOutcome {
    // The modeled error's Display names it and carries its message; an
    // error the SDK does not model shows its code.
    let shown = err.to_string();
    let why = match err.code() {
        Some(code) if !shown.contains(code) => format!("Lambda {code}: {shown}"),
        _ => format!("Lambda {shown}"),
    };
    match err {
        InvokeError::TooManyRequestsException(e) => {
            match e
                .retry_after_seconds()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
            {
                Some(s) => RunOutcome::RetryAfter(why, Duration::from_secs_f64(s.min(3600.0))),
                None => RunOutcome::RetryLater(why),
            }
        }
        InvokeError::ResourceNotReadyException(_)
        | InvokeError::ResourceConflictException(_)
        | InvokeError::ServiceException(_)
        | InvokeError::Ec2ThrottledException(_)
        | InvokeError::EniLimitReachedException(_)
        | InvokeError::SnapStartNotReadyException(_)
        | InvokeError::SnapStartTimeoutException(_) => RunOutcome::RetryLater(why),
        _ => RunOutcome::Failure(snippet(&why)),
    }
}

impl TaskRunner for LambdaRunner {
    fn capacity(&self) -> usize {
        self.max_concurrency
    }

    fn max_duration(&self) -> Duration {
        self.timeout
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        let request = match serde_json::to_vec(&WorkerRequest::of(task)) {
            Ok(r) => r,
            Err(e) => return RunOutcome::Failure(format!("request not serializable: {e}")),
        };
        let result = self
            .client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(request))
            .send()
            .await;
        match result {
            Ok(out) => answered(
                out.function_error(),
                out.payload().map(Blob::as_ref).unwrap_or_default(),
            ),
            Err(SdkError::ServiceError(e)) => refused(e.err()),
            Err(SdkError::TimeoutError(_)) => RunOutcome::Failure(format!(
                "no answer from the worker within {:?}",
                self.timeout
            )),
            // Never sent: the worker did not run.
            Err(SdkError::DispatchFailure(e)) if !e.is_timeout() => {
                let why = e
                    .as_connector_error()
                    .map_or_else(|| format!("{e:?}"), |c| lifo_core::error::chain(c));
                RunOutcome::RetryLater(format!("Lambda unreachable: {why}"))
            }
            Err(e) => RunOutcome::Failure(snippet(&format!(
                "invoking the worker failed: {}",
                lifo_core::error::chain(&e)
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
