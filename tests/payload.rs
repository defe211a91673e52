//! A task's payload is paid for once: on DynamoDB Local, with create's and
//! process's own code, realistic payloads of 100 B to 60 KB cost at most
//! 6 + ⌈payload / 1 KB⌉ write units per successful task (6.00 at 100 B),
//! reach the runner whole, and leave with their task.

use lifo_core::store::Op;
use lifo_core::store::payload::payload_key;
use lifo_core::{Task, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use process::runner::{RunOutcome, TaskRunner};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A runner that records the payload each task ran with.
#[derive(Default)]
struct Seen(Mutex<HashMap<String, Map<String, Value>>>);

impl TaskRunner for Seen {
    fn capacity(&self) -> usize {
        3
    }
    fn max_duration(&self) -> Duration {
        Duration::from_secs(1)
    }
    async fn run(&self, task: &Task) -> RunOutcome {
        if let Ok(mut seen) = self.0.lock() {
            seen.insert(task.task_id.clone(), task.payload.to_map());
        }
        RunOutcome::Success
    }
}

fn config(h: &Harness) -> process::ProcessConfig {
    process::ProcessConfig {
        linger: Duration::ZERO,
        rest: process::rest::RestPolicy::default(),
        ..process::ProcessConfig::new(h.stack.table.clone(), h.stack.trigger_topic_arn.clone())
    }
}

/// Creates `n` tasks of `bytes`-byte realistic payloads, runs them, and
/// returns the write units per successful task and what the runner saw.
async fn run(
    h: &Harness,
    bytes: usize,
    n: usize,
) -> (
    f64,
    HashMap<String, Map<String, Value>>,
    Vec<Map<String, Value>>,
) {
    let payloads: Vec<Map<String, Value>> = (0..n)
        .map(|i| {
            if bytes <= 100 {
                json!({"orderId": 1000 + i}).as_object().cloned().unwrap()
            } else {
                lifo_local::payloads::realistic(i as u64, bytes)
            }
        })
        .collect();
    let store = h.stack.store();
    let creator = lifo_ops::create::Creator::new(
        store.clone(),
        lifo_ops::create::CreateConfig::new(h.stack.table.clone()),
    );
    let tasks: Vec<Value> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"taskId": format!("p{bytes}-{i}"), "payload": p}))
        .collect();
    creator.handle(json!({ "tasks": tasks })).await.unwrap();
    let seen = Arc::new(Seen::default());
    let p = h.stack.processor(store.clone(), seen.clone(), config(h));
    let report = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, n, "{bytes} B");
    let m = store.meter();
    let writes = m.spent(Op::Put).units + m.spent(Op::Claim).units + m.spent(Op::Finish).units;
    let seen = seen.0.lock().unwrap().clone();
    (writes / n as f64, seen, payloads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_pays_for_its_payload_once_and_runs_with_it_whole() {
    let h = Harness::start(1).await;
    for bytes in [100, 1024, 4096, 16_384, 61_440] {
        let (units, seen, payloads) = run(&h, bytes, 6).await;
        let bound = 6.0 + bytes.div_ceil(1024) as f64;
        println!("{bytes} B: {units:.2} write units per successful task (bound {bound})");
        if bytes <= 100 {
            assert_eq!(units, 6.0, "a small payload stays on the task: 6.00");
        }
        assert!(units <= bound, "{bytes} B: {units} > {bound}");
        for (i, p) in payloads.iter().enumerate() {
            assert_eq!(
                seen.get(&format!("p{bytes}-{i}")),
                Some(p),
                "{bytes} B, task {i}"
            );
        }
    }
    // The task item of a large payload holds its size, not the payload; a
    // read of the task brings the payload back.
    let t = h.store.get("p61440-0").await.unwrap().unwrap();
    assert!(t.payload_bytes.unwrap() >= 61_440);
    assert_eq!(t.payload, lifo_local::payloads::realistic(0, 61_440).into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_lives_and_leaves_with_its_task() {
    let h = Harness::start(1).await;
    let big = lifo_local::payloads::realistic(1, 8192);
    let payload_item = |id: &str| {
        let ddb = h.stack.ddb.clone();
        let table = h.stack.table.clone();
        let key = payload_key(id);
        async move {
            ddb.get_item()
                .table_name(table)
                .key("taskId", aws_sdk_dynamodb::types::AttributeValue::S(key))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
        }
    };
    h.creator()
        .handle(json!({"tasks": [
            {"taskId": "keep", "payload": big, "ttlSeconds": 2},
            {"taskId": "drop", "payload": big},
            {"taskId": "gone", "payload": big},
        ]}))
        .await
        .unwrap();
    for id in ["keep", "drop", "gone"] {
        assert!(payload_item(id).await.is_some(), "{id}");
    }
    // Deleted: its payload item goes too.
    h.store.delete("drop", now_ms()).await.unwrap();
    assert!(payload_item("drop").await.is_none());
    // Redriven after it was shed: its payload item lives as long as its new life.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let revived = h
        .store
        .redrive(
            "keep",
            lifo_core::store::RedriveSettings {
                now_ms: now_ms(),
                default_ttl_seconds: 3600,
                retention_seconds: 3600,
                reason: "test",
            },
        )
        .await
        .unwrap();
    let item = payload_item("keep").await.unwrap();
    assert_eq!(item["ttl"].as_n().unwrap(), &revived.delete_at.to_string());
    // A payload item lost under a claimable task: the run fails, naming it,
    // rather than running without it.
    h.stack
        .ddb
        .delete_item()
        .table_name(&h.stack.table)
        .key(
            "taskId",
            aws_sdk_dynamodb::types::AttributeValue::S(payload_key("gone")),
        )
        .send()
        .await
        .unwrap();
    let seen = Arc::new(Seen::default());
    let p = h.stack.processor(
        h.store.clone(),
        seen.clone(),
        process::ProcessConfig {
            max_attempts: 1,
            ..config(&h)
        },
    );
    p.handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let t = h.store.get_item("gone").await.unwrap().unwrap();
    assert_eq!(t.task_status, TaskStatus::Failure);
    assert_eq!(
        t.last_error.as_deref(),
        Some("payload: its payload item is gone")
    );
    let seen = seen.0.lock().unwrap();
    assert!(!seen.contains_key("gone"), "never run without its payload");
    assert_eq!(
        seen.get("keep"),
        Some(&big),
        "the redriven task ran with its payload"
    );
}
