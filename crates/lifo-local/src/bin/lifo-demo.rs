//! The local pipeline demo: a burst of tasks faster than the simulated
//! downstream can serve, through the real handlers on DynamoDB Local + moto.
//! Prints the start order, counts by status, freshness and write units.

use clap::Parser;
use create::{CreateConfig, Creator};
use lifo_core::{Notifier, now_ms};
use lifo_local::report::{Observer, Report};
use lifo_local::{LocalStack, Pipeline, PipelineOptions, pipeline::PipelineStats};
use process::runner::SimulatedRunner;
use process::{ProcessConfig, Processor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the LIFO queue locally, end to end, and reports what happened.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "Example: lifo-demo --tasks 150 --rate 30 --ttl 8 --shards 4"
)]
struct Args {
    /// Tasks to create.
    #[arg(long, default_value_t = 150)]
    tasks: usize,
    /// Arrival rate, tasks per second.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// Time to live of each task, seconds (tasks not started by then are shed).
    #[arg(long, default_value_t = 8)]
    ttl: u64,
    /// LIFO index shards.
    #[arg(long, default_value_t = 4)]
    shards: u32,
    /// Tasks the simulated downstream runs at once.
    #[arg(long, default_value_t = 3)]
    concurrency: usize,
    /// Duration of one simulated task, milliseconds.
    #[arg(long, default_value_t = 300)]
    latency_ms: u64,
    /// Time budget of one process invocation, seconds (then it tail-calls).
    #[arg(long, default_value_t = 5)]
    budget: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(130),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Returns Ok(false) when interrupted.
async fn run(args: Args) -> lifo_local::Result<bool> {
    println!("Starting Amazon DynamoDB Local and moto on loopback…");
    let stack = LocalStack::start().await?;
    println!(
        "  DynamoDB Local {} (pid {}), moto {} (pid {})",
        stack.dynamodb_local.endpoint,
        stack.dynamodb_local.pid(),
        stack.moto.endpoint,
        stack.moto.pid()
    );
    println!(
        "  table {} and topics created from template.yaml",
        stack.table
    );

    let store = stack.store();
    let max_ttl: u64 = stack
        .template
        .parameter_default("MaxTaskTtlSeconds")?
        .parse()
        .unwrap_or(604_800);
    let creator = Creator::new(
        store.clone(),
        CreateConfig {
            table_name: stack.table.clone(),
            shard_count: args.shards,
            default_ttl_seconds: args.ttl,
            max_ttl_seconds: max_ttl,
            ..CreateConfig::new(stack.table.clone())
        },
    );
    let trigger = Arc::new(stack.trigger(store.clone(), args.shards, max_ttl));
    let runner = Arc::new(SimulatedRunner::new(
        args.concurrency,
        Duration::from_millis(args.latency_ms),
        0.0,
        0.0,
    ));
    let processor = Arc::new(Processor::new(
        store.clone(),
        Notifier::new(stack.sns.clone(), &stack.trigger_topic_arn),
        runner,
        ProcessConfig {
            table_name: stack.table.clone(),
            trigger_topic_arn: stack.trigger_topic_arn.clone(),
            shard_count: args.shards,
            max_ttl_seconds: max_ttl,
            time_budget: Duration::from_secs(args.budget),
            deadline_margin: Duration::from_secs(2),
            idle_poll: Duration::from_millis(100),
            max_attempts: 3,
            lease_margin: Duration::from_millis(500),
            order: lifo_core::Order::Lifo,
        },
    ));
    let pipeline = Pipeline::start(&stack, trigger, processor, PipelineOptions::default()).await?;
    println!(
        "Creating {} tasks at {}/s (ttl {} s, {} shards); downstream: {} at a time, {} ms each ({:.1} tasks/s)",
        args.tasks,
        args.rate,
        args.ttl,
        args.shards,
        args.concurrency,
        args.latency_ms,
        args.concurrency as f64 * 1000.0 / args.latency_ms.max(1) as f64
    );

    let outcome = tokio::select! {
        r = drive(&args, &creator, &stack, &pipeline.stats) => Some(r),
        _ = lifo_local::interrupted() => None,
    };
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    let Some(result) = outcome else {
        println!("Interrupted: stopped the pipeline; stopping DynamoDB Local and moto.");
        return Ok(false);
    };
    let (created, observer) = result?;
    let report = Report::build(&created, &observer, store.meter(), now_ms());
    println!();
    print!("{report}");
    println!(
        "Pipeline: {} stream records, {} trigger invocations, {} process invocations, {} tail calls, {} errors",
        PipelineStats::get(&stats.stream_records),
        PipelineStats::get(&stats.trigger_invocations),
        PipelineStats::get(&stats.process_invocations),
        PipelineStats::get(&stats.tail_calls),
        PipelineStats::get(&stats.errors),
    );
    println!(
        "Stopping DynamoDB Local (pid {}) and moto (pid {}).",
        stack.dynamodb_local.pid(),
        stack.moto.pid()
    );
    Ok(true)
}

/// Creates the tasks at the arrival rate, then watches until nothing is
/// left to do. Returns the created ids (in creation order) and what was seen.
async fn drive(
    args: &Args,
    creator: &Creator,
    stack: &LocalStack,
    stats: &PipelineStats,
) -> lifo_local::Result<(Vec<String>, Observer)> {
    let started = Instant::now();
    let tick = Duration::from_millis(100);
    let mut created: Vec<String> = Vec::with_capacity(args.tasks);
    let mut observer = Observer::default();
    let mut last_print = Instant::now();
    loop {
        let due = ((started.elapsed().as_secs_f64() * args.rate) as usize).min(args.tasks);
        if due > created.len() {
            let count = due - created.len();
            let out = creator
                .handle(serde_json::json!({ "count": count, "ttlSeconds": args.ttl }))
                .await
                .map_err(|e| lifo_local::LocalError(format!("create failed: {e}")))?;
            created.extend(out.created);
        }
        if created.len() == args.tasks || last_print.elapsed() >= Duration::from_secs(1) {
            observer.observe(stack.scan_tasks().await?);
        }
        let outstanding = observer.outstanding(&created, now_ms());
        if last_print.elapsed() >= Duration::from_secs(1) {
            last_print = Instant::now();
            let done = created
                .iter()
                .filter(|id| {
                    observer
                        .get(id)
                        .is_some_and(|t| t.task_status.is_terminal())
                })
                .count();
            println!(
                "  t={:>4.1}s created {:>4}  to do {:>4}  finished {:>4}  process invocations {}",
                started.elapsed().as_secs_f64(),
                created.len(),
                outstanding,
                done,
                PipelineStats::get(&stats.process_invocations)
            );
        }
        if created.len() == args.tasks && outstanding == 0 {
            return Ok((created, observer));
        }
        if started.elapsed() > Duration::from_secs(args.timeout) {
            return Err(lifo_local::LocalError(format!(
                "{outstanding} tasks still to do after {} s",
                args.timeout
            )));
        }
        tokio::time::sleep(tick).await;
    }
}
