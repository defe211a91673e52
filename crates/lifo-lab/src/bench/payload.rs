//! `lifo bench --only payload-cost`: write and read units per successful
//! task against payload size, for realistic JSON payloads
//! ([`lifo_local::payloads`]) of 100 B to 60 KB, and three ways to store
//! them: on the task item (how it was), in an item of their own, and in an
//! item of their own deflated (the default,
//! [`lifo_core::store::PayloadPolicy`]). Against the floor: 5 write units
//! for the task's moves plus ⌈payload / 1 KB⌉ to store the payload once.

use super::part::{BenchArgs, Line, Report};
use lifo_core::store::{Op, PayloadPolicy};
use lifo_local::LocalStack;
use lifo_ops::create::{CreateConfig, Creator};
use process::ProcessConfig;
use serde_json::json;
use std::time::{Duration, Instant};

/// Tasks per measurement.
const TASKS: usize = 20;

/// One size and way of storing.
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadRow {
    pub bytes: usize,
    pub storage: &'static str,
    pub put: f64,
    pub claim: f64,
    pub finish: f64,
    pub write_units: f64,
    pub read_units: f64,
    pub payload_read_ms: f64,
    pub floor: f64,
}

fn storages() -> [(&'static str, PayloadPolicy); 3] {
    [
        ("on the task item", PayloadPolicy::INLINE),
        (
            "own item",
            PayloadPolicy {
                compress: false,
                ..PayloadPolicy::default()
            },
        ),
        ("own item, deflated (default)", PayloadPolicy::default()),
    ]
}

async fn measure(
    bytes: usize,
    storage: &'static str,
    policy: PayloadPolicy,
) -> anyhow::Result<PayloadRow> {
    let stack = LocalStack::start().await?;
    let store = stack.store().with_payload_policy(policy);
    let creator = Creator::new(store.clone(), CreateConfig::new(stack.table.clone()));
    let tasks: Vec<serde_json::Value> = (0..TASKS)
        .map(|i| {
            let payload = if bytes <= 100 {
                json!({"orderId": 1000 + i, "kind": "demo"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            } else {
                lifo_local::payloads::realistic(i as u64, bytes)
            };
            json!({"payload": payload})
        })
        .collect();
    creator.handle(json!({ "tasks": tasks })).await?;
    let succeeded = super::part::drain(&stack, store.clone(), TASKS, |c| ProcessConfig {
        linger: Duration::ZERO,
        ..c
    })
    .await?;
    let m = store.meter();
    let per = |op: Op| m.spent(op).units / succeeded.max(1) as f64;
    // The payload read alone, timed: what a claim adds before the run.
    let ids: Vec<String> = stack
        .scan_tasks()
        .await?
        .into_iter()
        .map(|t| t.task_id)
        .collect();
    let timer = store.with_fresh_meter();
    let mut times = Vec::new();
    for id in &ids {
        if let Some(mut t) = timer.get(id).await? {
            t.payload = Default::default();
            let started = Instant::now();
            timer.load_payload(&mut t).await?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    let (put, claim, finish) = (per(Op::Put), per(Op::Claim), per(Op::Finish));
    Ok(PayloadRow {
        bytes,
        storage,
        put,
        claim,
        finish,
        write_units: put + claim + finish,
        read_units: per(Op::Read) + per(Op::Payload),
        payload_read_ms: times.get(times.len() / 2).copied().unwrap_or(0.0),
        floor: 5.0 + bytes.div_ceil(1024) as f64,
    })
}

pub(super) async fn payload_cost(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let mut figures = Vec::new();
    for &bytes in &args.payload_bytes {
        for (storage, policy) in storages() {
            eprintln!("bench: payload {bytes} B, {storage}");
            let r = measure(bytes, storage, policy).await?;
            let default = storage.ends_with("(default)");
            out.lines.push(Line {
                measure: format!(
                    "Payload {bytes} B (realistic JSON), {storage}: write units per successful task"
                ),
                result: format!(
                    "{:.2} (put {:.2} + claim {:.2} + finish {:.2}; floor {:.0}); {:.2} read units; payload read {:.1} ms",
                    r.write_units, r.put, r.claim, r.finish, r.floor, r.read_units, r.payload_read_ms
                ),
                target: if default {
                    format!("≤ 6 + ⌈payload / 1 KB⌉ = {}", 6 + bytes.div_ceil(1024))
                } else {
                    "-".into()
                },
                met: default.then_some(r.write_units <= (6 + bytes.div_ceil(1024)) as f64 + 1e-9),
                flags: format!(" --payload-bytes {bytes}"),
            });
            figures.push(json!({
                "bytes": r.bytes, "storage": r.storage, "put": r.put, "claim": r.claim,
                "finish": r.finish, "writeUnits": r.write_units, "readUnits": r.read_units,
                "payloadReadMs": r.payload_read_ms, "floor": r.floor,
            }));
        }
    }
    out.figures.insert("payloadCost".into(), json!(figures));
    Ok(out)
}
