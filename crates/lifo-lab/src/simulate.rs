//! A workload through the real pipeline on a fresh local stack: tasks arrive
//! (a seeded Poisson process) faster than a simulated downstream serves them,
//! for a while; then the queue drains (every task is run or shed by expiry).
//! What `lifo simulate` and `lifo bench` run, in LIFO or FIFO order.

use crate::report::{Observer, Report, percentile};
use anyhow::Result;
use anyhow::{Context, anyhow};
use lifo_core::store::{CapacityMeter, Op};
use lifo_core::{Order, Store, now_ms};
use lifo_local::pipeline::PipelineStats;
use lifo_local::{LocalStack, Pipeline, PipelineOptions};
use lifo_ops::create::{CreateConfig, Creator, MAX_TASKS_PER_REQUEST};
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use process::runner::downstream::{Downstream, Run, Schedule};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What arrives, and what serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Mean arrival rate, tasks per second.
    pub rate: f64,
    /// How long tasks keep arriving.
    pub duration: Duration,
    /// Tasks the downstream runs at once.
    pub concurrency: usize,
    /// How long the downstream takes per task.
    pub latency: Duration,
    /// Each run takes `latency × (1 ± this)`, uniform (0: exactly).
    pub latency_jitter: f64,
    /// Each task's time to live: not started by then, it is shed.
    pub ttl_seconds: u64,
    /// claimable index shards.
    pub shards: u32,
    /// `ProcessorCount`: processors claiming at once, each from its group
    /// of shards under a group lease, with an even share of the runner's
    /// slots (at most the shards).
    pub processors: u32,
    /// Time budget of one process invocation (then it tail-calls).
    pub budget: Duration,
    /// Seed of the arrival sequence: the same seed, the same arrivals.
    pub seed: u64,
    /// The downstream's rate limit (`RunnerMaxPerSecond`), if any.
    pub rate_limit: Option<process::RateLimit>,
    /// Rests before retries (`RetryBackoffSeconds`).
    pub rest: process::rest::RestPolicy,
    /// Tasks arrive through create, which wakes the processor itself (as
    /// deployed); `false`: written to the table directly, so only the
    /// stream wakes it (a producer that bypasses create).
    pub through_create: bool,
    /// process's `LINGER_MS`, when not its default.
    pub linger: Option<Duration>,
    /// process's `FAIR_SHARE` (a fair share per tenant).
    pub fair_share: bool,
    /// process's `TENANT_MAX_IN_FLIGHT` (the fair share's opt-in cap).
    pub tenant_max_in_flight: Option<std::num::NonZeroU32>,
    /// How long the run's fresh DynamoDB Local is warmed before the
    /// arrivals begin ([`crate::warm_up`]); zero: not at all.
    pub warm_up: Duration,
    /// The template the run's stack is built from (`lifo simulate
    /// --template FILE`); the workspace's template.yaml when `None`.
    pub template: Option<Arc<lifo_local::Template>>,
    /// The claimable index's lag behind its writes ([`lifo_local::index_lag`]).
    pub index_lag: lifo_local::index_lag::IndexLagMode,
    /// Arrivals gathered into one create request: a producer that sends
    /// this many at once (up to 1,000, all stamped when the request
    /// begins); 1: each tick's arrivals as they come.
    pub create_batch: usize,
    /// process's `RUNNER_CONCURRENCY`: `concurrency` always, or the
    /// adaptive limit under it.
    pub runner_concurrency: process::runner::Concurrency,
    /// A downstream that queues past its capacity (which follows a
    /// schedule) instead of answering "busy" past `concurrency`, which is
    /// then only process's `RunnerMaxConcurrency`.
    pub downstream: Option<DownstreamSpec>,
    /// Where it runs.
    pub engine: Engine,
    /// With [`Engine::Virtual`]: each store request's round trip.
    pub store_latency: Duration,
    /// process's claim policy and claim loop constants: the defaults but
    /// in `lifo simulate --constants` ([`crate::constants`]).
    pub tuning: process::select::Tuning,
}

/// Where a run happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Engine {
    /// DynamoDB Local and moto, in real time ([`run_specs`]).
    #[default]
    Local,
    /// The same handlers over the queue's in-memory model, in virtual time
    /// ([`crate::virtual_time`]).
    Virtual,
}

/// A request's round trip to DynamoDB in a region (single-digit
/// milliseconds, as AWS documents it): the virtual engine's default.
pub const STORE_LATENCY: Duration = Duration::from_millis(5);

/// What a virtual run adds to its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualRunInfo {
    /// The wall time it took.
    pub wall: Duration,
    /// Its event log's hash ([`crate::virtual_time::EventLog::hash`]).
    pub log_hash: String,
}

/// A downstream that behaves like one ([`Downstream`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DownstreamSpec {
    pub schedule: Schedule,
    /// Runs waiting inside it at most; past that, 429.
    pub queue: usize,
    /// Each run is given up (timed out) after this.
    pub timeout: Duration,
}

/// [`Workload::warm_up`] unless told otherwise. A cold run was slow for
/// about its first 9 s ([`crate::warm_up`]); the warm-up sends its requests
/// back to back, more of them a second than a run does, and 8 s of a first
/// version of it (puts, queries, deletes) brought the first seconds' idle
/// slot-time from 43–47% to 20–25% (the rest is the first wake-up).
pub const WARM_UP: Duration = Duration::from_secs(8);

impl Workload {
    /// `rate` tasks a second for `duration` into the demo's downstream (5
    /// slots of 500 ms), with a 20 s TTL on one shard, a 60 s budget,
    /// through create, the fair share on and nothing else: what
    /// `lifo simulate` runs when no flag says otherwise.
    pub fn demo(rate: f64, duration: Duration, seed: u64) -> Self {
        Self {
            rate,
            duration,
            concurrency: 5,
            latency: Duration::from_millis(500),
            latency_jitter: 0.0,
            ttl_seconds: 20,
            shards: 1,
            processors: 1,
            budget: Duration::from_secs(60),
            seed,
            rate_limit: None,
            rest: process::rest::RestPolicy::default(),
            through_create: true,
            linger: None,
            fair_share: true,
            tenant_max_in_flight: None,
            warm_up: WARM_UP,
            template: None,
            index_lag: lifo_local::index_lag::IndexLagMode::Aws,
            create_batch: 1,
            runner_concurrency: process::runner::Concurrency::Fixed,
            downstream: None,
            engine: Engine::Local,
            store_latency: STORE_LATENCY,
            tuning: process::select::Tuning::default(),
        }
    }

    /// The run's simulated downstream: its runner, and the downstream that
    /// queues past its capacity when the workload has one.
    pub fn runner(&self) -> (Arc<SimulatedRunner>, Option<Arc<Downstream>>) {
        let downstream = self
            .downstream
            .as_ref()
            .map(|d| Arc::new(Downstream::new(d.schedule.clone(), d.queue, d.timeout)));
        let mut runner = SimulatedRunner::new(self.concurrency, self.latency, 0.0, 0.0)
            .with_jitter(self.latency_jitter);
        if let Some(d) = &downstream {
            runner = runner.with_downstream(Arc::clone(d));
        }
        (Arc::new(runner), downstream)
    }

    /// process's settings for a run in `order`, the rest from `base`: the
    /// workload's processors (at most its shards, as process clamps them),
    /// shards, TTL, budget, linger, rests, rate limit, fair share and
    /// concurrency.
    pub fn process_config(&self, order: Order, base: ProcessConfig) -> ProcessConfig {
        ProcessConfig {
            shard_count: self.shards,
            max_ttl_seconds: self.ttl_seconds,
            time_budget: self.budget,
            linger: self.linger.unwrap_or(base.linger),
            rest: self.rest,
            rate_limit: self.rate_limit,
            processors: self.processors.clamp(1, self.shards.max(1)),
            order,
            fair_share: self.fair_share,
            tenant_max_in_flight: self.tenant_max_in_flight,
            concurrency: self.runner_concurrency,
            tuning: self.tuning,
            ..base
        }
    }

    /// Tasks per second the downstream can serve (at first, when its
    /// capacity follows a schedule).
    pub fn capacity_per_second(&self) -> f64 {
        let at_once = self
            .downstream
            .as_ref()
            .map_or(self.concurrency, |d| d.schedule.at(Duration::ZERO));
        at_once as f64 / self.latency.as_secs_f64().max(1e-3)
    }

    /// Arrival rate / capacity (2.0 = twice what the downstream can serve).
    pub fn load(&self) -> f64 {
        self.rate / self.capacity_per_second()
    }

    /// Arrival offsets from the start, ascending: a Poisson process of
    /// `rate` over `duration`, from `seed`.
    pub fn arrivals(&self) -> Vec<Duration> {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut at = 0.0f64;
        let end = self.duration.as_secs_f64();
        let mut out = Vec::with_capacity((self.rate * end * 1.1) as usize + 1);
        if self.rate <= 0.0 {
            return out;
        }
        loop {
            // Exponential inter-arrival time; 1 - U is in (0, 1].
            at += -(1.0 - rng.f64()).ln() / self.rate;
            if at >= end {
                return out;
            }
            out.push(Duration::from_secs_f64(at));
        }
    }
}

/// A live view of a run, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub elapsed: Duration,
    /// Arrivals of the whole run.
    pub arrivals: usize,
    pub created: usize,
    /// Outcomes recorded (success or failure).
    pub processed: usize,
    /// Claimable now.
    pub pending: usize,
    /// Neither claimed nor claimable any more: expired unstarted (an
    /// estimate from counters; the outcome counts exactly).
    pub shed: usize,
    /// Arrivals are over; the queue is draining.
    pub draining: bool,
}

/// One task that started: when (seconds since the run began) and how old
/// it was then.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Start {
    pub at_s: f64,
    pub age_ms: u64,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub order: Order,
    pub workload: Workload,
    pub created: usize,
    pub processed: usize,
    pub failed: usize,
    pub shed: usize,
    /// Every start, in start order.
    pub starts: Vec<Start>,
    /// Age at start of the tasks that started while tasks kept arriving:
    /// p50, p95, p99 (ms).
    pub age_under_load_ms: [u64; 3],
    /// Starts after arrivals stopped (the drain: older tasks, run while
    /// they are still alive).
    pub drain_starts: usize,
    /// Every write unit spent (tasks shed unrun included) / successes.
    pub write_units_per_success: f64,
    /// put + claim + finish: what one task that succeeds first time costs.
    pub write_units_per_successful_task: f64,
    pub read_units_per_success: f64,
    /// Every read and write unit the pipeline spent.
    pub read_units: f64,
    pub write_units: f64,
    /// SNS messages (trigger wake-ups and tail calls) per created task.
    pub publishes_per_task: f64,
    /// Starts that skipped a newer waiting task (0 for a LIFO run).
    pub lifo_inversions: usize,
    /// What the pipeline (AWS's side) did.
    pub pipeline: PipelineCounts,
    pub elapsed: Duration,
    /// When the run began (epoch ms): [`Start::at_s`] counts from it.
    pub epoch_ms: u64,
    /// Every created task as it ended, in creation order.
    pub tasks: Vec<lifo_core::Task>,
    /// When each task's create request returned (epoch ms), by task id: no
    /// scheduler can start a task before its write is done, and a task is
    /// stamped (`readyAt`) when its request begins.
    pub written_ms: HashMap<String, u64>,
    /// Every run as the downstream saw it (ms since the arrivals began),
    /// with [`Workload::downstream`].
    pub downstream_runs: Vec<Run>,
    /// With [`Engine::Virtual`]: its wall time and event log.
    pub virtual_run: Option<VirtualRunInfo>,
    /// With [`Engine::Virtual`]: what DynamoDB's partitions served and
    /// refused.
    pub partitions: Option<Partitions>,
}

/// What the busiest partitions served, and the requests DynamoDB's
/// per-partition limits refused (each try of a request counted).
#[derive(Debug, Clone, PartialEq)]
pub struct Partitions {
    /// Write units: the table's busiest partition, the indexes'.
    pub table_writes: Option<lifo_core::memory::limits::Busiest>,
    pub index_writes: Option<lifo_core::memory::limits::Busiest>,
    pub index_reads: Option<lifo_core::memory::limits::Busiest>,
    /// Refusals of writes by the table's and by an index's partitions, and
    /// of reads.
    pub table_write_throttles: u64,
    pub index_write_throttles: u64,
    pub read_throttles: u64,
}

impl Partitions {
    pub fn of(l: &lifo_core::memory::PartitionLimits) -> Self {
        use lifo_core::memory::limits::Kind;
        Self {
            table_writes: l.busiest(Kind::Write, false),
            index_writes: l.busiest(Kind::Write, true),
            index_reads: l.busiest(Kind::Read, true),
            table_write_throttles: l.throttled(Kind::Write, false),
            index_write_throttles: l.throttled(Kind::Write, true),
            read_throttles: l.throttled(Kind::Read, false) + l.throttled(Kind::Read, true),
        }
    }
}

/// The pipeline's counters at the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineCounts {
    pub process_invocations: usize,
    pub trigger_invocations: usize,
    /// SNS messages delivered (wake-ups and tail calls).
    pub published: usize,
    pub tail_calls: usize,
    pub sweeps: usize,
    /// Asynchronous attempts throttled by process's reserved concurrency.
    pub throttles: usize,
    pub cold_starts: usize,
    /// Events Lambda gave up on: to the dead-letter queue, or gone.
    pub dead_lettered: usize,
    pub dropped: usize,
}

impl PipelineCounts {
    pub fn of(stats: &PipelineStats) -> Self {
        let g = PipelineStats::get;
        Self {
            process_invocations: g(&stats.process_invocations),
            trigger_invocations: g(&stats.trigger_invocations),
            published: g(&stats.published),
            tail_calls: g(&stats.tail_calls),
            sweeps: g(&stats.sweeps),
            throttles: g(&stats.throttles),
            cold_starts: g(&stats.cold_starts),
            dead_lettered: g(&stats.dead_lettered),
            dropped: g(&stats.dropped),
        }
    }
}

impl Outcome {
    /// The most tasks that started in any one second (a sliding window
    /// `[t, t + 1 s)` over every start).
    pub fn max_starts_in_a_second(&self) -> usize {
        let mut most = 0;
        let mut first = 0;
        for (i, s) in self.starts.iter().enumerate() {
            while s.at_s - self.starts[first].at_s >= 1.0 {
                first += 1;
            }
            most = most.max(i + 1 - first);
        }
        most
    }
}

/// Runs `workload` in `order` on a fresh local stack (the servers stop
/// when it returns) with the arrival offsets `arrivals`, arrival `i`
/// created as `specs[i]` when given (one entry of a create request's
/// `tasks`: a tenant, a priority, a key), else as a demo task. Callers go
/// through [`crate::engine`], which picks the engine.
pub async fn run_specs(
    workload: &Workload,
    order: Order,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
    on_progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Outcome> {
    let stack = LocalStack::start_with(lifo_local::stack::StackOptions {
        template: workload.template.as_deref().cloned(),
        index_lag: workload.index_lag,
        ..lifo_local::stack::StackOptions::default()
    })
    .await?;
    let store = stack.store();
    // The largest TTL is the workload's: the claim query's horizon is then
    // exactly "not expired", which a FIFO run needs not to read every task
    // already shed.
    let max_ttl = workload.ttl_seconds;
    let create_config = CreateConfig {
        shard_count: workload.shards,
        default_ttl_seconds: workload.ttl_seconds,
        max_ttl_seconds: max_ttl,
        ..CreateConfig::new(stack.table.clone())
    };
    let processors = workload.processors.clamp(1, workload.shards.max(1));
    let creator = if workload.through_create {
        stack.creator(store.clone(), create_config, processors)
    } else {
        Creator::new(store.clone(), create_config)
    };
    let trigger = Arc::new(
        stack
            .trigger(store.clone(), workload.shards, max_ttl)
            .with_processors(processors),
    );
    let (runner, downstream) = workload.runner();
    let processor = Arc::new(stack.processor(
        store.clone(),
        runner,
        workload.process_config(
            order,
            ProcessConfig::new(stack.table.clone(), stack.trigger_topic_arn.clone()),
        ),
    ));
    let warmed = !workload.warm_up.is_zero();
    if warmed {
        // Its own store: the warm-up's units are not the run's.
        crate::warm_up::warm_up(&stack.store(), workload.shards, workload.warm_up).await?;
    }
    let options = PipelineOptions {
        // The stream from after the warm-up's records.
        stream_from_latest: warmed,
        ..PipelineOptions::default()
    };
    let pipeline = Pipeline::start(&stack, trigger, processor, options).await?;
    // The progress probe has its own store, so its reads are not billed to
    // the pipeline.
    let probe = stack.store();
    let started = Instant::now();
    let epoch_ms = now_ms();
    if let Some(d) = &downstream {
        d.start_now();
    }
    let driven = drive(
        workload,
        arrivals,
        specs,
        &creator,
        &store,
        &probe,
        &stack,
        on_progress,
        started,
    )
    .await;
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    let (created, observer, written_ms) = driven?;
    let report = Report::build(&created, &observer, store.meter(), now_ms());
    let mut outcome = outcome_of(
        workload,
        order,
        &created,
        &observer,
        &report,
        store.meter(),
        &stats,
        epoch_ms,
        started.elapsed(),
        written_ms,
    );
    outcome.downstream_runs = downstream.map(|d| d.runs()).unwrap_or_default();
    Ok(outcome)
}

/// Creates the arrivals on time, then waits for the drain. Returns the
/// created ids in creation order and the last state of every task.
#[allow(clippy::too_many_arguments)]
async fn drive(
    workload: &Workload,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
    creator: &Creator,
    store: &Store,
    probe: &Store,
    stack: &LocalStack,
    on_progress: &mut (dyn FnMut(&Progress) + Send),
    started: Instant,
) -> Result<(Vec<String>, Observer, HashMap<String, u64>)> {
    let tick = Duration::from_millis(100);
    let ttl = Duration::from_secs(workload.ttl_seconds);
    let drain_limit = workload.duration + ttl + Duration::from_secs(30);
    let mut created: Vec<String> = Vec::with_capacity(arrivals.len());
    let mut written: HashMap<String, u64> = HashMap::with_capacity(arrivals.len());
    let mut last_progress: Option<Instant> = None;
    let mut last_scan: Option<Instant> = None;
    loop {
        let elapsed = started.elapsed();
        let due = arrivals.partition_point(|a| *a <= elapsed);
        // A batching producer waits for its batch (the last one may be
        // short).
        let batch = workload.create_batch.clamp(1, MAX_TASKS_PER_REQUEST);
        while created.len() < due && (due - created.len() >= batch || due == arrivals.len()) {
            let most = if batch == 1 {
                MAX_TASKS_PER_REQUEST
            } else {
                batch
            };
            let count = (due - created.len()).min(most);
            let ids = create(
                creator,
                workload,
                specs,
                created.len()..created.len() + count,
            )
            .await?;
            let at = now_ms();
            written.extend(ids.iter().map(|id| (id.clone(), at)));
            created.extend(ids);
        }
        let draining = created.len() == arrivals.len() && elapsed >= workload.duration;
        if draining || last_progress.is_none_or(|t| t.elapsed() >= Duration::from_millis(500)) {
            last_progress = Some(Instant::now());
            let now = now_ms();
            let pending = probe
                .claimable_depth(
                    workload.shards,
                    now,
                    now.saturating_sub(workload.ttl_seconds * 1000),
                )
                .await
                .context("counting claimable tasks")?;
            let claims = store.meter().spent(Op::Claim).requests as usize;
            on_progress(&Progress {
                elapsed,
                arrivals: arrivals.len(),
                created: created.len(),
                processed: store.meter().spent(Op::Finish).requests as usize,
                pending,
                shed: created.len().saturating_sub(pending + claims),
                draining,
            });
            // Nothing claimable: look at every task (once a second at
            // most) to be sure none is still running or waiting.
            if draining
                && pending == 0
                && last_scan.is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                last_scan = Some(Instant::now());
                let mut observer = Observer::default();
                observer.observe(stack.scan_tasks().await?);
                if observer.outstanding(&created, now_ms()) == 0 {
                    return Ok((created, observer, written));
                }
            }
        }
        if elapsed > drain_limit {
            return Err(anyhow!(
                "tasks still to do {} s after arrivals stopped",
                (elapsed - workload.duration).as_secs()
            ));
        }
        tokio::time::sleep(tick).await;
    }
}

/// Creates arrivals `range` in one request (as `specs` says, or as demo
/// tasks): the ids created.
pub(crate) async fn create<Q: lifo_core::store::Queue>(
    creator: &Creator<Q>,
    workload: &Workload,
    specs: Option<&[serde_json::Value]>,
    range: std::ops::Range<usize>,
) -> Result<Vec<String>> {
    let request = match specs {
        Some(specs) => serde_json::json!({ "tasks": specs.get(range).unwrap_or_default() }),
        None => serde_json::json!({ "count": range.len(), "ttlSeconds": workload.ttl_seconds }),
    };
    let out = creator
        .handle(request)
        .await
        .map_err(|e| anyhow!("create failed: {}", lifo_core::error::chain(&e)))?;
    Ok(out.created)
}

/// A run's [`Outcome`] from what it created, the tasks as they ended, its
/// report and counters (`meter`: every unit the pipeline spent).
#[allow(clippy::too_many_arguments)]
pub(crate) fn outcome_of(
    workload: &Workload,
    order: Order,
    created: &[String],
    observer: &Observer,
    report: &Report,
    meter: &CapacityMeter,
    stats: &PipelineStats,
    epoch_ms: u64,
    elapsed: Duration,
    written_ms: HashMap<String, u64>,
) -> Outcome {
    let mut starts: Vec<Start> = created
        .iter()
        .filter_map(|id| observer.get(id))
        .filter_map(|t| {
            t.started_at.map(|s| Start {
                at_s: s.saturating_sub(epoch_ms) as f64 / 1000.0,
                age_ms: s.saturating_sub(t.ready_at),
            })
        })
        .collect();
    starts.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let load_end = workload.duration.as_secs_f64();
    let mut under_load: Vec<u64> = starts
        .iter()
        .filter(|s| s.at_s <= load_end)
        .map(|s| s.age_ms)
        .collect();
    under_load.sort_unstable();
    let count = |status: &str| report.by_status.get(status).copied().unwrap_or(0);
    let processed = count("SUCCESS");
    let (read_units, write_units) = (meter.spent(Op::Read).units, meter.write_units());
    let per_success = |units: f64| {
        if processed > 0 {
            units / processed as f64
        } else {
            0.0
        }
    };
    Outcome {
        order,
        workload: workload.clone(),
        created: created.len(),
        processed,
        failed: count("FAILURE"),
        shed: report.shed,
        drain_starts: starts.iter().filter(|s| s.at_s > load_end).count(),
        age_under_load_ms: [50.0, 95.0, 99.0].map(|p| percentile(&under_load, p)),
        starts,
        write_units_per_success: report.write.total_per_success,
        write_units_per_successful_task: report.write.per_successful_task,
        read_units_per_success: per_success(read_units),
        read_units,
        write_units,
        publishes_per_task: if created.is_empty() {
            0.0
        } else {
            PipelineStats::get(&stats.published) as f64 / created.len() as f64
        },
        lifo_inversions: report.lifo_inversions,
        pipeline: PipelineCounts::of(stats),
        elapsed,
        epoch_ms,
        tasks: created
            .iter()
            .filter_map(|id| observer.get(id).cloned())
            .collect(),
        written_ms,
        downstream_runs: Vec::new(),
        virtual_run: None,
        partitions: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(rate: f64, seconds: u64, seed: u64) -> Workload {
        Workload {
            shards: 4,
            budget: Duration::from_secs(10),
            ..Workload::demo(rate, Duration::from_secs(seconds), seed)
        }
    }

    #[test]
    fn arrivals_are_seeded_sorted_and_near_the_rate() {
        let w = workload(20.0, 600, 7);
        let a = w.arrivals();
        assert_eq!(a, w.arrivals(), "same seed, same arrivals");
        assert_ne!(a, workload(20.0, 600, 8).arrivals());
        assert!(a.windows(2).all(|p| p[0] <= p[1]));
        assert!(a.iter().all(|t| *t < w.duration));
        // 12,000 expected; a Poisson count's sd is ~110.
        assert!((11_500..=12_500).contains(&a.len()), "{} arrivals", a.len());
        assert!(workload(0.0, 10, 1).arrivals().is_empty());
    }

    #[test]
    fn load_is_rate_over_capacity() {
        let w = workload(20.0, 10, 1);
        assert_eq!(w.capacity_per_second(), 10.0);
        assert_eq!(w.load(), 2.0);
    }
}
