//! `process`: claims the newest claimable tasks, runs them, records outcomes,
//! and tail-calls itself through the trigger topic while work remains.
//!
//! It runs with reserved concurrency 1. One invocation loops until its time
//! budget (never past the invocation deadline minus a margin and the longest
//! run) or until no claimable task is left. It claims only as many tasks as
//! the runner has free slots, so it never claims a task just to bounce it.

mod config;
mod finish;
mod report;
pub mod runner;
mod serve;

pub use config::{ProcessConfig, RateLimit};
pub use report::{ProcessReport, StopReason};
pub use serve::{serve, serve_with};

use finish::{FinishPolicy, run_and_finish};
use lifo_core::{
    Candidate, Notifier, NotifyError, Step, Store, StoreError, Task, TaskStatus, Transition,
    Wakeup, now_ms,
};
use report::{Finished, tally};
use runner::TaskRunner;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinSet;

/// Why an invocation failed. Lambda retries it (and then sends it to the
/// on-failure destination); tasks already claimed were finished first.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("reading or claiming tasks failed")]
    Store(#[from] StoreError),
    #[error("tail call failed")]
    TailCall(#[from] NotifyError),
    #[error("malformed SNS event: {0}")]
    Malformed(String),
    /// The runner's longest run does not fit in the invocation: raise the
    /// function's Timeout or lower RunnerTimeoutMs / the runner's
    /// max_duration.
    #[error(
        "no run fits before the deadline: a run may take {max_run:?}, {left:?} are left \
         (minus the deadline margin); raise the function's Timeout or lower the runner's"
    )]
    NoTimeToRun { max_run: Duration, left: Duration },
}

/// [`wakeups_in`] for the event as the runtime hands it over.
pub fn wakeups_in_raw(event: &serde_json::value::RawValue) -> Result<usize, ProcessError> {
    let event = lifo_core::event::parse(event)
        .map_err(|e| ProcessError::Malformed(format!("the event is {e}")))?;
    wakeups_in(event)
}

/// Checks that `event` is an SNS event and returns how many wake-ups it
/// carries. The messages' contents do not matter: any wake-up means "look".
pub fn wakeups_in(event: serde_json::Value) -> Result<usize, ProcessError> {
    let sns: aws_lambda_events::sns::SnsEvent =
        serde_json::from_value(event).map_err(|e| ProcessError::Malformed(e.to_string()))?;
    Ok(sns.records.len())
}

impl From<ProcessError> for lambda_runtime::Diagnostic {
    fn from(e: ProcessError) -> Self {
        let error_type = match &e {
            ProcessError::Store(_) => "StoreError",
            ProcessError::TailCall(_) => "TailCallFailed",
            ProcessError::Malformed(_) => "MalformedEvent",
            ProcessError::NoTimeToRun { .. } => "NoTimeToRun",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: lifo_core::error::chain(&e),
        }
    }
}

/// The process function's handler.
pub struct Processor<R> {
    store: Store,
    tail: Notifier,
    runner: Arc<R>,
    config: ProcessConfig,
    /// The downstream's rate limit, shared by the invocations of this
    /// sandbox (a warm Lambda keeps its bucket).
    limiter: Option<governor::DefaultDirectRateLimiter>,
}

impl<R: TaskRunner> Processor<R> {
    /// `tail` publishes to the trigger topic.
    pub fn new(store: Store, tail: Notifier, runner: Arc<R>, config: ProcessConfig) -> Self {
        let limiter = config.rate_limit.map(|l| {
            governor::RateLimiter::direct(
                governor::Quota::per_second(l.per_second).allow_burst(l.burst),
            )
        });
        Self {
            store,
            tail,
            runner,
            config,
            limiter,
        }
    }

    /// Takes one start from the rate limit: `Ok` (or no limit), or how long
    /// until one is free. A claim is sent only with a start in hand, so no
    /// task is ever claimed and then kept waiting for its turn.
    fn take_start(&self) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check().map_err(|not_until| {
            use governor::clock::Clock;
            not_until.wait_time_from(governor::clock::DefaultClock::default().now())
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn config(&self) -> &ProcessConfig {
        &self.config
    }

    fn horizon(&self, now: u64) -> u64 {
        now.saturating_sub(self.config.max_ttl_seconds * 1000)
    }

    /// The first `want` claimable tasks in the configured order (newest
    /// first unless this is a FIFO comparison run).
    async fn first_in_order(&self, want: usize) -> Result<Vec<Candidate>, StoreError> {
        let now = now_ms();
        self.store
            .claimable(
                self.config.order,
                self.config.shard_count,
                want,
                now,
                self.horizon(now),
            )
            .await
    }

    /// Runs one invocation. `wakeups` is how many records woke it (for logs);
    /// `deadline` is the invocation deadline.
    pub async fn handle(
        &self,
        wakeups: usize,
        deadline: SystemTime,
    ) -> Result<ProcessReport, ProcessError> {
        let started = Instant::now();
        let until_deadline = deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let last_useful = until_deadline
            .saturating_sub(self.config.deadline_margin)
            .saturating_sub(self.runner.max_duration());
        if last_useful.is_zero() {
            // No run started now could end before the deadline: claiming
            // nothing and tail-calling would loop forever.
            return Err(ProcessError::NoTimeToRun {
                max_run: self.runner.max_duration(),
                left: until_deadline,
            });
        }
        let stop_claiming_at = started + self.config.time_budget.min(last_useful);
        tracing::info!(
            event = "process.start",
            wakeups,
            budgetMs = (stop_claiming_at - started).as_millis() as u64
        );

        let lease_until = deadline
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            + self.config.lease_margin.as_millis() as u64;
        let mut report = ProcessReport {
            claimed: Vec::new(),
            succeeded: 0,
            failed: 0,
            retried: 0,
            reclaimed: 0,
            abandoned: 0,
            retried_after_error: 0,
            conflicts: 0,
            stale_rejected: 0,
            skipped: 0,
            finish_errors: 0,
            stop: StopReason::Budget,
            tail_call: false,
            elapsed_ms: 0,
            ages_ms: Vec::new(),
        };
        let mut running: JoinSet<Finished> = JoinSet::new();
        let capacity = self.runner.capacity().max(1);
        // Paused: claim nothing, and no tail call (resume wakes the queue).
        if self.store.control(false).await?.paused {
            report.stop = StopReason::Paused;
            tracing::info!(
                event = "process.paused",
                "the queue is paused; claiming nothing"
            );
        }
        let outcome = self
            .claim_loop(
                &mut report,
                &mut running,
                capacity,
                stop_claiming_at,
                lease_until,
            )
            .await;
        // Whatever happened, finish what was claimed.
        while let Some(done) = running.join_next().await {
            tally(&mut report, done);
        }
        outcome?;
        // A tail call only after claiming something (as in model/lifo.pml):
        // an invocation that could claim nothing hands over to the sweep
        // instead of looping.
        if report.stop == StopReason::Budget
            && !report.claimed.is_empty()
            && !self.first_in_order(1).await?.is_empty()
        {
            let wakeup = Wakeup {
                source: "process".into(),
                reason: "tail-call".into(),
                at: now_ms(),
            };
            self.tail.wake(&wakeup).await?;
            report.tail_call = true;
        }
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        report.metrics().emit();
        tracing::info!(
            event = "process.end",
            claimed = report.claimed.len(),
            succeeded = report.succeeded,
            failed = report.failed,
            retried = report.retried,
            conflicts = report.conflicts,
            reclaimed = report.reclaimed,
            abandoned = report.abandoned,
            staleRejected = report.stale_rejected,
            skipped = report.skipped,
            finishErrors = report.finish_errors,
            stop = ?report.stop,
            tailCall = report.tail_call,
            elapsedMs = report.elapsed_ms,
        );
        Ok(report)
    }

    async fn claim_loop(
        &self,
        report: &mut ProcessReport,
        running: &mut JoinSet<Finished>,
        capacity: usize,
        stop_claiming_at: Instant,
        lease_until: u64,
    ) -> Result<(), StoreError> {
        // Index entries this invocation will not try again: they cannot be
        // claimed (unknown status, unparseable item) or were just lost.
        let mut skip: HashSet<String> = HashSet::new();
        let mut control_read = Instant::now();
        loop {
            if report.stop == StopReason::Paused {
                return Ok(());
            }
            while let Some(done) = running.try_join_next() {
                tally(report, done);
            }
            if Instant::now() >= stop_claiming_at {
                report.stop = StopReason::Budget;
                return Ok(());
            }
            if control_read.elapsed() >= self.config.pause_poll {
                control_read = Instant::now();
                match self.store.control(false).await {
                    Ok(c) if c.paused => {
                        tracing::info!(
                            event = "process.paused",
                            "the queue was paused; finishing what runs, claiming nothing more"
                        );
                        report.stop = StopReason::Paused;
                        return Ok(());
                    }
                    Ok(_) => {}
                    // Claims go on; the next read may see a pause.
                    Err(e) => {
                        tracing::warn!(event = "process.control_read_failed", error = %lifo_core::error::Chain(&e))
                    }
                }
            }
            let free = capacity - running.len().min(capacity);
            if free == 0 {
                self.wait_for_one(report, running, stop_claiming_at, None)
                    .await;
                continue;
            }
            // A slot is free; a start from the rate limit too, or wait for
            // one (or for a running task to end).
            if let Err(wait) = self.take_start() {
                self.wait_for_one(report, running, stop_claiming_at, Some(wait))
                    .await;
                continue;
            }
            let mut candidates = self.first_in_order(free + skip.len()).await?;
            candidates.retain(|c| !skip.contains(&c.task_id));
            candidates.truncate(free);
            // One start is in hand; each further claim needs its own.
            let mut starts: u32 = 1;
            candidates.retain(|_| {
                let ok = starts > 0 || self.take_start().is_ok();
                starts = starts.saturating_sub(1);
                ok
            });
            if candidates.is_empty() {
                if running.is_empty() {
                    report.stop = StopReason::Empty;
                    return Ok(());
                }
                self.wait_for_one(
                    report,
                    running,
                    stop_claiming_at,
                    Some(self.config.idle_poll),
                )
                .await;
                continue;
            }
            for c in candidates {
                match self.claim(&c, lease_until).await {
                    Ok(Some(task)) => {
                        let now = now_ms();
                        let age_ms = task.started_at.unwrap_or(now).saturating_sub(task.ready_at);
                        let reclaim = c.lease_until.is_some();
                        tracing::info!(
                            event = if reclaim { "task.reclaimed" } else { "task.claimed" },
                            taskId = %task.task_id, shard = task.lifo_shard, attempt = task.attempts,
                            token = task.token, ageMs = age_ms
                        );
                        report.reclaimed += usize::from(reclaim);
                        report.ages_ms.push(age_ms);
                        report.claimed.push(task.task_id.clone());
                        let (store, runner) = (self.store.clone(), Arc::clone(&self.runner));
                        let policy = FinishPolicy {
                            max_attempts: self.config.max_attempts,
                            retry: self.config.retry,
                        };
                        running.spawn(
                            async move { run_and_finish(store, runner, task, policy).await },
                        );
                    }
                    Ok(None) => {
                        report.abandoned += 1;
                        skip.insert(c.task_id);
                    }
                    Err(StoreError::ConditionFailed { current, .. }) => {
                        match current {
                            Some(t)
                                if matches!(
                                    t.task_status,
                                    TaskStatus::Pending | TaskStatus::Taken
                                ) =>
                            {
                                report.conflicts += 1;
                                tracing::info!(event = "task.claim_conflict", taskId = %c.task_id, token = t.token, "another worker claimed it first");
                            }
                            other => {
                                report.skipped += 1;
                                tracing::warn!(event = "task.skipped", taskId = %c.task_id,
                                    status = other.as_ref().map_or("unparseable", |t| t.task_status.as_str()),
                                    "index entry is not a claimable task; skipping it");
                            }
                        }
                        skip.insert(c.task_id);
                    }
                    Err(StoreError::Malformed { task_id, source }) => {
                        report.skipped += 1;
                        tracing::warn!(event = "task.skipped", taskId = %task_id, error = %source, "claimed item does not parse; its lease will expire");
                        skip.insert(task_id);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// Claims a candidate: a PENDING task, or a TAKEN one whose lease has
    /// expired (reclaim). A task whose lease expired with no attempts left
    /// is ended FAILURE instead (`Ok(None)`).
    async fn claim(&self, c: &Candidate, lease_until: u64) -> Result<Option<Task>, StoreError> {
        let now = now_ms();
        let max = self.config.max_attempts;
        let step = |attempts, reason| Step {
            now_ms: now,
            token: c.token,
            attempts,
            lease_until,
            max_attempts: max,
            reason,
            history: &[],
            ..Step::default()
        };
        if c.lease_until.is_none() || c.attempts < max {
            let (t, current) = if c.lease_until.is_none() {
                (Transition::Claim, TaskStatus::Pending)
            } else {
                (Transition::Reclaim, TaskStatus::Taken)
            };
            return match self
                .store
                .apply(&c.task_id, t, current, &step(c.attempts + 1, ""))
                .await
            {
                Ok(task) => Ok(Some(task)),
                // The claim was applied but its answer was lost and the SDK's
                // retry then failed the condition: the item carries exactly
                // our claim (next token, our start time and lease).
                Err(StoreError::ConditionFailed {
                    current: Some(cur), ..
                }) if cur.task_status == TaskStatus::Taken
                    && cur.token == c.token + 1
                    && cur.started_at == Some(now)
                    && cur.lease_until == Some(lease_until) =>
                {
                    Ok(Some(*cur))
                }
                Err(e) => Err(e),
            };
        }
        let reason = format!("lease expired after {} attempts", c.attempts);
        self.store
            .apply(
                &c.task_id,
                Transition::Abandon,
                TaskStatus::Taken,
                &step(c.attempts, &reason),
            )
            .await?;
        tracing::warn!(event = "task.abandoned", taskId = %c.task_id, attempt = c.attempts, token = c.token, reason);
        Ok(None)
    }

    /// Waits until a running task finishes, `poll` passes, or claiming must stop.
    async fn wait_for_one(
        &self,
        report: &mut ProcessReport,
        running: &mut JoinSet<Finished>,
        stop_claiming_at: Instant,
        poll: Option<Duration>,
    ) {
        let limit = poll.map_or(stop_claiming_at, |p| {
            (Instant::now() + p).min(stop_claiming_at)
        });
        if let Ok(Some(done)) = tokio::time::timeout_at(limit.into(), running.join_next()).await {
            tally(report, done);
        }
    }
}

#[cfg(test)]
mod tests;
