//! Running a claimed task and recording its outcome, fenced by the claim's
//! token.

use crate::report::Finished;
use crate::rest::RestPolicy;
use crate::runner::{RunOutcome, TaskRunner};
use lifo_core::clock::SharedClock;
use lifo_core::error::Chain;
use lifo_core::store::Queue;
use lifo_core::{Move, Step, StoreError, Task, TaskStatus, Transition};
use std::sync::Arc;

/// How often recording an outcome is tried before giving up.
const FINISH_ATTEMPTS: u32 = 4;

/// What a finish needs besides the task: the attempt limit and the rests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FinishPolicy {
    pub max_attempts: u32,
    pub rest: RestPolicy,
}

/// The run, as an X-Ray subsegment `run` (flagged by its outcome) when
/// the invocation is sampled; the runner's own calls hang under it.
async fn run_traced<R: TaskRunner>(runner: &R, task: &Task) -> RunOutcome {
    let Some(mut segment) = lifo_lambda::xray::Subsegment::start("run") else {
        return runner.run(task).await;
    };
    let outcome = lifo_lambda::xray::scope(Some(segment.as_parent()), runner.run(task)).await;
    if let Some(flag) = outcome.xray_flag() {
        segment.flag(flag);
    }
    segment.end();
    outcome
}

pub(crate) async fn run_and_finish<R: TaskRunner, Q: Queue>(
    store: Q,
    runner: Arc<R>,
    mut task: Task,
    (policy, clock): (FinishPolicy, SharedClock),
) -> Finished {
    // The payload, read once, if it lives in its own item: a task never
    // runs without it.
    let outcome = match store.load_payload(&mut task).await {
        Ok(()) => run_traced(runner.as_ref(), &task).await,
        Err(StoreError::Payload { reason, .. }) => {
            RunOutcome::Failure(format!("payload: {reason}"))
        }
        Err(e) => RunOutcome::RetryLater(format!("payload unreadable: {}", Chain(&e))),
    };
    let max_attempts = policy.max_attempts;
    let now = clock.now_ms();
    // When a task put back may be claimed again (0: at once).
    let (t, reason, finished, retry_at) = match &outcome {
        RunOutcome::Success => (Transition::Succeed, "", Finished::Succeeded, 0),
        RunOutcome::Failure(r) | RunOutcome::TimedOut(r) if task.attempts >= max_attempts => {
            (Transition::Fail, r.as_str(), Finished::Failed, 0)
        }
        RunOutcome::Failure(r) | RunOutcome::TimedOut(r) => {
            let at = policy
                .rest
                .after_failure(task.attempts, now, task.expires_at);
            (
                Transition::RetryAfterError,
                r.as_str(),
                Finished::RetriedAfterError(at),
                at,
            )
        }
        RunOutcome::RetryLater(r) => {
            let at = policy.rest.after_busy(None, now, task.expires_at);
            (
                Transition::RetryLater,
                r.as_str(),
                Finished::Retried(at),
                at,
            )
        }
        RunOutcome::RetryAfter(r, hint) => {
            let at = policy.rest.after_busy(Some(*hint), now, task.expires_at);
            (
                Transition::RetryLater,
                r.as_str(),
                Finished::Retried(at),
                at,
            )
        }
    };
    let history = task.history.as_slice();
    let mv = match t {
        Transition::Succeed => Move::Succeed { history },
        Transition::Fail => Move::Fail { reason, history },
        Transition::RetryAfterError => Move::RetryAfterError {
            reason,
            history,
            retry_at,
        },
        _ => Move::RetryLater {
            reason,
            history,
            retry_at,
        },
    };
    // A retry later gives the attempt back.
    let attempts = mv.attempts_after(task.attempts);
    for attempt in 1..=FINISH_ATTEMPTS {
        let step = Step {
            now_ms: clock.now_ms(),
            token: task.token,
            attempts,
        };
        match store
            .record(&task.task_id, &mv, TaskStatus::Taken, &step)
            .await
        {
            Ok(()) => {
                tracing::info!(event = "task.finished", taskId = %task.task_id, fromStatus = "TAKEN", toStatus = %t.to(),
                    attempt = task.attempts, token = task.token, reason);
                return finished;
            }
            // An earlier try whose answer was lost (ours, or the SDK's own
            // retry) already applied it: same token, status as we asked.
            Err(StoreError::ConditionFailed {
                current: Some(cur), ..
            }) if cur.token == task.token && cur.task_status == t.to() => {
                return finished;
            }
            // A newer task with its key was written while this one ran: it
            // is not put back, it ends SUPERSEDED.
            Err(StoreError::ConditionFailed {
                current: Some(cur), ..
            }) if cur.token == task.token
                && cur.task_status == TaskStatus::Taken
                && cur.superseded_by.is_some() =>
            {
                return match store
                    .end_superseded(&task.task_id, task.token, task.attempts, clock.now_ms())
                    .await
                {
                    Ok(true) => {
                        tracing::info!(event = "task.superseded", taskId = %task.task_id, token = task.token,
                            supersededBy = cur.superseded_by.as_deref().unwrap_or(""),
                            "a newer task with its key was written while it ran; not put back");
                        Finished::Superseded
                    }
                    Ok(false) => Finished::Stale,
                    Err(e) => {
                        tracing::error!(event = "task.finish_failed", taskId = %task.task_id, error = %Chain(&e),
                            "the lease will expire and its reader ends it superseded");
                        Finished::Error
                    }
                };
            }
            Err(StoreError::ConditionFailed { current, .. }) => {
                tracing::warn!(event = "task.stale_finish_rejected", taskId = %task.task_id, toStatus = %t.to(),
                    token = task.token, currentToken = current.as_ref().map(|c| c.token),
                    "the task was claimed again after this claim's lease expired; the newer claim's outcome stands");
                return Finished::Stale;
            }
            Err(e) if attempt < FINISH_ATTEMPTS => {
                tracing::warn!(event = "task.finish_retry", taskId = %task.task_id, attempt, error = %Chain(&e));
                tokio::time::sleep(lifo_core::store::resend_wait(attempt)).await;
            }
            Err(e) => {
                tracing::error!(event = "task.finish_failed", taskId = %task.task_id, toStatus = %t.to(), error = %Chain(&e),
                    "outcome not recorded; the lease will expire and the task will be claimed again");
                return Finished::Error;
            }
        }
    }
    Finished::Error
}
