//! `lifo bench --only throughput`: tasks per second through the processors
//! (runner latency 0, so the claim path is all that is measured), read and
//! write units per task, and the busiest index key, for each shard count,
//! processor count and number of tasks in flight, with and without a fixed
//! latency in front of DynamoDB Local (a loopback proxy,
//! [`crate::latency`]), against a floor: a minimal client issuing the
//! same claim and finish requests (and one query per refill) with the ids
//! known, at the same latency and parallelism.

use super::part::{BenchArgs, Line, Report};
use crate::latency::LatencyProxy;
use lifo_core::{Move, Op, Order, Step, Store, Task, TaskStatus, now_ms};
use lifo_local::LocalStack;
use process::runner::SimulatedRunner;
use process::{ProcessConfig, Processor, Wakeups};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// One configuration of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub shards: u32,
    pub processors: u32,
    pub in_flight: usize,
    pub latency_ms: u64,
}

/// What one configuration did.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub config: Config,
    pub tasks: usize,
    pub tasks_per_s: f64,
    pub floor_per_s: f64,
    pub read_units_per_task: f64,
    pub write_units_per_task: f64,
    /// Index writes per second on the busiest LIFO shard (claims and
    /// finishes: each rewrites or deletes the task's index entry).
    pub busiest_key_writes_per_s: f64,
    /// With `--repeat`: every run's ratio to its floor, ascending (this
    /// row is the median run).
    pub ratios: Vec<f64>,
}

impl Measured {
    pub fn ratio(&self) -> f64 {
        self.tasks_per_s / self.floor_per_s.max(1e-9)
    }

    /// The row's result, as printed while the grid runs and in the table.
    pub fn summary(&self) -> String {
        let spread = match self.ratios.as_slice() {
            [first, .., last] => format!(
                " (median of {} runs; {:.2}× to {:.2}×)",
                self.ratios.len(),
                first,
                last
            ),
            _ => String::new(),
        };
        format!(
            "{:.0} tasks/s (floor {:.0}, {:.2}×){spread}; {:.2} read, {:.2} write units per task; \
             busiest index key {:.0} writes/s",
            self.tasks_per_s,
            self.floor_per_s,
            self.ratio(),
            self.read_units_per_task,
            self.write_units_per_task,
            self.busiest_key_writes_per_s
        )
    }
}

/// `count` claimable tasks over `shards` shards, written straight to the
/// table (not through the proxy).
async fn load(stack: &LocalStack, shards: u32, count: usize) -> anyhow::Result<Vec<Task>> {
    let now = now_ms();
    let payload = json!({"n": 1}).as_object().cloned().unwrap_or_default();
    let tasks: Vec<Task> = (0..count)
        .map(|i| {
            Task::new_pending(
                lifo_core::new_task_id(),
                payload.clone(),
                now - (count - i) as u64,
                3600,
                shards,
            )
        })
        .collect();
    stack.store().put_new(&tasks).await?;
    Ok(tasks)
}

/// The store the measured client talks to: through the proxy, if any.
pub(super) async fn store_via(
    stack: &LocalStack,
    latency_ms: u64,
) -> anyhow::Result<(Store, Option<LatencyProxy>)> {
    let proxy = match latency_ms {
        0 => None,
        ms => Some(
            LatencyProxy::start(&stack.dynamodb_local.endpoint, Duration::from_millis(ms)).await?,
        ),
    };
    let endpoint = proxy
        .as_ref()
        .map_or(stack.dynamodb_local.endpoint.clone(), |p| {
            p.endpoint.clone()
        });
    let client = aws_sdk_dynamodb::Client::new(&lifo_local::stack::sdk_config(&endpoint).await);
    Ok((Store::new(client, &stack.table), proxy))
}

/// The processors, one per group, until their groups are empty.
async fn processors(config: Config, tasks: usize) -> anyhow::Result<Measured> {
    let stack = LocalStack::start().await?;
    let loaded = load(&stack, config.shards, tasks).await?;
    let (store, _proxy) = store_via(&stack, config.latency_ms).await?;
    let runner = Arc::new(SimulatedRunner::new(
        config.in_flight,
        Duration::ZERO,
        0.0,
        0.0,
    ));
    let procs: Vec<Arc<Processor<SimulatedRunner>>> = (0..config.processors)
        .map(|_| {
            Arc::new(stack.processor(
                store.clone(),
                runner.clone(),
                ProcessConfig {
                    shard_count: config.shards,
                    processors: config.processors,
                    max_ttl_seconds: 3600,
                    time_budget: Duration::from_secs(600),
                    idle_poll: Duration::from_millis(5),
                    linger: Duration::ZERO,
                    order: Order::Lifo,
                    ..ProcessConfig::new(stack.table.clone(), stack.trigger_topic_arn.clone())
                },
            ))
        })
        .collect();
    let started = Instant::now();
    let runs = procs.iter().enumerate().map(|(g, p)| {
        let p = p.clone();
        async move {
            let wake = Wakeups {
                groups: vec![g as u32],
                ..Wakeups::one()
            };
            p.handle(&wake, SystemTime::now() + Duration::from_secs(900))
                .await
        }
    });
    let reports = futures::future::join_all(runs).await;
    let wall = started.elapsed().as_secs_f64();
    let mut per_shard: HashMap<u32, usize> = HashMap::new();
    let shard_of: HashMap<&str, u32> = loaded
        .iter()
        .map(|t| (t.task_id.as_str(), t.lifo_shard))
        .collect();
    let mut succeeded = 0;
    for r in reports {
        let r = r.map_err(|e| anyhow::anyhow!(lifo_core::error::chain(&e)))?;
        succeeded += r.succeeded;
        for id in &r.claimed {
            if let Some(s) = shard_of.get(id.as_str()) {
                *per_shard.entry(*s).or_default() += 1;
            }
        }
    }
    if succeeded != tasks {
        return Err(anyhow::anyhow!(
            "{config:?}: {succeeded} of {tasks} tasks succeeded"
        ));
    }
    let meter = store.meter();
    let writes: f64 = [Op::Claim, Op::Finish, Op::Group, Op::Rejected]
        .iter()
        .map(|op| meter.spent(*op).units)
        .sum();
    let busiest = per_shard.values().copied().max().unwrap_or(0);
    Ok(Measured {
        config,
        tasks,
        tasks_per_s: tasks as f64 / wall,
        floor_per_s: 0.0,
        read_units_per_task: meter.spent(Op::Read).units / tasks as f64,
        write_units_per_task: writes / tasks as f64,
        busiest_key_writes_per_s: 2.0 * busiest as f64 / wall,
        ratios: Vec::new(),
    })
}

/// The floor: `in_flight` priorities claiming and finishing known ids, and one
/// query (a shard's head) per refill of `in_flight` claims.
async fn floor(config: Config, tasks: usize) -> anyhow::Result<f64> {
    let stack = LocalStack::start().await?;
    let loaded = load(&stack, config.shards, tasks).await?;
    let (store, _proxy) = store_via(&stack, config.latency_ms).await?;
    let queue = Arc::new(Mutex::new(loaded));
    let started = Instant::now();
    let priorities = (0..config.in_flight).map(|priority| {
        let (store, queue) = (store.clone(), queue.clone());
        async move {
            let mut done = 0usize;
            loop {
                let Some(task) = queue.lock().ok().and_then(|mut q| q.pop()) else {
                    return Ok::<_, anyhow::Error>(());
                };
                if (done + priority).is_multiple_of(config.in_flight) {
                    let now = now_ms();
                    store
                        .claimable_heads(Order::Lifo, &[task.lifo_shard], 1, now, 0)
                        .await?;
                }
                let now = now_ms();
                let claim = Step {
                    now_ms: now,
                    token: 0,
                    attempts: 1,
                };
                let lease = Move::Claim {
                    lease_until: now + 60_000,
                    claimed_by: "bench",
                };
                let claimed = store
                    .apply(&task.task_id, &lease, TaskStatus::Pending, &claim)
                    .await?;
                let finish = Step {
                    now_ms: now_ms(),
                    token: claimed.token,
                    attempts: 1,
                };
                let succeed = Move::Succeed {
                    history: &claimed.history,
                };
                store
                    .record(&task.task_id, &succeed, TaskStatus::Taken, &finish)
                    .await?;
                done += 1;
            }
        }
    });
    for r in futures::future::join_all(priorities).await {
        r?;
    }
    Ok(tasks as f64 / started.elapsed().as_secs_f64())
}

/// Measures `config` and its floor.
pub async fn measure(config: Config, tasks: usize) -> anyhow::Result<Measured> {
    let mut m = processors(config, tasks).await?;
    m.floor_per_s = floor(config, tasks).await?;
    Ok(m)
}

/// The flags that select a grid (or one configuration of it).
fn flags(
    tasks: usize,
    shards: &str,
    processors: &str,
    in_flight: &str,
    latency_ms: &str,
) -> String {
    format!(
        " --throughput-tasks {tasks} --shard-counts {shards} --processor-counts {processors} \
         --in-flight {in_flight} --latency-ms {latency_ms}"
    )
}

/// ` --repeat N` when more than one run.
fn repeat(args: &BenchArgs) -> String {
    if args.repeat > 1 {
        format!(" --repeat {}", args.repeat)
    } else {
        String::new()
    }
}

fn list<T: std::fmt::Display>(xs: &[T]) -> String {
    xs.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// The grid of `args`, one row per configuration.
pub(super) async fn throughput(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut out = Report::default();
    let mut measured = Vec::new();
    for &latency_ms in &args.latency_ms {
        for &shards in &args.shard_counts {
            for &processors in &args.processor_counts {
                for &in_flight in &args.in_flight {
                    if processors > shards || processors as usize > in_flight {
                        continue;
                    }
                    let config = Config {
                        shards,
                        processors,
                        in_flight,
                        latency_ms,
                    };
                    let mut runs = Vec::new();
                    for run in 1..=args.repeat {
                        eprintln!("bench: throughput {config:?}, run {run} of {}", args.repeat);
                        let m = measure(config, args.throughput_tasks).await?;
                        eprintln!("bench:   {}", m.summary());
                        runs.push(m);
                    }
                    runs.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
                    let ratios: Vec<f64> = runs.iter().map(Measured::ratio).collect();
                    let mut m = runs.swap_remove(runs.len() / 2);
                    if ratios.len() > 1 {
                        m.ratios = ratios;
                    }
                    measured.push(m);
                }
            }
        }
    }
    let grid = flags(
        args.throughput_tasks,
        &list(&args.shard_counts),
        &list(&args.processor_counts),
        &list(&args.in_flight),
        &list(&args.latency_ms),
    );
    for m in &measured {
        let c = m.config;
        let mut targets = Vec::new();
        let mut met = true;
        if c.processors == 1 && c.in_flight == 32 && c.latency_ms > 0 {
            targets.push("≥ 0.8× floor".to_owned());
            met &= m.ratio() >= 0.8;
        }
        if c.shards >= 32 {
            targets.push("≤ 0.5 read units per task".to_owned());
            met &= m.read_units_per_task <= 0.5;
        }
        out.lines.push(Line {
            measure: format!(
                "Throughput: {} shards, {} processors, {} in flight, {} ms per request",
                c.shards, c.processors, c.in_flight, c.latency_ms
            ),
            result: m.summary(),
            target: if targets.is_empty() {
                "-".into()
            } else {
                targets.join("; ")
            },
            met: (!targets.is_empty()).then_some(met),
            flags: flags(
                args.throughput_tasks,
                &c.shards.to_string(),
                &c.processors.to_string(),
                &c.in_flight.to_string(),
                &c.latency_ms.to_string(),
            ) + &repeat(args),
        });
    }
    out.figures.insert(
        "throughput".into(),
        json!(measured.iter().map(|m| json!({
            "shards": m.config.shards, "processors": m.config.processors,
            "inFlight": m.config.in_flight, "latencyMs": m.config.latency_ms,
            "tasks": m.tasks, "tasksPerSecond": m.tasks_per_s, "floorPerSecond": m.floor_per_s,
            "ratio": m.ratio(), "readUnitsPerTask": m.read_units_per_task,
            "writeUnitsPerTask": m.write_units_per_task,
            "busiestKeyWritesPerSecond": m.busiest_key_writes_per_s,
            "ratios": m.ratios,
        })).collect::<Vec<_>>()),
    );
    out.commands
        .push(("throughputCommand", grid + &repeat(args)));
    Ok(out)
}
