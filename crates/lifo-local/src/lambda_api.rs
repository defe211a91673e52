//! A local AWS Lambda *Invoke* API, so the real `aws-sdk-lambda` client is
//! exercised against functions that run here: the create handler behind
//! `lifo --stack … tasks create`, a worker Lambda behind process's lambda
//! runner (a Rust closure, or a Python handler run by [`python_handler`],
//! such as `examples/python-worker`).
//!
//! Served: `POST /2015-03-31/functions/{FunctionName}/invocations` with
//! `X-Amz-Invocation-Type: RequestResponse`, answered as Lambda answers:
//! - the function's result: 200 and its JSON;
//! - an error raised by the function: 200, `X-Amz-Function-Error: Unhandled`
//!   (or `Handled`) and `{"errorType", "errorMessage"}`; a timeout is one of
//!   these too (`Sandbox.Timedout`, "Task timed out after N seconds");
//! - Lambda's own refusals, as a non-2xx status with `x-amzn-ErrorType`:
//!   429 `TooManyRequestsException` (throttled: by the handler's answer, or,
//!   as AWS does, when a function with reserved concurrency
//!   ([`LambdaApi::reserve`]) already runs that many invocations), 502
//!   `ResourceNotReadyException`, 500 `ServiceException`, 404
//!   `ResourceNotFoundException` (no such function).

use anyhow::Result;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What an invocation answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The function returned this.
    Ok(Value),
    /// The function raised an error (`handled`: it returned an error object
    /// itself, as the Go and Rust runtimes do; otherwise the runtime caught
    /// it).
    FunctionError {
        handled: bool,
        error_type: String,
        error_message: String,
    },
    /// The function ran longer than its timeout (`seconds`).
    TimedOut { seconds: u64 },
    /// Lambda throttled the invocation (429 TooManyRequestsException).
    Throttled,
    /// Lambda refused with this status and error code, e.g. (502,
    /// "ResourceNotReadyException") or (500, "ServiceException").
    Refused { status: u16, code: String },
}

/// A function: takes the event, answers a [`Reply`].
pub type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Reply> + Send + Sync>;

/// Wraps an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    Arc::new(move |event| Box::pin(f(event)))
}

#[derive(Default)]
struct Functions {
    by_name: Mutex<HashMap<String, Handler>>,
    invocations: AtomicUsize,
    /// Reserved concurrency by function, and invocations running.
    reserved: Mutex<HashMap<String, usize>>,
    running: Mutex<HashMap<String, usize>>,
    throttled: AtomicUsize,
}

/// An invocation counted against its function's reserved concurrency
/// while it runs.
struct Running<'a>(&'a Functions, String);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut running) = self.0.running.lock()
            && let Some(n) = running.get_mut(&self.1)
        {
            *n = n.saturating_sub(1);
        }
    }
}

impl Functions {
    /// Counts an invocation of `name` as running, unless its reserved
    /// concurrency is used up (then Lambda throttles it).
    fn enter(&self, name: &str) -> Option<Running<'_>> {
        let reserved = self.reserved.lock().ok()?.get(name).copied();
        let mut running = self.running.lock().ok()?;
        let n = running.entry(name.to_owned()).or_insert(0);
        if reserved.is_some_and(|r| *n >= r) {
            self.throttled.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *n += 1;
        Some(Running(self, name.to_owned()))
    }
}

/// A running Invoke API on 127.0.0.1 (a free port). Stops when dropped.
pub struct LambdaApi {
    /// `http://127.0.0.1:PORT`: the Lambda client's `endpoint_url`.
    pub endpoint: String,
    functions: Arc<Functions>,
    // Kept for its Drop: stops the server.
    _server: crate::loopback::Loopback,
}

impl LambdaApi {
    pub async fn start() -> Result<Self> {
        let functions = Arc::new(Functions::default());
        let server = crate::loopback::serve(
            "Lambda Invoke API",
            functions.clone(),
            |functions, req| async move { serve(&functions, req).await },
        )
        .await?;
        let endpoint = format!("http://{}", server.address);
        Ok(Self {
            endpoint,
            functions,
            _server: server,
        })
    }

    /// Serves `name` (a function name; invocations by ARN find it too).
    pub fn register(&self, name: &str, handler: Handler) {
        if let Ok(mut map) = self.functions.by_name.lock() {
            map.insert(name.to_owned(), handler);
        }
    }

    /// Invocations received so far (all functions, refusals included).
    pub fn invocations(&self) -> usize {
        self.functions.invocations.load(Ordering::Relaxed)
    }

    /// Sets `name`'s reserved concurrency (PutFunctionConcurrency): an
    /// invocation past that many running is throttled, 429
    /// `TooManyRequestsException` (`ReservedFunctionConcurrentInvocationLimitExceeded`),
    /// as AWS does. `None`: unreserved (never throttled here).
    pub fn reserve(&self, name: &str, concurrency: Option<usize>) {
        if let Ok(mut map) = self.functions.reserved.lock() {
            match concurrency {
                Some(n) => map.insert(name.to_owned(), n),
                None => map.remove(name),
            };
        }
    }

    /// Invocations throttled at a reserved concurrency so far.
    pub fn throttled(&self) -> usize {
        self.functions.throttled.load(Ordering::Relaxed)
    }
}

/// Lambda's throttle at a reserved concurrency.
fn throttled() -> Response<Full<Bytes>> {
    reply(
        StatusCode::TOO_MANY_REQUESTS,
        &[("x-amzn-ErrorType", "TooManyRequestsException".to_owned())],
        json!({"Reason": "ReservedFunctionConcurrentInvocationLimitExceeded",
               "Type": "User", "message": "Rate Exceeded."}),
    )
}

/// `my-fn`, from `my-fn`, `arn:aws:lambda:r:a:function:my-fn[:qualifier]`
/// or `a:function:my-fn`.
fn function_name(path_segment: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(path_segment)
        .decode_utf8_lossy()
        .into_owned();
    match decoded.split_once("function:") {
        Some((_, rest)) => rest.split(':').next().unwrap_or(rest).to_owned(),
        None => decoded,
    }
}

fn reply(status: StatusCode, headers: &[(&str, String)], body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            h.insert(n, v);
        }
    }
    r
}

fn refusal(status: u16, code: &str, message: &str) -> Response<Full<Bytes>> {
    reply(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &[("x-amzn-ErrorType", code.to_owned())],
        json!({"Type": if status < 500 { "User" } else { "Service" }, "message": message}),
    )
}

async fn serve(functions: &Functions, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (&Method::POST, ["2015-03-31", "functions", name, "invocations"]) =
        (req.method(), parts.as_slice())
    else {
        return refusal(404, "UnknownOperationException", "unknown operation");
    };
    functions.invocations.fetch_add(1, Ordering::Relaxed);
    let name = function_name(name);
    let handler = functions
        .by_name
        .lock()
        .ok()
        .and_then(|m| m.get(&name).cloned());
    let Some(handler) = handler else {
        return refusal(
            404,
            "ResourceNotFoundException",
            &format!("Function not found: arn:aws:lambda:us-east-1:000000000000:function:{name}"),
        );
    };
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let event: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => {
                return refusal(
                    400,
                    "InvalidRequestContentException",
                    "Could not parse request body into json",
                );
            }
        }
    };
    let Some(_running) = functions.enter(&name) else {
        return throttled();
    };
    let executed = ("X-Amz-Executed-Version", "$LATEST".to_owned());
    match handler(event).await {
        Reply::Ok(v) => reply(StatusCode::OK, &[executed], v),
        Reply::FunctionError {
            handled,
            error_type,
            error_message,
        } => reply(
            StatusCode::OK,
            &[
                executed,
                (
                    "X-Amz-Function-Error",
                    if handled { "Handled" } else { "Unhandled" }.to_owned(),
                ),
            ],
            json!({"errorType": error_type, "errorMessage": error_message}),
        ),
        Reply::TimedOut { seconds } => reply(
            StatusCode::OK,
            &[executed, ("X-Amz-Function-Error", "Unhandled".to_owned())],
            json!({"errorType": "Sandbox.Timedout",
                   "errorMessage": format!("RequestId: local Error: Task timed out after {seconds}.00 seconds")}),
        ),
        Reply::Throttled => throttled(),
        Reply::Refused { status, code } => {
            refusal(status, &code, "refused by the local Lambda API")
        }
    }
}

/// The Python runtime's loop, reduced to one event: imports the handler's
/// module from its file, calls it with the event (stdin) and a context, and
/// prints what it returned, or the error as Lambda's Python runtime reports
/// it, `{"errorType", "errorMessage", "stackTrace"}`, exiting 1.
const PYTHON_RUNTIME: &str = r#"
import importlib.util, json, sys, time, traceback, uuid
path, name = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("worker", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
class Context:
    aws_request_id = str(uuid.uuid4())
    function_name = "worker"
    memory_limit_in_mb = 256
    _deadline = time.time() + float(sys.argv[3])
    def get_remaining_time_in_millis(self):
        return int(max(0.0, self._deadline - time.time()) * 1000)
try:
    result = getattr(module, name)(json.load(sys.stdin), Context())
    print(json.dumps(result))
except Exception as e:
    print(json.dumps({"errorType": type(e).__name__, "errorMessage": str(e),
                      "stackTrace": traceback.format_tb(e.__traceback__)}))
    sys.exit(1)
"#;

/// A Python handler (`file`'s function `function`) run as Lambda's Python
/// runtime would: one `python3` per invocation, `timeout` as the function's
/// Timeout (past it: `Sandbox.Timedout`).
pub fn python_handler(file: std::path::PathBuf, function: &str, timeout: Duration) -> Handler {
    let function = function.to_owned();
    handler(move |event| {
        let (file, function) = (file.clone(), function.clone());
        async move {
            let child = tokio::process::Command::new("python3")
                .arg("-c")
                .arg(PYTHON_RUNTIME)
                .arg(&file)
                .arg(&function)
                .arg(timeout.as_secs_f64().to_string())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true)
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "python3 did not run");
                    return Reply::Refused {
                        status: 500,
                        code: "ServiceException".into(),
                    };
                }
            };
            if let Some(mut stdin) = child.stdin.take() {
                use tokio::io::AsyncWriteExt;
                let _ = stdin.write_all(event.to_string().as_bytes()).await;
            }
            let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
                Ok(Ok(out)) => out,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "python3 failed");
                    return Reply::Refused {
                        status: 500,
                        code: "ServiceException".into(),
                    };
                }
                Err(_) => {
                    return Reply::TimedOut {
                        seconds: timeout.as_secs(),
                    };
                }
            };
            let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if out.status.success() {
                Reply::Ok(answer)
            } else {
                let text = |k: &str| answer[k].as_str().unwrap_or_default().to_owned();
                Reply::FunctionError {
                    handled: false,
                    error_type: text("errorType"),
                    error_message: text("errorMessage"),
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_come_from_names_and_arns() {
        assert_eq!(function_name("my-fn"), "my-fn");
        assert_eq!(
            function_name("arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Amy-fn"),
            "my-fn"
        );
        assert_eq!(
            function_name("arn:aws:lambda:us-east-1:123456789012:function:my-fn:live"),
            "my-fn"
        );
    }
}
