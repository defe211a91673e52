//! The `lifo` command: inspect and operate a queue, against AWS (the
//! caller's own credentials, like the AWS CLI) or the local stack
//! (`--endpoint-url`). Output is a table by default, `--json` for scripts.
//! Errors are one clear line and a non-zero exit code.

pub mod plot;
pub mod simulate;

use clap::{Parser, Subcommand};
use lifo_core::{CancelError, Store, StoreError, Task, now_ms};
use serde_json::{Value, json};
use std::fmt::Write as _;

#[derive(Debug, Parser)]
#[command(
    name = "lifo",
    version,
    about = "Inspect and operate a LIFO task queue"
)]
pub struct Cli {
    /// The queue table (the stack's TableName output).
    #[arg(long, env = "LIFO_TABLE", global = true, default_value = "QueueTable")]
    pub table: String,
    /// AWS region (default: the usual AWS configuration).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// Endpoint of a local DynamoDB (e.g. the one `lifo local up` prints).
    #[arg(long, env = "LIFO_ENDPOINT_URL", global = true)]
    pub endpoint_url: Option<String>,
    /// LIFO index shards of the stack (ShardCount).
    #[arg(long, global = true, default_value_t = 1)]
    pub shards: u32,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One task, a user's tasks, cancel, history.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// Queue depth and freshness: claimable tasks per shard, newest and oldest claimable age.
    #[command(
        after_help = "Example: lifo stats --shards 4 --table lifo-queue-QueueTable-1R4ZQ8X2K7BT"
    )]
    Stats,
    /// Start DynamoDB Local and moto with the stack's resources and the in-process pipeline;
    /// stays up until Ctrl-C, then stops everything it started.
    #[command(subcommand)]
    Local(LocalCommand),
    /// Run a workload through the local pipeline (fresh DynamoDB Local + moto) faster than
    /// the downstream can serve it; report freshness, shedding and cost, and plot age at start.
    #[command(
        after_help = "Example: lifo simulate --compare --rate 20 --capacity 5 --latency-ms 500 --duration 40 --ttl 20"
    )]
    Simulate(simulate::SimulateArgs),
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Show one task.
    #[command(after_help = "Example: lifo tasks get order-1001")]
    Get { id: String },
    /// A user's tasks, newest first (all statuses).
    #[command(after_help = "Example: lifo tasks list --user 1234 --limit 50")]
    List {
        #[arg(long)]
        user: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Cancel a task that is still SCHEDULED.
    #[command(after_help = "Example: lifo tasks cancel 0193a1b2-…")]
    Cancel { id: String },
    /// A task's transitions, oldest first.
    #[command(after_help = "Example: lifo tasks history order-1001")]
    History { id: String },
}

#[derive(Debug, Subcommand)]
pub enum LocalCommand {
    /// Start the local stack and pipeline; Ctrl-C stops it.
    #[command(after_help = "Example: lifo local up --shards 4")]
    Up,
}

/// A failed command: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Cancel(#[from] CancelError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Other(String),
}

/// The store the options point at.
pub async fn store(cli: &Cli) -> Store {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = &cli.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(endpoint) = &cli.endpoint_url {
        loader = loader.endpoint_url(endpoint);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "lifo",
            ));
        }
        if cli.region.is_none() {
            loader = loader.region(aws_config::Region::new("us-east-1"));
        }
    }
    Store::new(
        aws_sdk_dynamodb::Client::new(&loader.load().await),
        &cli.table,
    )
}

fn age(ms: u64, now: u64) -> String {
    format!("{:.1} s", now.saturating_sub(ms) as f64 / 1000.0)
}

fn task_json(t: &Task) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn task_row(t: &Task) -> String {
    format!(
        "{:<38} {:<10} {:>3} {:<10} {}",
        t.task_id,
        t.task_status.as_str(),
        t.attempts,
        t.due_date.as_deref().unwrap_or("-"),
        t.last_error.as_deref().unwrap_or("")
    )
}

/// Runs a command (other than `local up`) and returns what to print.
pub async fn run(cli: &Cli, store: &Store) -> Result<String, CliError> {
    let now = now_ms();
    match &cli.command {
        Command::Tasks(TasksCommand::Get { id }) => {
            let t = store
                .get(id)
                .await?
                .ok_or_else(|| CliError::NotFound(format!("no task {id}")))?;
            if cli.json {
                return Ok(task_json(&t).to_string());
            }
            let mut out = String::new();
            let _ = writeln!(out, "taskId      {}", t.task_id);
            let _ = writeln!(out, "status      {}", t.task_status);
            let _ = writeln!(out, "created     {} ago", age(t.task_created, now));
            let _ = writeln!(out, "attempts    {} (token {})", t.attempts, t.token);
            let _ = writeln!(
                out,
                "expires     in {} s",
                (t.expires_at as i64) - (now / 1000) as i64
            );
            if let Some(u) = &t.user_id {
                let _ = writeln!(out, "user        {u}");
            }
            if let Some(d) = &t.due_date {
                let _ = writeln!(out, "due         {d}");
            }
            if let Some(e) = &t.last_error {
                let _ = writeln!(out, "lastError   {e}");
            }
            let _ = write!(out, "payload     {}", Value::Object(t.payload.clone()));
            Ok(out)
        }
        Command::Tasks(TasksCommand::List { user, limit }) => {
            let mut tasks = Vec::new();
            let mut start = None;
            while tasks.len() < *limit {
                let want = i32::try_from((*limit - tasks.len()).min(100)).unwrap_or(100);
                let (page, next) = store.user_tasks(user, want, start).await?;
                tasks.extend(page);
                start = next;
                if start.is_none() {
                    break;
                }
            }
            if cli.json {
                return Ok(Value::Array(tasks.iter().map(task_json).collect()).to_string());
            }
            let mut out = format!(
                "{:<38} {:<10} {:>3} {:<10} {}\n",
                "TASK", "STATUS", "ATT", "DUE", "LAST ERROR"
            );
            for t in &tasks {
                out.push_str(&task_row(t));
                out.push('\n');
            }
            let _ = write!(out, "{} task(s) of user {user}, newest first", tasks.len());
            Ok(out)
        }
        Command::Tasks(TasksCommand::Cancel { id }) => {
            let t = store.cancel(id, now).await?;
            Ok(if cli.json {
                task_json(&t).to_string()
            } else {
                format!("cancelled {}", t.task_id)
            })
        }
        Command::Tasks(TasksCommand::History { id }) => {
            let t = store
                .get(id)
                .await?
                .ok_or_else(|| CliError::NotFound(format!("no task {id}")))?;
            if cli.json {
                return Ok(serde_json::to_value(&t.history)
                    .unwrap_or(Value::Null)
                    .to_string());
            }
            let mut out = format!(
                "{:<10} {:>10} {:>7} {:>5}  {}\n",
                "STATUS", "AGO", "ATTEMPT", "TOKEN", "REASON"
            );
            for h in &t.history {
                let _ = writeln!(
                    out,
                    "{:<10} {:>10} {:>7} {:>5}  {}",
                    h.status.as_str(),
                    age(h.at, now),
                    h.attempt,
                    h.token,
                    h.reason.as_deref().unwrap_or("")
                );
            }
            let _ = write!(
                out,
                "task {} is {} ({} transitions)",
                t.task_id,
                t.task_status,
                t.history.len()
            );
            Ok(out)
        }
        Command::Stats => {
            let horizon = 0;
            let mut shards = Vec::new();
            for shard in 0..cli.shards.max(1) {
                let depth = store.claimable_depth_in(shard, now, horizon).await?;
                let newest = store.edge_claimable(shard, now, horizon, false).await?;
                let oldest = store.edge_claimable(shard, now, horizon, true).await?;
                shards.push((shard, depth, newest, oldest));
            }
            if cli.json {
                let rows: Vec<Value> = shards
                    .iter()
                    .map(|(s, d, n, o)| {
                        json!({"shard": s, "claimable": d,
                               "newestAgeMs": n.map(|c| now.saturating_sub(c)),
                               "oldestAgeMs": o.map(|c| now.saturating_sub(c))})
                    })
                    .collect();
                return Ok(Value::Array(rows).to_string());
            }
            let mut out = format!(
                "{:>5} {:>10} {:>12} {:>12}\n",
                "SHARD", "CLAIMABLE", "NEWEST AGE", "OLDEST AGE"
            );
            let show = |c: &Option<u64>| c.map_or("-".to_owned(), |c| age(c, now));
            for (s, d, n, o) in &shards {
                let _ = writeln!(out, "{:>5} {:>10} {:>12} {:>12}", s, d, show(n), show(o));
            }
            let total: usize = shards.iter().map(|(_, d, _, _)| d).sum();
            let _ = write!(out, "{total} claimable task(s) in table {}", cli.table);
            Ok(out)
        }
        Command::Local(_) | Command::Simulate(_) => Err(CliError::Other(
            "this command runs the local stack, not a table".into(),
        )),
    }
}

/// `lifo local up`.
pub mod local {
    use lifo_core::Notifier;
    use lifo_local::{LocalStack, Pipeline, PipelineOptions};
    use process::runner::AnyRunner;
    use process::{ProcessConfig, Processor};
    use std::sync::Arc;

    /// Starts the local stack and the pipeline, prints the endpoints, and
    /// waits for Ctrl-C (or SIGTERM); then stops everything it started.
    pub async fn up(shards: u32) -> Result<(), String> {
        let stack = LocalStack::start().await.map_err(|e| e.to_string())?;
        let store = stack.store();
        let max_ttl: u64 = stack
            .template
            .parameter_default("MaxTaskTtlSeconds")
            .map_err(|e| e.to_string())?
            .parse()
            .map_err(|e| format!("MaxTaskTtlSeconds: {e}"))?;
        let trigger = Arc::new(stack.trigger(store.clone(), shards, max_ttl));
        // The runner from the same environment variables as in Lambda
        // (RUNNER, RUNNER_MAX_CONCURRENCY, RUNNER_LATENCY_MS, …).
        let runner =
            Arc::new(AnyRunner::from_source(&lifo_core::config::Env).map_err(|e| e.to_string())?);
        let processor = Arc::new(Processor::new(
            store.clone(),
            Notifier::new(stack.sns.clone(), &stack.trigger_topic_arn),
            runner,
            ProcessConfig {
                shard_count: shards,
                max_ttl_seconds: max_ttl,
                ..ProcessConfig::new(stack.table.clone(), stack.trigger_topic_arn.clone())
            },
        ));
        let pipeline = Pipeline::start(&stack, trigger, processor, PipelineOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        println!(
            "DynamoDB Local  {}  (pid {})",
            stack.dynamodb_local.endpoint,
            stack.dynamodb_local.pid()
        );
        println!(
            "moto (SNS/SQS)  {}  (pid {})",
            stack.moto.endpoint,
            stack.moto.pid()
        );
        println!("table           {}", stack.table);
        println!("process topic   {}", stack.process_topic_arn);
        println!("trigger topic   {}", stack.trigger_topic_arn);
        println!(
            "Try: lifo --endpoint-url {} --shards {shards} stats",
            stack.dynamodb_local.endpoint
        );
        println!("Ctrl-C stops the pipeline, DynamoDB Local and moto.");
        lifo_local::interrupted().await;
        pipeline.stop().await;
        println!("stopped");
        Ok(())
    }
}
