//! `lifo bench`: the figures the README quotes, each with the command line
//! that reproduces it, as a Markdown table.
//!
//! - write units per successful task (DynamoDB Local's ConsumedCapacity);
//! - freshness under 2× overload, LIFO vs FIFO (p95 age at start, per minute);
//! - CPU and peak RSS of the release `process` binary for N tasks, run
//!   against a local Lambda Runtime API ([`lifo_local::runtime_api`]);
//! - cold start of each release binary: from exec to its first request for
//!   an invocation;
//! - release binary sizes.

use anyhow::Context as _;
use lifo_core::{Order, Task, now_ms};
use lifo_local::LocalStack;
use lifo_local::report::percentile;
use lifo_local::runtime_api::{Answer, RuntimeApi, Usage, lambda_env, offline_function_env};
use lifo_local::simulate::{self, Outcome, Workload};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The four Lambda binaries.
pub const FUNCTIONS: [&str; 4] = ["create", "trigger", "process", "scheduler-start"];

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    WriteUnits,
    Freshness,
    Process,
    ColdStart,
    Sizes,
}

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Measure only these (comma-separated; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// Minutes of 2× overload for the freshness comparison (each order).
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Task TTL of the freshness runs, seconds.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub ttl: u64,
    /// Tasks the process binary runs for its CPU and memory figures.
    #[arg(long, default_value_t = 1000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub tasks: usize,
    /// Cold starts per binary (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub starts: usize,
    /// Directory of the Lambda binaries (`cargo build --release` puts them
    /// in target/release).
    #[arg(long, default_value = "target/release")]
    pub bin_dir: PathBuf,
}

/// One line of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub measure: String,
    pub result: String,
    pub target: String,
    /// Whether the target is met (None: no target).
    pub met: Option<bool>,
    pub command: String,
}

/// The table plus the raw figures (for `--json` and tests).
#[derive(Debug, Default)]
pub struct Bench {
    pub rows: Vec<Row>,
    pub figures: serde_json::Map<String, Value>,
}

impl BenchArgs {
    /// Refuses a `--minutes` clap cannot range-check (a float), naming the
    /// flag; the integer flags are range-checked by clap.
    pub fn check(&self) -> anyhow::Result<()> {
        if !(self.minutes.is_finite() && self.minutes > 0.0 && self.minutes <= 1440.0) {
            return Err(anyhow::anyhow!(
                "--minutes must be in (0, 1440], got {}",
                self.minutes
            ));
        }
        Ok(())
    }

    /// Seconds of the write-units run: 20, or `--minutes` if shorter.
    fn write_units_seconds(&self) -> f64 {
        (self.minutes * 60.0).clamp(1.0, 20.0)
    }

    fn wants(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }

    /// The command line that measures `part` alone with these settings.
    fn command(&self, part: Part, extra: &str) -> String {
        let name = clap::ValueEnum::to_possible_value(&part)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        let bin_dir = if self.bin_dir == Path::new("target/release") {
            String::new()
        } else {
            format!(" --bin-dir {}", self.bin_dir.display())
        };
        format!("lifo bench --only {name}{extra}{bin_dir}")
    }

    fn binary(&self, name: &str) -> anyhow::Result<PathBuf> {
        let path = self.bin_dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(anyhow::anyhow!(
                "no binary {}: build them with `make bench` or \
                 `cargo build --release -p create -p trigger -p process -p scheduler-start`",
                path.display()
            ))
        }
    }
}

fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

/// The downstream of the overload runs: 5 at a time × 500 ms = 10 tasks/s,
/// against 20 arrivals/s.
fn overload(duration: Duration, ttl_seconds: u64) -> Workload {
    Workload {
        rate: 20.0,
        duration: duration.max(Duration::from_secs(1)),
        concurrency: 5,
        latency: Duration::from_millis(500),
        ttl_seconds,
        shards: 1,
        budget: Duration::from_secs(10),
        seed: 1,
    }
}

async fn run_order(workload: &Workload, order: Order) -> anyhow::Result<Outcome> {
    let arrivals = workload.arrivals();
    simulate::run(workload, order, &arrivals, &mut |_| {})
        .await
        .with_context(|| format!("{order} run"))
}

/// p95 age at start (ms) of the starts in each minute of the load (the
/// last one may be partial).
fn p95_per_minute(o: &Outcome) -> Vec<u64> {
    let minutes = (o.workload.duration.as_secs_f64() / 60.0).ceil().max(1.0) as usize;
    (0..minutes)
        .map(|m| {
            let mut ages: Vec<u64> = o
                .starts
                .iter()
                .filter(|s| {
                    (s.at_s / 60.0) as usize == m && s.at_s <= o.workload.duration.as_secs_f64()
                })
                .map(|s| s.age_ms)
                .collect();
            ages.sort_unstable();
            percentile(&ages, 95.0)
        })
        .collect()
}

/// A LIFO overload run of 20 s (or `--minutes`, if shorter).
async fn write_units(args: &BenchArgs, bench: &mut Bench) -> anyhow::Result<()> {
    let w = overload(Duration::from_secs_f64(args.write_units_seconds()), 10);
    let o = run_order(&w, Order::Lifo).await?;
    bench.figures.insert(
        "writeUnitsPerSuccessfulTask".into(),
        json!(o.write_units_per_successful_task),
    );
    bench.figures.insert(
        "writeUnitsPerSuccess".into(),
        json!(o.write_units_per_success),
    );
    bench.rows.push(Row {
        measure: "Write units per successful task (put + claim + finish, incl. GSI)".into(),
        result: format!(
            "{:.2} (all writes incl. shed tasks / successes: {:.2})",
            o.write_units_per_successful_task, o.write_units_per_success
        ),
        target: "≤ 6".into(),
        met: Some(o.write_units_per_successful_task <= 6.0 + 1e-9),
        command: args.command(
            Part::WriteUnits,
            &if args.write_units_seconds() < 20.0 {
                format!(" --minutes {}", args.minutes)
            } else {
                String::new()
            },
        ),
    });
    Ok(())
}

async fn freshness(args: &BenchArgs, bench: &mut Bench) -> anyhow::Result<()> {
    let duration = Duration::from_secs_f64((args.minutes * 60.0).max(1.0));
    let w = overload(duration, args.ttl);
    let lifo = run_order(&w, Order::Lifo).await?;
    let fifo = run_order(&w, Order::Fifo).await?;
    let (l, f) = (p95_per_minute(&lifo), p95_per_minute(&fifo));
    let target_ms = 3 * w.latency.as_millis() as u64;
    let l_max = l.iter().copied().max().unwrap_or(0);
    let (f_first, f_max) = (
        f.first().copied().unwrap_or(0),
        f.iter().copied().max().unwrap_or(0),
    );
    bench.figures.insert(
        "freshness".into(),
        json!({
            "lifoP95Ms": lifo.age_under_load_ms[1],
            "fifoP95Ms": fifo.age_under_load_ms[1],
            "lifoP95PerMinuteMs": l,
            "fifoP95PerMinuteMs": f,
            "lifoShed": lifo.shed, "fifoShed": fifo.shed,
            "lifoProcessed": lifo.processed, "fifoProcessed": fifo.processed,
        }),
    );
    let per_minute = |v: &[u64]| {
        v.iter()
            .map(|ms| format!("{:.1}", *ms as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    bench.rows.push(Row {
        measure: format!(
            "Freshness, 2× overload for {} min (20/s into 5 × 500 ms, TTL {} s): p95 age at start",
            args.minutes, args.ttl
        ),
        result: format!(
            "LIFO {} (per minute, s: {}); FIFO {} (per minute, s: {})",
            secs(lifo.age_under_load_ms[1]),
            per_minute(&l),
            secs(fifo.age_under_load_ms[1]),
            per_minute(&f)
        ),
        target: format!("LIFO ≤ {} every minute; FIFO grows", secs(target_ms)),
        met: Some(l_max <= target_ms && f_max > f_first.max(target_ms)),
        command: args.command(
            Part::Freshness,
            &format!(" --minutes {} --ttl {}", args.minutes, args.ttl),
        ),
    });
    Ok(())
}

/// Runs the `process` binary against DynamoDB Local + moto until `tasks`
/// tasks succeeded; CPU is counted from its first request for an event.
async fn process_cost(args: &BenchArgs, bench: &mut Bench) -> anyhow::Result<()> {
    let binary = args.binary("process")?;
    let stack = LocalStack::start().await?;
    let store = stack.store();
    let now = now_ms();
    let tasks: Vec<Task> = (0..args.tasks)
        .map(|i| {
            let payload = json!({"n": i}).as_object().cloned().unwrap_or_default();
            Task::new_pending(lifo_core::new_task_id(), payload, now + i as u64, 3600, 1)
        })
        .collect();
    store.put_new(&tasks).await?;
    let concurrency = stack.template.parameter_default("RunnerMaxConcurrency")?;
    let mut api = RuntimeApi::start(Duration::from_secs(60)).await?;
    let mut child = tokio::process::Command::new(&binary)
        .envs(lambda_env(&api, "process"))
        .envs([
            ("TABLE_NAME", stack.table.as_str()),
            ("TRIGGER_TOPIC_ARN", stack.trigger_topic_arn.as_str()),
            ("AWS_ENDPOINT_URL_DYNAMODB", &stack.dynamodb_local.endpoint),
            ("AWS_ENDPOINT_URL_SNS", &stack.moto.endpoint),
            ("RUNNER", "simulated"),
            ("RUNNER_LATENCY_MS", "0"),
            ("RUNNER_MAX_CONCURRENCY", concurrency.as_str()),
            ("TIME_BUDGET_SECONDS", "50"),
        ])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let pid = child.id().context("the process binary exited at once")?;
    let result = async {
        first_request(&mut api, &mut child, "process").await?;
        let init = Usage::of(pid)?;
        let event: Value =
            serde_json::from_str(include_str!("../../../events/process-wakeup.json"))?;
        let started = Instant::now();
        let mut succeeded = 0u64;
        let mut invocations = 0;
        while succeeded < args.tasks as u64 {
            invocations += 1;
            if invocations > 50 {
                return Err(anyhow::anyhow!(
                    "only {succeeded} tasks succeeded in 50 invocations"
                ));
            }
            match api.invoke(event.clone(), Duration::from_secs(90)).await? {
                Answer::Response(report) => {
                    succeeded += report["succeeded"].as_u64().unwrap_or(0);
                }
                other => return Err(anyhow::anyhow!("process failed: {other:?}")),
            }
        }
        let wall = started.elapsed();
        let end = Usage::of(pid)?;
        Ok::<_, anyhow::Error>((init, end, wall, succeeded, invocations))
    }
    .await;
    let _ = child.kill().await;
    let (init, end, wall, succeeded, invocations) = result?;
    let per_task = (end.cpu - init.cpu).as_secs_f64() * 1000.0 / succeeded as f64;
    let rss_mb = end.peak_rss_bytes as f64 / 1_048_576.0;
    bench.figures.insert(
        "process".into(),
        json!({
            "tasks": succeeded, "invocations": invocations,
            "cpuMsPerTask": per_task, "initCpuMs": init.cpu.as_millis() as u64,
            "peakRssMb": rss_mb, "wallMs": wall.as_millis() as u64,
        }),
    );
    bench.rows.push(Row {
        measure: format!(
            "process binary, {succeeded} tasks (runner latency 0, {concurrency} at a time): CPU per task"
        ),
        result: format!(
            "{per_task:.3} ms ({:.0} ms CPU in init; {:.1} s wall, {invocations} invocations)",
            init.cpu.as_secs_f64() * 1000.0,
            wall.as_secs_f64()
        ),
        target: "< 1 ms".into(),
        met: Some(per_task < 1.0),
        command: args.command(Part::Process, &format!(" --tasks {}", args.tasks)),
    });
    bench.rows.push(Row {
        measure: format!("process binary, {succeeded} tasks: peak RSS"),
        result: format!("{rss_mb:.1} MB"),
        target: "< 64 MB".into(),
        met: Some(rss_mb < 64.0),
        command: args.command(Part::Process, &format!(" --tasks {}", args.tasks)),
    });
    Ok(())
}

/// Exec to first `next` request, once.
async fn cold_start_once(binary: &Path, name: &str) -> anyhow::Result<Duration> {
    let mut api = RuntimeApi::start(Duration::from_secs(30)).await?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .envs(lambda_env(&api, name))
        .envs(offline_function_env())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let first = first_request(&mut api, &mut child, name).await;
    let _ = child.kill().await;
    first.map(|at| at.duration_since(started))
}

/// When the function first asked for an event; an error naming why not
/// (it exited, reported an init error, or stayed silent for 10 s).
async fn first_request(
    api: &mut RuntimeApi,
    child: &mut tokio::process::Child,
    name: &str,
) -> anyhow::Result<Instant> {
    tokio::select! {
        first = api.first_request(Duration::from_secs(10)) => match first {
            Ok(Some(at)) => Ok(at),
            Ok(None) => Err(anyhow::anyhow!("{name} never asked for an event")),
            Err(init) => Err(anyhow::anyhow!("{name} failed to start: {init}")),
        },
        status = child.wait() => Err(match status {
            Ok(s) => anyhow::anyhow!("{name} exited before asking for an event ({s})"),
            Err(e) => anyhow::Error::new(e).context(name.to_owned()),
        }),
    }
}

async fn cold_starts(args: &BenchArgs, bench: &mut Bench) -> anyhow::Result<()> {
    let mut figures = serde_json::Map::new();
    for name in FUNCTIONS {
        let binary = args.binary(name)?;
        let mut times = Vec::new();
        for _ in 0..args.starts.max(1) {
            times.push(cold_start_once(&binary, name).await?);
        }
        times.sort_unstable();
        let median = times[times.len() / 2];
        let max = times[times.len() - 1];
        figures.insert(name.into(), json!(median.as_secs_f64() * 1000.0));
        bench.rows.push(Row {
            measure: format!("Cold start of {name} (exec → first request for an event)"),
            result: format!(
                "{:.1} ms median, {:.1} ms max of {}",
                median.as_secs_f64() * 1000.0,
                max.as_secs_f64() * 1000.0,
                times.len()
            ),
            target: "< 50 ms".into(),
            met: Some(median < Duration::from_millis(50)),
            command: args.command(Part::ColdStart, &format!(" --starts {}", args.starts)),
        });
    }
    bench
        .figures
        .insert("coldStartMedianMs".into(), Value::Object(figures));
    Ok(())
}

fn sizes(args: &BenchArgs, bench: &mut Bench) -> anyhow::Result<()> {
    let mut figures = serde_json::Map::new();
    let mut parts = Vec::new();
    for name in FUNCTIONS {
        let binary = args.binary(name)?;
        let bytes = std::fs::metadata(&binary)
            .with_context(|| format!("{}", binary.display()))?
            .len();
        figures.insert(name.into(), json!(bytes));
        parts.push(format!("{name} {:.1} MB", bytes as f64 / 1_048_576.0));
    }
    bench
        .figures
        .insert("sizesBytes".into(), Value::Object(figures));
    bench.rows.push(Row {
        measure: format!("Binary sizes ({})", args.bin_dir.display()),
        result: parts.join(", "),
        target: "-".into(),
        met: None,
        command: args.command(Part::Sizes, ""),
    });
    Ok(())
}

/// Runs the selected measurements in order.
pub async fn run(args: &BenchArgs) -> anyhow::Result<Bench> {
    args.check()?;
    let mut bench = Bench::default();
    let step = |what: &str| eprintln!("bench: {what}…");
    if args.wants(Part::Sizes) {
        sizes(args, &mut bench)?;
    }
    if args.wants(Part::ColdStart) {
        step("cold starts");
        cold_starts(args, &mut bench).await?;
    }
    if args.wants(Part::Process) {
        step(&format!("process binary, {} tasks", args.tasks));
        process_cost(args, &mut bench).await?;
    }
    if args.wants(Part::WriteUnits) {
        step("write units (a LIFO overload run)");
        write_units(args, &mut bench).await?;
    }
    if args.wants(Part::Freshness) {
        step(&format!(
            "freshness: {} min of 2× overload, LIFO then FIFO",
            args.minutes
        ));
        freshness(args, &mut bench).await?;
    }
    Ok(bench)
}

impl Bench {
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| Measure | Result | Target | Met | Reproduce |\n|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | `{}` |",
                r.measure, r.result, r.target, met, r.command
            );
        }
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "rows": self.rows.iter().map(|r| json!({
                "measure": r.measure, "result": r.result, "target": r.target,
                "met": r.met, "command": r.command,
            })).collect::<Vec<_>>(),
            "figures": self.figures,
        })
    }
}

/// `lifo bench`.
pub async fn command(args: &BenchArgs, as_json: bool) -> anyhow::Result<String> {
    let bench = run(args).await?;
    Ok(if as_json {
        bench.json().to_string()
    } else {
        bench.markdown()
    })
}
