//! Chaos in virtual time: thousands of tasks through the real handlers
//! while every fault is drawn from the run's seed ([`super::faults`]):
//! store calls fail before or after they were applied, or are resent;
//! process invocations are cut short (their claims' leases must run out
//! and be reclaimed); SNS delivers some messages twice; with
//! `ProcessorCount` above one, processors claim at once, each from its
//! shard group, and with one, a second invocation sometimes races it over
//! the same shards; the claimable index lags as AWS's does. Tasks come in
//! three priorities and four tenants (the fair share on); one in five
//! carries a `supersedeKey`, and several producers write each key's tasks
//! at about the same moment, resending a request until it is answered
//! (same ids).
//! Beside them, a backlog of tasks already expired must be shed, once,
//! and never run. Each store request takes DynamoDB's round trip.
//!
//! The run is judged as the chaos test on DynamoDB Local is
//! ([`crate::chaos`]), from every change the store committed: nothing
//! lost, stuck, committed twice or started stale.

use super::faults::{FaultyStore, StoreFaultCounts};
use super::invocation_faults::{InvocationFaultCounts, InvocationFaults};
use super::{EPOCH_MS, EventLog, Functions, Setup, seeded_clock};
use crate::chaos::{Evidence, Verdict, judge};
use crate::simulate::{PipelineCounts, STORE_LATENCY};
use anyhow::{Context, Result, anyhow};
use lifo_core::clock::{Clock, SharedClock};
use lifo_core::memory::{Lag, Memory};
use lifo_core::store::Queue;
use lifo_core::{Order, Task, TaskStatus};
use lifo_local::pipeline::PipelineStats;
use lifo_ops::create::{CreateConfig, Creator};
use process::ProcessConfig;
use process::runner::{RunOutcome, SimulatedRunner, TaskRunner};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The priorities, taken in turn.
const LANES: [&str; 3] = ["high", "normal", "low"];
const TENANTS: usize = 4;
/// One task in this many has a supersede key.
const KEYED_EVERY: usize = 5;
const KEYS: usize = 25;
/// A task's time to live, and the largest one allowed
/// (`MaxTaskTtlSeconds`): a task that waits its whole TTL is then past the
/// readers' horizon as it expires, where only the reaper (which reads from
/// each band's oldest end) still sheds it. Longer than a run normally
/// lasts; a run whose shard groups were held by crashed invocations for a
/// while sheds some.
const TTL_SECONDS: u64 = 3_600;
/// An invocation cut short is cut this long after it began at most (most
/// end sooner than their budget: when nothing is left to claim).
const CUT_WITHIN: Duration = Duration::from_secs(3);
/// Tasks of one create request at most.
const BATCH: usize = 25;

/// A chaos run's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Chaos {
    pub seed: u64,
    /// Tasks created while the processors run (the backlog apart).
    pub tasks: usize,
    /// Over how long they arrive (a Poisson process).
    pub arrivals_over: Duration,
    /// Tasks already expired at the start.
    pub backlog: usize,
    /// Producers writing at once, each its share of the arrivals in turn.
    pub producers: usize,
    /// `ProcessorCount` (process's reserved concurrency).
    pub processors: u32,
    /// Invocations Lambda runs beyond `processors` at once: a second one
    /// racing the only processor over the same shards (a misconfigured
    /// concurrency, or a duplicated wake-up run beside the first), as the
    /// chaos test on DynamoDB Local once raced it.
    pub racing: u32,
    pub shards: u32,
    pub order: Order,
    /// A store call meets a fault (refused, failed after it was applied,
    /// or resent) with this probability.
    pub store_fault_rate: f64,
    /// A process invocation is cut short with this probability.
    pub cut_rate: f64,
    /// An SNS delivery is made twice with this probability.
    pub duplicate_rate: f64,
}

impl Chaos {
    /// `tasks` tasks under every fault; the processors (one, two or three;
    /// half of the single ones raced by a second invocation) and the order
    /// (LIFO or adaptive) vary with `seed`.
    pub fn of_seed(seed: u64, tasks: usize) -> Self {
        let processors = 1 + (seed % 3) as u32;
        Self {
            seed,
            tasks,
            arrivals_over: Duration::from_secs(60),
            backlog: 100,
            producers: 4,
            processors,
            racing: u32::from(processors == 1 && (seed / 6).is_multiple_of(2)),
            shards: 4,
            order: if (seed / 3).is_multiple_of(2) {
                Order::Lifo
            } else {
                Order::Adaptive
            },
            // A fault here is one past the SDK's own retries. An invocation
            // makes hundreds of calls and ends on the first error, so at
            // 1% nearly every one failed within a second and throughput
            // fell to what the sweep restarts each minute.
            store_fault_rate: 0.003,
            cut_rate: 0.15,
            duplicate_rate: 0.1,
        }
    }
}

/// What a chaos run did, and the judge's verdict.
#[derive(Debug, Clone)]
pub struct ChaosRun {
    pub chaos: Chaos,
    /// Tasks created, the backlog included.
    pub created: usize,
    pub keyed: usize,
    pub verdict: Verdict,
    pub store_faults: StoreFaultCounts,
    pub invocation_faults: InvocationFaultCounts,
    /// Create requests sent again after an error.
    pub create_resends: usize,
    pub pipeline: PipelineCounts,
    /// Invocations that failed (process's and trigger's: cut short, or a
    /// store error).
    pub invocation_errors: usize,
    /// Runs of backlog tasks (never: they expired before the start).
    pub backlog_run: usize,
    /// Backlog tasks not shed exactly once.
    pub backlog_not_shed_once: usize,
    /// Live tasks shed by expiry (waited past their TTL: not lost).
    pub shed_live: usize,
    /// Live tasks whose ends (an outcome, a supersede before a start, or a
    /// shed) are not exactly one.
    pub ends_not_one: usize,
    /// Runs the downstream made (re-runs of a task included).
    pub runs: usize,
    /// From the first arrival to the drain, in virtual time.
    pub elapsed: Duration,
    pub log_hash: String,
    /// The wall time it took.
    pub wall: Duration,
}

impl ChaosRun {
    /// Whether every invariant held.
    pub fn clean(&self) -> bool {
        let v = &self.verdict;
        v.lost
            + v.stuck
            + v.duplicates
            + v.stale_commits
            + v.late_starts
            + v.starts_after_answer
            + v.newest_unrun
            + v.shed_twice
            + self.backlog_run
            + self.backlog_not_shed_once
            + self.ends_not_one
            == 0
    }

    /// The run's figures on one line (its wall time apart: the same seed
    /// gives the same line).
    pub fn figures(&self) -> String {
        let (c, v, s, i, p) = (
            &self.chaos,
            &self.verdict,
            &self.store_faults,
            &self.invocation_faults,
            &self.pipeline,
        );
        format!(
            "seed {} (processors {}{}, at once {}, {}): tasks {} (keyed {}), succeeded {}, failed {}, superseded {}, shed {}; \
             faults: store {} before + {} after + {} resent, invocations cut short {}, SNS duplicates {}, \
             create resends {}; invocations {} (throttled {}, errors {}), runs {}, reclaims {}; \
             lost {}, stuck {}, duplicated {}, stale {} (starts after a newer write {}, after its answer {}, \
             stale commits {}), newest of a key not run {}, shed twice {}, backlog run {}, backlog not shed once {}, \
             live tasks shed by expiry {}, ends not one {}; {:.0} s virtual, log {}",
            c.seed,
            c.processors,
            if c.racing > 0 { " raced" } else { "" },
            i.most_at_once,
            c.order,
            self.created,
            self.keyed,
            v.succeeded,
            v.failed,
            v.superseded,
            v.shed,
            s.before,
            s.after,
            s.resent,
            i.cut_short,
            i.duplicated,
            self.create_resends,
            p.process_invocations,
            p.throttles,
            self.invocation_errors,
            self.runs,
            v.reclaims,
            v.lost,
            v.stuck,
            v.duplicates,
            v.late_starts + v.starts_after_answer + v.stale_commits,
            v.late_starts,
            v.starts_after_answer,
            v.stale_commits,
            v.newest_unrun,
            v.shed_twice,
            self.backlog_run,
            self.backlog_not_shed_once,
            self.shed_live,
            self.ends_not_one,
            self.elapsed.as_secs_f64(),
            self.log_hash,
        )
    }
}

/// A downstream that answers as [`SimulatedRunner`] does and records each
/// run's task and claim stamp.
struct Witness {
    inner: SimulatedRunner,
    starts: Mutex<Vec<(String, u64)>>,
}

impl TaskRunner for Witness {
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn max_duration(&self) -> Duration {
        self.inner.max_duration()
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        if let Ok(mut s) = self.starts.lock() {
            s.push((task.task_id.clone(), task.started_at.unwrap_or_default()));
        }
        self.inner.run(task).await
    }
}

/// Runs `chaos` in virtual time on this thread (a runtime of one thread,
/// its clock paused).
pub fn run(chaos: &Chaos) -> Result<ChaosRun> {
    let wall = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .context("building the chaos run's runtime")?;
    let result = runtime.block_on(run_paused(chaos));
    lifo_core::seed_task_ids(None);
    let mut run = result?;
    run.wall = wall.elapsed();
    Ok(run)
}

/// The arrivals: each one's offset from the start and its create spec.
fn arrivals(chaos: &Chaos) -> Vec<(Duration, serde_json::Value)> {
    let mut rng = fastrand::Rng::with_seed(chaos.seed ^ 0xa11_1a1);
    let rate = chaos.tasks as f64 / chaos.arrivals_over.as_secs_f64().max(1e-3);
    let mut at = 0.0f64;
    (0..chaos.tasks)
        .map(|n| {
            at += -(1.0 - rng.f64()).ln() / rate;
            let mut spec = serde_json::json!({
                "taskId": format!("t{n:05}"),
                "payload": {"n": n},
                "priority": LANES[n % LANES.len()],
                "tenant": format!("tenant-{}", n % TENANTS),
            });
            // Consecutive keyed tasks (one per producer, in turn) share a
            // key: its writes race.
            if n.is_multiple_of(KEYED_EVERY) {
                let key = (n / (KEYED_EVERY * chaos.producers.max(1))) % KEYS;
                spec["supersedeKey"] = serde_json::json!(format!("key-{key}"));
            }
            (Duration::from_secs_f64(at), spec)
        })
        .collect()
}

/// What the producers did: when each keyed write was answered, and how
/// many requests they sent again.
#[derive(Default)]
struct Produced {
    answered: HashMap<String, u64>,
    resends: usize,
}

/// Producer `p` of `producers`: its share of `arrivals` in turn, each
/// request (the arrivals due, up to [`BATCH`]) sent again until answered.
async fn produce(
    p: usize,
    producers: usize,
    arrivals: &[(Duration, serde_json::Value)],
    creator: &Creator<FaultyStore>,
    clock: &dyn Clock,
    produced: &Mutex<Produced>,
) {
    let started = tokio::time::Instant::now();
    let mine: Vec<&(Duration, serde_json::Value)> =
        arrivals.iter().skip(p).step_by(producers).collect();
    let mut next = 0;
    while next < mine.len() {
        tokio::time::sleep_until(started + mine[next].0).await;
        let due = started.elapsed();
        let end = (next + mine[next..].iter().take_while(|a| a.0 <= due).count())
            .min(next + BATCH)
            .max(next + 1);
        let specs: Vec<&serde_json::Value> = mine[next..end].iter().map(|a| &a.1).collect();
        let request = serde_json::json!({ "tasks": specs });
        let mut resends = 0;
        while creator.handle(request.clone()).await.is_err() {
            resends += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let at = clock.now_ms();
        if let Ok(mut out) = produced.lock() {
            out.resends += resends;
            for spec in &specs {
                if spec.get("supersedeKey").is_some()
                    && let Some(id) = spec["taskId"].as_str()
                {
                    out.answered.insert(id.to_owned(), at);
                }
            }
        }
        next = end;
    }
}

/// The expired backlog: tasks created two minutes before the start with a
/// minute to live.
fn backlog(chaos: &Chaos) -> Vec<Task> {
    let at = EPOCH_MS - 120_000;
    (0..chaos.backlog)
        .map(|i| {
            Task::new_pending(
                format!("expired-{i}"),
                lifo_core::Payload::new(),
                at + i as u64,
                60,
                chaos.shards,
            )
        })
        .collect()
}

async fn run_paused(chaos: &Chaos) -> Result<ChaosRun> {
    let template = lifo_local::Template::workspace()?;
    let clock: SharedClock = seeded_clock(chaos.seed);
    let store = FaultyStore::new(
        Memory::new(Lag::Aws { seed: chaos.seed }).with_latency(STORE_LATENCY),
        chaos.store_fault_rate,
        chaos.seed ^ 0x5707e,
    );
    let stats = Arc::new(PipelineStats::default());
    let log = EventLog::new(Arc::clone(&clock));
    let base = ProcessConfig::new("virtual", "virtual");
    let config = ProcessConfig {
        shard_count: chaos.shards,
        max_ttl_seconds: TTL_SECONDS,
        time_budget: Duration::from_secs(10),
        processors: chaos.processors,
        order: chaos.order,
        ..base
    };
    let faults = Arc::new(InvocationFaults::new(
        chaos.cut_rate,
        CUT_WITHIN,
        chaos.duplicate_rate,
        chaos.seed ^ 0xc0ffee,
    ));
    let runner = Arc::new(Witness {
        inner: SimulatedRunner::new(16, Duration::from_millis(100), 0.03, 0.03).with_jitter(0.5),
        starts: Mutex::new(Vec::new()),
    });

    let backlog = backlog(chaos);
    store.set_enabled(false);
    store.put_new(&backlog).await?;
    store.set_enabled(true);
    let functions = Functions::deploy(Setup {
        template: &template,
        clock: &clock,
        stats: &stats,
        log: &log,
        store: store.clone(),
        runner: Arc::clone(&runner),
        config,
        faults: Some(Arc::clone(&faults)),
        racing: chaos.racing,
    })?;
    let creator = Creator::new(
        store.clone(),
        CreateConfig {
            shard_count: chaos.shards,
            default_ttl_seconds: TTL_SECONDS,
            max_ttl_seconds: TTL_SECONDS,
            ..CreateConfig::new("virtual")
        },
    )
    .with_clock(Arc::clone(&clock))
    .with_wakeups(functions.wakeups());

    let arrivals = arrivals(chaos);
    let produced = Mutex::new(Produced::default());
    let started = tokio::time::Instant::now();
    futures::future::join_all((0..chaos.producers).map(|p| {
        produce(
            p,
            chaos.producers,
            &arrivals,
            &creator,
            clock.as_ref(),
            &produced,
        )
    }))
    .await;
    // The drain: until every task ended, or two hours passed.
    let limit = chaos.arrivals_over + Duration::from_secs(7_200);
    while store.open() > 0 && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let elapsed = started.elapsed();
    functions.stop().await;

    let tasks: Vec<Task> = store.memory().snapshot().tasks.into_values().collect();
    log.tasks(tasks.iter());
    let mut created: Vec<String> = backlog.iter().map(|t| t.task_id.clone()).collect();
    let mut keys: HashMap<String, String> = HashMap::new();
    for (_, spec) in &arrivals {
        let id = spec["taskId"]
            .as_str()
            .ok_or_else(|| anyhow!("a spec without its id"))?
            .to_owned();
        if let Some(key) = spec["supersedeKey"].as_str() {
            keys.insert(id.clone(), key.to_owned());
        }
        created.push(id);
    }
    let changes = store.changes();
    let starts = runner.starts.lock().map(|s| s.clone()).unwrap_or_default();
    let produced = produced.into_inner().unwrap_or_default();
    let (verdict, ledger) = judge(&Evidence {
        created: &created,
        tasks: &tasks,
        changes: &changes,
        keys: &keys,
        answered: &produced.answered,
        starts: &starts,
    });
    let is_backlog = |id: &str| id.starts_with("expired-");
    // Each live task's ends: its outcomes, its sheds, and supersedes before
    // a start (of a PENDING task, or of one written SUPERSEDED).
    let mut ends: HashMap<&str, usize> = HashMap::new();
    for (id, n) in ledger.outcomes.iter().chain(&ledger.sheds) {
        *ends.entry(id.as_str()).or_default() += n;
    }
    for c in &changes {
        if c.new.is_some_and(|n| n.status == TaskStatus::Superseded)
            && c.old.is_none_or(|o| o.status == TaskStatus::Pending)
        {
            *ends.entry(c.id.as_str()).or_default() += 1;
        }
    }
    Ok(ChaosRun {
        chaos: chaos.clone(),
        created: created.len(),
        keyed: keys.len(),
        store_faults: store.injected(),
        invocation_faults: faults.injected(),
        create_resends: produced.resends,
        pipeline: PipelineCounts::of(&stats),
        invocation_errors: PipelineStats::get(&stats.errors),
        backlog_run: starts.iter().filter(|(id, _)| is_backlog(id)).count(),
        backlog_not_shed_once: backlog
            .iter()
            .filter(|t| ledger.sheds.get(&t.task_id) != Some(&1))
            .count(),
        shed_live: ledger.sheds.keys().filter(|id| !is_backlog(id)).count(),
        ends_not_one: created
            .iter()
            .filter(|id| !is_backlog(id) && ends.get(id.as_str()) != Some(&1))
            .count(),
        runs: starts.len(),
        verdict,
        elapsed,
        log_hash: log.hash(),
        wall: Duration::ZERO,
    })
}
