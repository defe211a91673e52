//! What every part of `lifo bench` shares: its arguments, the parts, the
//! lines they report (figures plus their own flags), the rows of the table
//! (each with the command line that reproduces it), the binaries, and the
//! drain loop of the cost measurements.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The five Lambda binaries.
pub const FUNCTIONS: [&str; 5] = ["create", "trigger", "process", "scheduler-start", "api"];

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    WriteUnits,
    Freshness,
    Process,
    ColdStart,
    Sizes,
    RateLimit,
    Throughput,
    ShedBacklog,
    PayloadCost,
    Api,
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
    /// Throughput: tasks each configuration runs.
    #[arg(long, default_value_t = 2000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(10..=1_000_000))]
    pub throughput_tasks: usize,
    /// Throughput: the shard counts of the grid.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub shard_counts: Vec<u32>,
    /// Throughput: the processor counts of the grid.
    #[arg(long, value_delimiter = ',', default_value = "1,3", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub processor_counts: Vec<u32>,
    /// Throughput: tasks in flight (RunnerMaxConcurrency) of the grid.
    #[arg(long, value_delimiter = ',', default_value = "3,32", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub in_flight: Vec<usize>,
    /// Throughput: milliseconds added to every DynamoDB request (0: none).
    #[arg(long, value_delimiter = ',', default_value = "0,20", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub latency_ms: Vec<u64>,
    /// Throughput: runs of each configuration; the median is reported,
    /// with the spread of the ratios.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=20))]
    pub repeat: usize,
    /// Payload cost: payload sizes (bytes of JSON), each stored three ways.
    #[arg(long, value_delimiter = ',', default_value = "100,1024,4096,16384,61440", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub payload_bytes: Vec<usize>,
    /// Shed backlog: expired tasks in the shard, per row (the first is the
    /// floor the others are compared with).
    #[arg(long, value_delimiter = ',', default_value = "0,10000,100000", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1_000_000))]
    pub backlogs: Vec<usize>,
    /// Shed backlog: milliseconds added to every DynamoDB request.
    #[arg(long, value_delimiter = ',', default_value = "0,20", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub backlog_latency_ms: Vec<u64>,
}

/// One figure a part measured, with the flags of its own that measure it
/// again (`" --tasks 1000"`); `bench/mod.rs` makes the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub measure: String,
    pub result: String,
    pub target: String,
    /// Whether the target is met (None: no target).
    pub met: Option<bool>,
    pub flags: String,
}

/// What one part returns: its lines, its raw figures, and the figures that
/// are command lines (their key, and the part's flags).
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<Line>,
    pub figures: serde_json::Map<String, Value>,
    pub commands: Vec<(&'static str, String)>,
}

/// One line of the table: what a part measured, and the command line that
/// measures it again.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub line: Line,
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
    pub(super) fn write_units_seconds(&self) -> f64 {
        (self.minutes * 60.0).clamp(1.0, 20.0)
    }

    pub(super) fn wants(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }

    /// The command line that measures `part` alone with these settings.
    pub(super) fn command(&self, part: Part, extra: &str) -> String {
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
}

/// The release Lambda binaries' folder, once the binaries the selected
/// parts run were found in it.
#[derive(Debug)]
pub struct Binaries(PathBuf);

impl Binaries {
    /// The binaries the selected parts run, in `--bin-dir`: every one of
    /// [`FUNCTIONS`] for sizes and cold starts, process alone for its cost;
    /// or an error naming the first missing and how to build them.
    pub fn find(args: &BenchArgs) -> anyhow::Result<Self> {
        let names: &[&'static str] = if args.wants(Part::Sizes) || args.wants(Part::ColdStart) {
            &FUNCTIONS
        } else if args.wants(Part::Process) {
            &["process"]
        } else {
            &[]
        };
        for &name in names {
            let path = args.bin_dir.join(name);
            if !path.is_file() {
                return Err(anyhow::anyhow!(
                    "no binary {}: build them with `make bench` or \
                     `cargo build --release -p create -p trigger -p process -p scheduler-start -p api`",
                    path.display()
                ));
            }
        }
        Ok(Self(args.bin_dir.clone()))
    }

    /// The path of `name`, one of the binaries found.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

/// Runs a processor with an instant three-slot downstream over `store`
/// until `want` tasks succeeded (at most ten invocations); the successes.
/// `config` adjusts the stack's own process configuration.
pub(super) async fn drain(
    stack: &lifo_local::LocalStack,
    store: lifo_core::store::Store,
    want: usize,
    config: impl FnOnce(process::ProcessConfig) -> process::ProcessConfig,
) -> anyhow::Result<usize> {
    let processor = stack.processor(
        store,
        std::sync::Arc::new(process::runner::SimulatedRunner::new(
            3,
            std::time::Duration::ZERO,
            0.0,
            0.0,
        )),
        config(process::ProcessConfig {
            time_budget: std::time::Duration::from_secs(30),
            rest: process::rest::RestPolicy::default(),
            ..process::ProcessConfig::new(stack.table.clone(), stack.trigger_topic_arn.clone())
        }),
    );
    let mut succeeded = 0;
    for _ in 0..10 {
        let deadline = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        succeeded += processor
            .handle(&process::Wakeups::one(), deadline)
            .await?
            .succeeded;
        if succeeded >= want {
            break;
        }
    }
    Ok(succeeded)
}
