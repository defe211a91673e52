//! X-Ray subsegments from inside a function: AWS's documented segment
//! format, sent by UDP to the daemon Lambda runs beside the function
//! (`AWS_XRAY_DAEMON_ADDRESS`), under the invocation's trace
//! (`_X_AMZN_TRACE_ID`: `Root=…;Parent=…;Sampled=1`).
//!
//! - [`TraceHeader`]: the header, parsed;
//! - [`Tracer`]: where documents go; sending never blocks and never fails
//!   an invocation (a full or absent daemon loses the document, nothing
//!   else);
//! - [`scope`] and [`Subsegment`]: the invocation's trace, carried through
//!   its futures (a task-local), and the subsegments opened under it. When
//!   the trace is not sampled (or there is none), nothing is built or sent.
//!
//! Why not a crate: the OpenTelemetry route (the `opentelemetry-aws`
//! propagator and lambda_runtime's `opentelemetry` feature) needs an OTLP
//! collector layer in the function (ADOT) to reach X-Ray, and the X-Ray
//! daemon crates on crates.io are unmaintained; the UDP format is two
//! lines of AWS documentation
//! (<https://docs.aws.amazon.com/xray/latest/devguide/xray-api-sendingdata.html>).

mod sdk;

pub use sdk::SdkSubsegments;

use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What one trace has sent, against [`TRACE_BUDGET`], and what it left out.
#[derive(Debug, Default)]
pub struct Budget {
    sent: AtomicUsize,
    dropped: AtomicUsize,
}

impl Budget {
    /// Takes `bytes` from the budget; `false` (and counted as dropped) when
    /// they do not fit.
    fn spend(&self, bytes: usize) -> bool {
        let fits = self
            .sent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sent| {
                (sent + bytes <= TRACE_BUDGET).then_some(sent + bytes)
            })
            .is_ok();
        if !fits {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        fits
    }

    /// Bytes sent so far.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }

    /// Subsegments left out: over the trace's budget, or over a datagram.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The largest datagram the daemon reads (64 KiB); a document over it is
/// sent without its annotations and metadata, or not at all.
pub const MAX_DATAGRAM: usize = 64 * 1024;
/// X-Ray indexes at most 50 annotations per trace (the rest cannot be
/// searched): one invocation's subsegment carries a few, tasks none.
pub const MAX_ANNOTATIONS_PER_TRACE: usize = 50;
/// X-Ray keeps a trace of at most 500 KB (100 KB at its lower limit);
/// what one invocation sends stays under this, Lambda's own segments
/// beside it. Past it, subsegments are counted, not sent.
pub const TRACE_BUDGET: usize = 400 * 1024;
/// What precedes every document on the wire.
const HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// `_X_AMZN_TRACE_ID`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeader {
    /// `1-<8 hex>-<24 hex>`.
    pub root: String,
    /// The segment to hang subsegments under (Lambda's function segment).
    pub parent: Option<String>,
    /// `Sampled=1`; `None` when the header leaves the decision open.
    pub sampled: Option<bool>,
}

impl TraceHeader {
    /// `None` for anything that is not a trace header with a root.
    pub fn parse(header: &str) -> Option<Self> {
        let mut root = None;
        let mut parent = None;
        let mut sampled = None;
        for part in header.split(';') {
            match part.trim().split_once('=') {
                Some(("Root", v)) if valid_root(v) => root = Some(v.to_owned()),
                Some(("Parent", v)) if is_hex(v, 16) => parent = Some(v.to_owned()),
                Some(("Sampled", "1")) => sampled = Some(true),
                Some(("Sampled", "0")) => sampled = Some(false),
                _ => {}
            }
        }
        Some(Self {
            root: root?,
            parent,
            sampled,
        })
    }

    /// The header of a call made under `parent`: how the next hop
    /// continues this trace.
    pub fn with_parent(&self, parent: &str) -> String {
        format!(
            "Root={};Parent={parent};Sampled={}",
            self.root,
            u8::from(self.sampled == Some(true))
        )
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn valid_root(v: &str) -> bool {
    let mut p = v.split('-');
    matches!((p.next(), p.next(), p.next(), p.next()),
        (Some("1"), Some(t), Some(r), None) if is_hex(t, 8) && is_hex(r, 24))
}

/// A new segment id: 16 hex digits.
pub fn new_id() -> String {
    format!("{:016x}", fastrand::u64(1..))
}

/// Now, in epoch seconds (X-Ray's clock).
pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Where documents go: the daemon's UDP address, or nowhere.
#[derive(Debug, Clone, Default)]
pub struct Tracer {
    to: Option<Arc<(UdpSocket, SocketAddr)>>,
}

impl Tracer {
    /// From `AWS_XRAY_DAEMON_ADDRESS` (`host:port`, or Lambda's
    /// `udp:host:port tcp:host:port` form); disabled without it.
    pub fn from_env() -> Self {
        std::env::var("AWS_XRAY_DAEMON_ADDRESS")
            .ok()
            .and_then(|v| daemon_address(&v))
            .map_or_else(Self::default, Self::to)
    }

    /// Sends to `daemon` (a test's socket).
    pub fn to(daemon: SocketAddr) -> Self {
        let bind: SocketAddr = if daemon.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(bind).and_then(|s| s.set_nonblocking(true).map(|()| s));
        match socket {
            Ok(s) => Self {
                to: Some(Arc::new((s, daemon))),
            },
            Err(e) => {
                tracing::warn!(error = %e, "X-Ray: no UDP socket; subsegments are not sent");
                Self::default()
            }
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.to.is_some()
    }

    /// Sends one subsegment (never blocks; a failure is logged at debug
    /// and dropped). Over [`MAX_DATAGRAM`], it goes without annotations,
    /// or not at all.
    fn send(&self, doc: &mut Wire<'_>, budget: &Budget) {
        let Some(to) = &self.to else { return };
        DATAGRAM.with_borrow_mut(|buf| {
            let mut encode = |doc: &Wire<'_>| {
                buf.clear();
                buf.extend_from_slice(HEADER.as_bytes());
                serde_json::to_writer(&mut *buf, doc).is_ok() && buf.len() <= MAX_DATAGRAM
            };
            if !encode(doc) {
                doc.annotations = &[];
                doc.metadata = None;
                if !encode(doc) {
                    budget.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            if !budget.spend(buf.len()) {
                return;
            }
            if let Err(e) = to.0.send_to(buf, to.1) {
                tracing::debug!(error = %e, "X-Ray: a subsegment was not sent");
            }
        });
    }
}

thread_local! {
    /// The datagram being encoded, reused.
    static DATAGRAM: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A subsegment on the wire (X-Ray's segment document).
#[derive(serde::Serialize)]
struct Wire<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
    name: &'a str,
    start_time: f64,
    end_time: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "pairs")]
    annotations: &'a [(&'static str, Value)],
    /// Not indexed; under the `lifo` namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "pairs")]
    aws: &'a [(&'static str, Value)],
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "pairs")]
    http: &'a [(&'static str, Value)],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    error: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    throttle: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    fault: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    subsegments: &'a [Box<serde_json::value::RawValue>],
}

fn pairs<S: serde::Serializer>(pairs: &&[(&'static str, Value)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs.iter() {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

fn daemon_address(v: &str) -> Option<SocketAddr> {
    let udp = v
        .split_whitespace()
        .find_map(|p| p.strip_prefix("udp:"))
        .unwrap_or(v.split_whitespace().next()?);
    use std::net::ToSocketAddrs;
    udp.to_socket_addrs().ok()?.next()
}

/// An invocation's trace: where its subsegments go and under which parent.
#[derive(Debug, Clone)]
pub struct Trace {
    pub tracer: Tracer,
    /// Shared by every subsegment of the invocation.
    pub root: Arc<str>,
    /// The segment or subsegment new subsegments hang under.
    pub parent: String,
    /// What this trace has sent (shared by the invocation's subsegments).
    pub budget: Arc<Budget>,
    /// Under a subsegment: where its children go when they end. They are
    /// sent inside it (X-Ray's embedded `subsegments`), one datagram for a
    /// task and everything in it; only the function segment's own children
    /// are sent on their own.
    inline: Option<Children>,
}

/// The ended children of an open subsegment, as JSON.
type Children = Arc<std::sync::Mutex<Vec<Box<serde_json::value::RawValue>>>>;

/// The SNS message attribute a wake-up names its trace in.
pub const TRACE_ATTRIBUTE: &str = "AWSTraceHeader";

impl Trace {
    /// The header a call made now continues this trace with.
    pub fn header(&self) -> String {
        format!("Root={};Parent={};Sampled=1", self.root, self.parent)
    }

    /// A new sampled trace header (a new root): what Lambda gives an
    /// invocation that no traced caller started (a stream batch, a
    /// schedule), when it samples it.
    pub fn new_root_header() -> String {
        let secs = now_secs() as u64;
        format!(
            "Root=1-{secs:08x}-{:024x};Parent={};Sampled=1",
            fastrand::u128(..) & ((1u128 << 96) - 1),
            new_id()
        )
    }

    /// The trace of an invocation with `header` (`_X_AMZN_TRACE_ID`), when
    /// it is sampled and the tracer sends somewhere; `None` otherwise (then
    /// nothing is recorded at all).
    pub fn sampled(tracer: &Tracer, header: Option<&str>) -> Option<Self> {
        let h = TraceHeader::parse(header?)?;
        if h.sampled != Some(true) || !tracer.is_enabled() {
            return None;
        }
        Some(Self {
            tracer: tracer.clone(),
            root: h.root.into(),
            parent: h.parent?,
            budget: Arc::default(),
            inline: None,
        })
    }
}

/// A DynamoDB client whose calls are subsegments (on `table`).
pub fn dynamodb(
    conf: impl Into<aws_sdk_dynamodb::config::Builder>,
    table: &str,
) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        conf.into()
            .interceptor(SdkSubsegments::dynamodb(table))
            .build(),
    )
}

/// An SNS client whose calls are subsegments (on `topic_arn`).
pub fn sns(conf: impl Into<aws_sdk_sns::config::Builder>, topic_arn: &str) -> aws_sdk_sns::Client {
    aws_sdk_sns::Client::from_conf(
        conf.into()
            .interceptor(SdkSubsegments::sns(topic_arn))
            .build(),
    )
}

/// An SQS client whose calls are subsegments (on `queue_url`).
pub fn sqs(conf: impl Into<aws_sdk_sqs::config::Builder>, queue_url: &str) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::from_conf(
        conf.into()
            .interceptor(SdkSubsegments::sqs(queue_url))
            .build(),
    )
}

/// Runs one invocation's handler under its trace (`xray_trace_id`, the
/// runtime's `_X_AMZN_TRACE_ID`): subsegments when it is sampled and a
/// daemon is configured, nothing otherwise.
pub async fn invocation<F: std::future::Future>(
    tracer: &Tracer,
    xray_trace_id: Option<&str>,
    handler: F,
) -> F::Output {
    scope(Trace::sampled(tracer, xray_trace_id), handler).await
}

tokio::task_local! {
    static CURRENT: Option<Trace>;
}

/// Runs `f` under `trace` (its subsegments and SDK calls hang under it).
pub async fn scope<F: std::future::Future>(trace: Option<Trace>, f: F) -> F::Output {
    CURRENT.scope(trace, f).await
}

/// The trace the current future runs under, if sampled.
pub fn current() -> Option<Trace> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// An open subsegment: sent when ended (or dropped unended, marked as a
/// fault: the work it timed did not finish).
#[derive(Debug)]
pub struct Subsegment {
    trace: Trace,
    id: String,
    name: String,
    start: f64,
    namespace: Option<&'static str>,
    annotations: Vec<(&'static str, Value)>,
    metadata: serde_json::Map<String, Value>,
    aws: Vec<(&'static str, Value)>,
    http: Vec<(&'static str, Value)>,
    error: bool,
    throttle: bool,
    fault: bool,
    ended: bool,
    /// Sent whatever the trace's budget (an invocation's own).
    essential: bool,
    /// Its ended children, sent inside it.
    children: Children,
}

impl Subsegment {
    /// Opens `name` under the current trace; `None` when not sampled.
    pub fn start(name: &str) -> Option<Self> {
        current().map(|t| Self::under(t, name))
    }

    /// Opens `name` under `trace`.
    pub fn under(trace: Trace, name: &str) -> Self {
        Self {
            trace,
            id: new_id(),
            name: name.to_owned(),
            start: now_secs(),
            namespace: None,
            annotations: Vec::new(),
            metadata: serde_json::Map::new(),
            aws: Vec::new(),
            http: Vec::new(),
            error: false,
            throttle: false,
            fault: false,
            ended: false,
            essential: false,
            children: Children::default(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The trace of work done inside this subsegment (its children).
    pub fn as_parent(&self) -> Trace {
        Trace {
            parent: self.id.clone(),
            inline: Some(self.children.clone()),
            ..self.trace.clone()
        }
    }

    /// `aws` or `remote`.
    pub fn namespace(&mut self, ns: &'static str) -> &mut Self {
        self.namespace = Some(ns);
        self
    }

    /// An indexed annotation (X-Ray's filter expressions find it). X-Ray
    /// indexes [`MAX_ANNOTATIONS_PER_TRACE`] per trace: annotate an
    /// invocation, not each of its tasks.
    pub fn annotate(&mut self, key: &'static str, value: impl Into<Value>) -> &mut Self {
        self.annotations.push((key, value.into()));
        self
    }

    /// A field of its metadata (the `lifo` namespace; shown, not indexed).
    pub fn metadata(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.metadata.insert(key.to_owned(), value.into());
        self
    }

    /// The trace it is in.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Sent even when the trace's budget is spent (the invocation's own
    /// subsegment, which says what was left out).
    pub fn essential(&mut self) -> &mut Self {
        self.essential = true;
        self
    }

    /// A field of the subsegment's `aws` (operation, table_name,
    /// request_id…) or `http` (request, response) object.
    pub fn field(&mut self, object: &str, key: &'static str, value: impl Into<Value>) -> &mut Self {
        let to = if object == "http" {
            &mut self.http
        } else {
            &mut self.aws
        };
        to.push((key, value.into()));
        self
    }

    /// X-Ray's flags: `error` (a 4xx), `throttle` (429 or throttled, an
    /// error too), `fault` (a 5xx or no answer).
    pub fn flag(&mut self, flag: &str) -> &mut Self {
        match flag {
            "throttle" => {
                self.throttle = true;
                self.error = true;
            }
            "fault" => self.fault = true,
            _ => self.error = true,
        }
        self
    }

    /// Closes and sends it.
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let children = std::mem::take(&mut *lock(&self.children));
        let inline = self.trace.inline.as_ref();
        let mut wire = Wire {
            // An embedded subsegment takes its trace and parent from the
            // document it is in.
            kind: if inline.is_some() {
                None
            } else {
                Some("subsegment")
            },
            id: &self.id,
            trace_id: inline.is_none().then_some(&*self.trace.root),
            parent_id: inline.is_none().then_some(self.trace.parent.as_str()),
            name: &self.name,
            start_time: self.start,
            end_time: now_secs(),
            namespace: self.namespace,
            annotations: &self.annotations,
            metadata: (!self.metadata.is_empty())
                .then(|| serde_json::json!({ "lifo": self.metadata })),
            aws: &self.aws,
            http: &self.http,
            error: self.error,
            throttle: self.throttle,
            fault: self.fault,
            subsegments: &children,
        };
        match inline {
            Some(parent) => {
                if let Ok(json) = serde_json::value::to_raw_value(&wire) {
                    lock(parent).push(json);
                }
            }
            None => {
                let unlimited = Budget::default();
                let budget = if self.essential {
                    &unlimited
                } else {
                    &*self.trace.budget
                };
                self.trace.tracer.send(&mut wire, budget);
            }
        }
    }
}

fn lock(c: &Children) -> std::sync::MutexGuard<'_, Vec<Box<serde_json::value::RawValue>>> {
    c.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Subsegment {
    fn drop(&mut self) {
        if !self.ended {
            self.fault = true;
            self.finish();
        }
    }
}

#[cfg(test)]
mod tests;
