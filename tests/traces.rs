//! X-Ray, offline: a UDP socket on 127.0.0.1 stands in for the daemon
//! while create and process run on DynamoDB Local with clients built as
//! the functions build them. One subsegment per task (its fields as
//! metadata, its claim, run and finish inside), one per DynamoDB and SNS
//! call (with the operation, table and request id), one per invocation
//! (annotated); every parent exists and every child's times nest inside
//! its parent's. Not sampled: nothing is sent. No daemon: the same outcome.
//!
//! The daemon here is as strict as X-Ray: a document over 64 KB, a trace
//! over 500 KB, or more than 50 annotations in a trace fail the test.

use lifo_core::{Op, Store, TaskStatus};
use lifo_lambda::Notifier;
use lifo_lambda::xray::{self, Trace, Tracer};
use lifo_tests::{Harness, deadline};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::UdpSocket;
use std::time::Duration;

const ROOT: &str = "1-6743a1b2-0123456789abcdef01234567";
const FUNCTION_SEGMENT: &str = "53995c3f42cd8ad8";
const CREATE_ROOT: &str = "1-6743a1b1-fedcba9876543210fedcba98";

fn header(root: &str, sampled: bool) -> String {
    format!(
        "Root={root};Parent={FUNCTION_SEGMENT};Sampled={}",
        u8::from(sampled)
    )
}

/// A daemon that reads as the documents come (as X-Ray's daemon does; a
/// socket read only at the end would lose what its buffer cannot hold).
struct Daemon {
    addr: std::net::SocketAddr,
    got: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Daemon {
    fn start() -> Self {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let addr = s.local_addr().unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let into = std::sync::Arc::downgrade(&got);
        // Ends once the test drops the daemon (and a read times out).
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 70_000];
            loop {
                let read = s.recv(&mut buf);
                let Some(into) = into.upgrade() else { return };
                if let Ok(n) = read {
                    into.lock().unwrap().push(buf[..n].to_vec());
                }
            }
        });
        Self { addr, got }
    }

    fn tracer(&self) -> Tracer {
        Tracer::to(self.addr)
    }

    /// Every subsegment received, embedded ones too (given the trace and
    /// parent of the document they came in).
    fn received(&self) -> Vec<Value> {
        fn flatten(doc: &Value, out: &mut Vec<Value>) {
            let mut own = doc.clone();
            if let Some(o) = own.as_object_mut() {
                o.remove("subsegments");
            }
            out.push(own);
            for child in doc["subsegments"].as_array().into_iter().flatten() {
                // Embedded: it takes its trace and parent from the document
                // it is in, and names neither itself.
                assert!(
                    child.get("trace_id").is_none()
                        && child.get("parent_id").is_none()
                        && child.get("type").is_none(),
                    "{child}"
                );
                let mut child = child.clone();
                child["parent_id"] = doc["id"].clone();
                child["trace_id"] = doc["trace_id"].clone();
                child["type"] = doc["type"].clone();
                flatten(&child, out);
            }
        }
        let mut flat = Vec::new();
        for doc in self.datagrams() {
            flatten(&doc, &mut flat);
        }
        flat
    }

    /// Every document received, checked against X-Ray's limits.
    fn datagrams(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut bytes_per_trace: HashMap<String, usize> = HashMap::new();
        // What is still in flight arrives within the reader's poll.
        std::thread::sleep(Duration::from_millis(300));
        let got = std::mem::take(&mut *self.got.lock().unwrap());
        for datagram in got {
            let n = datagram.len();
            let text = std::str::from_utf8(&datagram).unwrap();
            let (head, doc) = text.split_once('\n').unwrap();
            assert_eq!(head, r#"{"format": "json", "version": 1}"#);
            assert!(
                doc.len() <= 64 * 1024,
                "a segment document is at most 64 KB"
            );
            let doc: Value = serde_json::from_str(doc).unwrap();
            *bytes_per_trace
                .entry(doc["trace_id"].as_str().unwrap_or("").to_owned())
                .or_default() += n;
            out.push(doc);
        }
        for (trace, bytes) in &bytes_per_trace {
            assert!(
                *bytes <= 500 * 1024,
                "trace {trace}: {bytes} bytes; X-Ray keeps at most 500 KB a trace"
            );
        }
        out
    }

    /// [`Daemon::received`], and no trace with more than X-Ray's 50
    /// indexed annotations.
    fn received_within_limits(&self) -> Vec<Value> {
        let docs = self.received();
        let mut per_trace: HashMap<&str, usize> = HashMap::new();
        for d in &docs {
            *per_trace
                .entry(d["trace_id"].as_str().unwrap_or(""))
                .or_default() += d["annotations"].as_object().map_or(0, |a| a.len());
        }
        for (trace, n) in per_trace {
            assert!(
                n <= xray::MAX_ANNOTATIONS_PER_TRACE,
                "trace {trace} has {n} annotations; X-Ray indexes 50"
            );
        }
        docs
    }
}

/// A processor whose DynamoDB and SNS clients send subsegments, as
/// process's main builds them.
async fn traced_processor(h: &Harness) -> process::Processor<process::runner::SimulatedRunner> {
    let conf = lifo_local::stack::sdk_config(&h.stack.dynamodb_local.endpoint).await;
    let store = Store::new(xray::dynamodb(&conf, &h.stack.table), &h.stack.table);
    let p = h.processor_on(
        store.clone(),
        3,
        Duration::from_millis(20),
        Duration::from_secs(5),
    );
    let moto = lifo_local::stack::sdk_config(&h.stack.moto.endpoint).await;
    let tail = Notifier::new(
        xray::sns(&moto, &h.stack.trigger_topic_arn),
        &h.stack.trigger_topic_arn,
    );
    process::Processor::new(
        store,
        tail,
        std::sync::Arc::new(process::runner::SimulatedRunner::new(
            3,
            Duration::from_millis(20),
            0.0,
            0.0,
        )),
        p.config().clone(),
    )
}

/// The subsegments under `root` as an indented text tree, children in
/// start order: what docs/operating.md shows.
fn tree(docs: &[Value], root: &str) -> String {
    fn walk(docs: &[Value], parent: &str, depth: usize, t0: f64, out: &mut String) {
        let mut children: Vec<&Value> = docs.iter().filter(|d| d["parent_id"] == parent).collect();
        children.sort_by(|a, b| secs(a, "start_time").total_cmp(&secs(b, "start_time")));
        for d in children {
            let what = match (
                d["aws"]["operation"].as_str(),
                d["metadata"]["lifo"]["taskId"].as_str(),
            ) {
                (Some(op), _) => format!(" {op}"),
                (None, Some(id)) => format!(
                    " {id} attempt={} token={} outcome={}",
                    d["metadata"]["lifo"]["attempt"],
                    d["metadata"]["lifo"]["fencingToken"],
                    d["metadata"]["lifo"]["outcome"]
                ),
                _ => String::new(),
            };
            out.push_str(&format!(
                "{:indent$}{}{what}  +{:.1} ms, {:.1} ms\n",
                "",
                d["name"].as_str().unwrap_or("?"),
                (secs(d, "start_time") - t0) * 1000.0,
                (secs(d, "end_time") - secs(d, "start_time")) * 1000.0,
                indent = 2 * depth + 2
            ));
            walk(docs, d["id"].as_str().unwrap_or(""), depth + 1, t0, out);
        }
    }
    let t0 = docs
        .iter()
        .map(|d| secs(d, "start_time"))
        .fold(f64::MAX, f64::min);
    let mut out = format!("process (function segment {root})\n");
    walk(docs, root, 0, t0, &mut out);
    out
}

/// One process invocation under a trace header of root [`ROOT`].
async fn drain(
    processor: &process::Processor<process::runner::SimulatedRunner>,
    tracer: &Tracer,
    sampled: bool,
) -> process::ProcessReport {
    xray::invocation(tracer, Some(&header(ROOT, sampled)), async {
        processor
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
    })
    .await
}

fn secs(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_invocation_leaves_one_nested_trace_with_every_task_annotated() {
    let h = Harness::start(1).await;
    let daemon = Daemon::start();
    let tracer = daemon.tracer();
    // Created under a sampled trace of its own, with create's clients as its
    // main builds them: its write is a subsegment, and the tasks carry it.
    let conf = lifo_local::stack::sdk_config(&h.stack.dynamodb_local.endpoint).await;
    let creator = lifo_ops::create::Creator::new(
        Store::new(xray::dynamodb(&conf, &h.stack.table), &h.stack.table),
        lifo_ops::create::CreateConfig::new(h.stack.table.clone()),
    );
    xray::invocation(&tracer, Some(&header(CREATE_ROOT, true)), async {
        creator
            .handle(json!({"tasks": [
                {"taskId": "t-1", "payload": {"n": 1}},
                {"taskId": "t-2", "payload": {"n": 2}},
                {"taskId": "t-3", "payload": {"n": 3}},
            ]}))
            .await
            .unwrap()
    })
    .await;
    let created = daemon.received();
    assert!(
        !created.is_empty()
            && created
                .iter()
                .all(|d| d["trace_id"] == CREATE_ROOT && d["name"] == "DynamoDB"),
        "{created:?}"
    );
    assert_eq!(
        h.store
            .get("t-1")
            .await
            .unwrap()
            .unwrap()
            .created_trace
            .as_deref(),
        Some(CREATE_ROOT)
    );

    let processor = traced_processor(&h).await;
    let report = drain(&processor, &tracer, true).await;
    assert_eq!(report.succeeded, 3);
    // The creating trace's id on each task costs no write unit: 6.00 a task.
    let units = creator.store().meter().spent(Op::Put).units
        + processor.store().meter().spent(Op::Claim).units
        + processor.store().meter().spent(Op::Finish).units;
    assert_eq!(units / 3.0, 6.0);
    let docs = daemon.received_within_limits();
    let by_id: HashMap<&str, &Value> = docs
        .iter()
        .map(|d| (d["id"].as_str().unwrap(), d))
        .collect();
    assert_eq!(by_id.len(), docs.len(), "ids are unique");
    for d in &docs {
        assert_eq!(d["trace_id"], ROOT, "{d}");
        assert_eq!(d["type"], "subsegment");
        assert!(secs(d, "start_time") <= secs(d, "end_time"), "{d}");
        let parent = d["parent_id"].as_str().unwrap();
        if parent != FUNCTION_SEGMENT {
            let p = by_id
                .get(parent)
                .unwrap_or_else(|| panic!("no parent {parent} for {d}"));
            assert!(
                secs(p, "start_time") <= secs(d, "start_time"),
                "{d} starts before {p}"
            );
            assert!(
                secs(d, "end_time") <= secs(p, "end_time"),
                "{d} ends after {p}"
            );
        }
    }
    let tasks: Vec<&Value> = docs.iter().filter(|d| d["name"] == "task").collect();
    assert_eq!(tasks.len(), 3, "{docs:#?}");
    for t in &tasks {
        assert!(
            t.get("annotations").is_none(),
            "tasks carry no annotations: {t}"
        );
        let a = &t["metadata"]["lifo"];
        assert!(a["taskId"].as_str().unwrap().starts_with("t-"), "{t}");
        assert_eq!(
            (a["attempt"].as_u64(), a["outcome"].as_str()),
            (Some(1), Some("success")),
            "{t}"
        );
        assert!(a["fencingToken"].as_u64().unwrap() >= 1, "{t}");
        assert_eq!(a["lifoShard"].as_u64(), Some(0));
        assert_eq!(a["createdTraceId"], CREATE_ROOT);
        assert_eq!(t["parent_id"], FUNCTION_SEGMENT);
        // Its claim, its run and its finish inside it, in that order.
        let mut inside: Vec<&Value> = docs.iter().filter(|d| d["parent_id"] == t["id"]).collect();
        inside.sort_by(|a, b| secs(a, "start_time").total_cmp(&secs(b, "start_time")));
        let steps: Vec<&str> = inside
            .iter()
            .map(|d| {
                d["aws"]["operation"]
                    .as_str()
                    .or(d["name"].as_str())
                    .unwrap()
            })
            .collect();
        assert_eq!(
            steps,
            ["UpdateItem", "run", "UpdateItem"],
            "claim, run, finish: {inside:?}"
        );
        for d in inside.into_iter().filter(|d| d["name"] != "run") {
            assert_eq!(
                (d["name"].as_str(), d["namespace"].as_str()),
                (Some("DynamoDB"), Some("aws"))
            );
            assert_eq!(d["aws"]["table_name"], h.stack.table.as_str());
            assert!(d["aws"]["request_id"].is_string(), "{d}");
        }
    }
    println!("{}", tree(&docs, FUNCTION_SEGMENT));
    // The index reads hang under the function segment itself.
    assert!(
        docs.iter()
            .any(|d| d["aws"]["operation"] == "Query" && d["parent_id"] == FUNCTION_SEGMENT)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsampled_sends_nothing_and_a_missing_daemon_changes_no_outcome() {
    let h = Harness::start(1).await;
    let daemon = Daemon::start();
    let tasks = |prefix: &str| json!({"tasks": (0..3).map(|i| json!({"taskId": format!("{prefix}-{i}"), "payload": {"n": i}})).collect::<Vec<_>>()});
    h.creator().handle(tasks("a")).await.unwrap();
    let processor = traced_processor(&h).await;
    let report = drain(&processor, &daemon.tracer(), false).await;
    assert_eq!(report.succeeded, 3);
    assert!(daemon.received().is_empty());

    // A daemon address where nothing listens: every task still succeeds.
    let gone = Daemon::start().addr;
    h.creator().handle(tasks("b")).await.unwrap();
    let trace = Trace::sampled(&Tracer::to(gone), Some(&header(ROOT, true)));
    assert!(trace.is_some());
    let report = xray::scope(trace, async {
        processor
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
    })
    .await;
    assert_eq!(report.succeeded, 3);
    assert_eq!(h.count(TaskStatus::Success).await, 6);
}

/// Across hops, on the local pipeline: a stream batch starts a trace;
/// trigger's wake-up continues it into process. A tail call starts a new
/// trace (a busy queue's loop would otherwise grow one trace past X-Ray's
/// size limits), and the next process invocation names the one before
/// (`previousTraceId`), so the chain can still be walked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_invocation_of_the_tail_call_loop_has_its_own_trace_naming_the_one_before() {
    let h = Harness::as_deployed(1).await;
    let daemon = Daemon::start();
    // A short budget: 20 tasks at 2 × 100 ms need several invocations.
    let processor =
        std::sync::Arc::new(h.processor(2, Duration::from_millis(100), Duration::from_millis(400)));
    let pipeline = lifo_local::Pipeline::start(
        &h.stack,
        std::sync::Arc::new(h.trigger()),
        processor,
        lifo_local::PipelineOptions {
            tracer: daemon.tracer(),
            // The sweep would start traces of its own.
            sweep: lifo_local::pipeline::SweepRate::Off,
            ..lifo_local::PipelineOptions::default()
        },
    )
    .await
    .unwrap();
    // Twenty tasks nobody announces (the stream's filter skips them, as it
    // skips tasks create announced itself), then one that the stream
    // announces: one stream batch, one trace to start with.
    let now = lifo_core::now_ms();
    let quiet: Vec<lifo_core::Task> = (0..20)
        .map(|i| {
            let mut t = lifo_core::Task::new_pending(
                format!("q-{i}"),
                lifo_core::Payload::new(),
                now + i,
                3600,
                0,
            );
            t.announced = true;
            t
        })
        .collect();
    h.store.put_new(&quiet).await.unwrap();
    h.plain_creator()
        .handle(json!({"tasks": [{"taskId": "first", "payload": {"n": 0}}]}))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    while h.count(TaskStatus::Success).await < 21 {
        assert!(started.elapsed() < Duration::from_secs(60), "tasks left");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = std::sync::Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    let tail_calls = lifo_local::pipeline::PipelineStats::get(&stats.tail_calls);
    let invocations = lifo_local::pipeline::PipelineStats::get(&stats.process_invocations);
    assert!(
        tail_calls >= 1 && invocations >= 2,
        "{tail_calls} tail calls, {invocations} invocations"
    );
    let docs = daemon.received_within_limits();
    let tasks: Vec<&Value> = docs
        .iter()
        .filter(|d| d["name"] == "task" && d["metadata"]["lifo"]["outcome"] == "success")
        .collect();
    assert_eq!(tasks.len(), 21);
    // One process invocation a trace, each with its own subsegment.
    let runs: Vec<&Value> = docs.iter().filter(|d| d["name"] == "invocation").collect();
    let roots: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|r| r["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(roots.len(), runs.len(), "a trace per invocation: {runs:#?}");
    assert!(runs.len() >= 2, "{runs:#?}");
    for t in &tasks {
        assert!(roots.contains(t["trace_id"].as_str().unwrap()), "{t}");
    }
    // Every invocation after a tail call names the trace before it; the
    // chain leads back to the first.
    let named: Vec<&str> = runs
        .iter()
        .filter_map(|r| r["annotations"]["previousTraceId"].as_str())
        .collect();
    assert_eq!(named.len(), runs.len() - 1, "{runs:#?}");
    for p in &named {
        assert!(roots.contains(p), "{p} is one of the loop's traces");
    }
    let first: Vec<&&Value> = runs
        .iter()
        .filter(|r| r["annotations"].get("previousTraceId").is_none())
        .collect();
    assert_eq!(first.len(), 1, "one invocation started the loop");
}

/// A busy invocation (600 tasks, about 1 KB of subsegment each) stays
/// within X-Ray's limits: 50 annotations a trace (tasks carry none), 500 KB
/// a trace (what does not fit is counted in the invocation's metadata, not
/// sent). Each task's trace is in its `task.claimed` log line (`traceId`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_invocation_stays_within_x_rays_limits() {
    // Over the budget by half: about 410 task subsegments fit.
    const TASKS: u64 = 600;
    let h = Harness::start(1).await;
    let daemon = Daemon::start();
    let tracer = daemon.tracer();
    let now = lifo_core::now_ms();
    let tasks: Vec<lifo_core::Task> = (0..TASKS)
        .map(|i| {
            lifo_core::Task::new_pending(
                format!("busy-{i:04}"),
                lifo_core::Payload::new(),
                now + i,
                3600,
                1,
            )
        })
        .collect();
    h.store.put_new(&tasks).await.unwrap();
    let conf = lifo_local::stack::sdk_config(&h.stack.dynamodb_local.endpoint).await;
    let store = Store::new(xray::dynamodb(&conf, &h.stack.table), &h.stack.table);
    // A budget that no day's machine reaches: the test is of the trace, not
    // of the pace (15 tasks a second beside the other suites on a slow day).
    let processor = h.processor_on(store, 32, Duration::ZERO, Duration::from_secs(120));
    let report = xray::invocation(&tracer, Some(&header(ROOT, true)), async {
        processor
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
    })
    .await;
    assert_eq!(report.succeeded, TASKS as usize);
    let docs = daemon.received_within_limits();
    let run = docs
        .iter()
        .find(|d| d["name"] == "invocation")
        .expect("the invocation's subsegment is sent whatever the budget");
    assert_eq!(run["annotations"]["tasksClaimed"], TASKS);
    let sent = run["metadata"]["lifo"]["traceBytes"].as_u64().unwrap();
    let dropped = run["metadata"]["lifo"]["subsegmentsDropped"]
        .as_u64()
        .unwrap();
    assert!(sent <= xray::TRACE_BUDGET as u64, "{sent}");
    let task_docs = docs.iter().filter(|d| d["name"] == "task").count() as u64;
    println!("{TASKS} tasks: {task_docs} task subsegments sent ({sent} bytes), {dropped} left out");
    assert!(
        task_docs > 0 && dropped > 0,
        "the budget was reached and counted"
    );
}
