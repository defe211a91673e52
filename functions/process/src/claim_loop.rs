//! The claim loop: free slots, then starts from the rate limit, then the
//! claim policy's picks ([`crate::select`]), then a claim for each, then
//! what happened, told to the policy.
//!
//! Each claimed candidate is handled on a tokio task of its own
//! ([`crate::handle`]: claim, run, record the outcome), spawned at once, so
//! the claims of one refill go out together, and the loop reads and claims
//! again while earlier tasks run. A slot counts as taken from the moment
//! its claim is sent. A start is taken from the rate limit for each pick,
//! never before (a start taken for a slot no candidate fills would be
//! lost); a pick without one goes back to the policy. When nothing is left
//! to claim, the loop waits for a rest that ends within [`MAX_REST_SLEEP`]
//! (reading again once a second) and ends otherwise.

use crate::config::ProcessConfig;
use crate::finish::FinishPolicy;
use crate::halt::Halt;
use crate::handle::{self, ClaimContext, Handled};
use crate::report::{Finished, ProcessReport, StopReason, tally};
use crate::runner::{Limited, Slots, TaskRunner};
use crate::select::{self, Event, Handover, Select, Setup, Tally};
use lifo_core::StoreError;
use lifo_core::clock::{Instant, SharedClock};
use lifo_core::store::Queue;
use lifo_lambda::alarm::MAX_REST_SLEEP;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long after a rest's end an invocation waiting for it reads again
/// (the claim query's `retryAt` filter uses the reader's clock).
pub(crate) const REST_END_MARGIN_MS: u64 = 20;
/// While it waits for a rest to end, an invocation reads again at least
/// this often: a task that arrives meanwhile cannot wake it (its wake-up
/// is throttled: this invocation holds the reserved concurrency), so it
/// would otherwise wait for the whole rest (10 to 30 s at the template's
/// RetryBackoffSeconds).
pub(crate) const REST_WAIT_STEP: Duration = Duration::from_secs(1);

/// The loop's memory across refills.
pub(crate) struct LoopState {
    /// Ids the next candidates must not be: those whose claim was sent and
    /// whose handling has not ended, and those this invocation will not try
    /// again (lost to another worker, abandoned, not claimable). One set kept
    /// up to date, so a refill reads it in place instead of building it.
    pub exclude: HashSet<String>,
    /// The first claim that failed on a store error.
    pub failure: Option<StoreError>,
    /// Claims sent so far (the claim order of the report).
    pub seq: u64,
    /// (claim order, id) of each task claimed.
    pub claimed: Vec<(u64, String)>,
    /// The claim policy, once the loop has begun.
    pub select: Option<Box<dyn Select>>,
    /// The tasks this invocation put back and has not claimed since, each
    /// with its rest's end (epoch ms): it waits for one that ends within
    /// [`MAX_REST_SLEEP`], and sets rest alarms for the others when it
    /// ends.
    pub rests: std::collections::HashMap<String, u64>,
    /// The latest rest end the rest alarms that woke this invocation named
    /// (epoch ms): it looks until then.
    pub look_until: Option<u64>,
    /// When the last refill began (epoch ms): one that found nothing read
    /// the index as of then, so a task whose rest ended after it was not
    /// claimable to it.
    pub read_at: u64,
    /// What the policy hands to the next invocation, once the loop ended.
    pub handover: Handover,
    /// Where the loop reads the time.
    pub clock: SharedClock,
}

impl LoopState {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            exclude: HashSet::new(),
            failure: None,
            seq: 0,
            claimed: Vec::new(),
            select: None,
            rests: std::collections::HashMap::new(),
            look_until: None,
            read_at: 0,
            handover: Handover::new(),
            clock,
        }
    }

    /// The rest ends of the tasks this invocation put back and has not
    /// claimed again, earliest first, those already past included: each
    /// needs a wake-up (one whose rest just ended, and which this
    /// invocation did not claim before it ends, gets one at once).
    pub fn unclaimed_rest_ends(&self) -> Vec<u64> {
        let mut ends: Vec<u64> = self.rests.values().copied().collect();
        ends.sort_unstable();
        ends
    }

    /// The first end after `now_ms` of the rests of [`Self::rests`], or of
    /// [`Self::look_until`].
    pub fn next_rest_end(&self, now_ms: u64) -> Option<u64> {
        self.rests
            .values()
            .copied()
            .chain(self.look_until)
            .filter(|at| *at > now_ms)
            .min()
    }

    /// How long to wait at `now_ms` before reading again for a rest that
    /// ends after [`Self::read_at`]: the last read could not see its task,
    /// even when the rest ended while it ran. The read again comes
    /// `margin_ms` after the end. `None`: none is left.
    pub fn rest_wait(&self, now_ms: u64, margin_ms: u64) -> Option<Duration> {
        self.next_rest_end(self.read_at)
            .map(|at| Duration::from_millis((at + margin_ms).saturating_sub(now_ms)))
    }

    /// Tells the claim policy `events`, now.
    fn tell<'a>(&mut self, events: impl Iterator<Item = Event<'a>>) {
        if let Some(policy) = &mut self.select {
            for e in events {
                policy.tell(e, self.clock.now_ms());
            }
        }
    }

    /// Books a candidate's handling that ended.
    pub fn absorb(
        &mut self,
        report: &mut ProcessReport,
        done: Result<Handled, tokio::task::JoinError>,
    ) {
        let handled = match done {
            Ok(p) => p,
            Err(e) => {
                tally(report, Err(e));
                return;
            }
        };
        if let Some(select) = &mut self.select {
            let ran = matches!(handled, Handled::Ran { .. });
            let event = Event::Ended {
                task_id: handled.task_id(),
                ran,
            };
            select.tell(event, self.clock.now_ms());
        }
        match handled {
            Handled::Ran {
                seq,
                task_id,
                age_ms,
                reclaim,
                finished,
                ..
            } => {
                self.exclude.remove(&task_id);
                report.reclaimed += usize::from(reclaim);
                report.ages_ms.push(age_ms);
                if let Finished::Retried(at) | Finished::RetriedAfterError(at) = finished
                    && at > 0
                {
                    self.rests.insert(task_id.clone(), at);
                }
                self.claimed.push((seq, task_id));
                tally(report, Ok(finished));
            }
            // These stay in `exclude`: this invocation will not try them again.
            Handled::Conflict(_) => report.conflicts += 1,
            Handled::Skipped(_) => report.skipped += 1,
            Handled::Abandoned(_) => report.abandoned += 1,
            Handled::Superseded(_) => report.superseded += 1,
            Handled::Failed(id, e) => {
                self.exclude.remove(&id);
                self.failure.get_or_insert(e);
            }
        }
    }

    /// The report's claim list, in the order the claims were sent, and
    /// what the policy did.
    pub fn finish(mut self, report: &mut ProcessReport) {
        let mut tally = Tally::default();
        if let Some(select) = &self.select {
            select.tally(&mut tally);
        }
        report.deadline_starts = tally.deadline_starts;
        report.fairness = tally.fairness;
        self.claimed.sort_unstable();
        report.claimed = self.claimed.into_iter().map(|(_, id)| id).collect();
    }
}

/// Waits until a candidate's handling ends (and books it), `poll` passes, or claiming
/// must stop.
pub(crate) async fn wait_for_one(
    state: &mut LoopState,
    report: &mut ProcessReport,
    running: &mut JoinSet<Handled>,
    stop_claiming_at: Instant,
    poll: Option<Duration>,
) {
    let limit = poll.map_or(stop_claiming_at, |p| {
        (state.clock.instant() + p).min(stop_claiming_at)
    });
    if let Ok(Some(done)) = tokio::time::timeout_at(limit, running.join_next()).await {
        state.absorb(report, done);
    }
}

/// Drains every handling still running into the report.
pub(crate) async fn drain(
    state: &mut LoopState,
    report: &mut ProcessReport,
    running: &mut JoinSet<Handled>,
) {
    while let Some(done) = running.join_next().await {
        state.absorb(report, done);
    }
}

/// What an invocation works on: a shard group (or all shards) and its
/// share of the runner.
pub(crate) struct Assignment {
    /// `None`: the only processor (no group lease).
    pub(crate) group: Option<(u32, u64)>,
    pub(crate) shards: Vec<u32>,
    /// Its share of `RunnerMaxConcurrency`.
    pub(crate) capacity: usize,
    /// How many of them may run now: the runner-side limit, told each
    /// run's latency and outcome.
    pub(crate) slots: Arc<Slots>,
    pub(crate) limiter: Option<Arc<crate::rate_limit::Limiter>>,
    /// This invocation, as its claims and its group lease name it
    /// (`claimedBy`).
    pub(crate) claimed_by: Arc<str>,
}

/// What one invocation's claim loop works with: the processor's parts.
pub(crate) struct Claiming<'a, R, Q> {
    pub store: &'a Q,
    pub runner: &'a Arc<R>,
    pub config: &'a ProcessConfig,
    pub assignment: &'a Assignment,
    /// A rest alarm wakes the queue when a later rest ends: the loop waits
    /// only for one that ends within [`MAX_REST_SLEEP`].
    pub alarm: bool,
    /// What the invocation before handed over (for this group).
    pub handover: Option<&'a Handover>,
    /// Its host's stop: once stopped, nothing more is claimed.
    pub halt: &'a Halt,
    /// Where the loop reads the time.
    pub clock: &'a SharedClock,
}

/// Takes a start from `limiter` for each of `candidates` in turn: those
/// left without one, and when a start is free again.
fn grant(
    limiter: Option<&crate::rate_limit::Limiter>,
    candidates: &mut Vec<lifo_core::Candidate>,
    now: Instant,
) -> (Vec<lifo_core::Candidate>, Option<Instant>) {
    let mut granted = 0;
    while granted < candidates.len() {
        match crate::rate_limit::take_start(limiter) {
            Ok(()) => granted += 1,
            Err(wait) => return (candidates.split_off(granted), Some(now + wait)),
        }
    }
    (Vec::new(), None)
}

impl<R: TaskRunner, Q: Queue + Clone + 'static> Claiming<'_, R, Q> {
    /// Sleeps `d`, or less when the host stops the processor.
    async fn nap(&self, d: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.halt.stopped() => {}
        }
    }

    /// The claim policy of this invocation's settings and share of the
    /// runner, at `now`.
    fn policy(&self, now: u64) -> Box<dyn Select> {
        let a = self.assignment;
        let (group, processors) = (a.group.map_or(0, |(g, _)| g), self.config.processors.max(1));
        let share = |n: u32| lifo_core::groups::share(n, group, processors);
        select::stack(
            &Setup {
                order: self.config.order,
                shards: a.shards.clone(),
                capacity: a.capacity,
                per_second: self.config.rate_limit.map(|l| share(l.per_second.get())),
                fair_share: self.config.fair_share,
                // Each processor caps its share of the slots.
                tenant_max_in_flight: self
                    .config
                    .tenant_max_in_flight
                    .map(|n| share(n.get()) as usize),
                handover: self.handover,
                tuning: self.config.tuning,
            },
            now,
        )
    }

    /// Nothing to claim: waits for a running task to end (`idle_poll` at
    /// most), or with nothing running looks a little longer (a task
    /// announced a moment ago may not be in the index yet), then for a rest
    /// of this invocation's that ends soon; true when the loop should end.
    async fn idle(
        &self,
        state: &mut LoopState,
        report: &mut ProcessReport,
        running: &mut JoinSet<Handled>,
        stop_claiming_at: Instant,
        last_work: Instant,
    ) -> bool {
        if !running.is_empty() {
            let poll = Some(self.config.idle_poll);
            wait_for_one(state, report, running, stop_claiming_at, poll).await;
            return false;
        }
        if last_work.elapsed() < self.config.linger {
            let left = stop_claiming_at.saturating_duration_since(self.clock.instant());
            self.nap(self.config.idle_poll.min(left)).await;
            return false;
        }
        // A task this invocation put back comes back in a moment (the rest
        // alarm's precision; without an alarm, within the budget): sleep
        // until its rest ends, reading again each second so new work is not
        // held back. A later rest end is the alarm's, set at the end.
        let (now, tuning) = (self.clock.now_ms(), &self.config.tuning);
        let longest = if self.alarm {
            MAX_REST_SLEEP
        } else {
            stop_claiming_at.saturating_duration_since(self.clock.instant())
        };
        let wait = state
            .rest_wait(now, tuning.rest_end_margin_ms)
            .filter(|w| *w <= longest && self.clock.instant() + *w < stop_claiming_at);
        let Some(wait) = wait else {
            report.stop = StopReason::Empty;
            return true;
        };
        tracing::debug!(
            event = "process.awaiting_rest",
            waitMs = wait.as_millis() as u64
        );
        self.nap(wait.min(tuning.rest_wait_step)).await;
        false
    }

    /// Claims until the budget (`stop_claiming_at`) ends, nothing is left,
    /// the queue is paused or a claim fails on the store; then what the
    /// policy hands over is in `state`.
    pub(crate) async fn run(
        &self,
        report: &mut ProcessReport,
        state: &mut LoopState,
        running: &mut JoinSet<Handled>,
        stop_claiming_at: Instant,
        lease_until: u64,
    ) -> Result<(), StoreError> {
        state.select = Some(self.policy(self.clock.now_ms()));
        let outcome = self
            .claim(report, state, running, (stop_claiming_at, lease_until))
            .await;
        // Not what it claimed: a read while a claim ran can show it.
        let mut exclude = state.exclude.clone();
        exclude.extend(state.claimed.iter().map(|(_, id)| id.clone()));
        if let Some(select) = &mut state.select {
            select.hand_over(&exclude, self.clock.now_ms(), &mut state.handover);
        }
        outcome
    }

    /// [`Claiming::run`]'s loop, until the budget's end
    /// (`stop_claiming_at`), each claim leased until `lease_until`.
    async fn claim(
        &self,
        report: &mut ProcessReport,
        state: &mut LoopState,
        running: &mut JoinSet<Handled>,
        (stop_claiming_at, lease_until): (Instant, u64),
    ) -> Result<(), StoreError> {
        let assignment = self.assignment;
        let limiter = assignment.limiter.as_deref();
        let ctx = ClaimContext {
            store: self.store.clone(),
            // Each run timed and told to the slots.
            runner: Arc::new(Limited::new(
                Arc::clone(self.runner),
                Arc::clone(&assignment.slots),
            )),
            policy: FinishPolicy {
                max_attempts: self.config.max_attempts,
                rest: self.config.rest,
            },
            lease_until,
            claimed_by: Arc::clone(&assignment.claimed_by),
            halt: self.halt.clone(),
            clock: self.clock.clone(),
        };
        let clock = Arc::clone(self.clock);
        let mut control_read = self.clock.instant();
        // When there last was work: a candidate found, or a task running.
        let mut last_work = self.clock.instant();
        // The rate limit's bucket ran dry: no start before this.
        let mut next_start_at: Option<Instant> = None;
        loop {
            if report.stop == StopReason::Paused {
                return Ok(());
            }
            if self.halt.is_stopped() {
                tracing::info!(
                    event = "process.stopped",
                    "the host is stopping; finishing what runs, claiming nothing more"
                );
                report.stop = StopReason::Stopped;
                return Ok(());
            }
            while let Some(done) = running.try_join_next() {
                state.absorb(report, done);
            }
            if state.failure.is_some() {
                return Ok(());
            }
            if self.clock.instant() >= stop_claiming_at {
                report.stop = StopReason::Budget;
                return Ok(());
            }
            if control_read.elapsed() >= self.config.pause_poll {
                control_read = self.clock.instant();
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
            let free = assignment.slots.free(running.len());
            if free == 0 {
                wait_for_one(state, report, running, stop_claiming_at, None).await;
                continue;
            }
            // A slot is free. With a rate limit, a start is taken from the
            // bucket for each candidate once it is read, never before: a
            // start taken for a slot no candidate fills (an empty read at
            // light load) would be lost. When the bucket ran dry, wait for
            // it (or for a running task to end) before reading again.
            if let Some(wait) = next_start_at
                .and_then(|at| at.checked_duration_since(self.clock.instant()))
                .filter(|w| !w.is_zero())
            {
                wait_for_one(state, report, running, stop_claiming_at, Some(wait)).await;
                continue;
            }
            let now = self.clock.now_ms();
            let horizon = now.saturating_sub(self.config.max_ttl_seconds * 1000);
            let Some(policy) = state.select.as_mut() else {
                return Ok(());
            };
            state.read_at = now;
            let mut candidates = crate::reads::refill(
                &mut **policy,
                self.store,
                (free, &state.exclude),
                horizon,
                &|| clock.now_ms(),
            )
            .await?;
            // The bucket ran dry: what was picked and not started goes back.
            let (dry, dry_until) = grant(limiter, &mut candidates, self.clock.instant());
            next_start_at = dry_until;
            state.tell(dry.iter().map(Event::NotStarted));
            if candidates.is_empty() {
                if !dry.is_empty() || !running.is_empty() {
                    last_work = self.clock.instant();
                }
                // Read, but the bucket is dry: they stay claimable.
                if dry.is_empty()
                    && self
                        .idle(state, report, running, stop_claiming_at, last_work)
                        .await
                {
                    return Ok(());
                }
                continue;
            }
            // Stopped while it read: what it read stays claimable.
            if self.halt.is_stopped() {
                state.tell(candidates.iter().map(Event::NotStarted));
                continue;
            }
            last_work = self.clock.instant();
            let sent_at = self.clock.now_ms();
            for c in candidates {
                if let Some(policy) = &mut state.select {
                    policy.tell(Event::Started(&c), sent_at);
                }
                state.seq += 1;
                state.rests.remove(&c.task_id);
                state.exclude.insert(c.task_id.clone());
                handle::spawn(running, &ctx, state.seq, c, sent_at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that asked just before a rest's end, and ended after it, did
    /// not see the task: the loop reads once more, the margin after the
    /// end, instead of ending as if nothing were left.
    #[test]
    fn a_rest_that_ended_during_the_read_is_read_for_again() {
        let mut state = LoopState::new(lifo_core::clock::system());
        state.rests.insert("t".into(), 2_000);
        let mut wait = |read_at, now| {
            state.read_at = read_at;
            state.rest_wait(now, 20)
        };
        assert_eq!(wait(1_000, 1_000), Some(Duration::from_millis(1_020)));
        assert_eq!(wait(1_995, 2_010), Some(Duration::from_millis(10)));
        assert_eq!(wait(1_995, 2_030), Some(Duration::ZERO));
        // A read that asked after the end saw what there was to see.
        assert_eq!(wait(2_000, 2_030), None);
        assert_eq!(wait(2_020, 2_030), None);
    }
}
