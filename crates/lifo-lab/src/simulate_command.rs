//! `lifo simulate`: a workload through the local pipeline, with a progress
//! bar, a report table and (with `--compare`, LIFO then FIFO on the same
//! arrivals) a plot of age at start over time.

use crate::report::secs;
use crate::simulate::{self, Outcome, Progress, Workload};
use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lifo_core::Order;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// How tasks reach the queue in a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Producer {
    /// Through create: it wakes the processor itself.
    Create,
    /// Written to the table directly: the stream wakes the processor.
    Direct,
}

/// The workload and what to write.
#[derive(Debug, Clone, clap::Args)]
pub struct SimulateArgs {
    /// Arrivals per second (the mean of a Poisson process).
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Seconds during which tasks arrive; then the queue drains.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration: u64,
    /// Tasks the downstream runs at once.
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub capacity: usize,
    /// Downstream time per task, milliseconds (0 to 240000, the template's
    /// RunnerLatencyMs bounds).
    #[arg(long, default_value_t = 500, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(lifo_lambda::config::bounds::RUNNER_LATENCY_MS))]
    pub latency_ms: u64,
    /// Each run takes the latency × (1 ± this), uniform: 0 (the default)
    /// runs every task in exactly --latency-ms; a real downstream's runs
    /// spread (0.2: 800 to 1,200 ms of a 1 s latency).
    #[arg(long, default_value_t = 0.0, value_parser = parse_jitter)]
    pub latency_jitter: f64,
    /// Task time to live, seconds: not started by then, a task is shed.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub ttl: u64,
    /// Which tasks the processor takes first.
    #[arg(long, default_value = "lifo")]
    pub order: Order,
    /// Run LIFO, FIFO and adaptive on the same arrivals and plot them (with
    /// --load: at each load, for each of --seeds).
    #[arg(long)]
    pub compare: bool,
    /// Seed of the arrival sequence (0 to 4294967295: with --seeds, the
    /// seeds that follow it stay in range).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=u64::from(u32::MAX)))]
    pub seed: u64,
    /// Seeds to run, from --seed on (a mix): the figures of each, with
    /// their median and worst.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub seeds: u64,
    /// Time budget of one process invocation, seconds (then it tail-calls);
    /// the template's TimeBudgetSeconds when not given.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=900))]
    pub budget: Option<u64>,
    /// Freshness at every load instead of one workload: light (a task every
    /// 5 s), steady (half the downstream's capacity), mild (1.2× it for
    /// 40 s), overload (twice it), burst (200 tasks into an idle queue);
    /// comma-separated.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub load: Vec<crate::loads::Load>,
    /// A feature's workload instead: tenants (ten tenants, one at 10× the
    /// others' rate, fair share on and off), keys (50 keys updated every
    /// second, with and without supersedeKey), priorities (2× overload, half of
    /// it high, and high alone); each with a table per class and a plot.
    #[arg(long, value_enum)]
    pub mix: Option<crate::mixes::Mix>,
    #[command(flatten)]
    pub tenants: crate::mixes::tenants::TenantsArgs,
    /// How tasks arrive: through create, which wakes the processor itself
    /// (as deployed), or written to the table directly, so that only the
    /// stream (and the sweep) wakes it.
    #[arg(long, value_enum, default_value = "create")]
    pub producer: Producer,
    /// process's LINGER_MS (how long an idle invocation keeps looking
    /// before it ends), when not its default (1000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub linger_ms: Option<u64>,
    /// Seconds of the light load (about one task every 5 s).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..=86_400))]
    pub light_seconds: u64,
    /// Seconds each run's fresh DynamoDB Local is warmed before tasks
    /// arrive (a cold JVM serves its first requests slowly; AWS's DynamoDB
    /// does not); 0: not at all.
    #[arg(long, default_value_t = crate::simulate::WARM_UP.as_secs(), value_parser = clap::value_parser!(u64).range(0..=120))]
    pub warm_up_seconds: u64,
    /// Where the plot goes: PATH.svg and PATH.png.
    #[arg(long, default_value = "target/lifo-simulate.svg")]
    pub plot: PathBuf,
    #[command(flatten)]
    pub pacing: lifo_local::pacing::Pacing,
    /// The SAM template each run's stack is built from (its table,
    /// topics, settings and IAM policies); default: the workspace's
    /// template.yaml.
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,
    /// How late a task shows up in the claimable index after its write:
    /// `aws` (as AWS's global secondary indexes: a median of 100 ms, p99
    /// about 1 s), `off`, or a number of milliseconds (a busy index).
    #[arg(long, default_value = "aws", value_parser = lifo_local::index_lag::IndexLagMode::parse)]
    pub index_lag: lifo_local::index_lag::IndexLagMode,
    /// Arrivals sent in one create request (1 to 1000): a producer that
    /// batches, each request's tasks stamped when it begins; 1: each
    /// moment's arrivals as they come.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub create_batch: usize,
    /// process's RunnerConcurrency: `fixed` (always --capacity runs) or
    /// `adaptive` (a limit found from the downstream's latency and
    /// refusals, at most --capacity); the template's default when not
    /// given.
    #[arg(long)]
    pub concurrency: Option<process::runner::Concurrency>,
    /// A downstream that queues runs past its capacity instead of answering
    /// "busy" past --capacity (which is then only process's
    /// RunnerMaxConcurrency): its runs at once, and when that changes, e.g.
    /// `10,4@30s,10@60s` (10, then 4 from 30 s, then 10 from 60 s; times
    /// as 30s, 1500ms or 2m).
    #[arg(long, value_name = "SCHEDULE", value_parser = parse_schedule)]
    pub downstream_capacity: Option<process::runner::downstream::Schedule>,
    /// With --downstream-capacity: runs waiting inside it at most; past
    /// that it answers 429.
    #[arg(long, default_value_t = 10, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000))]
    pub downstream_queue: usize,
    /// With --downstream-capacity: each run is given up after this many
    /// milliseconds (a timeout, as the http and lambda runners set one).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=240_000))]
    pub run_timeout_ms: u64,
    /// Where the runs happen: `local` (DynamoDB Local and moto, in real
    /// time) or `virtual` (the same handlers over the queue's in-memory
    /// model, in virtual time: a minute in about a second, and the same
    /// seed gives the same run, byte for byte).
    #[arg(long, value_enum, default_value = "local")]
    pub engine: simulate::Engine,
    /// With --engine virtual: how long each request to the store takes
    /// (a round trip to DynamoDB in a region is a few milliseconds).
    #[arg(long, default_value_t = simulate::STORE_LATENCY.as_millis() as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub store_latency_ms: u64,
    /// Processors claiming at once (the template's ProcessorCount, 1 to
    /// 32; at most the shards), each from its group of shards.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub processors: u32,
    /// Each tuning constant of the claim policy and the claim loop (those
    /// named, comma-separated; every one when none is), with
    /// --engine virtual: as deployed, without it, at half and at double
    /// its value, on the workloads it was made for, over --seeds seeds.
    #[arg(long, value_delimiter = ',', num_args = 0.., value_name = "NAME")]
    pub constants: Option<Vec<String>>,
}

/// The template's defaults a run takes when no flag says otherwise:
/// `RunnerConcurrency` and `TimeBudgetSeconds`.
pub fn template_settings(
    template: &lifo_local::Template,
) -> anyhow::Result<(process::runner::Concurrency, u64)> {
    let concurrency = template
        .parameter_default("RunnerConcurrency")?
        .parse()
        .map_err(|e| anyhow::anyhow!("template parameter RunnerConcurrency: {e}"))?;
    let budget = template
        .parameter_default("TimeBudgetSeconds")?
        .parse()
        .context("TimeBudgetSeconds")?;
    Ok((concurrency, budget))
}

/// `--downstream-capacity`'s schedule, its error naming the entry.
fn parse_schedule(text: &str) -> Result<process::runner::downstream::Schedule, String> {
    process::runner::downstream::Schedule::parse(text)
}

/// `--latency-jitter`: a share of the latency, 0 to 1.
fn parse_jitter(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(j) if (0.0..=1.0).contains(&j) => Ok(j),
        _ => Err(format!("{text:?} is not a share between 0 and 1")),
    }
}

impl SimulateArgs {
    pub fn workload(&self, shards: u32) -> anyhow::Result<Workload> {
        let template = lifo_local::Template::load_or_workspace(self.template.as_deref())?;
        let (default_concurrency, default_budget) = template_settings(&template)?;
        let runner_concurrency = self.concurrency.unwrap_or(default_concurrency);
        let budget = self.budget.unwrap_or(default_budget);
        Ok(Workload {
            rate: self.rate,
            duration: Duration::from_secs(self.duration),
            concurrency: self.capacity,
            latency: Duration::from_millis(self.latency_ms),
            latency_jitter: self.latency_jitter,
            ttl_seconds: self.ttl,
            shards,
            processors: self.processors,
            budget: Duration::from_secs(budget),
            seed: self.seed,
            rate_limit: self.pacing.rate_limit(),
            rest: process::rest::RestPolicy {
                base: Duration::from_secs(self.pacing.retry_backoff),
            },
            through_create: self.producer == Producer::Create,
            linger: self.linger_ms.map(Duration::from_millis),
            fair_share: true,
            tenant_max_in_flight: self.pacing.tenant_max_in_flight(),
            warm_up: Duration::from_secs(self.warm_up_seconds),
            template: self
                .template
                .is_some()
                .then(|| std::sync::Arc::new(template)),
            index_lag: self.index_lag,
            create_batch: self.create_batch,
            runner_concurrency,
            engine: self.engine,
            store_latency: Duration::from_millis(self.store_latency_ms),
            tuning: process::select::Tuning::default(),
            downstream: self
                .downstream_capacity
                .clone()
                .map(|schedule| simulate::DownstreamSpec {
                    schedule,
                    queue: self.downstream_queue,
                    timeout: Duration::from_millis(self.run_timeout_ms),
                }),
        })
    }

    /// The orders to run: every one with `--compare`, else `--order`.
    pub fn orders(&self) -> Vec<Order> {
        if self.compare {
            Order::ALL.to_vec()
        } else {
            vec![self.order]
        }
    }

    /// Refuses a rate clap cannot range-check (a float), naming the flag
    /// (DynamoDB Local serves a few hundred tasks a second; the virtual
    /// engine, DynamoDB's own limits); the integer flags are range-checked
    /// by clap.
    pub fn check(&self) -> anyhow::Result<()> {
        let most = match self.engine {
            simulate::Engine::Local => 500.0,
            simulate::Engine::Virtual => 100_000.0,
        };
        if !(self.rate > 0.0 && self.rate <= most) {
            return Err(anyhow::anyhow!(
                "--rate must be in (0, {most}] with --engine {}, got {}",
                match self.engine {
                    simulate::Engine::Local => "local",
                    simulate::Engine::Virtual => "virtual",
                },
                self.rate
            ));
        }
        Ok(())
    }
}

fn bar(order: Order, arrivals: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(arrivals as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>5} [{elapsed_precise}] [{bar:28}] {pos}/{len} arrived  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(order.as_str().to_uppercase());
    bar
}

fn show(bar: &ProgressBar, p: &Progress) {
    bar.set_position(p.created as u64);
    bar.set_message(format!(
        "processed {}  pending {}  shed {}{}",
        p.processed,
        p.pending,
        p.shed,
        if p.draining { "  (draining)" } else { "" }
    ));
}

/// Runs the workload once per order (`--compare`: LIFO, FIFO, adaptive).
pub async fn run_all(args: &SimulateArgs, shards: u32) -> anyhow::Result<Vec<Outcome>> {
    args.check()?;
    let workload = args.workload(shards)?;
    let arrivals = workload.arrivals();
    let orders = args.orders();
    eprintln!(
        "{} arrivals over {} s ({:.1}/s) into a downstream of {} × {} ms ({:.1}/s): {:.1}× load, TTL {} s, {} shard(s)",
        arrivals.len(),
        args.duration,
        args.rate,
        args.capacity,
        args.latency_ms,
        workload.capacity_per_second(),
        workload.load(),
        args.ttl,
        shards
    );
    let mut outcomes = Vec::new();
    for order in orders {
        let bar = bar(order, arrivals.len());
        let mut on_progress = |p: &Progress| show(&bar, p);
        let outcome = crate::engine::run(&workload, order, &arrivals, &mut on_progress)
            .await
            .with_context(|| format!("{order} run"))?;
        bar.finish_and_clear();
        let engine = match &outcome.virtual_run {
            Some(v) => format!(
                " of virtual time ({:.2} s of wall time, event log {})",
                v.wall.as_secs_f64(),
                v.log_hash
            ),
            None => String::new(),
        };
        eprintln!(
            "{:>5} done in {:.0} s{engine}: {} processed, {} shed",
            order.as_str().to_uppercase(),
            outcome.elapsed.as_secs_f64(),
            outcome.processed,
            outcome.shed
        );
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Where the table's units come from, printed under it.
pub const UNITS_NOTE: &str = "Units: DynamoDB Local's ConsumedCapacity (ddb-local), which tests/billing.rs \
     checks against AWS's documented billing rules; SNS publishes counted on moto.";

/// The virtual engine's units, printed under its table.
pub const VIRTUAL_UNITS_NOTE: &str = "Units: what AWS's billing rules charge for the in-memory model's \
     reads and writes (lifo_core::memory::Billing), in the columns marked ddb-local; SNS publishes counted \
     on the engine's topics.";

/// The report table (Markdown, readable as plain text).
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| order | created | processed | shed by expiry | failed | age at start p50 | p95 | p99 | write units / success (ddb-local) | read units / success (ddb-local) | SNS publishes / task |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in outcomes {
        let [p50, p95, p99] = o.age_under_load_ms;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.3} |",
            o.order.as_str().to_uppercase(),
            o.created,
            o.processed,
            o.shed,
            o.failed,
            secs(p50),
            secs(p95),
            secs(p99),
            o.write_units_per_success,
            o.read_units_per_success,
            o.publishes_per_task
        );
    }
    out
}

pub fn json(outcomes: &[Outcome]) -> Value {
    Value::Array(
        outcomes
            .iter()
            .map(|o| {
                let [p50, p95, p99] = o.age_under_load_ms;
                json!({
                    "order": o.order.as_str(),
                    "created": o.created,
                    "processed": o.processed,
                    "shedByExpiry": o.shed,
                    "failed": o.failed,
                    "ageAtStartMs": {"p50": p50, "p95": p95, "p99": p99},
                    "drainStarts": o.drain_starts,
                    "writeUnitsPerSuccess": o.write_units_per_success,
                    "writeUnitsPerSuccessfulTask": o.write_units_per_successful_task,
                    "readUnitsPerSuccess": o.read_units_per_success,
                    "snsPublishesPerTask": o.publishes_per_task,
                    "lifoInversions": o.lifo_inversions,
                    "elapsedMs": o.elapsed.as_millis() as u64,
                })
            })
            .collect(),
    )
}

/// `lifo simulate`: runs, prints the table (or JSON), writes the plot.
pub async fn command(args: &SimulateArgs, shards: u32, as_json: bool) -> anyhow::Result<String> {
    if let Some(names) = &args.constants {
        let seeds = args.seed..args.seed + args.seeds;
        return crate::constants::command(&args.workload(shards)?, names, seeds);
    }
    if let Some(mix) = args.mix {
        return mix_command(mix, args, shards, as_json).await;
    }
    if !args.load.is_empty() {
        args.check()?;
        let rows = crate::loads::run(
            args.workload(shards)?,
            args.light_seconds,
            &args.load,
            &args.orders(),
            args.seed..args.seed + args.seeds,
        )
        .await?;
        if as_json {
            return Ok(crate::loads::json(&rows).to_string());
        }
        if !args.compare {
            return Ok(crate::loads::table(&rows));
        }
        let plots = crate::loads::plots(&args.plot, &rows)?;
        let mut out = crate::loads::compare_table(&rows);
        let _ = write!(
            out,
            "Plots: {}",
            plots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(out);
    }
    let outcomes = run_all(args, shards).await?;
    let (svg, png) = crate::plot::write(&args.plot, &outcomes)?;
    if as_json {
        let mut v = json(&outcomes);
        if let Value::Array(rows) = &mut v {
            for row in rows.iter_mut() {
                row["plot"] = json!({"svg": svg, "png": png});
            }
        }
        return Ok(v.to_string());
    }
    let mut out = table(&outcomes);
    if args.downstream_capacity.is_some() {
        let _ = write!(out, "\n{}", crate::phases::table(&outcomes));
    }
    let _ = match args.engine {
        simulate::Engine::Local => writeln!(out, "\n{UNITS_NOTE}"),
        simulate::Engine::Virtual => writeln!(out, "\n{VIRTUAL_UNITS_NOTE}"),
    };
    for o in &outcomes {
        out.push_str(&crate::scale::summary(o));
    }
    let _ = writeln!(
        out,
        "Age at start: tasks that started while tasks kept arriving ({} s); \
         starts in the drain after that: {}.",
        args.duration,
        outcomes
            .iter()
            .map(|o| format!("{} {}", o.order.as_str().to_uppercase(), o.drain_starts))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let [lifo, fifo, ..] = outcomes.as_slice() {
        let (l, f) = (lifo.age_under_load_ms[1], fifo.age_under_load_ms[1]);
        let _ = writeln!(
            out,
            "LIFO's p95 age at start is {} against FIFO's {}{}.",
            secs(l),
            secs(f),
            if f > l && l > 0 {
                format!(" ({:.1}× fresher)", f as f64 / l as f64)
            } else if f < l {
                " (FIFO was fresher: is the downstream overloaded?)".to_owned()
            } else {
                String::new()
            }
        );
    }
    let _ = write!(out, "Plot: {} and {}", svg.display(), png.display());
    Ok(out)
}

/// `lifo simulate --mix`: each seed's runs; the first seed's table and
/// plot, and for the tenants mix, every seed's figures.
async fn mix_command(
    mix: crate::mixes::Mix,
    args: &SimulateArgs,
    shards: u32,
    as_json: bool,
) -> anyhow::Result<String> {
    use crate::mixes::{self, tenants};
    args.check()?;
    let base = args.workload(shards)?;
    let mut first = None;
    let mut figures = Vec::new();
    for seed in args.seed..args.seed + args.seeds {
        let w = Workload {
            seed,
            ..base.clone()
        };
        let runs = mixes::run(mix, &w, &args.tenants).await?;
        if mix == mixes::Mix::Tenants {
            figures.push(tenants::figures(seed, &runs));
        }
        if first.is_none() {
            first = Some(runs);
        }
    }
    let runs = first.unwrap_or_default();
    let rows = mixes::rows(&runs);
    let (svg, png) = mixes::plot(mix, &runs, &args.plot)?;
    let tenants_mix = mix == mixes::Mix::Tenants;
    Ok(if as_json {
        let mut v = mixes::json(mix, &rows);
        v["plot"] = json!({"svg": svg, "png": png});
        if tenants_mix {
            v["tenants"] = tenants::json(&args.tenants, &figures);
        }
        v.to_string()
    } else {
        format!(
            "{}{}Plot (seed {}): {} and {}",
            mixes::table(mix, &rows),
            if tenants_mix {
                tenants::summary(&args.tenants, &figures)
            } else {
                String::new()
            },
            args.seed,
            svg.display(),
            png.display()
        )
    })
}

#[cfg(test)]
mod tests;
