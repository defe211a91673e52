//! A local AWS Lambda Runtime API (the interface a `provided.al2023`
//! bootstrap talks to): enough to run a release binary of a function
//! outside Lambda, hand it events one at a time, and time it. `lifo bench`
//! uses it for cold starts and for the CPU and memory of `process`.
//!
//! Served: `GET /2018-06-01/runtime/invocation/next` (waits for an event),
//! `POST …/invocation/{id}/response`, `POST …/invocation/{id}/error` and
//! `POST …/init/error`.

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Mutex, mpsc, watch};

/// How one invocation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Response(Value),
    Error(Value),
    /// The function failed before asking for its first event.
    InitError(Value),
}

struct Shared {
    events: Mutex<mpsc::Receiver<(String, Value)>>,
    /// (request id, answer); no id for an init error.
    answers: mpsc::Sender<(Option<String>, Answer)>,
    /// Set when the first `next` request arrives.
    first_next: watch::Sender<Option<Instant>>,
    deadline: Duration,
    /// `Lambda-Runtime-Trace-Id` of every invocation.
    trace_header: String,
}

/// The trace header of an invocation X-Ray does not sample.
pub const UNSAMPLED: &str = "Root=1-00000000-000000000000000000000000;Sampled=0";
/// The trace header of a sampled invocation (a fixed root, Lambda's
/// function segment as the parent).
pub const SAMPLED: &str =
    "Root=1-00000000-000000000000000000000001;Parent=0000000000000001;Sampled=1";

/// A running Runtime API on 127.0.0.1 (a free port).
pub struct RuntimeApi {
    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    events: mpsc::Sender<(String, Value)>,
    answers: mpsc::Receiver<(Option<String>, Answer)>,
    first_next: watch::Receiver<Option<Instant>>,
    // Kept for its Drop: stops the server.
    _server: crate::loopback::Loopback,
    next_id: u64,
}

impl RuntimeApi {
    /// Starts the API; each invocation gets `deadline` to run, unsampled.
    pub async fn start(deadline: Duration) -> Result<Self> {
        Self::start_traced(deadline, UNSAMPLED).await
    }

    /// [`RuntimeApi::start`], each invocation under `trace_header`
    /// ([`SAMPLED`] to have X-Ray record it).
    pub async fn start_traced(deadline: Duration, trace_header: &str) -> Result<Self> {
        let (events_tx, events_rx) = mpsc::channel(1);
        let (answers_tx, answers_rx) = mpsc::channel(16);
        let (first_tx, first_rx) = watch::channel(None);
        let shared = Arc::new(Shared {
            events: Mutex::new(events_rx),
            answers: answers_tx,
            first_next: first_tx,
            deadline,
            trace_header: trace_header.to_owned(),
        });
        let server = crate::loopback::serve("runtime API", shared, |shared, req| async move {
            serve(&shared, req).await
        })
        .await?;
        let address = server.address.clone();
        Ok(Self {
            address,
            events: events_tx,
            answers: answers_rx,
            first_next: first_rx,
            _server: server,
            next_id: 0,
        })
    }

    /// When the function first asked for an event (its init is over),
    /// waiting at most `limit` (`Ok(None)`); `Err` with the body of an init
    /// error the function reported instead.
    pub async fn first_request(
        &mut self,
        limit: Duration,
    ) -> std::result::Result<Option<Instant>, Value> {
        let mut first = self.first_next.clone();
        let wait = first.wait_for(Option::is_some);
        tokio::select! {
            r = tokio::time::timeout(limit, wait) => Ok(match r {
                Ok(Ok(at)) => *at,
                _ => None,
            }),
            Some((_, Answer::InitError(body))) = self.answers.recv() => Err(body),
        }
    }

    /// Hands the function `event` and waits (at most `limit`) for its
    /// answer. Answers to earlier, timed-out invocations are dropped.
    pub async fn invoke(&mut self, event: Value, limit: Duration) -> Result<Answer> {
        self.next_id += 1;
        let id = format!("bench-{:08}", self.next_id);
        tokio::time::timeout(limit, async {
            self.events
                .send((id.clone(), event))
                .await
                .context("the runtime API stopped")?;
            loop {
                let (for_id, answer) = self
                    .answers
                    .recv()
                    .await
                    .context("the runtime API stopped")?;
                if for_id.is_none_or(|f| f == id) {
                    return Ok(answer);
                }
            }
        })
        .await
        .context(format!("no answer within {limit:?}"))?
    }
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

async fn body_json(req: Request<Incoming>) -> Value {
    match req.into_body().collect().await {
        Ok(b) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

async fn serve(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method(), parts.as_slice()) {
        (&Method::GET, ["2018-06-01", "runtime", "invocation", "next"]) => {
            shared.first_next.send_if_modified(|first| {
                let unset = first.is_none();
                if unset {
                    *first = Some(Instant::now());
                }
                unset
            });
            let Some((id, event)) = shared.events.lock().await.recv().await else {
                return reply(StatusCode::GONE, "");
            };
            let deadline_ms = (SystemTime::now() + shared.deadline)
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let mut r = reply(StatusCode::OK, event.to_string());
            let h = r.headers_mut();
            for (name, value) in [
                ("lambda-runtime-aws-request-id", id),
                ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:000000000000:function:bench".to_owned(),
                ),
                ("lambda-runtime-trace-id", shared.trace_header.clone()),
            ] {
                if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
                    h.insert(name, v);
                }
            }
            r
        }
        (&Method::POST, ["2018-06-01", "runtime", "invocation", id, kind]) => {
            let id = (*id).to_owned();
            let answer = match *kind {
                "response" => Answer::Response(body_json(req).await),
                "error" => Answer::Error(body_json(req).await),
                _ => return reply(StatusCode::NOT_FOUND, ""),
            };
            let _ = shared.answers.send((Some(id), answer)).await;
            reply(StatusCode::ACCEPTED, "")
        }
        (&Method::POST, ["2018-06-01", "runtime", "init", "error"]) => {
            let _ = shared
                .answers
                .send((None, Answer::InitError(body_json(req).await)))
                .await;
            reply(StatusCode::ACCEPTED, "")
        }
        _ => reply(StatusCode::NOT_FOUND, ""),
    }
}

/// The Lambda environment a bootstrap expects, pointing at `api`.
pub fn lambda_env(api: &RuntimeApi, function: &str) -> Vec<(String, String)> {
    [
        ("AWS_LAMBDA_RUNTIME_API", api.address.as_str()),
        ("AWS_LAMBDA_FUNCTION_NAME", function),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "bench"),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The settings every function binary needs to start, with no AWS behind
/// them: a table name, topic ARNs, and an endpoint where nothing listens
/// (so a function that calls AWS before answering fails fast and visibly).
pub fn offline_function_env() -> Vec<(String, String)> {
    let arn = "arn:aws:sns:us-east-1:000000000000:offline";
    [
        ("TABLE_NAME", "QueueTable"),
        ("TRIGGER_TOPIC_ARN", arn),
        ("PROCESS_TOPIC_ARN", arn),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// CPU time (user + system) and peak resident memory of a running process,
/// from /proc.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub cpu: Duration,
    pub peak_rss_bytes: u64,
}

impl Usage {
    pub fn of(pid: u32) -> Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .context(format!("reading /proc/{pid}/stat"))?;
        // Fields after the command name (which may hold spaces) are
        // space-separated; utime and stime are fields 14 and 15.
        let after = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .context("malformed /proc stat")?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| -> Result<u64> {
            fields
                .get(i)
                .context("short /proc stat")?
                .parse()
                .context("/proc stat field")
        };
        // Fields are numbered from 1 and `after` starts at field 3.
        let cpu_ticks = ticks(14 - 3)? + ticks(15 - 3)?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .context(format!("reading /proc/{pid}/status"))?;
        let hwm_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmHWM in /proc status")?;
        Ok(Self {
            // USER_HZ is 100 on Linux.
            cpu: Duration::from_millis(cpu_ticks * 10),
            peak_rss_bytes: hwm_kb * 1024,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_an_event_and_takes_the_answer() {
        let mut api = RuntimeApi::start(Duration::from_secs(30)).await.unwrap();
        let base = format!("http://{}/2018-06-01/runtime", api.address);
        let client = reqwest::Client::new();
        let worker = {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let next = client
                    .get(format!("{base}/invocation/next"))
                    .send()
                    .await
                    .unwrap();
                let id = next.headers()["lambda-runtime-aws-request-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                assert!(next.headers().contains_key("lambda-runtime-deadline-ms"));
                let event: Value = next.json().await.unwrap();
                client
                    .post(format!("{base}/invocation/{id}/response"))
                    .json(&serde_json::json!({"echo": event}))
                    .send()
                    .await
                    .unwrap();
            })
        };
        let answer = api
            .invoke(serde_json::json!({"n": 1}), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(
            answer,
            Answer::Response(serde_json::json!({"echo": {"n": 1}}))
        );
        assert!(matches!(
            api.first_request(Duration::from_secs(1)).await,
            Ok(Some(_))
        ));
        worker.await.unwrap();
    }

    #[test]
    fn usage_of_this_process_is_read_from_proc() {
        let u = Usage::of(std::process::id()).unwrap();
        assert!(u.peak_rss_bytes > 1024 * 1024);
    }
}
