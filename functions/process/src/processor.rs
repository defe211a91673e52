//! The processor and one invocation of it: take a shard group (with more
//! than one processor), run the claim loop ([`crate::claim_loop`]), finish
//! what was claimed, set the rest alarms of what rests, and tail-call while
//! work remains.

use crate::claim_loop::{Assignment, Claiming, LoopState, drain};
use crate::config::ProcessConfig;
use crate::halt::Halt;
use crate::handle::Handled;
use crate::report::{ProcessReport, StopReason};
use crate::runner::limit::Handed;
use crate::runner::{Slots, TaskRunner};
use crate::{ProcessError, Wakeups};
use lifo_core::clock::SharedClock;
use lifo_core::groups;
use lifo_core::store::{Queue, QueueOps};
use lifo_core::{Store, StoreError};
use lifo_lambda::alarm::RestAlarm;
use lifo_lambda::notify::Wake;
use lifo_lambda::{Notifier, Wakeup};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::task::JoinSet;

/// The process function's handler, over the queue's storage `Q` (the
/// DynamoDB [`Store`] as deployed, or the in-memory model in a simulation).
pub struct Processor<R, Q = Store> {
    pub(crate) store: Q,
    /// Where tail calls go: the trigger topic ([`Notifier`]) as deployed.
    pub(crate) tail: Arc<dyn Wake>,
    /// Wakes the queue when a rest this invocation started ends after it
    /// ([`lifo_lambda::alarm`]); without it, the sweep does (within a minute).
    pub(crate) alarm: Option<RestAlarm>,
    pub(crate) runner: Arc<R>,
    pub(crate) config: ProcessConfig,
    /// The downstream's rate limit (this processor's share), per shard
    /// group, kept by the sandbox across invocations (a warm Lambda keeps
    /// its bucket).
    pub(crate) limiters: Mutex<HashMap<u32, Arc<crate::rate_limit::Limiter>>>,
    /// The adaptive limit each shard group ended its last invocation with
    /// in this sandbox: where an invocation that no tail call handed a
    /// limit to starts.
    pub(crate) limits: Mutex<HashMap<u32, Handed>>,
    /// How its host stops it in order ([`Halt`]).
    pub(crate) halt: Halt,
    /// Where it reads the time ([`lifo_core::clock`]).
    pub(crate) clock: SharedClock,
}

impl<R: TaskRunner> Processor<R, Store> {
    /// `tail` publishes to the trigger topic. `config` is fitted to the
    /// runner's capacity ([`ProcessConfig::fit_capacity`]).
    pub fn new(store: Store, tail: Notifier, runner: Arc<R>, config: ProcessConfig) -> Self {
        // Each invocation of the tail-call loop starts its own trace.
        Processor::over(store, Arc::new(tail.starting_new_traces()), runner, config)
    }
}

impl<R: TaskRunner, Q: Queue + Clone + 'static> Processor<R, Q> {
    /// A processor over any store, its tail calls sent to `tail` (what a
    /// simulation runs: [`Processor::new`] is the deployed one).
    pub fn over(store: Q, tail: Arc<dyn Wake>, runner: Arc<R>, config: ProcessConfig) -> Self {
        let config = config.fit_capacity(runner.capacity());
        Self {
            store,
            tail,
            alarm: None,
            runner,
            config,
            limiters: Mutex::new(HashMap::new()),
            limits: Mutex::new(HashMap::new()),
            halt: Halt::default(),
            clock: lifo_core::clock::system(),
        }
    }

    /// Reading the time from `clock` (a simulation's virtual time): the
    /// deadline is then measured against it too.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// With the rest alarm (`REST_WAKE_QUEUE_URL`).
    pub fn with_rest_alarm(mut self, alarm: RestAlarm) -> Self {
        self.alarm = Some(alarm);
        self
    }

    pub fn store(&self) -> &Q {
        &self.store
    }

    pub fn config(&self) -> &ProcessConfig {
        &self.config
    }

    /// Its halt: [`Halt::stop`] ends every invocation's claiming, and
    /// [`Halt::running`] counts the tasks still running.
    pub fn halt(&self) -> &Halt {
        &self.halt
    }

    pub(crate) fn horizon(&self, now: u64) -> u64 {
        now.saturating_sub(self.config.max_ttl_seconds * 1000)
    }

    pub(crate) fn processors(&self) -> u32 {
        self.config.processors.max(1)
    }

    /// Group `group`'s rate limiter (its share of the rate and burst).
    fn limiter(&self, group: u32) -> Option<Arc<crate::rate_limit::Limiter>> {
        let limit = self.config.rate_limit?;
        let p = self.processors();
        let mut map = self.limiters.lock().ok()?;
        let limiter = map.entry(group).or_insert_with(|| {
            let per_second = groups::share(limit.per_second.get(), group, p);
            let burst = groups::share(limit.burst.get(), group, p);
            Arc::new(crate::rate_limit::limiter(per_second, burst))
        });
        Some(Arc::clone(limiter))
    }

    /// Group `group`'s slots of `capacity`: the limit a tail call handed
    /// over for it, else the one this sandbox last ended it with.
    fn slots(&self, wake: &Wakeups, group: Option<u32>, capacity: usize) -> Arc<Slots> {
        let handed = wake
            .handover
            .as_ref()
            .filter(|h| h.group == group)
            .and_then(|h| Slots::handed(Some(&h.value)))
            .or_else(|| {
                let kept = self.limits.lock().ok()?;
                kept.get(&group.unwrap_or(0)).copied()
            });
        Arc::new(Slots::new(
            self.config.concurrency,
            capacity,
            handed.as_ref(),
        ))
    }

    /// Takes a shard group (the ones `wake` names first, then any), or, for
    /// the only processor, all shards. `None`: every group is held.
    async fn assign(
        &self,
        wake: &Wakeups,
        lease_until: u64,
        claimed_by: &str,
    ) -> Result<Option<Assignment>, StoreError> {
        let p = self.processors();
        let capacity = self.runner.capacity().max(1);
        if p == 1 {
            return Ok(Some(Assignment {
                group: None,
                shards: (0..self.config.shard_count.max(1)).collect(),
                capacity,
                slots: self.slots(wake, None, capacity),
                limiter: self.limiter(0),
                claimed_by: claimed_by.into(),
            }));
        }
        let mut order: Vec<u32> = wake.groups.iter().copied().filter(|g| *g < p).collect();
        order.extend((0..p).filter(|g| !wake.groups.contains(g)));
        for g in order {
            if let Some(token) = self
                .store
                .take_group(g, lease_until, self.clock.now_ms(), claimed_by)
                .await?
            {
                let capacity = groups::share(capacity as u32, g, p) as usize;
                return Ok(Some(Assignment {
                    group: Some((g, token)),
                    shards: groups::shards_of(g, p, self.config.shard_count),
                    capacity,
                    slots: self.slots(wake, Some(g), capacity),
                    limiter: self.limiter(g),
                    claimed_by: claimed_by.into(),
                }));
            }
        }
        Ok(None)
    }

    /// Whether any of `shards` holds a claimable task now.
    pub(crate) async fn any_claimable(&self, shards: &[u32]) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        let heads = self
            .store
            .claimable_heads(self.config.order, shards, 1, now, self.horizon(now))
            .await?;
        Ok(heads.iter().any(|(head, _)| !head.is_empty()))
    }

    /// Runs one invocation woken by `wake` ([`Wakeups::parse`]); `deadline`
    /// is the invocation deadline.
    pub async fn handle(
        &self,
        wake: &Wakeups,
        deadline: SystemTime,
    ) -> Result<ProcessReport, ProcessError> {
        let started = self.clock.instant();
        let until_deadline = deadline
            .duration_since(UNIX_EPOCH + Duration::from_millis(self.clock.now_ms()))
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
        let mut report = ProcessReport {
            settings_clamped: self.config.clamps.len(),
            ..ProcessReport::default()
        };
        let shed_before = self.store.shed_by_reads();
        let claimed_by = format!("process-{}", lifo_core::new_task_id());
        let Some(assignment) = self.assign(wake, lease_until, &claimed_by).await? else {
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
        let mut invocation = lifo_lambda::xray::Subsegment::start("invocation");
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
            claimedBy = %claimed_by,
            wakeups = wake.records,
            group = assignment.group.map(|(g, _)| g),
            shards = assignment.shards.len(),
            capacity = assignment.capacity,
            concurrency = %self.config.concurrency,
            downstreamLimit = assignment.slots.limit(),
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
        let mut state = LoopState::new(self.clock.clone());
        // Woken by a rest alarm: its rests end by `wake_at`; look until then.
        if let Some(at) = wake.wake_at.filter(|at| *at > self.clock.now_ms()) {
            state.look_until = Some(at);
        }
        let outcome = Claiming {
            store: &self.store,
            runner: &self.runner,
            config: &self.config,
            assignment: &assignment,
            alarm: self.alarm.is_some(),
            // A tail call's handover, if it was for this group.
            handover: wake
                .handover
                .as_ref()
                .filter(|h| h.group == assignment.group.map(|(g, _)| g))
                .map(|h| &h.value),
            halt: &self.halt,
            clock: &self.clock,
        }
        .run(
            &mut report,
            &mut state,
            &mut running,
            stop_claiming_at,
            lease_until,
        )
        .await;
        // Whatever happened, finish what was claimed.
        drain(&mut state, &mut report, &mut running).await;
        self.keep_limit(&assignment, &mut report).await;
        let failure = state.failure.take();
        // The tasks it put back and did not claim again: the rest alarms'.
        let rest_ends = state.unclaimed_rest_ends();
        // What the next invocation of the loop starts from.
        let sent_at = self.clock.now_ms();
        let mut handover = std::mem::take(&mut state.handover);
        // The limit as the last run left it (after the drain).
        assignment.slots.hand_over(&mut handover);
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
            // Set even before a tail call: the chain may end before these
            // rests do, and the next invocation knows nothing of them.
            // Paused, resume wakes the queue; stopped, the host is going
            // away (its next start's sweep finds what rests).
            if !matches!(report.stop, StopReason::Paused | StopReason::Stopped) {
                self.set_rest_alarms(&rest_ends, &mut report, assignment.group.map(|(g, _)| g))
                    .await;
            }
            if tail {
                let wakeup = Wakeup {
                    group: assignment.group.map(|(g, _)| g),
                    previous_trace: lifo_lambda::xray::current().map(|t| t.root.to_string()),
                    handover: (!handover.is_empty()).then_some(serde_json::Value::Object(handover)),
                    ..Wakeup::new("process", "tail-call", sent_at)
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
            retriedLater = report.retried_later,
            conflicts = report.conflicts,
            reclaimed = report.reclaimed,
            abandoned = report.abandoned,
            superseded = report.superseded,
            staleRejected = report.stale_rejected,
            skipped = report.skipped,
            finishErrors = report.finish_errors,
            shed = report.shed,
            deadlineStarts = report.deadline_starts,
            stop = ?report.stop,
            tailCall = report.tail_call,
            restAlarms = report.rest_alarms,
            restAlarmsFailed = report.rest_alarms_failed,
            floodingStarts = report.fairness.map(|f| f.flooding_starts),
            quietTenantsOldestAgeMs = report.fairness.and_then(|f| f.quiet_oldest_age_ms),
            downstreamLimit = report.downstream_limit,
            runsRefused = report.runs_refused,
            limitHalvings = report.limit_halvings,
            elapsedMs = report.elapsed_ms,
            error = result.as_ref().err().map(|e| lifo_core::error::chain(e)),
        );
        result.map(|()| report)
    }

    /// Books what the slots saw; with the adaptive limit, keeps it for
    /// this sandbox's next invocation of the group and, once it ran
    /// something, records it for `lifo stats` (one write; a failure is
    /// only logged).
    async fn keep_limit(&self, assignment: &Assignment, report: &mut ProcessReport) {
        let slots = &assignment.slots;
        report.downstream(slots.limit(), slots.seen());
        let Some(handed) = slots.state() else {
            return;
        };
        let group = report.group.unwrap_or(0);
        if let Ok(mut kept) = self.limits.lock() {
            kept.insert(group, handed);
        }
        if report.downstream_latencies_ms.is_empty() {
            return;
        }
        let last = lifo_core::store::DownstreamLimit {
            limit: report.downstream_limit as u64,
            ceiling: assignment.capacity as u64,
            unloaded_ms: handed.unloaded_ms.map_or(0, |u| u.round() as u64),
            group,
            at: self.clock.now_ms(),
        };
        if let Err(e) = self.store.record_limit(&last).await {
            tracing::warn!(event = "process.limit_record_failed", error = %lifo_core::error::Chain(&e));
        }
    }

    /// Sets the rest alarms for `rest_ends` (epoch ms, earliest first), the
    /// rests of the tasks this invocation put back and did not claim again
    /// (one already past: at once): one per
    /// cluster ([`lifo_lambda::alarm::clusters`]). A failure is logged, not
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
        let now = self.clock.now_ms();
        // Each cluster's alarm comes at its first end (at once for an end
        // already past) and names its last.
        let alarms: Vec<(u64, Wakeup)> = lifo_lambda::alarm::clusters(rest_ends.iter().copied())
            .into_iter()
            .map(|(first, last)| {
                let wakeup = Wakeup {
                    group,
                    wake_at: Some(last),
                    // The alarm carries no trace header: its wake-up names
                    // this trace, as a tail call's does.
                    previous_trace: lifo_lambda::xray::current().map(|t| t.root.to_string()),
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
                report.rest_alarms_failed = alarms.len();
                tracing::warn!(event = "process.rest_alarm_failed", alarms = alarms.len(), error = %lifo_core::error::Chain(&e));
            }
        }
    }
}
