//! The `lifo` command: inspect and operate a queue, against AWS (the
//! caller's own credentials, like the AWS CLI) or the local stack
//! (`--endpoint-url`). Output is a table by default, `--json` for scripts.
//! Errors are one clear line and a non-zero exit code.

pub mod bench;
pub mod plot;
pub mod simulate;
pub mod stats;

use clap::{Parser, Subcommand};
use lifo_core::{CancelError, Store, StoreError, Task, now_ms};
use serde_json::Value;
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
    /// Read the table and its settings from this CloudFormation stack's outputs;
    /// they override --table, --shards, --due-shards and --max-ttl-seconds.
    #[arg(long, env = "LIFO_STACK", global = true)]
    pub stack: Option<String>,
    /// AWS region (default: the usual AWS configuration).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// Endpoint of a local DynamoDB (e.g. the one `lifo local up` prints).
    #[arg(long, env = "LIFO_ENDPOINT_URL", global = true)]
    pub endpoint_url: Option<String>,
    /// LIFO index shards of the stack (ShardCount).
    #[arg(long, global = true, default_value_t = 1)]
    pub shards: u32,
    /// Due-date index shards of the stack (DueShardCount).
    #[arg(long, global = true, default_value_t = 50)]
    pub due_shards: u32,
    /// The stack's MaxTaskTtlSeconds: bounds what `stats` reads of the index.
    #[arg(long, global = true, default_value_t = 604_800)]
    pub max_ttl_seconds: u64,
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
    /// Queue depth by status and shard (pending, running, shed by expiry in the last hour,
    /// scheduled by due date) and freshness (newest and oldest claimable age). Index queries
    /// only (COUNTs, and the two ends of each shard for the ages): no scan.
    #[command(after_help = "Example: lifo --stack lifo-queue stats --days 14")]
    Stats {
        /// Count SCHEDULED tasks due in the next DAYS days (and the 7 days before today).
        #[arg(long, default_value_t = 7)]
        days: u32,
    },
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
    /// Measure what the README quotes: write units per task, freshness under 2× overload
    /// (LIFO vs FIFO), CPU and memory of the process binary, cold starts, binary sizes.
    /// Prints a Markdown table with the command line that reproduces each row.
    #[command(
        after_help = "Example: lifo bench --only process,cold-start --tasks 1000 --bin-dir target/release"
    )]
    Bench(bench::BenchArgs),
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
    #[command(
        after_help = "Example: lifo local up --shards 4 --scheduler-every 10 --data-dir .lifo-data"
    )]
    Up {
        /// Seconds between scheduler-start runs (in AWS: hourly, 00:00-05:00 UTC).
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
        scheduler_every: u64,
        /// Keep DynamoDB Local's table in DIR across restarts (default: in memory). A restart
        /// resumes: tasks still queued are served, and tasks a killed run held are claimed again
        /// when their lease ends.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<std::path::PathBuf>,
        /// Seconds each process invocation may run (its deadline, and so the longest lease);
        /// default: the function's Timeout in template.yaml (900).
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(5..=900))]
        process_timeout: Option<u64>,
    },
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

/// The queue the options point at: its store and settings.
#[derive(Debug, Clone)]
pub struct Target {
    pub store: Store,
    pub shards: u32,
    pub due_shards: u32,
    pub max_ttl_seconds: u64,
}

/// AWS configuration from the usual sources, with `--region`; with
/// `--endpoint-url`, that endpoint for DynamoDB and local credentials when
/// none are set.
async fn aws_config(cli: &Cli, endpoint: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = &cli.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(endpoint) = endpoint {
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
    loader.load().await
}

/// The outputs of a CloudFormation stack, by key.
async fn stack_outputs(
    cli: &Cli,
    stack: &str,
) -> Result<std::collections::HashMap<String, String>, CliError> {
    // CloudFormation is reached the usual way (AWS_ENDPOINT_URL_CLOUDFORMATION
    // works); --endpoint-url is DynamoDB's.
    let cfn = aws_sdk_cloudformation::Client::new(&aws_config(cli, None).await);
    let out = cfn
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await
        .map_err(|e| {
            CliError::Other(format!(
                "reading stack {stack}: {}",
                aws_sdk_cloudformation::error::DisplayErrorContext(&e)
            ))
        })?;
    let found = out
        .stacks
        .unwrap_or_default()
        .into_iter()
        .next()
        .ok_or_else(|| CliError::NotFound(format!("no stack {stack}")))?;
    Ok(found
        .outputs
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| Some((o.output_key?, o.output_value?)))
        .collect())
}

/// Resolves `--stack` (or `--table` and friends) to a store and settings.
pub async fn connect(cli: &Cli) -> Result<Target, CliError> {
    let mut target = Target {
        store: Store::new(
            aws_sdk_dynamodb::Client::new(&aws_config(cli, cli.endpoint_url.as_deref()).await),
            &cli.table,
        ),
        shards: cli.shards,
        due_shards: cli.due_shards,
        max_ttl_seconds: cli.max_ttl_seconds,
    };
    let Some(stack) = &cli.stack else {
        return Ok(target);
    };
    let outputs = stack_outputs(cli, stack).await?;
    let output = |key: &str| {
        outputs.get(key).cloned().ok_or_else(|| {
            CliError::Other(format!(
                "stack {stack} has no output {key} (is it this project's template?)"
            ))
        })
    };
    fn number<T: std::str::FromStr>(key: &str, v: String) -> Result<T, CliError> {
        v.parse()
            .map_err(|_| CliError::Other(format!("stack output {key}={v:?} is not a number")))
    }
    let table = output("TableName")?;
    target.store = Store::new(target.store.client().clone(), &table);
    target.shards = number("ShardCount", output("ShardCount")?)?;
    target.due_shards = number("DueShardCount", output("DueShardCount")?)?;
    target.max_ttl_seconds = number("MaxTaskTtlSeconds", output("MaxTaskTtlSeconds")?)?;
    Ok(target)
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

/// Runs a command (other than `local up` and `simulate`) and returns what
/// to print.
pub async fn run(cli: &Cli, target: &Target) -> Result<String, CliError> {
    let now = now_ms();
    let store = &target.store;
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
            if let Some(lease) = t.lease_until {
                let _ = if t.lease_is_live(now) {
                    writeln!(out, "lease       live for another {}", age(now, lease))
                } else {
                    writeln!(
                        out,
                        "lease       expired {} ago: claimable again",
                        age(lease, now)
                    )
                };
            }
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
        Command::Stats { days } => {
            let stats = stats::collect(target, now, *days).await?;
            Ok(if cli.json {
                stats.json(now).to_string()
            } else {
                stats.table(now, store.table())
            })
        }
        Command::Local(_) | Command::Simulate(_) | Command::Bench(_) => Err(CliError::Other(
            "this command runs the local stack, not a table".into(),
        )),
    }
}

/// `lifo local up`.
pub mod local {
    use anyhow::Context as _;
    use lifo_core::Notifier;
    use lifo_local::stack::StackOptions;
    use lifo_local::{LocalStack, Pipeline, PipelineOptions};
    use process::runner::AnyRunner;
    use process::{ProcessConfig, Processor};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    /// What `lifo local up` was asked for.
    #[derive(Debug, Clone)]
    pub struct UpOptions {
        pub shards: u32,
        pub scheduler_every: Duration,
        pub data_dir: Option<PathBuf>,
        pub process_timeout: Option<Duration>,
    }

    /// Starts the local stack and the pipeline, prints the endpoints, and
    /// waits for Ctrl-C (or SIGTERM); then stops everything it started.
    /// If this process is killed outright, the servers die with it.
    pub async fn up(options: UpOptions) -> anyhow::Result<()> {
        let shards = options.shards;
        let stack = LocalStack::start_with(StackOptions {
            data_dir: options.data_dir.clone(),
        })
        .await?;
        let store = stack.store();
        let max_ttl: u64 = stack
            .template
            .parameter_default("MaxTaskTtlSeconds")?
            .parse()
            .context("template parameter MaxTaskTtlSeconds")?;
        let trigger = Arc::new(stack.trigger(store.clone(), shards, max_ttl));
        // The runner from the same environment variables as in Lambda
        // (RUNNER, RUNNER_MAX_CONCURRENCY, RUNNER_LATENCY_MS, …).
        let runner = Arc::new(AnyRunner::from_source(&lifo_core::config::Env)?);
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
        let pipeline_options = PipelineOptions {
            process_timeout: options.process_timeout,
            ..PipelineOptions::default()
        };
        let mut pipeline = Pipeline::start(&stack, trigger, processor, pipeline_options).await?;
        let scheduler = stack.scheduler(store.clone())?;
        let timeout = stack.template.function_timeout("SchedulerStartFunction")?;
        pipeline.run_scheduler(
            Arc::new(scheduler),
            options.scheduler_every,
            Duration::from_secs(timeout),
        );
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
        match &options.data_dir {
            Some(dir) => println!(
                "table           {} (kept in {})",
                stack.table,
                dir.display()
            ),
            None => println!("table           {} (in memory)", stack.table),
        }
        println!("process topic   {}", stack.process_topic_arn);
        println!("trigger topic   {}", stack.trigger_topic_arn);
        println!(
            "Try: lifo --endpoint-url {} --shards {shards} stats",
            stack.dynamodb_local.endpoint
        );
        println!(
            "scheduler-start runs every {} s (in AWS: hourly, 00:00-05:00 UTC).",
            options.scheduler_every.as_secs()
        );
        println!("Ctrl-C stops the pipeline, DynamoDB Local and moto.");
        lifo_local::interrupted().await;
        pipeline.stop().await;
        println!("stopped");
        Ok(())
    }
}
