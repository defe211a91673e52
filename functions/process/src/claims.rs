//! The claim loop: fill every free slot with the newest claimable task,
//! claiming in parallel.
//!
//! Each claimed candidate is handled on a tokio task of its own (claim, run, record
//! the outcome), spawned at once, so the claims of one refill go out
//! together, and the loop reads and claims again while earlier tasks are
//! still being claimed and run. A slot counts as taken from the moment its
//! claim is sent. The candidates come from [`ShardHeads`]: the shards'
//! heads kept in memory and read again only when needed, so reads stay
//! flat in the shard count. A start from the rate limit is taken before a
//! candidate is taken, so no task is claimed and then kept waiting.

use crate::finish::{FinishPolicy, run_and_finish};
use crate::report::{Finished, ProcessReport, tally};
use crate::runner::TaskRunner;
use lifo_core::fair::{Ledger, tenant_of};
use lifo_core::heads::{Read, ShardHeads};
use lifo_core::{Candidate, Move, Step, Store, StoreError, Task, TaskStatus, now_ms};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How one candidate's handling (claim, run, finish) ended.
pub(crate) enum Handled {
    /// Claimed (the `seq`-th claim sent by this invocation), then run.
    Ran {
        seq: u64,
        task_id: String,
        age_ms: u64,
        reclaim: bool,
        finished: Finished,
        /// The claim's attempt and fencing token (the trace's annotations).
        attempt: u32,
        token: u64,
        /// The trace of the invocation that created the task.
        created_trace: Option<String>,
    },
    /// Another worker claimed it first.
    Conflict(String),
    /// The index entry is no claimable task (unknown status, unparseable).
    Skipped(String),
    /// Its lease expired with no attempts left: ended FAILURE.
    Abandoned(String),
    /// A newer task with its key was written: ended SUPERSEDED (a claim
    /// whose lease lapsed after the newer task's write marked it).
    Superseded(String),
    /// The claim failed on a store error: claiming stops, the invocation
    /// fails once what runs is finished.
    Failed(String, StoreError),
}

impl Handled {
    /// The task it was for.
    fn task_id(&self) -> &str {
        match self {
            Handled::Ran { task_id, .. } => task_id,
            Handled::Conflict(id)
            | Handled::Skipped(id)
            | Handled::Abandoned(id)
            | Handled::Superseded(id)
            | Handled::Failed(id, _) => id,
        }
    }

    /// How it ended, as the task subsegment's `outcome` annotation.
    fn outcome(&self) -> &'static str {
        match self {
            Handled::Ran { finished, .. } => match finished {
                Finished::Succeeded => "success",
                Finished::Failed => "failure",
                Finished::Retried(_) => "retry-later",
                Finished::RetriedAfterError(_) => "retry-after-error",
                Finished::Stale => "stale",
                Finished::Error => "error",
                Finished::Superseded => "superseded",
            },
            Handled::Conflict(_) => "claim-conflict",
            Handled::Skipped(_) => "skipped",
            Handled::Abandoned(_) => "abandoned",
            Handled::Superseded(_) => "superseded",
            Handled::Failed(..) => "claim-failed",
        }
    }
}

/// What handling a candidate needs, owned (it runs on its own task).
pub(crate) struct ClaimContext<R> {
    pub store: Store,
    pub runner: Arc<R>,
    pub policy: FinishPolicy,
    pub lease_until: u64,
    /// This invocation, written as the claims' `claimedBy`.
    pub owner: Arc<str>,
}

impl<R> Clone for ClaimContext<R> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            runner: Arc::clone(&self.runner),
            policy: self.policy,
            lease_until: self.lease_until,
            owner: Arc::clone(&self.owner),
        }
    }
}

/// The loop's memory across refills.
pub(crate) struct LoopState {
    /// Ids this invocation will not try again: lost to another worker,
    /// abandoned, not claimable.
    pub skip: HashSet<String>,
    /// Ids whose claim was sent and whose handling has not ended.
    pub in_flight: HashSet<String>,
    /// The first claim that failed on a store error.
    pub failure: Option<StoreError>,
    /// Claims sent so far (the claim order of the report).
    pub seq: u64,
    /// (claim order, id) of each task claimed.
    pub claimed: Vec<(u64, String)>,
    /// Each tenant's running tasks and recent starts, with the fair share
    /// on.
    pub fair: Option<Ledger>,
    /// When the rests of the tasks this invocation put back end (epoch ms):
    /// it waits for one that ends within its budget instead of leaving the
    /// task to the next sweep.
    pub rest_ends: std::collections::BTreeSet<u64>,
}

impl LoopState {
    pub fn new() -> Self {
        Self {
            skip: HashSet::new(),
            in_flight: HashSet::new(),
            failure: None,
            seq: 0,
            claimed: Vec::new(),
            fair: None,
            rest_ends: std::collections::BTreeSet::new(),
        }
    }

    /// The first rest of a task this invocation put back that ends after
    /// `now_ms` (earlier ones are forgotten: their tasks are claimable).
    /// Every rest this invocation started that ends after `now_ms`,
    /// earliest first.
    pub fn rest_ends_after(&self, now_ms: u64) -> Vec<u64> {
        self.rest_ends
            .range(now_ms.saturating_add(1)..)
            .copied()
            .collect()
    }

    pub fn next_rest_end(&mut self, now_ms: u64) -> Option<u64> {
        self.rest_ends = self.rest_ends.split_off(&now_ms.saturating_add(1));
        self.rest_ends.first().copied()
    }

    /// Ids the next candidates must not be.
    pub fn exclude(&self) -> HashSet<String> {
        self.skip.union(&self.in_flight).cloned().collect()
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
        if let Some(fair) = &mut self.fair {
            fair.end(handled.task_id());
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
                self.in_flight.remove(&task_id);
                report.reclaimed += usize::from(reclaim);
                report.ages_ms.push(age_ms);
                self.claimed.push((seq, task_id));
                if let Finished::Retried(at) | Finished::RetriedAfterError(at) = finished
                    && at > 0
                {
                    self.rest_ends.insert(at);
                }
                tally(report, Ok(finished));
            }
            Handled::Conflict(id) => {
                report.conflicts += 1;
                self.in_flight.remove(&id);
                self.skip.insert(id);
            }
            Handled::Skipped(id) => {
                report.skipped += 1;
                self.in_flight.remove(&id);
                self.skip.insert(id);
            }
            Handled::Abandoned(id) => {
                report.abandoned += 1;
                self.in_flight.remove(&id);
                self.skip.insert(id);
            }
            Handled::Superseded(id) => {
                report.superseded += 1;
                self.in_flight.remove(&id);
                self.skip.insert(id);
            }
            Handled::Failed(id, e) => {
                self.in_flight.remove(&id);
                self.failure.get_or_insert(e);
            }
        }
    }

    /// The report's claim list, in the order the claims were sent.
    pub fn finish(mut self, report: &mut ProcessReport) {
        self.claimed.sort_unstable();
        report.claimed = self.claimed.into_iter().map(|(_, id)| id).collect();
    }
}

/// Starts handling candidate `c`, whose claim is sent at `sent_at`
/// (ms). The claims of one refill share that time: they go out together,
/// so their start times never rank an older task before a newer one
/// because one spawned future happened to be polled first.
pub(crate) fn spawn<R: TaskRunner>(
    running: &mut JoinSet<Handled>,
    ctx: &ClaimContext<R>,
    seq: u64,
    c: Candidate,
    sent_at: u64,
) {
    let ctx = ctx.clone();
    // One X-Ray subsegment per task, its claim, run and finish inside it
    // (the spawned task inherits the invocation's trace explicitly). Its
    // fields are metadata, not annotations: X-Ray indexes 50 annotations a
    // trace, and an invocation runs hundreds of tasks. A task's trace is
    // found from its log lines (`traceId`), the invocation's by its
    // annotations.
    let mut segment = lifo_core::xray::Subsegment::start("task");
    if let Some(s) = &mut segment {
        s.metadata("taskId", c.task_id.as_str())
            .metadata("lifoShard", c.lifo_shard);
    }
    let trace = segment.as_ref().map(lifo_core::xray::Subsegment::as_parent);
    running.spawn(async move {
        let handled = lifo_core::xray::scope(trace, claim_run_finish(ctx, seq, c, sent_at)).await;
        if let Some(mut s) = segment {
            s.metadata("outcome", handled.outcome());
            if let Handled::Ran {
                attempt,
                token,
                created_trace,
                ..
            } = &handled
            {
                s.metadata("attempt", *attempt)
                    .metadata("fencingToken", *token);
                if let Some(t) = created_trace {
                    s.metadata("createdTraceId", t.as_str());
                }
            }
            s.end();
        }
        handled
    });
}

/// Claims `c`, then runs and finishes it: one candidate's handling.
async fn claim_run_finish<R: TaskRunner>(
    ctx: ClaimContext<R>,
    seq: u64,
    c: Candidate,
    sent_at: u64,
) -> Handled {
    {
        let id = c.task_id.clone();
        let reclaim = c.lease_until.is_some();
        match claim(&ctx, &c, sent_at).await {
            Ok(Claimed::Task(task)) => {
                let now = now_ms();
                let age_ms = task.started_at.unwrap_or(now).saturating_sub(task.ready_at);
                tracing::info!(
                    event = if reclaim { "task.reclaimed" } else { "task.claimed" },
                    taskId = %task.task_id, shard = task.lifo_shard, attempt = task.attempts,
                    token = task.token, ageMs = age_ms,
                    createdTraceId = task.created_trace.as_deref().unwrap_or(""),
                    // The trace of the invocation that runs it: from a task
                    // id, Logs Insights finds it.
                    traceId = lifo_core::xray::current().map(|t| t.root.to_string()).unwrap_or_default()
                );
                let (attempt, token) = (task.attempts, task.token);
                let created_trace = task.created_trace.clone();
                let finished = run_and_finish(ctx.store, ctx.runner, *task, ctx.policy).await;
                Handled::Ran {
                    seq,
                    task_id: id,
                    age_ms,
                    reclaim,
                    finished,
                    attempt,
                    token,
                    created_trace,
                }
            }
            Ok(Claimed::Abandoned) => Handled::Abandoned(id),
            Ok(Claimed::Superseded) => Handled::Superseded(id),
            Err(StoreError::ConditionFailed { current, .. }) => match current {
                Some(t) if t.task_status == TaskStatus::Superseded => {
                    tracing::info!(event = "task.superseded", taskId = %id,
                        supersededBy = t.superseded_by.as_deref().unwrap_or(""),
                        "a newer task with its key was written before this claim");
                    Handled::Skipped(id)
                }
                Some(t) if matches!(t.task_status, TaskStatus::Pending | TaskStatus::Taken) => {
                    tracing::info!(event = "task.claim_conflict", taskId = %id, token = t.token,
                        "another worker claimed it first");
                    Handled::Conflict(id)
                }
                other => {
                    tracing::warn!(event = "task.skipped", taskId = %id,
                        status = other.as_ref().map_or("gone", |t| t.task_status.as_str()),
                        "index entry is not a claimable task; skipping it");
                    Handled::Skipped(id)
                }
            },
            // A supersede transaction held the task through every resend:
            // contention, like a lost race; the next refill reads it again.
            Err(e) if e.is_conflict() => {
                tracing::info!(event = "task.claim_conflict", taskId = %id, error = %lifo_core::error::Chain(&e),
                    "a transaction held the task; skipping it for now");
                Handled::Conflict(id)
            }
            Err(StoreError::Malformed { task_id, source }) => {
                tracing::warn!(event = "task.skipped", taskId = %task_id, error = %source,
                    "claimed item does not parse; its lease will expire");
                Handled::Skipped(id)
            }
            Err(e) => Handled::Failed(id, e),
        }
    }
}

/// What a claim came to.
enum Claimed {
    /// Claimed: the task as it is now (TAKEN by this invocation).
    Task(Box<Task>),
    /// Its lease expired with no attempts left: ended FAILURE instead.
    Abandoned,
    /// Its lease expired after a newer task with its key marked it: ended
    /// SUPERSEDED instead.
    Superseded,
}

/// Claims a candidate at `now` (ms): a PENDING task, or a TAKEN one whose
/// lease has expired (reclaim). A task whose lease expired with no attempts
/// left is ended FAILURE instead; one that a newer task with its key
/// marked, SUPERSEDED.
async fn claim<R>(ctx: &ClaimContext<R>, c: &Candidate, now: u64) -> Result<Claimed, StoreError> {
    let max_attempts = ctx.policy.max_attempts;
    let step = |attempts| Step {
        now_ms: now,
        token: c.token,
        attempts,
    };
    let (owner, lease_until) = (&*ctx.owner, ctx.lease_until);
    if c.lease_until.is_none() || c.attempts < max_attempts {
        let (mv, current) = if c.lease_until.is_none() {
            (Move::Claim { lease_until, owner }, TaskStatus::Pending)
        } else {
            let reclaim = Move::Reclaim {
                lease_until,
                owner,
                max_attempts,
            };
            (reclaim, TaskStatus::Taken)
        };
        return match ctx
            .store
            .apply(&c.task_id, &mv, current, &step(c.attempts + 1))
            .await
        {
            Ok(task) => Ok(Claimed::Task(Box::new(task))),
            // The claim was applied but its answer was lost and the SDK's
            // retry then failed the condition: the item carries exactly our
            // claim (next token, this invocation, our start time and lease).
            // Another processor's claim differs in `claimedBy` even when it
            // was sent in the same millisecond with the same lease.
            Err(StoreError::ConditionFailed {
                current: Some(cur), ..
            }) if cur.task_status == TaskStatus::Taken
                && cur.token == c.token + 1
                && cur.claimed_by.as_deref() == Some(owner)
                && cur.started_at == Some(now)
                && cur.lease_until == Some(lease_until) =>
            {
                Ok(Claimed::Task(cur))
            }
            // A lapsed claim that a newer task's write marked: it ends
            // instead of starting again.
            Err(StoreError::ConditionFailed {
                current: Some(cur), ..
            }) if cur.task_status == TaskStatus::Taken
                && cur.token == c.token
                && cur.superseded_by.is_some()
                && !cur.lease_is_live(now) =>
            {
                if ctx
                    .store
                    .end_superseded(&c.task_id, c.token, c.attempts, now)
                    .await?
                {
                    tracing::info!(event = "task.superseded", taskId = %c.task_id, token = c.token,
                        supersededBy = cur.superseded_by.as_deref().unwrap_or(""),
                        "its lease lapsed after a newer task with its key was written");
                    Ok(Claimed::Superseded)
                } else {
                    Err(StoreError::ConditionFailed {
                        task_id: c.task_id.clone(),
                        current: Some(cur),
                    })
                }
            }
            Err(e) => Err(e),
        };
    }
    let reason = format!("lease expired after {} attempts", c.attempts);
    ctx.store
        .apply(
            &c.task_id,
            &Move::Abandon { reason: &reason },
            TaskStatus::Taken,
            &step(c.attempts),
        )
        .await?;
    tracing::warn!(event = "task.abandoned", taskId = %c.task_id, attempt = c.attempts, token = c.token, reason);
    Ok(Claimed::Abandoned)
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
        (Instant::now() + p).min(stop_claiming_at)
    });
    if let Ok(Some(done)) = tokio::time::timeout_at(limit.into(), running.join_next()).await {
        state.absorb(report, done);
    }
}

/// Reads the heads again if they cannot answer `want` candidates, then
/// takes them (by the fair share, with a `fair` ledger).
pub(crate) async fn refill(
    store: &Store,
    heads: &mut ShardHeads,
    order: lifo_core::Order,
    horizon_ms: u64,
    want: usize,
    exclude: &HashSet<String>,
    fair: Option<&mut Ledger>,
) -> Result<Vec<Candidate>, StoreError> {
    match heads.to_read(want, exclude, Instant::now()) {
        Read::Nothing => {}
        Read::All => {
            let now = now_ms();
            let read = store
                .claimable_heads(order, heads.shards(), heads.policy().page, now, horizon_ms)
                .await?;
            heads.replace(read, Instant::now());
        }
        // Only the cut-short shards whose heads ran out.
        Read::Some(shards) => {
            let now = now_ms();
            let read = store
                .claimable_heads(order, &shards, heads.policy().page, now, horizon_ms)
                .await?;
            heads.replace_some(&shards, read);
        }
    }
    Ok(match fair {
        Some(ledger) => take_fair(heads, want, exclude, ledger),
        None => heads.take(want, exclude),
    })
}

/// Up to `want` candidates by the fair share ([`lifo_core::fair`]): each
/// free slot goes to the waiting tenant that
/// [`Shares::pick`](lifo_core::fair::Shares::pick) names, and
/// takes that tenant's first candidate in the claim order (its newest).
fn take_fair(
    heads: &mut ShardHeads,
    want: usize,
    exclude: &HashSet<String>,
    ledger: &mut Ledger,
) -> Vec<Candidate> {
    let mut taken = exclude.clone();
    let mut waiting = heads.tenant_heads(&taken);
    let mut shares = ledger.shares(waiting.keys().map(String::as_str), now_ms());
    let mut out: Vec<Candidate> = Vec::with_capacity(want);
    // Tenants whose first candidate sits behind a cut-short shard's end.
    let mut blocked: HashSet<String> = HashSet::new();
    while out.len() < want {
        let next = shares.pick(
            waiting
                .iter()
                .filter(|(t, _)| !blocked.contains(*t))
                .map(|(t, key)| (t.as_str(), *key)),
        );
        let Some(tenant) = next.map(str::to_owned) else {
            break;
        };
        let got = heads.take_by(1, &taken, |c| tenant_of(c.tenant.as_deref()) == tenant);
        match got.into_iter().next() {
            Some(c) => {
                shares.book(&tenant);
                taken.insert(c.task_id.clone());
                out.push(c);
                waiting = heads.tenant_heads(&taken);
            }
            None => {
                blocked.insert(tenant);
            }
        }
    }
    out
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
