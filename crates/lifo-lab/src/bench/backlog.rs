//! `lifo bench --only shed-backlog`: what a shed backlog costs the queue,
//! for backlogs of 0, 10k and 100k expired tasks in one shard, on DynamoDB
//! Local and through the latency proxy of the throughput bench:
//!
//! - the reaper's cost per shed task (read and write units), over the
//!   sweep runs that shed the backlog;
//! - then, with the backlog shed: read units per successful task to run 10
//!   live tasks, the latency of a refill (one read of the shard's head),
//!   and the read units of one sweep run; each against the row without a
//!   backlog;
//! - and with the backlog expired but not yet swept (no sweep has run since
//!   it expired): read units per success to run [`UNSWEPT_LIVE`] live tasks
//!   over it, against the row without a backlog.

use super::part::{BenchArgs, Line, Report};
use lifo_core::{Op, Order, Task, now_ms};
use lifo_local::LocalStack;
use process::ProcessConfig;
use serde_json::json;
use std::time::Instant;

/// Live tasks run per measurement: enough that one query more or less (a
/// refill falling on either side of a second) moves the figure by 0.005
/// read units per success, not 0.05.
const LIVE: usize = 100;
/// Refills timed per measurement (the median is reported).
const REFILLS: usize = 21;

/// Live tasks run over a backlog expired but not yet swept: what a quiet
/// queue gets after an overload.
pub const UNSWEPT_LIVE: usize = 10;

/// What running live tasks over an unswept backlog cost.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsweptRow {
    pub backlog: usize,
    pub read_units_per_success: f64,
    pub read_requests: u64,
    pub succeeded: usize,
}

/// Runs [`UNSWEPT_LIVE`] live tasks over `backlog` tasks that expired and
/// that no sweep has shed.
pub async fn measure_unswept(backlog: usize) -> anyhow::Result<UnsweptRow> {
    let stack = LocalStack::start().await?;
    expired_backlog(&stack, backlog).await?;
    let live: Vec<Task> = (0..UNSWEPT_LIVE)
        .map(|i| {
            let payload = json!({"live": i}).as_object().cloned().unwrap_or_default();
            Task::new_pending(format!("live-{i}"), payload, now_ms() + i as u64, 3600, 1)
        })
        .collect();
    stack.store().put_new(&live).await?;
    let drain_store = stack.store().with_fresh_meter();
    let succeeded = super::part::drain(&stack, drain_store.clone(), UNSWEPT_LIVE, |c| {
        ProcessConfig {
            shard_count: 1,
            ..c
        }
    })
    .await?;
    let reads = drain_store.meter().spent(Op::Read);
    Ok(UnsweptRow {
        backlog,
        read_units_per_success: reads.units / succeeded.max(1) as f64,
        read_requests: reads.requests,
        succeeded,
    })
}

/// What one backlog size measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BacklogRow {
    pub backlog: usize,
    pub latency_ms: u64,
    pub reap_runs: usize,
    pub reap_read_units_per_shed: f64,
    pub reap_write_units_per_shed: f64,
    pub reap_seconds: f64,
    pub read_units_per_success: f64,
    pub refill_ms: f64,
    pub sweep_read_units: f64,
}

/// `n` tasks of one shard that expired a minute ago, never started.
pub async fn expired_backlog(stack: &LocalStack, n: usize) -> anyhow::Result<()> {
    let created = now_ms() - 120_000;
    let payload = json!({"n": 1}).as_object().cloned().unwrap_or_default();
    let tasks: Vec<Task> = (0..n)
        .map(|i| {
            Task::new_pending(
                format!("shed-{i:07}"),
                payload.clone(),
                created + (i as u64 % 60_000),
                60,
                1,
            )
        })
        .collect();
    let store = stack.store();
    let loads = tasks
        .chunks(5_000)
        .map(|chunk| store.put_new(chunk))
        .collect::<Vec<_>>();
    for written in futures::future::join_all(loads).await {
        written?;
    }
    Ok(())
}

async fn measure(backlog: usize, latency_ms: u64) -> anyhow::Result<BacklogRow> {
    let stack = LocalStack::start().await?;
    expired_backlog(&stack, backlog).await?;
    let (store, _proxy) = super::throughput::store_via(&stack, latency_ms).await?;
    let sweep = |store: lifo_core::Store| stack.trigger(store, 1, 604_800);
    let event = lifo_local::pipeline::scheduled_event_json();

    // The reaper: sweep runs until a run sheds nothing.
    let reaper_store = store.with_fresh_meter();
    let started = Instant::now();
    let mut runs = 0;
    let mut shed = 0;
    loop {
        runs += 1;
        let outcome = sweep(reaper_store.clone()).measured(event.clone()).await?;
        shed += outcome.shed;
        if outcome.shed == 0 || runs > 100 {
            break;
        }
    }
    let reap_seconds = started.elapsed().as_secs_f64();
    let per_shed = |op: Op| reaper_store.meter().spent(op).units / shed.max(1) as f64;
    let (reap_read, reap_write) = (per_shed(Op::Read), per_shed(Op::Shed));
    if shed != backlog {
        anyhow::bail!("the reaper shed {shed} of {backlog}");
    }

    // Live work after the backlog was shed.
    let live: Vec<Task> = (0..LIVE)
        .map(|i| {
            let payload = json!({"live": i}).as_object().cloned().unwrap_or_default();
            Task::new_pending(format!("live-{i}"), payload, now_ms() + i as u64, 3600, 1)
        })
        .collect();
    stack.store().put_new(&live).await?;
    let drain_store = store.with_fresh_meter();
    let succeeded = super::part::drain(&stack, drain_store.clone(), LIVE, |c| ProcessConfig {
        shard_count: 1,
        ..c
    })
    .await?;
    let read_units_per_success =
        drain_store.meter().spent(Op::Read).units / succeeded.max(1) as f64;

    // A refill: one read of the shard's head (an empty queue now), after
    // as many untimed ones (DynamoDB Local's JVM warms up).
    let mut times = Vec::with_capacity(REFILLS);
    for i in 0..2 * REFILLS {
        let now = now_ms();
        let t = Instant::now();
        store
            .claimable_heads(Order::Lifo, &[0], 8, now, now - 604_800_000)
            .await?;
        if i >= REFILLS {
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);

    // One sweep run.
    let sweep_store = store.with_fresh_meter();
    sweep(sweep_store.clone()).measured(event).await?;
    Ok(BacklogRow {
        backlog,
        latency_ms,
        reap_runs: runs,
        reap_read_units_per_shed: reap_read,
        reap_write_units_per_shed: reap_write,
        reap_seconds,
        read_units_per_success,
        refill_ms: times[times.len() / 2],
        sweep_read_units: sweep_store.meter().spent(Op::Read).units,
    })
}

pub(super) async fn shed_backlog(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let mut rows = Vec::new();
    for latency_ms in &args.backlog_latency_ms {
        let mut floor: Option<BacklogRow> = None;
        for backlog in &args.backlogs {
            eprintln!("bench: shed backlog {backlog}, {latency_ms} ms per request");
            let row = measure(*backlog, *latency_ms).await?;
            let base = floor.get_or_insert_with(|| row.clone()).clone();
            let ratio = row.read_units_per_success / base.read_units_per_success.max(1e-9);
            let reaper = if row.backlog == 0 {
                "nothing to shed".to_owned()
            } else {
                format!(
                    "reaper {:.3} read + {:.2} write units per shed task, {} runs, {:.1} s",
                    row.reap_read_units_per_shed,
                    row.reap_write_units_per_shed,
                    row.reap_runs,
                    row.reap_seconds
                )
            };
            let extra = format!(" --backlogs {backlog} --backlog-latency-ms {latency_ms}");
            out.lines.push(Line {
                measure: format!(
                    "Shed backlog of {backlog} in one shard, {latency_ms} ms per request: read units per success"
                ),
                result: format!(
                    "{:.3} ({ratio:.2}× the empty queue's {:.3}); refill {:.1} ms (empty: {:.1}); \
                     sweep {:.1} read units (empty: {:.1}); {reaper}",
                    row.read_units_per_success,
                    base.read_units_per_success,
                    row.refill_ms,
                    base.refill_ms,
                    row.sweep_read_units,
                    base.sweep_read_units,
                ),
                target: "≤ 1.2× the empty queue's".into(),
                met: Some(ratio <= 1.2 && row.sweep_read_units <= base.sweep_read_units * 1.2),
                flags: extra,
            });
            rows.push(json!({
                "backlog": row.backlog, "latencyMs": row.latency_ms,
                "readUnitsPerSuccess": row.read_units_per_success, "ratio": ratio,
                "refillMs": row.refill_ms, "sweepReadUnits": row.sweep_read_units,
                "reapReadUnitsPerShed": row.reap_read_units_per_shed,
                "reapWriteUnitsPerShed": row.reap_write_units_per_shed,
                "reapRuns": row.reap_runs, "reapSeconds": row.reap_seconds,
            }));
        }
    }
    out.figures.insert("shedBacklog".into(), json!(rows));

    // The same backlogs expired but not yet swept.
    let mut unswept = Vec::new();
    let mut floor: Option<UnsweptRow> = None;
    let mut others: Vec<UnsweptRow> = Vec::new();
    for backlog in &args.backlogs {
        eprintln!("bench: {backlog} expired, not yet swept, under {UNSWEPT_LIVE} live tasks");
        let row = measure_unswept(*backlog).await?;
        if floor.is_none() {
            floor = Some(row.clone());
        } else {
            others.push(row.clone());
        }
        unswept.push(json!({
            "backlog": row.backlog, "readUnitsPerSuccess": row.read_units_per_success,
            "readRequests": row.read_requests, "succeeded": row.succeeded,
        }));
    }
    // Flat in the backlog: the rows with a backlog within 1.2× of one
    // another (the row without one reads an empty index).
    let (lo, hi) = others.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| {
        (
            lo.min(r.read_units_per_success),
            hi.max(r.read_units_per_success),
        )
    });
    for row in floor.iter().chain(&others) {
        out.lines.push(Line {
            measure: format!(
                "{} expired, not yet swept, in one shard: read units per success of {UNSWEPT_LIVE} live tasks",
                row.backlog
            ),
            result: format!(
                "{:.2} ({} read requests, {} succeeded)",
                row.read_units_per_success, row.read_requests, row.succeeded
            ),
            target: "flat in the backlog: within 1.2× across backlogs, ≤ 1.40".into(),
            met: (row.backlog > 0).then_some(
                row.read_units_per_success <= 1.40 && (others.len() < 2 || hi <= lo * 1.2),
            ),
            flags: format!(" --backlogs {}", row.backlog),
        });
    }
    out.figures.insert("unsweptBacklog".into(), json!(unswept));
    Ok(out)
}
