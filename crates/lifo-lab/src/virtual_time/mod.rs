//! The virtual engine: a workload through the real handlers in virtual
//! time, in one thread, in seconds.
//!
//! The process handler runs unmodified over the queue's in-memory model
//! ([`lifo_core::memory::Memory`], the store the differential test holds to
//! DynamoDB's results) with its claimable index lagging as AWS's does;
//! create writes the arrivals and wakes it, and the trigger forwards its
//! tail calls and runs the sweep. Lambda's asynchronous invocation (SNS's
//! delivery, reserved concurrency's throttles and retries, cold starts) is
//! [`lifo_local::invoke`]'s, with [`lifo_local::aws`]'s timings and the
//! template's settings, as in the local engine.
//!
//! Time is tokio's paused clock: whenever every task waits on a timer, the
//! clock jumps to the next one. Every clock the handlers read is
//! [`TokioClock`]; every random draw (task ids, the index's lag, runs'
//! jitter, rests) comes from the run's seed; the runtime has one thread. So
//! the same seed gives the same run, which [`EventLog`] shows byte for byte.
//!
//! Units are what AWS's billing rules charge for each of the model's
//! operations ([`lifo_core::memory::Billing`]), over the template's indexes.
//!
//! [`chaos`] runs the same functions under faults ([`faults`],
//! [`invocation_faults`]) and judges what the store committed.
//!
//! DynamoDB's per-partition limits hold ([`lifo_core::memory::limits`]):
//! 1,000 write and 3,000 read units a second per partition key value, in
//! the table and in each index, each refusal retried as the SDK does.
//!
//! Not modelled yet: the table's stream (producers that write past create)
//! and rest alarms (the sweep finds what rests past a minute).

pub mod chaos;
pub mod faults;
pub mod invocation_faults;
mod log;
mod topic;

use invocation_faults::InvocationFaults;
pub use log::EventLog;

use crate::report::{Observer, Report};
use crate::simulate::Partitions;
use crate::simulate::{Outcome, PipelineCounts, Workload, create, outcome_of};
use anyhow::{Context, Result, anyhow};
use lifo_core::clock::{Clock, SharedClock, TokioClock};
use lifo_core::memory::{Billing, Memory, PartitionLimits};
use lifo_core::store::{CapacityMeter, Queue, QueueOps};
use lifo_core::{Order, TaskStatus};
use lifo_lambda::notify::Fanout;
use lifo_local::aws::AwsTiming;
use lifo_local::invoke::{AsyncFunction, Handler};
use lifo_local::pipeline::{PipelineStats, scheduled_event_json};
use lifo_ops::create::{CreateConfig, Creator, MAX_TASKS_PER_REQUEST};
use process::ProcessConfig;
use process::runner::TaskRunner;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};
use tokio::sync::watch;
use topic::Topic;
use trigger::{Sweep, Trigger};

/// Where a virtual run's clock starts (epoch ms): a fixed date, so that the
/// same seed writes the same times.
pub const EPOCH_MS: u64 = 1_800_000_000_000;

/// A virtual run: what it did, its event log, the time its functions ran,
/// and the wall time it took.
#[derive(Debug)]
pub struct VirtualRun {
    pub outcome: Outcome,
    pub log: EventLog,
    pub lambda: LambdaTime,
    pub wall: Duration,
}

/// How long the run's functions ran, in virtual time, as Lambda bills it
/// (each invocation rounded up to the millisecond; inits left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LambdaTime {
    /// Every process invocation's duration, summed (ms).
    pub process_ms: u64,
    /// Every trigger invocation's (the sweep's included).
    pub trigger_ms: u64,
    /// create's invocations: one per create request.
    pub create_requests: usize,
    pub create_ms: u64,
}

/// Milliseconds an invocation that began at `start` is billed for so far.
fn billed_ms(start: tokio::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}

/// Adds an invocation's billed time to `total`.
fn add_billed(total: &AtomicU64, start: tokio::time::Instant) {
    total.fetch_add(billed_ms(start), Ordering::Relaxed);
}

/// Runs `workload` in `order` with the arrival offsets `arrivals` (each
/// created as `specs[i]` when given) in virtual time, on a thread of its own
/// (a runtime of one thread, its clock paused).
pub fn run(
    workload: &Workload,
    order: Order,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
) -> Result<VirtualRun> {
    if !workload.through_create {
        anyhow::bail!(
            "--producer direct: only the table's stream wakes the processor for such tasks, and \
             the virtual engine has no stream yet; run it with --engine local"
        );
    }
    let wall = std::time::Instant::now();
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()
                    .context("building the virtual engine's runtime")?;
                let result = runtime.block_on(run_paused(workload, order, arrivals, specs));
                lifo_core::seed_task_ids(None);
                result
            })
            .join()
            .map_err(|_| anyhow!("the virtual engine's thread panicked"))?
    })
    .map(|(outcome, log, lambda)| VirtualRun {
        outcome,
        log,
        lambda,
        wall: wall.elapsed(),
    })
}

/// The run itself, inside the paused runtime.
async fn run_paused(
    workload: &Workload,
    order: Order,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
) -> Result<(Outcome, EventLog, LambdaTime)> {
    let template = match &workload.template {
        Some(t) => t.as_ref().clone(),
        None => lifo_local::Template::workspace()?,
    };
    let clock = seeded_clock(workload.seed);
    // Its units by AWS's billing rules, over the template's indexes.
    let meter = Arc::new(CapacityMeter::default());
    let indexes = template.table(lifo_local::stack::TABLE)?.billed_indexes();
    let memory = Memory::new(workload.index_lag.model(workload.seed))
        .with_billing(Billing {
            indexes: indexes.clone(),
            meter: Arc::clone(&meter),
        })
        .with_partition_limits(PartitionLimits::new(indexes, Arc::clone(&clock)))
        .with_latency(workload.store_latency);
    let stats = Arc::new(PipelineStats::default());
    let log = EventLog::new(Arc::clone(&clock));
    let (runner, downstream) = workload.runner();
    let functions = Functions::deploy(Setup {
        template: &template,
        clock: &clock,
        stats: &stats,
        log: &log,
        store: memory.clone(),
        runner,
        config: workload.process_config(order, ProcessConfig::new("virtual", "virtual")),
        faults: None,
        racing: 0,
    })?;
    let create_config = CreateConfig {
        shard_count: workload.shards,
        default_ttl_seconds: workload.ttl_seconds,
        max_ttl_seconds: workload.ttl_seconds,
        ..CreateConfig::new("virtual")
    };
    // create as deployed: it wakes the processor itself.
    let creator = Creator::new(memory.clone(), create_config)
        .with_clock(Arc::clone(&clock))
        .with_wakeups(functions.wakeups());
    if let Some(d) = &downstream {
        d.start_now();
    }
    let driven = drive(workload, arrivals, specs, &creator, &memory, clock.as_ref()).await;
    let ran = functions.stop().await;
    let (created, written_ms, create_time) = driven?;
    let mut observer = Observer::default();
    observer.observe(memory.snapshot().tasks.into_values().collect());
    let now = clock.now_ms();
    let report = Report::build(&created, &observer, &meter, now);
    log.tasks(created.iter().filter_map(|id| observer.get(id)));
    let mut outcome = outcome_of(
        workload,
        order,
        &created,
        &observer,
        &report,
        &meter,
        &stats,
        EPOCH_MS,
        Duration::from_millis(now.saturating_sub(EPOCH_MS)),
        written_ms,
    );
    outcome.downstream_runs = downstream.map(|d| d.runs()).unwrap_or_default();
    outcome.partitions = memory.partition_limits(Partitions::of);
    outcome.pipeline = PipelineCounts::of(&stats);
    let lambda = LambdaTime {
        process_ms: ran.process_ms,
        trigger_ms: ran.trigger_ms,
        ..create_time
    };
    Ok((outcome, log, lambda))
}

/// The run's clock, from [`EPOCH_MS`], and every random draw of the run
/// from its seed: this thread's task ids, the global generator (runs'
/// jitter, rests).
fn seeded_clock(seed: u64) -> SharedClock {
    let clock: SharedClock = Arc::new(TokioClock::starting_at(EPOCH_MS));
    lifo_core::seed_task_ids(Some((seed, Arc::clone(&clock))));
    fastrand::seed(seed);
    clock
}

/// What a run deploys ([`Functions::deploy`]).
struct Setup<'a, Q, R> {
    template: &'a lifo_local::Template,
    clock: &'a SharedClock,
    stats: &'a Arc<PipelineStats>,
    log: &'a EventLog,
    store: Q,
    runner: Arc<R>,
    /// process's settings: its reserved concurrency is their
    /// `processors` (the template's `ProcessorCount`).
    config: ProcessConfig,
    /// A chaos run's invocations cut short and deliveries made twice.
    faults: Option<Arc<InvocationFaults>>,
    /// Invocations Lambda may run beyond `processors` (0 as deployed): a
    /// chaos run's second invocation racing the only processor, as a
    /// misconfigured concurrency or a duplicated wake-up would.
    racing: u32,
}

/// The AWS side of a run: the process function behind Lambda's
/// asynchronous queue and its topic, the trigger behind its own (tail calls
/// in, wake-ups out), and the sweep's schedule.
struct Functions {
    process_topic: Topic,
    processors: u32,
    /// process's and trigger's invocations, their billed time (ms).
    process_ms: Arc<AtomicU64>,
    trigger_ms: Arc<AtomicU64>,
    process_fn: Arc<AsyncFunction>,
    trigger_fn: Arc<AsyncFunction>,
    sweep: tokio::task::JoinHandle<()>,
    shutdown: watch::Sender<bool>,
}

impl Functions {
    fn deploy<Q, R>(s: Setup<'_, Q, R>) -> Result<Self>
    where
        Q: Queue + QueueOps + Clone + 'static,
        R: TaskRunner,
    {
        let (shutdown, stop) = watch::channel(false);
        let timing = AwsTiming::default();
        let shards = s.config.shard_count;
        let max_ttl_seconds = s.config.max_ttl_seconds;
        let process_timeout = Duration::from_secs(s.template.function_timeout("ProcessFunction")?);
        let topic = |name| Topic::new(name, Arc::clone(s.stats), s.log.clone(), s.faults.clone());
        let (trigger_topic, process_topic) = (topic("trigger"), topic("process"));
        let processor = Arc::new(
            process::Processor::over(
                s.store.clone(),
                Arc::new(trigger_topic.clone()),
                s.runner,
                s.config,
            )
            .with_clock(Arc::clone(s.clock)),
        );
        let processors = processor.config().processors.max(1);
        let (process_ms, trigger_ms) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut process_config = s.template.async_config("ProcessFunction")?;
        process_config.reserved = Some((processors + s.racing) as usize);
        let process_fn = {
            let (processor, clock, counts, log, faults, busy) = (
                processor,
                Arc::clone(s.clock),
                Arc::clone(s.stats),
                s.log.clone(),
                s.faults,
                Arc::clone(&process_ms),
            );
            let handler: Handler = Arc::new(move |event| {
                let (processor, clock, stats, log, faults, busy) = (
                    Arc::clone(&processor),
                    Arc::clone(&clock),
                    Arc::clone(&counts),
                    log.clone(),
                    faults.clone(),
                    Arc::clone(&busy),
                );
                Box::pin(async move {
                    let start = tokio::time::Instant::now();
                    stats.process_invocations.fetch_add(1, Ordering::Relaxed);
                    let _running = faults.as_ref().map(|f| f.enter());
                    let wake = process::Wakeups::parse(event).map_err(|e| e.to_string())?;
                    let deadline =
                        UNIX_EPOCH + Duration::from_millis(clock.now_ms()) + process_timeout;
                    // Lambda ends the invocation at its timeout; a chaos
                    // run crashes some before.
                    let ends = faults
                        .as_ref()
                        .map_or(process_timeout, |f| f.cut(process_timeout));
                    let report =
                        tokio::time::timeout(ends, processor.handle(&wake, deadline)).await;
                    add_billed(&busy, start);
                    let Ok(report) = report else {
                        if let Some(f) = &faults {
                            f.count_cut();
                        }
                        log.cut_short();
                        return Err("the invocation ended before its handler".into());
                    };
                    let report = report.map_err(|e| {
                        let e = lifo_core::error::chain(&e);
                        log.failed(&e);
                        e
                    })?;
                    log.invocation(&report);
                    Ok(())
                })
            });
            AsyncFunction::new(
                process_config,
                timing,
                handler,
                Arc::clone(s.stats),
                stop.clone(),
            )
        };
        process_topic.deliver_to(&process_fn);

        let trigger = Arc::new(
            Trigger::<Q>::over(Fanout::over(Arc::new(process_topic.clone()), processors))
                .with_sweep(Sweep {
                    store: s.store,
                    shard_count: shards,
                    max_ttl_seconds,
                })
                .with_clock(Arc::clone(s.clock)),
        );
        let trigger_fn = {
            let (counts, busy) = (Arc::clone(s.stats), Arc::clone(&trigger_ms));
            let handler: Handler = Arc::new(move |event| {
                let (trigger, stats, busy) =
                    (Arc::clone(&trigger), Arc::clone(&counts), Arc::clone(&busy));
                Box::pin(async move {
                    let start = tokio::time::Instant::now();
                    stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
                    let outcome = trigger.handle_outcome(event).await;
                    add_billed(&busy, start);
                    let outcome = outcome.map_err(|e| lifo_core::error::chain(&e))?;
                    stats.shed.fetch_add(outcome.shed, Ordering::Relaxed);
                    Ok(())
                })
            });
            let config = s.template.async_config("TriggerFunction")?;
            AsyncFunction::new(config, timing, handler, Arc::clone(s.stats), stop.clone())
        };
        trigger_topic.deliver_to(&trigger_fn);
        let sweep = {
            let (trigger_fn, stats, mut stop) =
                (Arc::clone(&trigger_fn), Arc::clone(s.stats), stop.clone());
            let every = s.template.schedule_rate("TriggerFunction", "Sweep")?;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        biased;
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(every) => {}
                    }
                    stats.sweeps.fetch_add(1, Ordering::Relaxed);
                    trigger_fn.deliver(scheduled_event_json());
                }
            })
        };
        Ok(Self {
            process_topic,
            processors,
            process_ms,
            trigger_ms,
            process_fn,
            trigger_fn,
            sweep,
            shutdown,
        })
    }

    /// create's wake-ups: through the process topic, one per shard group.
    fn wakeups(&self) -> Fanout {
        Fanout::over(Arc::new(self.process_topic.clone()), self.processors)
    }

    /// Stops the sweep and Lambda's retries; waits for what still runs.
    /// How long process and trigger ran.
    async fn stop(self) -> LambdaTime {
        let _ = self.shutdown.send(true);
        let _ = self.sweep.await;
        for f in [&self.process_fn, &self.trigger_fn] {
            f.drain().await;
        }
        LambdaTime {
            process_ms: self.process_ms.load(Ordering::Relaxed),
            trigger_ms: self.trigger_ms.load(Ordering::Relaxed),
            ..LambdaTime::default()
        }
    }
}

/// What [`drive`] returns: the created ids in creation order, when each
/// one's request returned, and create's invocations (requests, time).
type Driven = (Vec<String>, HashMap<String, u64>, LambdaTime);

/// Creates the arrivals on time, then waits for the drain.
async fn drive(
    workload: &Workload,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
    creator: &Creator<Memory>,
    memory: &Memory,
    clock: &dyn Clock,
) -> Result<Driven> {
    let started = tokio::time::Instant::now();
    let ttl = Duration::from_secs(workload.ttl_seconds);
    let drain_limit = workload.duration + ttl + Duration::from_secs(30);
    let mut created: Vec<String> = Vec::with_capacity(arrivals.len());
    let mut written: HashMap<String, u64> = HashMap::with_capacity(arrivals.len());
    let mut create_time = LambdaTime::default();
    let batch = workload.create_batch.clamp(1, MAX_TASKS_PER_REQUEST);
    let mut next = 0;
    while next < arrivals.len() {
        let end = if batch == 1 {
            // Each moment's arrivals as they come, as the local engine
            // sends them: every one due by now (a burst's, or those that
            // came while the last request ran) in one request.
            tokio::time::sleep_until(started + arrivals[next]).await;
            let due = arrivals.partition_point(|a| started + *a <= tokio::time::Instant::now());
            due.clamp(next + 1, next + MAX_TASKS_PER_REQUEST)
        } else {
            // A batching producer waits for its batch (the last one may be
            // short).
            let end = (next + batch).min(arrivals.len());
            tokio::time::sleep_until(started + arrivals[end - 1]).await;
            end
        };
        let request = tokio::time::Instant::now();
        let ids = create(creator, workload, specs, next..end).await?;
        create_time.create_requests += 1;
        create_time.create_ms += billed_ms(request);
        let at = clock.now_ms();
        written.extend(ids.iter().map(|id| (id.clone(), at)));
        created.extend(ids);
        next = end;
    }
    // The drain: until no task is taken or still claimable. A task that is
    // neither stays so (finished, or expired: a claim past its deadline is
    // refused), so each look reads only those still to do.
    let mut outstanding: Vec<&String> = created.iter().collect();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = clock.now_ms();
        outstanding.retain(|id| {
            memory.task(id).is_some_and(|t| {
                t.task_status == TaskStatus::Taken
                    || (t.task_status == TaskStatus::Pending && !t.is_expired(now))
            })
        });
        if outstanding.is_empty() {
            return Ok((created, written, create_time));
        }
        if started.elapsed() > drain_limit {
            return Err(anyhow!(
                "{} tasks still to do {} s after arrivals stopped",
                outstanding.len(),
                (started.elapsed().saturating_sub(workload.duration)).as_secs()
            ));
        }
    }
}

#[cfg(test)]
mod tests;
