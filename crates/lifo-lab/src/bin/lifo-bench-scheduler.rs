//! Benchmark of scheduler-start on DynamoDB Local: N tasks due on one date,
//! started by scheduler-start's handler, with 50 due-index shards and with 1.
//! Compared with the emulator's floor: a minimal client issuing the same
//! conditional updates at the same parallelism, given the ids up front.
//! Each measured run is a child process, so its peak RSS is its own.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use chrono::NaiveDate;
use clap::{Parser, Subcommand};
use futures::{StreamExt, TryStreamExt};
use lifo_core::model::DEFAULT_RETENTION_SECONDS;
use lifo_core::{Store, Task, now_ms};
use lifo_lambda::Notifier;
use lifo_local::LocalStack;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, Parser)]
#[command(
    about,
    after_help = "Example: lifo-bench-scheduler --tasks 100000 --shards 50,1 --parallelism 32"
)]
struct Args {
    #[command(subcommand)]
    child: Option<Child>,
    /// Tasks due on the run date.
    #[arg(long, default_value_t = 100_000)]
    tasks: usize,
    /// Due-index shard counts to compare.
    #[arg(long, value_delimiter = ',', default_value = "50,1")]
    shards: Vec<u32>,
    /// Conditional updates in flight (scheduler-start and the floor alike).
    #[arg(long, default_value_t = 32)]
    parallelism: usize,
}

#[derive(Debug, Subcommand)]
enum Child {
    /// (internal) run scheduler-start's handler and report.
    Scheduler {
        endpoint: String,
        sns: String,
        topic: String,
        table: String,
        shards: u32,
        date: String,
        parallelism: usize,
    },
    /// (internal) issue the same conditional updates for the ids in a file.
    Floor {
        endpoint: String,
        table: String,
        ids_file: String,
        parallelism: usize,
    },
}

/// Counts operations and HTTP attempts (attempts − operations = retries).
#[derive(Debug, Default, Clone)]
struct Requests {
    operations: Arc<AtomicUsize>,
    attempts: Arc<AtomicUsize>,
}

impl Intercept for Requests {
    fn name(&self) -> &'static str {
        "bench-requests"
    }
    fn read_before_execution(
        &self,
        _: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.operations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn read_before_attempt(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Measured {
    wall_ms: u64,
    started: usize,
    requests: usize,
    retries: usize,
    peak_rss_kb: u64,
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

async fn client(endpoint: &str, requests: &Requests) -> aws_sdk_dynamodb::Client {
    let conf = lifo_local::stack::sdk_config(endpoint).await;
    let conf = aws_sdk_dynamodb::config::Builder::from(&conf)
        .interceptor(requests.clone())
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

async fn run_child(child: Child) -> Result<Measured, String> {
    let requests = Requests::default();
    match child {
        Child::Scheduler {
            endpoint,
            sns,
            topic,
            table,
            shards,
            date,
            parallelism,
        } => {
            let ddb = client(&endpoint, &requests).await;
            let sns_conf = lifo_local::stack::sdk_config(&sns).await;
            let scheduler = scheduler_start::Scheduler::new(
                Store::new(ddb, &table),
                Notifier::new(aws_sdk_sns::Client::new(&sns_conf), &topic),
                scheduler_start::SchedulerConfig {
                    table_name: table.clone(),
                    process_topic_arn: topic.clone(),
                    due_shard_count: shards,
                    catch_up_days: 0,
                    parallelism,
                    default_ttl_seconds: 3600,
                    retention_seconds: DEFAULT_RETENTION_SECONDS,
                    deadline_margin: Duration::ZERO,
                    processors: 1,
                },
            );
            let date = NaiveDate::parse_from_str(&date, "%Y-%m-%d").map_err(|e| e.to_string())?;
            let began = Instant::now();
            let report = scheduler
                .run(date, SystemTime::now() + Duration::from_secs(3600))
                .await
                .map_err(|e| e.to_string())?;
            Ok(Measured {
                wall_ms: began.elapsed().as_millis() as u64,
                started: report.started,
                requests: requests.operations.load(Ordering::Relaxed),
                retries: requests.attempts.load(Ordering::Relaxed)
                    - requests.operations.load(Ordering::Relaxed),
                peak_rss_kb: peak_rss_kb(),
            })
        }
        Child::Floor {
            endpoint,
            table,
            ids_file,
            parallelism,
        } => {
            let ddb = client(&endpoint, &requests).await;
            let store = Store::new(ddb, &table);
            let ids: Vec<String> = std::fs::read_to_string(&ids_file)
                .map_err(|e| format!("{ids_file}: {e}"))?
                .lines()
                .map(str::to_owned)
                .collect();
            let began = Instant::now();
            let started = AtomicUsize::new(0);
            futures::stream::iter(ids)
                .for_each_concurrent(parallelism, |id| {
                    let (store, started) = (&store, &started);
                    async move {
                        if store
                            .start(&id, now_ms(), 3600, DEFAULT_RETENTION_SECONDS)
                            .await
                            .is_ok()
                        {
                            started.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
                .await;
            Ok(Measured {
                wall_ms: began.elapsed().as_millis() as u64,
                started: started.load(Ordering::Relaxed),
                requests: requests.operations.load(Ordering::Relaxed),
                retries: requests.attempts.load(Ordering::Relaxed)
                    - requests.operations.load(Ordering::Relaxed),
                peak_rss_kb: peak_rss_kb(),
            })
        }
    }
}

/// `n` tasks due on `date`, spread over `shards` due-index shards.
fn due_tasks(n: usize, date: NaiveDate, shards: u32) -> Vec<Task> {
    let due = date.format("%Y-%m-%d").to_string();
    let epoch = date
        .and_hms_opt(0, 0, 0)
        .map_or(0, |d| d.and_utc().timestamp() as u64);
    (0..n)
        .map(|_| {
            Task::new_pending(
                lifo_core::new_task_id(),
                lifo_core::Payload::new(),
                now_ms(),
                3600,
                1,
            )
            .scheduled(
                due.clone(),
                epoch,
                shards,
                8 * 86_400,
                3600,
                DEFAULT_RETENTION_SECONDS,
            )
        })
        .collect()
}

async fn load(store: &Store, tasks: &[Task]) -> Result<(), String> {
    let chunks: Vec<&[Task]> = tasks.chunks(500).collect();
    futures::stream::iter(chunks)
        .map(|c| store.put_new(c))
        .buffer_unordered(8)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await
        .map_err(|e| format!("loading the tasks: {e}"))
}

fn child_run(args: &[String]) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("child output: {e}"))
}

struct Row {
    shards: u32,
    load_s: f64,
    scheduler: Measured,
    floor: Measured,
    max_share: f64,
}

/// One measured run on a fresh DynamoDB Local holding just `tasks`.
async fn measured(
    kind: &str,
    args: &Args,
    tasks: &[Task],
    shards: u32,
    date: NaiveDate,
) -> Result<(Measured, f64), String> {
    let stack = LocalStack::start().await.map_err(|e| e.to_string())?;
    let began = Instant::now();
    load(&stack.store(), tasks).await?;
    let load_s = began.elapsed().as_secs_f64();
    let p = args.parallelism.to_string();
    let child_args: Vec<String> = if kind == "floor" {
        // In the order the due index hands them out, as scheduler-start sees them.
        let mut ids: Vec<(&str, &str)> = tasks
            .iter()
            .map(|t| (t.due_key.as_deref().unwrap_or(""), t.task_id.as_str()))
            .collect();
        ids.sort_by_key(|(k, _)| *k);
        let ids: Vec<&str> = ids.into_iter().map(|(_, id)| id).collect();
        let ids_file =
            std::env::temp_dir().join(format!("lifo-bench-ids-{}.txt", std::process::id()));
        std::fs::write(&ids_file, ids.join("\n")).map_err(|e| e.to_string())?;
        vec![
            "floor".into(),
            stack.dynamodb_local.endpoint.clone(),
            stack.table.clone(),
            ids_file.display().to_string(),
            p,
        ]
    } else {
        vec![
            "scheduler".into(),
            stack.dynamodb_local.endpoint.clone(),
            stack.moto.endpoint.clone(),
            stack.process_topic_arn.clone(),
            stack.table.clone(),
            shards.to_string(),
            date.format("%Y-%m-%d").to_string(),
            p,
        ]
    };
    let m = child_run(&child_args);
    if kind == "floor" {
        let _ = std::fs::remove_file(
            std::env::temp_dir().join(format!("lifo-bench-ids-{}.txt", std::process::id())),
        );
    }
    Ok((m?, load_s))
}

async fn bench(args: &Args, shards: u32, date: NaiveDate) -> Result<Row, String> {
    let tasks = due_tasks(args.tasks, date, shards);
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for t in &tasks {
        *per_key
            .entry(t.due_key.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let fair = args.tasks as f64 / f64::from(shards);
    let max_share = per_key.values().copied().max().unwrap_or(0) as f64 / fair;
    let (scheduler, load_s) = measured("scheduler", args, &tasks, shards, date).await?;
    let (floor, _) = measured("floor", args, &tasks, shards, date).await?;
    Ok(Row {
        shards,
        load_s,
        scheduler,
        floor,
        max_share,
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if let Some(child) = args.child {
        return match run_child(child).await {
            Ok(m) => {
                println!("{}", serde_json::to_string(&m).unwrap_or_default());
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let date = chrono::Utc::now().date_naive();
    let mut rows = Vec::new();
    for &shards in &args.shards {
        eprintln!(
            "benchmarking {} tasks with {shards} due shard(s)…",
            args.tasks
        );
        match bench(&args, shards, date).await {
            Ok(row) => rows.push(row),
            Err(e) => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    println!(
        "| due shards | tasks | started | scheduler-start wall | floor wall | ratio | peak RSS | requests | retries | max writes per key / fair share |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.1} s | {:.1} s | {:.2}× | {:.1} MB | {} | {} | {:.2}× |",
            r.shards,
            args.tasks,
            r.scheduler.started,
            r.scheduler.wall_ms as f64 / 1000.0,
            r.floor.wall_ms as f64 / 1000.0,
            r.scheduler.wall_ms as f64 / r.floor.wall_ms.max(1) as f64,
            r.scheduler.peak_rss_kb as f64 / 1024.0,
            r.scheduler.requests,
            r.scheduler.retries,
            r.max_share,
        );
    }
    for r in &rows {
        eprintln!(
            "({} shards: loading {} tasks took {:.1} s; the floor client peaked at {:.1} MB)",
            r.shards,
            args.tasks,
            r.load_s,
            r.floor.peak_rss_kb as f64 / 1024.0
        );
    }
    println!();
    println!(
        "Reproduce: cargo run --release -p lifo-lab --bin lifo-bench-scheduler -- --tasks {} --shards {} --parallelism {}",
        args.tasks,
        args.shards
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        args.parallelism
    );
    std::process::ExitCode::SUCCESS
}
