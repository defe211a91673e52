//! Shared set-up of the integration tests: a fresh local stack per test
//! (its own table, topics and queues, in the DynamoDB Local and moto that
//! the test binary starts once and that die with it; a DynamoDB Local of
//! its own for a test that reads the stream or needs the server's pace)
//! and the real handlers wired to it.

pub use lifo_core::testing::{deadline, fixture, fixture_path, fixture_text};

use lifo_core::{Store, Task, TaskStatus};
use lifo_lambda::Notifier;
use lifo_local::LocalStack;
use lifo_local::stack::{Servers, StackOptions};
use lifo_ops::create::{CreateConfig, Creator};
use process::runner::SimulatedRunner;
use process::{ProcessConfig, Processor};
use std::sync::Arc;
use std::time::Duration;
use trigger::Trigger;

pub const MAX_TTL: u64 = 604_800;

/// A local stack and the handlers over it.
pub struct Harness {
    pub stack: LocalStack,
    pub store: Store,
    pub shards: u32,
}

impl Harness {
    /// A stack in the test binary's shared servers: for a test that does
    /// not read the table's stream (no [`lifo_local::Pipeline`]).
    /// Its claimable index is current (no lag): these suites check what a
    /// store's and a handler's moves do, and read it right after a write.
    pub async fn start(shards: u32) -> Self {
        Self::start_with(shards, StackOptions::default().current_index()).await
    }

    /// A stack as deployed, for a [`lifo_local::Pipeline`]: a DynamoDB
    /// Local of its own, and the claimable index lagging its writes as
    /// AWS's does ([`lifo_local::index_lag`]).
    pub async fn as_deployed(shards: u32) -> Self {
        Self::start_with(
            shards,
            StackOptions {
                servers: Servers::SharedMoto,
                ..StackOptions::default()
            },
        )
        .await
    }

    /// A stack with a DynamoDB Local of its own ([`Servers::SharedMoto`]):
    /// for a test that reads the table's stream (a [`lifo_local::Pipeline`]
    /// runs on it), or that needs the server's whole pace (the reaper's
    /// 2,000 sheds within its 20 s budget; read units per success compared
    /// between two drains).
    pub async fn own_dynamodb(shards: u32) -> Self {
        Self::start_with(
            shards,
            StackOptions {
                servers: Servers::SharedMoto,
                ..StackOptions::default().current_index()
            },
        )
        .await
    }

    /// [`Harness::start`] with the stack's options (for example transaction
    /// conflicts at a rate). Servers [`Servers::Own`] (the options'
    /// default) are taken as [`Servers::Shared`]: ask for
    /// [`Servers::SharedMoto`] to read the stream.
    pub async fn start_with(shards: u32, options: StackOptions) -> Self {
        // `LIFO_TEST_LOG=process=info,trigger=info cargo test …` shows the
        // functions' JSON log lines (as Logs Insights would) on stderr.
        if let Ok(filter) = std::env::var("LIFO_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .json()
                .try_init();
        }
        let options = match options.servers {
            Servers::Own => StackOptions {
                servers: Servers::Shared,
                ..options
            },
            _ => options,
        };
        let stack = LocalStack::start_with(options)
            .await
            .expect("local stack starts (run `make tools` first)");
        let store = stack.store();
        Self {
            stack,
            store,
            shards,
        }
    }

    fn create_config(&self) -> CreateConfig {
        CreateConfig {
            table_name: self.stack.table.clone(),
            shard_count: self.shards,
            default_ttl_seconds: 3600,
            max_ttl_seconds: MAX_TTL,
            due_shard_count: 4,
            ..CreateConfig::new(self.stack.table.clone())
        }
    }

    /// create as deployed: it wakes the processor itself (and its tasks'
    /// stream inserts pass the filter by).
    pub fn creator(&self) -> Creator {
        self.stack
            .creator(self.store.clone(), self.create_config(), 1)
    }

    /// create's code run by another function under its policy (the API).
    pub fn creator_as(&self, function: &str) -> Creator {
        self.stack
            .creator_as(function, self.store.clone(), self.create_config(), 1)
    }

    /// A producer that writes the table directly, waking nobody itself:
    /// the stream (trigger) announces its tasks.
    pub fn plain_creator(&self) -> Creator {
        Creator::new(self.store.clone(), self.create_config())
    }

    pub fn trigger(&self) -> Trigger {
        self.stack.trigger(self.store.clone(), self.shards, MAX_TTL)
    }

    /// process's settings in these tests: the template's, over this stack's
    /// shards, with short margins and polls, and the rest after a failure
    /// [`RestPolicy::default`](process::rest::RestPolicy); no linger
    /// over a current index, the template's over one that lags (the linger
    /// is what waits out the lag). A test sets what it is about with
    /// `..h.process_config()`.
    pub fn process_config(&self) -> ProcessConfig {
        let lags = self.stack.index_lag.is_some();
        ProcessConfig {
            shard_count: self.shards,
            max_ttl_seconds: MAX_TTL,
            time_budget: Duration::from_secs(10),
            deadline_margin: Duration::from_millis(500),
            idle_poll: Duration::from_millis(50),
            linger: if lags {
                ProcessConfig::new("", "").linger
            } else {
                Duration::ZERO
            },
            pause_poll: Duration::from_millis(500),
            rest: process::rest::RestPolicy::default(),
            lease_margin: Duration::from_millis(500),
            ..ProcessConfig::new(
                self.stack.table.clone(),
                self.stack.trigger_topic_arn.clone(),
            )
        }
    }

    /// A processor with its own simulated downstream.
    pub fn processor(
        &self,
        capacity: usize,
        latency: Duration,
        budget: Duration,
    ) -> Processor<SimulatedRunner> {
        self.processor_on(self.store.clone(), capacity, latency, budget)
    }

    /// A processor with the given downstream and attempt limit.
    pub fn processor_custom(
        &self,
        runner: SimulatedRunner,
        max_attempts: u32,
    ) -> Processor<SimulatedRunner> {
        let mut p = self.processor(1, Duration::ZERO, Duration::from_secs(5));
        p = self.stack.processor(
            self.store.clone(),
            Arc::new(runner),
            ProcessConfig {
                max_attempts,
                ..p.config().clone()
            },
        );
        p
    }

    pub fn processor_on(
        &self,
        store: Store,
        capacity: usize,
        latency: Duration,
        budget: Duration,
    ) -> Processor<SimulatedRunner> {
        self.stack.processor(
            store,
            Arc::new(SimulatedRunner::new(capacity, latency, 0.0, 0.0)),
            ProcessConfig {
                time_budget: budget,
                ..self.process_config()
            },
        )
    }

    /// A processor with its own simulated downstream (`capacity` at once,
    /// each run `latency`) and `config`, usually `..h.process_config()`
    /// with what the test is about.
    pub fn processor_with(
        &self,
        capacity: usize,
        latency: Duration,
        config: ProcessConfig,
    ) -> Processor<SimulatedRunner> {
        self.stack.processor(
            self.store.clone(),
            Arc::new(SimulatedRunner::new(capacity, latency, 0.0, 0.0)),
            config,
        )
    }

    /// scheduler-start over this stack (4 due shards, 7 catch-up days).
    pub fn scheduler(&self) -> scheduler_start::Scheduler {
        scheduler_start::Scheduler::new(
            self.store.clone(),
            Notifier::new(self.stack.sns.clone(), &self.stack.process_topic_arn),
            scheduler_start::SchedulerConfig {
                table_name: self.stack.table.clone(),
                process_topic_arn: self.stack.process_topic_arn.clone(),
                due_shard_count: 4,
                catch_up_days: 7,
                parallelism: 8,
                default_ttl_seconds: 3600,
                retention_seconds: 3600,
                deadline_margin: Duration::from_millis(100),
                processors: 1,
            },
        )
    }

    pub async fn tasks(&self) -> Vec<Task> {
        self.stack.scan_tasks().await.expect("scan")
    }

    /// The table's tasks once `done` holds for them, polled every 200 ms;
    /// panics naming `what` (with the tasks) after `limit`.
    pub async fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&[Task]) -> bool,
    ) -> Vec<Task> {
        let started = std::time::Instant::now();
        loop {
            let tasks = self.tasks().await;
            if done(&tasks) {
                return tasks;
            }
            assert!(
                started.elapsed() < limit,
                "{what}: not after {limit:?}: {tasks:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A worker's claim of the PENDING task `id` that then stalls (it
    /// neither runs nor finishes), with a lease of `lease_ms`.
    pub async fn stalled_claim(&self, id: &str, lease_ms: u64) -> Task {
        self.stalled_claim_at(id, 0, 1, TaskStatus::Pending, lease_ms)
            .await
    }

    /// A worker's claim of `id` as it is (`current`: PENDING, or TAKEN
    /// with a lapsed lease: a reclaim), at fencing `token` and `attempts`
    /// the claim's attempt, that then stalls, with a lease of `lease_ms`.
    pub async fn stalled_claim_at(
        &self,
        id: &str,
        token: u64,
        attempts: u32,
        current: TaskStatus,
        lease_ms: u64,
    ) -> Task {
        let now = lifo_core::now_ms();
        let (lease_until, claimed_by) = (now + lease_ms, "stalled-worker");
        let claim = if current == TaskStatus::Pending {
            lifo_core::Move::Claim {
                lease_until,
                claimed_by,
            }
        } else {
            lifo_core::Move::Reclaim {
                lease_until,
                claimed_by,
                max_attempts: 3,
            }
        };
        let step = lifo_core::Step {
            now_ms: now,
            token,
            attempts,
        };
        self.store
            .apply(id, &claim, current, &step)
            .await
            .expect("the stalled claim is applied")
    }

    /// `tasks` (create's request entries) created through a store whose
    /// meter starts at zero, then run by one processor of `capacity` slots
    /// until none is left: the write units per task (put, claim, finish).
    pub async fn write_units_per_task(
        &self,
        tasks: Vec<serde_json::Value>,
        capacity: usize,
    ) -> f64 {
        let n = tasks.len();
        let store = self.store.with_fresh_meter();
        let create = Creator::new(
            store.clone(),
            CreateConfig {
                shard_count: 1,
                ..CreateConfig::new(self.stack.table.clone())
            },
        );
        create
            .handle(serde_json::json!({ "tasks": tasks }))
            .await
            .expect("create");
        let p = self.processor_on(
            store.clone(),
            capacity,
            Duration::ZERO,
            Duration::from_secs(10),
        );
        let report = p
            .handle(&process::Wakeups::one(), deadline())
            .await
            .expect("process");
        assert_eq!(report.succeeded, n, "every task ran");
        let m = store.meter();
        use lifo_core::Op;
        (m.spent(Op::Put).units + m.spent(Op::Claim).units + m.spent(Op::Finish).units) / n as f64
    }

    pub async fn count(&self, status: TaskStatus) -> usize {
        self.tasks()
            .await
            .iter()
            .filter(|t| t.task_status == status)
            .count()
    }
}

/// The first claim of the PENDING task `id` through `store`, as process
/// makes it (token 0, attempt 1, a lease of a minute).
pub async fn claim(store: &Store, id: &str) -> Task {
    let now = lifo_core::now_ms();
    let claim = lifo_core::Move::Claim {
        lease_until: now + 60_000,
        claimed_by: "test",
    };
    let step = lifo_core::Step {
        now_ms: now,
        token: 0,
        attempts: 1,
    };
    store
        .apply(id, &claim, TaskStatus::Pending, &step)
        .await
        .expect("claimed")
}

/// Task `id` written straight to the table (as an older version, a
/// migration or a producer with its own code might: no check of its id),
/// then claimed and failed with `error` the way process does it.
pub async fn failed_task(store: &Store, id: &str, error: &str) -> Task {
    use lifo_core::{Move, Step, now_ms};
    let payload = serde_json::json!({"n": 1})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let task = Task::new_pending(id.into(), payload, now_ms(), 3600, 1);
    store.put_new(&[task]).await.expect("written");
    let claimed = claim(store, id).await;
    let step = Step {
        now_ms: now_ms(),
        token: claimed.token,
        attempts: 1,
    };
    store
        .apply(
            id,
            &Move::Fail {
                reason: error,
                history: &claimed.history,
            },
            TaskStatus::Taken,
            &step,
        )
        .await
        .expect("failed")
}

/// Log output kept in memory: the writer of a tracing subscriber, read
/// back as text or as JSON lines.
#[derive(Clone, Default)]
pub struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut kept) = self.0.lock() {
            kept.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The lines written so far, each parsed as JSON (a line that is not
    /// JSON panics, naming it).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}
