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
//! A refusal whose body the SDK cannot read (no error code) is mapped by
//! its HTTP status: 429 and 5xx are retry later, anything else a failed run
//! that names the status.
//!
//! At most [`ANSWER_LIMIT`] bytes of an answer are read: an answer that
//! goes on past it is not read further (the connection is dropped). A
//! worker's result that long is a success; its error, a failed run that
//! says so.
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
use serde_json::Value;
use std::time::Duration;

/// Longest part of a worker's error message kept in `lastError`.
const ERROR_SNIPPET: usize = 400;

/// Most bytes of an answer read: an error's type and message, or a
/// result's `outcome`, fit many times over.
pub const ANSWER_LIMIT: usize = 64 * 1024;

/// What the worker receives for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRequest {
    pub task_id: String,
    /// This run's attempt, from 1 (a retry after "retry later" keeps the
    /// number; a retry after a failure adds one).
    pub attempt: u32,
    /// The producer's payload, as given (its numbers as written).
    pub payload: lifo_core::Payload,
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
            .interceptor(lifo_lambda::bounded::BoundedAnswers::new(ANSWER_LIMIT))
            .interceptor(lifo_lambda::xray::SdkSubsegments::lambda(&function))
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

/// The start of a raw answer, as text: control characters escaped.
fn shown(body: &[u8]) -> String {
    if body.is_empty() {
        return "(empty)".to_owned();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let mut out = String::new();
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if body.len() > 200 {
        out.push('…');
    }
    out
}

/// A refusal known only by its HTTP status: 429 and 5xx never ran the
/// worker and are retry later; anything else is a failed run.
fn by_status(status: u16, why: String) -> RunOutcome {
    if status == 429 || (500..600).contains(&status) {
        RunOutcome::RetryLater(why)
    } else {
        RunOutcome::Failure(snippet(&why))
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
            return RunOutcome::TimedOut(format!("worker timed out: {}", snippet(&message)));
        }
        if error_type.is_empty() && message.is_empty() {
            return RunOutcome::Failure(format!(
                "{kind} error, and its answer is not Lambda's error JSON: {}",
                shown(body)
            ));
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
                .filter(|s| s.is_finite() && *s >= 0.0)
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

/// The outcome of an invocation Lambda refused (the worker did not run),
/// answered with HTTP `status`.
fn refused(err: &InvokeError, status: u16, location: Option<&str>) -> RunOutcome {
    // The modeled error's Display names it and carries its message; an
    // error the SDK does not model shows its code; an answer with neither
    // (not Lambda's JSON) is known only by its status.
    let shown_err = err.to_string();
    let why = match err.code() {
        Some(code) if !shown_err.contains(code) => format!("Lambda {code}: {shown_err}"),
        Some(_) => format!("Lambda {shown_err}"),
        // What the SDK makes of an answer it cannot parse at all.
        None if shown_err == "unhandled error" => {
            let to = location.map_or_else(String::new, |l| {
                format!(" (Location {})", shown(l.as_bytes()))
            });
            format!("Lambda answered HTTP {status}{to} with no error code it documents")
        }
        None => format!("Lambda {shown_err}"),
    };
    match err {
        InvokeError::TooManyRequestsException(e) => {
            match e
                .retry_after_seconds()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
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
        // Anything else: by its status (Lambda's permanent refusals are
        // 4xx; a 429 or 5xx it does not model is still a refusal).
        _ => by_status(status, why),
    }
}

impl LambdaRunner {
    /// An answer that could not be read: too long ([`ANSWER_LIMIT`]), or
    /// cut off by the peer.
    fn unread(
        &self,
        e: &SdkError<InvokeError, aws_smithy_runtime_api::http::Response>,
    ) -> RunOutcome {
        let SdkError::ResponseError(r) = e else {
            return RunOutcome::Failure(snippet(&lifo_core::error::chain(e)));
        };
        let status = r.raw().status().as_u16();
        let function_error = r.raw().headers().get("x-amz-function-error");
        let why = if lifo_lambda::bounded::is_over_limit(e) {
            format!(
                "its answer is over {} KB and was not read",
                ANSWER_LIMIT / 1024
            )
        } else {
            format!("its answer was cut off ({})", lifo_core::error::chain(e))
        };
        match (status, function_error) {
            (200, Some(kind)) => RunOutcome::Failure(snippet(&format!("{kind} error; {why}"))),
            // The worker returned: whatever its result says past the
            // bound, it is not a retry-later answer (those are small).
            (200, None) if lifo_lambda::bounded::is_over_limit(e) => RunOutcome::Success,
            (200, None) => RunOutcome::Failure(snippet(&format!("the worker ran, but {why}"))),
            (status, _) => by_status(status, format!("Lambda answered HTTP {status}; {why}")),
        }
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
            Err(SdkError::ServiceError(e)) => refused(
                e.err(),
                e.raw().status().as_u16(),
                e.raw().headers().get("location"),
            ),
            Err(e @ SdkError::ResponseError(_)) => self.unread(&e),
            Err(SdkError::TimeoutError(_)) => RunOutcome::TimedOut(format!(
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
