//! One candidate's handling, on a tokio task of its own: claim it (or
//! reclaim it, or end it when its lease lapsed with no attempts left or a
//! newer task with its key was written), run it, and record the outcome
//! ([`crate::finish`]).

use crate::finish::{FinishPolicy, run_and_finish};
use crate::halt::Halt;
use crate::report::Finished;
use crate::runner::TaskRunner;
use lifo_core::clock::SharedClock;
use lifo_core::store::Queue;
use lifo_core::{Candidate, Move, Step, StoreError, Task, TaskStatus};
use std::sync::Arc;
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
    pub(crate) fn task_id(&self) -> &str {
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
    pub(crate) fn outcome(&self) -> &'static str {
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
pub(crate) struct ClaimContext<R, Q> {
    pub store: Q,
    pub runner: Arc<R>,
    pub policy: FinishPolicy,
    pub lease_until: u64,
    /// This invocation, written as the claims' `claimedBy`.
    pub claimed_by: Arc<str>,
    /// The processor's halt: counts each handling as running.
    pub halt: Halt,
    /// Where it reads the time.
    pub clock: SharedClock,
}

impl<R, Q: Clone> Clone for ClaimContext<R, Q> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            runner: Arc::clone(&self.runner),
            policy: self.policy,
            lease_until: self.lease_until,
            claimed_by: Arc::clone(&self.claimed_by),
            halt: self.halt.clone(),
            clock: Arc::clone(&self.clock),
        }
    }
}

/// Starts handling candidate `c`, whose claim is sent at `sent_at`
/// (ms). The claims of one refill share that time: they go out together,
/// so their start times never rank an older task before a newer one
/// because one spawned future happened to be polled first.
pub(crate) fn spawn<R: TaskRunner, Q: Queue + Clone + 'static>(
    running: &mut JoinSet<Handled>,
    ctx: &ClaimContext<R, Q>,
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
    let mut segment = lifo_lambda::xray::Subsegment::start("task");
    if let Some(s) = &mut segment {
        s.metadata("taskId", c.task_id.as_str())
            .metadata("lifoShard", c.lifo_shard);
    }
    let trace = segment
        .as_ref()
        .map(lifo_lambda::xray::Subsegment::as_parent);
    let counted = ctx.halt.enter();
    running.spawn(async move {
        let _counted = counted;
        let handled = lifo_lambda::xray::scope(trace, claim_run_finish(ctx, seq, c, sent_at)).await;
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
async fn claim_run_finish<R: TaskRunner, Q: Queue + Clone + 'static>(
    ctx: ClaimContext<R, Q>,
    seq: u64,
    c: Candidate,
    sent_at: u64,
) -> Handled {
    {
        let id = c.task_id.clone();
        let reclaim = c.lease_until.is_some();
        match claim(&ctx, &c, sent_at).await {
            Ok(Claimed::Task(task)) => {
                let now = ctx.clock.now_ms();
                let age_ms = task.started_at.unwrap_or(now).saturating_sub(task.ready_at);
                tracing::info!(
                    event = if reclaim { "task.reclaimed" } else { "task.claimed" },
                    taskId = %task.task_id, shard = task.lifo_shard, attempt = task.attempts,
                    token = task.token, ageMs = age_ms,
                    createdTraceId = task.created_trace.as_deref().unwrap_or(""),
                    // The trace of the invocation that runs it: from a task
                    // id, Logs Insights finds it.
                    traceId = lifo_lambda::xray::current().map(|t| t.root.to_string()).unwrap_or_default()
                );
                let (attempt, token) = (task.attempts, task.token);
                let created_trace = task.created_trace.clone();
                let finished =
                    run_and_finish(ctx.store, ctx.runner, *task, (ctx.policy, ctx.clock)).await;
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
                // The claimable index lags the table (a global secondary
                // index's reads are eventually consistent): a task that
                // ended moments ago can still be read as claimable.
                other => {
                    tracing::info!(event = "task.skipped", taskId = %id,
                        status = other.as_ref().map_or("gone", |t| t.task_status.as_str()),
                        "the index still showed a task that is no longer claimable; skipping it");
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
async fn claim<R, Q: Queue>(
    ctx: &ClaimContext<R, Q>,
    c: &Candidate,
    now: u64,
) -> Result<Claimed, StoreError> {
    let max_attempts = ctx.policy.max_attempts;
    let step = |attempts| Step {
        now_ms: now,
        token: c.token,
        attempts,
    };
    let (claimed_by, lease_until) = (&*ctx.claimed_by, ctx.lease_until);
    if c.lease_until.is_none() || c.attempts < max_attempts {
        let (mv, current) = if c.lease_until.is_none() {
            (
                Move::Claim {
                    lease_until,
                    claimed_by,
                },
                TaskStatus::Pending,
            )
        } else {
            let reclaim = Move::Reclaim {
                lease_until,
                claimed_by,
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
                && cur.claimed_by.as_deref() == Some(claimed_by)
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
