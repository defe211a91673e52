//! The `lifo` command: inspect and operate a queue, against AWS (the
//! caller's own credentials, like the AWS CLI) or the local stack
//! (`--endpoint-url`). Output is a table by default, `--json` for scripts.
//! Errors are one clear line and a non-zero exit code.

pub mod bench;
pub mod loads;
pub mod local;
pub mod plot;
pub mod queue;
pub mod retry;
pub mod simulate;
pub mod stats;
pub mod target;
pub mod tasks;
pub mod ui;

pub use target::{Target, connect};

use clap::{Parser, Subcommand};
use lifo_core::store::OperateError;
use lifo_core::{CancelError, StoreError, now_ms};
use tasks::Since;

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
    /// The stack's TaskTtlSeconds: the TTL of a created or retried task that gives none.
    #[arg(long, global = true, default_value_t = 3600)]
    pub task_ttl_seconds: u64,
    /// The stack's RetentionSeconds: how long tasks stay readable after they expire.
    #[arg(long, global = true, default_value_t = 604_800)]
    pub retention_seconds: u64,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, find, retry, delete tasks: one, a user's, or the failed ones.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// Stop processing: processors claim nothing more (they finish what runs, within their
    /// 5 s poll) and nobody is woken. Tasks keep expiring while paused: it is a LIFO queue.
    #[command(
        after_help = "Example: lifo --stack lifo-queue pause --reason \"downstream is down\""
    )]
    Pause {
        /// Why (kept on the control item, shown by `stats`).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Start processing again and wake the processor.
    #[command(after_help = "Example: lifo --stack lifo-queue resume")]
    Resume {
        /// Why (kept on the control item).
        #[arg(long)]
        reason: Option<String>,
    },
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
    /// Serve the web console: overview (live), failed and scheduled tasks, a task's payload and
    /// history, and the operator's actions. Prints the URL to open, with its access token.
    #[command(
        after_help = "Examples: lifo --stack lifo-queue ui\n          lifo --endpoint-url http://127.0.0.1:8000 ui --listen 127.0.0.1:0 --read-only"
    )]
    Ui(ui::UiArgs),
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Create tasks: the create function's request, from a file or a count of demo tasks.
    /// Locally it runs create's own code against the table; with --stack it invokes the
    /// stack's CreateFunction, as the console does.
    #[command(
        after_help = "Example: lifo --endpoint-url http://127.0.0.1:8000 tasks create --file events/create-tasks.json"
    )]
    Create {
        /// A create request (JSON): {"tasks": [...]} or {"count": N}.
        #[arg(long, conflicts_with = "count")]
        file: Option<std::path::PathBuf>,
        /// N demo tasks (1 to 1000).
        #[arg(long)]
        count: Option<u64>,
    },
    /// Show one task.
    #[command(after_help = "Example: lifo tasks get order-1001")]
    Get { id: String },
    /// A user's tasks, newest first (all statuses), or with --failed the failed tasks, newest
    /// first, from the failed-task index (no scan).
    #[command(
        after_help = "Examples: lifo tasks list --user 1234 --limit 50\n          lifo tasks list --failed --since 1h --error-prefix \"HTTP 5\""
    )]
    List {
        #[arg(long, required_unless_present = "failed", conflicts_with = "failed")]
        user: Option<String>,
        /// The failed tasks instead.
        #[arg(long)]
        failed: bool,
        /// With --failed: failed since (90s, 15m, 1h, 2d, an RFC 3339 time, or epoch ms).
        #[arg(long, requires = "failed")]
        since: Option<Since>,
        /// With --failed: only those whose last error starts with this.
        #[arg(long, requires = "failed")]
        error_prefix: Option<String>,
        #[arg(long, default_value_t = 100, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
        limit: usize,
    },
    /// Cancel a task that is still SCHEDULED.
    #[command(after_help = "Example: lifo tasks cancel 0193a1b2-…")]
    Cancel { id: String },
    /// A task's transitions, oldest first.
    #[command(after_help = "Example: lifo tasks history order-1001")]
    History { id: String },
    /// Run failed tasks (or tasks shed by expiry) again, as new work: attempts reset, a new
    /// expiry, newest in the LIFO order. By id, or every failure of a window with --failed.
    #[command(
        after_help = "Examples: lifo tasks retry order-1001 order-1002\n          lifo tasks retry --failed --since 2h --error-prefix \"HTTP 503\" --dry-run"
    )]
    Retry(RetryArgs),
    /// Delete tasks (any status, except one running under a live lease).
    #[command(after_help = "Example: lifo tasks delete order-1001")]
    Delete {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct RetryArgs {
    /// The tasks to retry (FAILURE, or shed by expiry).
    #[arg(conflicts_with = "failed")]
    pub ids: Vec<String>,
    /// Every failed task of the window instead (the failed-task index, newest first).
    #[arg(long)]
    pub failed: bool,
    /// With --failed: failed since (90s, 15m, 1h, 2d, an RFC 3339 time, or epoch ms).
    #[arg(long, requires = "failed")]
    pub since: Option<Since>,
    /// With --failed: only those whose last error starts with this.
    #[arg(long, requires = "failed")]
    pub error_prefix: Option<String>,
    /// With --failed: at most this many (newest first).
    #[arg(long, default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub limit: usize,
    /// List what would be retried; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Retries per second at most (each is 3 write units).
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rate: u32,
    /// Why (kept in each task's history).
    #[arg(long)]
    pub reason: Option<String>,
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
        #[command(flatten)]
        pacing: Pacing,
        /// Serve the web console too (`lifo ui`) on --ui-listen.
        #[arg(long)]
        ui: bool,
        /// Where the console listens (port 0: a free one).
        #[arg(long, default_value = "127.0.0.1:7070", requires = "ui")]
        ui_listen: std::net::SocketAddr,
    },
}

/// The downstream's pacing, as the template's RunnerMaxPerSecond, RunnerBurst and
/// RetryBackoffSeconds set it in AWS.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Pacing {
    /// Tasks started per second at most (0: no limit).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub rate_limit: u32,
    /// Starts allowed above the rate at once: in any second, at most rate + burst start.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub burst: u32,
    /// Seconds a failed task rests before its next attempt (doubling per attempt; 0: off).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub retry_backoff: u64,
}

impl Pacing {
    pub fn rate_limit(&self) -> Option<process::RateLimit> {
        Some(process::RateLimit {
            per_second: std::num::NonZeroU32::new(self.rate_limit)?,
            burst: std::num::NonZeroU32::new(self.burst)?,
        })
    }
}

/// A failed command: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Cancel(#[from] CancelError),
    #[error(transparent)]
    Operate(#[from] OperateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Other(String),
}

/// Runs a command (other than `local up`, `simulate` and `bench`) and
/// returns what to print.
pub async fn run(cli: &Cli, target: &Target) -> Result<String, CliError> {
    match &cli.command {
        Command::Tasks(cmd) => tasks::run(cmd, target, cli.json).await,
        Command::Pause { reason } => queue::set(target, true, reason.as_deref(), cli.json).await,
        Command::Resume { reason } => queue::set(target, false, reason.as_deref(), cli.json).await,
        Command::Stats { days } => {
            let now = now_ms();
            let stats = stats::collect(target, now, *days).await?;
            Ok(if cli.json {
                stats.json(now).to_string()
            } else {
                stats.table(now, target.store.table())
            })
        }
        Command::Local(_) | Command::Simulate(_) | Command::Bench(_) | Command::Ui(_) => {
            Err(CliError::Other(
                "this command runs a server or the local stack, not one request".into(),
            ))
        }
    }
}
