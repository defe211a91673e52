//! `process`: claims the newest claimable tasks, runs them, records outcomes,
//! and tail-calls itself through the trigger topic while work remains.
//!
//! It runs with reserved concurrency `ProcessorCount` (1 by default). One
//! invocation loops until its time budget (never past the invocation
//! deadline minus a margin and the longest run) or until no claimable task
//! is left. It claims only as many tasks as the runner has free slots, so it
//! never claims a task just to bounce it, and claims them in parallel
//! ([`claims`]). With more than one processor, each invocation first takes
//! a shard group's lease ([`lifo_core::groups`]) and claims from its shards
//! only, with its share of the runner's concurrency and rate.

mod claims;
mod config;
mod finish;
mod report;
pub mod runner;
mod serve;

pub use config::{ProcessConfig, RateLimit};
pub use report::{ProcessReport, StopReason};
pub use serve::{serve, serve_with};

use claims::{ClaimContext, Handled, LoopState};
use finish::FinishPolicy;
use lifo_core::alarm::{MAX_REST_SLEEP, RestAlarm};
use lifo_core::groups;
use lifo_core::heads::{HeadsPolicy, ShardHeads};
use lifo_core::{Notifier, NotifyError, Store, StoreError, Wakeup, now_ms};
use runner::TaskRunner;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinSet;

/// How long after a rest's end an invocation waiting for it reads again
/// (the claim query's `retryAt` filter uses the reader's clock).
const REST_END_MARGIN_MS: u64 = 20;
/// While it waits for a rest to end, an invocation reads again at least
/// this often: a task that arrives meanwhile cannot wake it (its wake-up
/// is throttled: this invocation holds the reserved concurrency), so it
/// would otherwise wait for the whole rest (10 to 30 s at the template's
/// RetryBackoffSeconds).
const REST_WAIT_STEP: Duration = Duration::from_secs(1);

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

/// What woke an invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wake {
    /// SNS records (wake-ups) in the event.
    pub records: usize,
    /// Shard groups the wake-ups named (more than one processor): taken
    /// first, in this order.
    pub groups: Vec<u32>,
    /// The X-Ray trace of the invocation before this one in the tail-call
    /// loop (each starts its own).
    pub previous_trace: Option<String>,
    /// The latest rest end a rest alarm among the wake-ups named (epoch
    /// ms): the invocation looks until then ([`lifo_core::alarm`]).
    pub wake_at: Option<u64>,
}

impl Wake {
    /// One wake-up naming no group (the sweep's, a test's).
    pub fn one() -> Self {
        Self {
            records: 1,
            groups: Vec::new(),
            previous_trace: None,
            wake_at: None,
        }
    }

    /// [`Wake::parse`] for the event as the runtime hands it over.
    pub fn parse_raw(event: &serde_json::value::RawValue) -> Result<Self, ProcessError> {
        let event = lifo_core::event::parse(event)
            .map_err(|e| ProcessError::Malformed(format!("the event is {e}")))?;
        Self::parse(event)
    }

    /// Checks that `event` is an SNS event and reads its wake-ups. Any
    /// wake-up means "look"; one that names a shard group (a [`Wakeup`]
    /// with `group`) says where.
    pub fn parse(event: serde_json::Value) -> Result<Self, ProcessError> {
        let sns: aws_lambda_events::sns::SnsEvent =
            serde_json::from_value(event).map_err(|e| ProcessError::Malformed(e.to_string()))?;
        let mut groups = Vec::new();
        let mut previous_trace = None;
        let mut wake_at: Option<u64> = None;
        for r in &sns.records {
            let w = serde_json::from_str::<Wakeup>(&r.sns.message).ok();
            if previous_trace.is_none() {
                previous_trace = w.as_ref().and_then(|w| w.previous_trace.clone());
            }
            wake_at = wake_at.max(w.as_ref().and_then(|w| w.wake_at));
            if let Some(g) = w.and_then(|w| w.group)
                && !groups.contains(&g)
            {
                groups.push(g);
            }
        }
        Ok(Self {
            records: sns.records.len(),
            groups,
            previous_trace,
            wake_at,
        })
    }
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
    /// Wakes the queue when a rest this invocation started ends after it
    /// ([`lifo_core::alarm`]); without it, the sweep does (within a minute).
    alarm: Option<RestAlarm>,
    runner: Arc<R>,
    config: ProcessConfig,
    /// The downstream's rate limit (this processor's share), per shard
    /// group, kept by the sandbox across invocations (a warm Lambda keeps
    /// its bucket).
    limiters: Mutex<HashMap<u32, Arc<governor::DefaultDirectRateLimiter>>>,
}

/// What an invocation works on: a shard group (or all shards) and its
/// share of the runner.
struct Assignment {
    /// `None`: the only processor (no group lease).
    group: Option<(u32, u64)>,
    shards: Vec<u32>,
    capacity: usize,
    limiter: Option<Arc<governor::DefaultDirectRateLimiter>>,
    /// This invocation, as its claims name it (`claimedBy`) and its group
    /// lease's owner.
    owner: Arc<str>,
}

impl<R: TaskRunner> Processor<R> {
    /// `tail` publishes to the trigger topic.
    pub fn new(store: Store, tail: Notifier, runner: Arc<R>, config: ProcessConfig) -> Self {
        Self {
            store,
            // Each invocation of the tail-call loop starts its own trace.
            tail: tail.starting_new_traces(),
            alarm: None,
            runner,
            config,
            limiters: Mutex::new(HashMap::new()),
        }
    }

    /// With the rest alarm (`REST_WAKE_QUEUE_URL`).
    pub fn with_rest_alarm(mut self, alarm: RestAlarm) -> Self {
        self.alarm = Some(alarm);
        self
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

    fn processors(&self) -> u32 {
        self.config.processors.max(1)
    }

    /// Group `group`'s rate limiter (its share of the rate and burst).
    fn limiter(&self, group: u32) -> Option<Arc<governor::DefaultDirectRateLimiter>> {
        let limit = self.config.rate_limit?;
        let p = self.processors();
        let mut map = self.limiters.lock().ok()?;
        let limiter = map.entry(group).or_insert_with(|| {
            let per_second = groups::share(limit.per_second.get(), group, p);
            let burst = groups::share(limit.burst.get(), group, p);
            Arc::new(governor::RateLimiter::direct(
                governor::Quota::per_second(NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN))
                    .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN)),
            ))
        });
        Some(Arc::clone(limiter))
    }

    /// Takes a shard group (the ones `wake` names first, then any), or, for
    /// the only processor, all shards. `None`: every group is held.
    async fn assign(
        &self,
        wake: &Wake,
        lease_until: u64,
        owner: &str,
    ) -> Result<Option<Assignment>, StoreError> {
        let p = self.processors();
        let capacity = self.runner.capacity().max(1);
        if p == 1 {
            return Ok(Some(Assignment {
                group: None,
                shards: (0..self.config.shard_count.max(1)).collect(),
                capacity,
                limiter: self.limiter(0),
                owner: owner.into(),
            }));
        }
        let mut order: Vec<u32> = wake.groups.iter().copied().filter(|g| *g < p).collect();
        order.extend((0..p).filter(|g| !wake.groups.contains(g)));
        for g in order {
            if let Some(token) = self
                .store
                .take_group(g, lease_until, now_ms(), owner)
                .await?
            {
                return Ok(Some(Assignment {
                    group: Some((g, token)),
                    shards: groups::shards_of(g, p, self.config.shard_count),
                    capacity: groups::share(capacity as u32, g, p) as usize,
                    limiter: self.limiter(g),
                    owner: owner.into(),
                }));
            }
        }
        Ok(None)
    }

    /// Whether any of `shards` holds a claimable task now.
    async fn any_claimable(&self, shards: &[u32]) -> Result<bool, StoreError> {
        let now = now_ms();
        let heads = self
            .store
            .claimable_heads(self.config.order, shards, 1, now, self.horizon(now))
            .await?;
        Ok(heads.iter().any(|(head, _)| !head.is_empty()))
    }

    /// Runs one invocation woken by `wake` ([`Wake::parse`]); `deadline`
    /// is the invocation deadline.
    pub async fn handle(
        &self,
        wake: &Wake,
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
        let lease_until = deadline
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            + self.config.lease_margin.as_millis() as u64;
        let mut report = ProcessReport::default();
        let shed_before = self.store.shed_by_reads();
        let owner = format!("process-{}", lifo_core::new_task_id());
        let Some(assignment) = self.assign(wake, lease_until, &owner).await? else {
            report.stop = StopReason::Held;
            tracing::info!(
                event = "process.held",
                "every shard group is held by another processor"
            );
            return Ok(report);
        };
        report.group = assignment.group.map(|(g, _)| g);
        // The invocation's own subsegment: the only one annotated (X-Ray
        // indexes 50 annotations a trace), so `annotation.previousTraceId`
        // walks the tail-call loop back, one trace per invocation.
        let mut invocation = lifo_core::xray::Subsegment::start("invocation");
        if let Some(s) = &mut invocation {
            s.essential();
            if let Some(p) = &wake.previous_trace {
                s.annotate("previousTraceId", p.as_str());
            }
            if let Some(g) = report.group {
                s.annotate("group", g);
            }
        }
        tracing::info!(
            event = "process.start",
            owner = %owner,
            wakeups = wake.records,
            group = assignment.group.map(|(g, _)| g),
            shards = assignment.shards.len(),
            capacity = assignment.capacity,
            budgetMs = (stop_claiming_at - started).as_millis() as u64
        );
        // Paused: claim nothing, and no tail call (resume wakes the queue).
        if self.store.control(false).await?.paused {
            report.stop = StopReason::Paused;
            tracing::info!(
                event = "process.paused",
                "the queue is paused; claiming nothing"
            );
        }
        let mut running: JoinSet<Handled> = JoinSet::new();
        let mut state = LoopState::new();
        // Woken by a rest alarm: its rests end by `wake_at`; look until then.
        if let Some(at) = wake.wake_at.filter(|at| *at > now_ms()) {
            state.rest_ends.insert(at);
        }
        let outcome = self
            .claim_loop(
                &mut report,
                &mut state,
                &mut running,
                &assignment,
                stop_claiming_at,
                lease_until,
            )
            .await;
        // Whatever happened, finish what was claimed.
        claims::drain(&mut state, &mut report, &mut running).await;
        let failure = state.failure.take();
        // The rests this invocation started that are still running: the
        // rest alarms', if it ends without a tail call.
        let rest_ends = state.rest_ends_after(now_ms());
        state.finish(&mut report);
        let outcome = outcome.and_then(|()| failure.map_or(Ok(()), Err));
        // A tail call only after claiming something (as in model/lifo.pml):
        // an invocation that could claim nothing hands over to the sweep
        // instead of looping.
        let tail =
            if outcome.is_ok() && report.stop == StopReason::Budget && !report.claimed.is_empty() {
                self.any_claimable(&assignment.shards).await
            } else {
                Ok(false)
            };
        if let Some((g, token)) = assignment.group
            && let Err(e) = self.store.release_group(g, token).await
        {
            // Its lease ends by itself at the deadline.
            tracing::warn!(event = "process.group_release_failed", group = g, error = %lifo_core::error::Chain(&e));
        }
        // Whatever failed, what ran is counted and the end is logged below
        // (a failed invocation's successes are still successes).
        let result: Result<(), ProcessError> = async {
            outcome?;
            let tail = tail?;
            if !tail && report.stop != StopReason::Paused {
                self.set_rest_alarms(&rest_ends, &mut report, assignment.group.map(|(g, _)| g))
                    .await;
            }
            if tail {
                let wakeup = Wakeup {
                    group: assignment.group.map(|(g, _)| g),
                    previous_trace: lifo_core::xray::current().map(|t| t.root.to_string()),
                    ..Wakeup::new("process", "tail-call", now_ms())
                };
                self.tail.wake(&wakeup).await?;
                report.tail_call = true;
            }
            Ok(())
        }
        .await;
        if let Some(mut s) = invocation {
            s.annotate("tasksClaimed", report.claimed.len())
                .annotate("tailCall", report.tail_call);
            let budget = &s.trace().budget;
            let (sent, dropped) = (budget.sent(), budget.dropped());
            s.metadata("traceBytes", sent)
                .metadata("subsegmentsDropped", dropped);
            s.end();
        }
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        report.shed = usize::try_from(self.store.shed_by_reads().saturating_sub(shed_before))
            .unwrap_or(usize::MAX);
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
            superseded = report.superseded,
            staleRejected = report.stale_rejected,
            skipped = report.skipped,
            finishErrors = report.finish_errors,
            shed = report.shed,
            stop = ?report.stop,
            tailCall = report.tail_call,
            restAlarms = report.rest_alarms,
            elapsedMs = report.elapsed_ms,
            error = result.as_ref().err().map(|e| lifo_core::error::chain(e)),
        );
        result.map(|()| report)
    }

    /// Sets the rest alarms for `rest_ends` (epoch ms, earliest first), the
    /// rests this invocation started that are still running: one per
    /// cluster ([`lifo_core::alarm::clusters`]). A failure is logged, not
    /// the invocation's: the sweep still finds the tasks within a minute.
    async fn set_rest_alarms(
        &self,
        rest_ends: &[u64],
        report: &mut ProcessReport,
        group: Option<u32>,
    ) {
        let Some(alarm) = &self.alarm else {
            return;
        };
        let now = now_ms();
        // Each cluster's alarm comes at its first end and names its last.
        let alarms: Vec<(u64, Wakeup)> = lifo_core::alarm::clusters(rest_ends.iter().copied())
            .into_iter()
            .filter(|(_, last)| *last > now)
            .map(|(first, last)| {
                let wakeup = Wakeup {
                    group,
                    wake_at: Some(last),
                    ..Wakeup::new("process", "rest-end", now)
                };
                (first, wakeup)
            })
            .collect();
        let Some((first_at, _)) = alarms.first() else {
            return;
        };
        match alarm.set_all(&alarms, now).await {
            Ok(n) => {
                report.rest_alarms = n;
                tracing::info!(
                    event = "process.rest_alarms",
                    alarms = n,
                    firstAt = first_at,
                    group
                );
            }
            Err(e) => {
                tracing::warn!(event = "process.rest_alarm_failed", alarms = alarms.len(), error = %lifo_core::error::Chain(&e));
            }
        }
    }

    /// Takes one start from `limiter`: `Ok` (or no limit), or how long until
    /// one is free.
    fn take_start(limiter: Option<&governor::DefaultDirectRateLimiter>) -> Result<(), Duration> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        limiter.check().map_err(|not_until| {
            use governor::clock::Clock;
            not_until.wait_time_from(governor::clock::DefaultClock::default().now())
        })
    }

    async fn claim_loop(
        &self,
        report: &mut ProcessReport,
        state: &mut LoopState,
        running: &mut JoinSet<Handled>,
        assignment: &Assignment,
        stop_claiming_at: Instant,
        lease_until: u64,
    ) -> Result<(), StoreError> {
        let capacity = assignment.capacity;
        let limiter = assignment.limiter.as_deref();
        let policy = HeadsPolicy::new(assignment.shards.len(), capacity);
        let mut heads = ShardHeads::new(self.config.order, assignment.shards.clone(), policy);
        // Tasks with a tenant were seen: the fair share's reads from then on.
        let mut tenanted = false;
        let ctx = ClaimContext {
            store: self.store.clone(),
            runner: Arc::clone(&self.runner),
            policy: FinishPolicy {
                max_attempts: self.config.max_attempts,
                rest: self.config.rest,
            },
            lease_until,
            owner: Arc::clone(&assignment.owner),
        };
        if self.config.fair_share {
            let group = assignment.group.map_or(0, |(g, _)| g);
            let per_second = self
                .config
                .rate_limit
                .map(|l| groups::share(l.per_second.get(), group, self.processors()));
            state.fair = Some(lifo_core::fair::Ledger::new(per_second).in_order(self.config.order));
        }
        let mut control_read = Instant::now();
        // When there last was work: a candidate found, or a task running.
        let mut last_work = Instant::now();
        // The rate limit's bucket ran dry: no start before this.
        let mut next_start_at: Option<Instant> = None;
        loop {
            if report.stop == StopReason::Paused {
                return Ok(());
            }
            while let Some(done) = running.try_join_next() {
                state.absorb(report, done);
            }
            if state.failure.is_some() {
                return Ok(());
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
                claims::wait_for_one(state, report, running, stop_claiming_at, None).await;
                continue;
            }
            // A slot is free. With a rate limit, a start is taken from the
            // bucket for each candidate once it is read, never before: a
            // start taken for a slot no candidate fills (an empty read at
            // light load) would be lost. When the bucket ran dry, wait for
            // it (or for a running task to end) before reading again.
            if let Some(at) = next_start_at {
                let now = Instant::now();
                if now < at {
                    claims::wait_for_one(state, report, running, stop_claiming_at, Some(at - now))
                        .await;
                    continue;
                }
                next_start_at = None;
            }
            let now = now_ms();
            if self.config.fair_share && !tenanted && heads.any_tenant() {
                tenanted = true;
                heads.set_policy(lifo_core::fair::policy(policy));
            }
            let exclude = state.exclude();
            let mut candidates = claims::refill(
                &self.store,
                &mut heads,
                self.config.order,
                self.horizon(now),
                free,
                &exclude,
                state.fair.as_mut().filter(|_| tenanted),
            )
            .await?;
            let mut granted = 0;
            while granted < candidates.len() {
                match Self::take_start(limiter) {
                    Ok(()) => granted += 1,
                    Err(wait) => {
                        next_start_at = Some(Instant::now() + wait);
                        break;
                    }
                }
            }
            if granted == 0 && !candidates.is_empty() {
                // Read, but the bucket is dry: they stay claimable.
                last_work = Instant::now();
                continue;
            }
            candidates.truncate(granted);
            if candidates.is_empty() {
                if running.is_empty() {
                    // Nothing to claim and nothing runs: look a little
                    // longer (a task announced a moment ago may not be in
                    // the index yet), then end.
                    if last_work.elapsed() >= self.config.linger {
                        // A task this invocation put back comes back in a
                        // moment (the rest alarm's precision; without an
                        // alarm, within the budget): sleep until its rest
                        // ends, reading again each second so new work is
                        // not held back. A later rest end is the alarm's,
                        // set when the invocation ends.
                        let now = now_ms();
                        let longest = if self.alarm.is_some() {
                            MAX_REST_SLEEP
                        } else {
                            stop_claiming_at.saturating_duration_since(Instant::now())
                        };
                        let wait = state
                            .next_rest_end(now)
                            .map(|at| Duration::from_millis(at - now + REST_END_MARGIN_MS))
                            .filter(|w| *w <= longest && Instant::now() + *w < stop_claiming_at);
                        let Some(wait) = wait else {
                            report.stop = StopReason::Empty;
                            return Ok(());
                        };
                        tracing::debug!(
                            event = "process.awaiting_rest",
                            waitMs = wait.as_millis() as u64
                        );
                        tokio::time::sleep(wait.min(REST_WAIT_STEP)).await;
                        continue;
                    }
                    tokio::time::sleep(
                        self.config
                            .idle_poll
                            .min(stop_claiming_at.saturating_duration_since(Instant::now())),
                    )
                    .await;
                    continue;
                }
                last_work = Instant::now();
                claims::wait_for_one(
                    state,
                    report,
                    running,
                    stop_claiming_at,
                    Some(self.config.idle_poll),
                )
                .await;
                continue;
            }
            last_work = Instant::now();
            let sent_at = now_ms();
            for c in candidates {
                if let Some(fair) = &mut state.fair {
                    let tenant = lifo_core::fair::tenant_of(c.tenant.as_deref());
                    fair.start(&c.task_id, tenant, sent_at);
                }
                state.seq += 1;
                state.in_flight.insert(c.task_id.clone());
                claims::spawn(running, &ctx, state.seq, c, sent_at);
            }
        }
    }
}

#[cfg(test)]
mod tests;
