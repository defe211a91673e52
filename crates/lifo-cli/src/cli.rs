//! The command line: what `lifo` accepts (clap) and how each command
//! calls an operation and prints its result. The operations themselves are
//! `lifo-ops`'s; nothing below this face knows of clap.

use crate::connect::Connection;
use crate::error::CliError;
use crate::print;
use clap::{Parser, Subcommand};
use lifo_core::now_ms;
use lifo_lambda::config::bounds;
use lifo_ops::Queue;
use lifo_ops::redrive::{Redrive, Selection};
use lifo_ops::since::Since;
use lifo_ops::tasks::{BatchReport, FailedFilter};
use serde_json::json;
use std::num::NonZeroU32;
use std::ops::RangeInclusive;

/// Why a redrive from the command line is recorded in the task's history.
const REDRIVE_REASON: &str = "retried with lifo tasks retry";

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
    /// Endpoint of a local DynamoDB (e.g. the one `lifo local up` prints):
    /// http:// or https://, a host and perhaps a port.
    #[arg(long, env = "LIFO_ENDPOINT_URL", global = true, value_parser = endpoint_url)]
    pub endpoint_url: Option<String>,
    /// Seconds to wait for a connection to DynamoDB (or CloudFormation,
    /// Lambda) before the command fails.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub connect_timeout: u64,
    /// Seconds to wait for an answer once connected; a request and its
    /// retries end within --connect-timeout + --read-timeout.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub read_timeout: u64,
    /// claimable index shards of the stack (ShardCount, 1 to 100).
    #[arg(long, global = true, default_value_t = 1, value_parser = u32_in(bounds::SHARD_COUNT))]
    pub shards: u32,
    /// Due-date index shards of the stack (DueShardCount, 1 to 100).
    #[arg(long, global = true, default_value_t = 50, value_parser = u32_in(bounds::DUE_SHARD_COUNT))]
    pub due_shards: u32,
    /// The stack's MaxTaskTtlSeconds (60 to 31536000): bounds what `stats` reads of the index.
    #[arg(long, global = true, default_value_t = 604_800, value_parser = u64_in(bounds::MAX_TTL_SECONDS))]
    pub max_ttl_seconds: u64,
    /// The stack's TaskTtlSeconds (60 to 604800): the TTL of a created or retried task that
    /// gives none.
    #[arg(long, global = true, default_value_t = 3600, value_parser = u64_in(bounds::TASK_TTL_SECONDS))]
    pub task_ttl_seconds: u64,
    /// The stack's RetentionSeconds (0 to 31536000): how long tasks stay readable after they
    /// expire.
    #[arg(long, global = true, default_value_t = 604_800, value_parser = u64_in(bounds::RETENTION_SECONDS))]
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
    /// Stop processing: processors claim nothing more (they finish what runs, within one
    /// PAUSE_POLL_MS, 5 s by default) and nobody is woken. Tasks keep expiring while paused:
    /// it is a LIFO queue.
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
    /// Queue depth by status and shard (pending, running, shed by expiry and superseded in the last hour,
    /// scheduled by due date) and freshness (newest and oldest claimable age). Index queries
    /// only (COUNTs, and the two ends of each shard for the ages): no scan.
    #[command(after_help = "Example: lifo --stack lifo-queue stats --days 14")]
    Stats {
        /// Count SCHEDULED tasks due in the next DAYS days (and the 7 days before today);
        /// 0 to 365, the farthest a task can be scheduled.
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(0..=i64::from(lifo_ops::stats::MAX_DAYS)))]
        days: u32,
        /// Also who waits, per tenant: each tenant's waiting tasks and oldest, the flooding
        /// ones (more than twice the mean), the oldest task of the others. Reads each shard's
        /// newest 200 claimable entries (about 4 read units a shard).
        #[arg(long)]
        tenants: bool,
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
    Simulate(lifo_lab::simulate_command::SimulateArgs),
    /// Plan a deployment: which order, how many shards and processors, the p95 age at start
    /// and tasks shed to expect, and the cost per million tasks beside SQS's.
    ///
    /// From an arrival rate (or bursts), the downstream's concurrency and latency, a TTL and a
    /// payload size, it runs the workload in every order for each seed in virtual time (the
    /// real process handler over the queue's in-memory model): seconds, no servers. The same
    /// flags and seed give the same answer.
    ///
    /// At the peak (the rate plus the most burst tasks within a second), starts/s = min(peak,
    /// concurrency / (latency + 2 × 5 ms)); under a steady overload shed/s = rate − that.
    /// ShardCount = ⌈(peak + 2 × starts/s + shed/s) / 750⌉: a task writes its shard's index key
    /// when it is put, claimed and finished, or put and shed, and a key takes 1,000 writes a
    /// second, planned at 75%. ProcessorCount = ⌈starts/s / (0.75 × 1000 × min(MemorySize,
    /// 1769) / 1769)⌉: ≈ 1 ms of CPU a task at one vCPU.
    #[command(after_help = lifo_lab::plan::HELP_EXAMPLE)]
    Plan(lifo_lab::plan::PlanArgs),
    /// Measure what the README quotes: write units per task, freshness under 2× overload
    /// (LIFO vs FIFO), CPU and memory of the process binary, cold starts, binary sizes.
    /// Prints a Markdown table with the command line that reproduces each row.
    #[command(
        after_help = "Example: lifo bench --only process,cold-start --tasks 1000 --bin-dir target/release"
    )]
    Bench(lifo_lab::bench::BenchArgs),
    /// Serve the web console: overview (live), failed and scheduled tasks, a task's payload and
    /// history, and the operator's actions. Prints the URL to open, with its access token.
    #[command(
        after_help = "Examples: lifo --stack lifo-queue ui\n          lifo --endpoint-url http://127.0.0.1:8000 ui --listen 127.0.0.1:0 --read-only"
    )]
    Ui(crate::ui::console::UiArgs),
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
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=lifo_ops::create::MAX_TASKS_PER_REQUEST as u64))]
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
        after_help = "Examples: lifo tasks retry order-1001 order-1002\n          lifo tasks retry --failed --since 2h --error-prefix \"HTTP 503\" --dry-run",
        name = "retry"
    )]
    Redrive(RedriveArgs),
    /// Delete tasks (any status, except one running under a live lease).
    #[command(after_help = "Example: lifo tasks delete order-1001")]
    Delete {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct RedriveArgs {
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
        pacing: lifo_local::pacing::Pacing,
        /// Which claimable tasks go first (the template's SelectionOrder): lifo, fifo, or
        /// adaptive (newest first, but a task near its deadline that can still start first).
        #[arg(long, default_value = "lifo")]
        order: lifo_core::Order,
        /// Serve the web console too (`lifo ui`) on --ui-listen.
        #[arg(long)]
        ui: bool,
        /// Where the console listens (port 0: a free one).
        #[arg(long, default_value = "127.0.0.1:7070", requires = "ui")]
        ui_listen: std::net::SocketAddr,
        /// Serve the HTTP API too (the `api` function's routes behind a local API Gateway: its
        /// authorizer, decoded paths, size limits and timeout) on --api-listen.
        #[arg(long)]
        api: bool,
        /// Where the HTTP API listens (port 0: a free one).
        #[arg(long, default_value = "127.0.0.1:7071", requires = "api")]
        api_listen: std::net::SocketAddr,
        /// Who may call the HTTP API: `iam` (the stack's HttpApi: SigV4 with the local stack's
        /// credentials, key `local`, secret `local`, region us-east-1), `jwt` (the JWT API: a
        /// local issuer's tokens, printed at start) or `none` (anyone on loopback).
        #[arg(long, value_enum, default_value = "iam", requires = "api")]
        api_auth: crate::local::ApiAuth,
        /// The SAM template the stack is built from (its table, topics, settings, timeouts
        /// and each function's IAM policy); default: the workspace's template.yaml.
        #[arg(long, value_name = "FILE")]
        template: Option<std::path::PathBuf>,
        /// Transaction conflicts injected at this rate (0 to 1) on the items transactions
        /// write (keyed tasks, their key items) and on transactions, as busy AWS tables meet
        /// them; conflicts with a transaction in flight are always answered.
        #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
        contention_rate: f64,
        /// How late a task shows up in the claimable index after its write: `aws` (a median
        /// of 100 ms, p99 about 1 s, as AWS's global secondary indexes), `off`, or milliseconds.
        #[arg(long, default_value = "aws", value_parser = lifo_local::index_lag::IndexLagMode::parse)]
        index_lag: lifo_local::index_lag::IndexLagMode,
    },
    /// Run one function's real binary on an event under AWS's Lambda Runtime Interface Emulator
    /// (what `sam local invoke` runs inside its container), against a fresh local stack, with
    /// the template's environment. Prints the answer; the emulator's and the function's lines go
    /// to stderr.
    #[command(
        after_help = "Example: lifo local invoke create --event events/create-tasks.json (after `cargo build --bins`)"
    )]
    Invoke {
        /// The function: create, trigger, process, scheduler-start or api.
        function: crate::local::Function,
        /// The event (a JSON file, e.g. events/create-tasks.json).
        #[arg(long, short = 'e', value_name = "FILE")]
        event: std::path::PathBuf,
        /// Where the function binaries are (`cargo build --bins` puts them in target/debug).
        #[arg(long, value_name = "DIR", default_value = "target/debug")]
        bin_dir: std::path::PathBuf,
        /// The SAM template the stack, the function's environment and its IAM policy come
        /// from; default: the workspace's template.yaml.
        #[arg(long, value_name = "FILE")]
        template: Option<std::path::PathBuf>,
    },
}

impl Cli {
    /// Where the queue is, as `connect` takes it.
    pub fn connection(&self) -> Connection {
        Connection {
            table: self.table.clone(),
            stack: self.stack.clone(),
            region: self.region.clone(),
            endpoint_url: self.endpoint_url.clone(),
            settings: lifo_ops::Settings {
                shards: self.shards,
                due_shards: self.due_shards,
                max_ttl_seconds: self.max_ttl_seconds,
                task_ttl_seconds: self.task_ttl_seconds,
                retention_seconds: self.retention_seconds,
            },
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout),
            read_timeout: std::time::Duration::from_secs(self.read_timeout),
        }
    }
}

/// Runs a command (other than `local up`, `simulate`, `plan`, `bench` and `ui`) and
/// returns what to print.
pub async fn run(cli: &Cli, q: &Queue) -> Result<String, CliError> {
    let as_json = cli.json;
    let now = now_ms();
    match &cli.command {
        Command::Tasks(cmd) => tasks(cmd, q, as_json).await,
        Command::Pause { reason } | Command::Resume { reason } => {
            let paused = matches!(cli.command, Command::Pause { .. });
            let c = lifo_ops::control::set(q, paused, reason.as_deref().unwrap_or("")).await?;
            Ok(if as_json {
                print::json(&c)
            } else {
                print::control(&c)
            })
        }
        Command::Stats { days, tenants } => {
            let stats = lifo_ops::stats::collect(q, now, lifo_ops::stats::PAST_DAYS, *days).await?;
            let tenants = match tenants {
                true => {
                    let rule = |load: &[(&str, usize)]| {
                        process::select::fair::flooding(load.iter().copied())
                    };
                    Some(lifo_ops::tenants::collect(q, now, &rule).await?)
                }
                false => None,
            };
            Ok(if as_json {
                let mut v = stats.json(now);
                if let Some(t) = &tenants {
                    v["tenants"] = t.json();
                }
                v.to_string()
            } else {
                let mut text = print::stats(&stats, now, q.store.table());
                if let Some(t) = &tenants {
                    text.push_str(&print::tenants(t));
                }
                text
            })
        }
        Command::Local(_)
        | Command::Simulate(_)
        | Command::Plan(_)
        | Command::Bench(_)
        | Command::Ui(_) => Err(CliError::Other(
            "this command runs a server or the local stack, not one request".into(),
        )),
    }
}

async fn tasks(cmd: &TasksCommand, q: &Queue, as_json: bool) -> Result<String, CliError> {
    let now = now_ms();
    let out = |v: String, text: String| if as_json { v } else { text };
    Ok(match cmd {
        TasksCommand::Create { file, count } => {
            let request = create_request(file.as_deref(), *count)?;
            let r = q.create_json(request).await?;
            out(print::json(&r), print::created(&r))
        }
        TasksCommand::Get { id } => {
            let t = lifo_ops::tasks::get(q, id).await?;
            out(print::json(&t), print::task(&t, now))
        }
        TasksCommand::List {
            user: Some(user),
            limit,
            ..
        } => {
            let page = lifo_ops::tasks::list_user(q, user, *limit, None).await?;
            out(print::json(&page.items), print::user_tasks(user, &page))
        }
        TasksCommand::List {
            user: None,
            since,
            error_prefix,
            limit,
            ..
        } => {
            let failed = lifo_ops::tasks::failed(
                q,
                &FailedFilter {
                    since_ms: since_ms(*since, now)?,
                    error_prefix: error_prefix.clone().unwrap_or_default(),
                    limit: *limit,
                },
            )
            .await?;
            out(print::json(&failed), print::failed(&failed, now))
        }
        TasksCommand::Cancel { id } => {
            let t = lifo_ops::tasks::cancel(q, id).await?;
            out(
                print::json(&t),
                format!("cancelled {}", crate::terminal::shown(&t.task_id)),
            )
        }
        TasksCommand::History { id } => {
            let h = lifo_ops::tasks::history(q, id).await?;
            out(print::json(&h.history), print::history(&h, now))
        }
        TasksCommand::Redrive(args) => {
            let r = redrive_request(args, now)?;
            let bar = progress_bar(as_json, &r);
            let report = lifo_ops::redrive::redrive(q, &r, &|done, of| {
                bar.set_length(of as u64);
                bar.set_position(done as u64);
            })
            .await;
            bar.finish_and_clear();
            let report = report?;
            // By id, every id must have been retried; a window skips what
            // someone else redrove meanwhile.
            let by_window = matches!(r.selection, Selection::Failed(_));
            finish(("retry", "retried"), by_window, &report, as_json)?
        }
        TasksCommand::Delete { ids } => {
            let report = lifo_ops::tasks::delete(q, ids).await?;
            finish(("delete", "deleted"), false, &report, as_json)?
        }
    })
}

/// A command on several ids fails when any was refused, naming each.
fn finish(
    (infinitive, past): (&str, &str),
    by_window: bool,
    report: &BatchReport,
    as_json: bool,
) -> Result<String, CliError> {
    if !report.refused.is_empty() {
        let asked = report.done.len() + report.refused.len();
        let reasons: Vec<&str> = report.refused.iter().map(|r| r.reason.as_str()).collect();
        return Err(CliError::Other(format!(
            "{past} {} of {asked}; {}",
            report.done.len(),
            reasons.join("; ")
        )));
    }
    Ok(if as_json {
        print::json(report)
    } else {
        print::batch(infinitive, past, by_window, report)
    })
}

fn redrive_request(args: &RedriveArgs, now: u64) -> Result<Redrive, CliError> {
    let selection = if args.failed {
        Selection::Failed(FailedFilter {
            since_ms: since_ms(args.since, now)?,
            error_prefix: args.error_prefix.clone().unwrap_or_default(),
            limit: args.limit,
        })
    } else if args.ids.is_empty() {
        return Err(CliError::Other(
            "give the ids to retry, or --failed (with --since, --error-prefix)".into(),
        ));
    } else {
        Selection::Ids(args.ids.clone())
    };
    Ok(Redrive {
        selection,
        per_second: NonZeroU32::new(args.rate).unwrap_or(NonZeroU32::MIN),
        reason: args
            .reason
            .clone()
            .unwrap_or_else(|| REDRIVE_REASON.to_owned()),
        dry_run: args.dry_run,
        until: None,
    })
}

fn progress_bar(as_json: bool, r: &Redrive) -> indicatif::ProgressBar {
    if as_json || r.dry_run || matches!(&r.selection, Selection::Ids(ids) if ids.len() < 2) {
        return indicatif::ProgressBar::hidden();
    }
    indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} retried, {per_sec}, {eta} left",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    )
}

/// `--since` as epoch ms at `now` (0 without one), refused in the future.
fn since_ms(since: Option<Since>, now: u64) -> Result<u64, CliError> {
    since.map_or(Ok(0), |s| {
        s.epoch_ms_checked(now)
            .map_err(|e| CliError::Other(format!("--since: {e}")))
    })
}

/// `tasks create`'s request: a file's JSON, or `{"count": N}`.
/// The create request's JSON text: the file's as written (its payloads'
/// numbers keep every digit), or a demo count's.
fn create_request(file: Option<&std::path::Path>, count: Option<u64>) -> Result<String, CliError> {
    match (file, count) {
        (Some(path), None) => {
            // Refused before it is read whole when it is over create's limit.
            let size = std::fs::metadata(path)
                .map_err(|e| CliError::Other(format!("reading {}: {e}", path.display())))?
                .len();
            lifo_ops::create::check_request_size(usize::try_from(size).unwrap_or(usize::MAX))
                .map_err(|e| CliError::Other(e.to_string()))?;
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Other(format!("reading {}: {e}", path.display())))?;
            // Checked for JSON here, so that the error names the file; the
            // text goes on as it is.
            serde_json::from_str::<serde::de::IgnoredAny>(&text)
                .map_err(|e| CliError::Other(format!("{} is not JSON: {e}", path.display())))?;
            Ok(text)
        }
        (None, Some(n)) => Ok(json!({ "count": n }).to_string()),
        _ => Err(CliError::Other(
            "give --file FILE (a create request) or --count N".into(),
        )),
    }
}

/// A clap parser of a u32 flag within `range` (its error names the flag
/// and the range).
fn u32_in(range: RangeInclusive<u32>) -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(i64::from(*range.start())..=i64::from(*range.end()))
}

/// A clap parser of a u64 flag within `range`.
fn u64_in(range: RangeInclusive<u64>) -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::<u64>::new().range(range)
}

/// `--endpoint-url`: an http or https URL with a host, checked before any
/// request is built (the SDK's own error would print the whole request).
fn endpoint_url(s: &str) -> Result<String, String> {
    let expected = "expected http://HOST[:PORT] or https://HOST[:PORT], e.g. http://127.0.0.1:8000";
    let uri: hyper::Uri = s
        .parse()
        .map_err(|e| format!("not a URL ({e}): {expected}"))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(host)) if !host.is_empty() => Ok(s.to_owned()),
        _ => Err(expected.to_owned()),
    }
}

/// A rate from 0 to 1.
fn parse_rate(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("{text:?} is not a rate from 0 to 1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `lifo local up --contention-rate` takes a rate, from 0 to 1.
    #[test]
    fn a_contention_rate_is_a_rate() {
        let up =
            |rate: &str| Cli::try_parse_from(["lifo", "local", "up", "--contention-rate", rate]);
        assert!(up("1.5").is_err());
        assert!(up("0.2").is_ok());
    }
}
