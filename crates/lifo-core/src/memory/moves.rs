//! Each move of the state machine as the model applies it: its condition
//! as a predicate over the task, and its effect as a function of it,
//! written from [`crate::state`]'s moves and [`crate::expr::Move`]'s
//! fields, attribute by attribute (an absent attribute fails every
//! comparison, as in DynamoDB's conditions).

use crate::expr::{Move, Step};
use crate::model::{HistoryEntry, MAX_HISTORY, Task, TaskStatus};

/// `a < b` when `a` is present.
fn below(a: Option<u64>, b: u64) -> bool {
    a.is_some_and(|a| a < b)
}

/// Whether `mv` at `step` may be applied to `t` (the item as stored).
pub fn allows(mv: &Move<'_>, step: &Step, t: &Task) -> bool {
    let tr = mv.transition();
    let now = step.now_ms;
    let now_sec = now / 1000;
    let from = t.task_status == tr.from();
    let token = t.token == step.token;
    let unmarked = t.superseded_by.is_none();
    match *mv {
        Move::Claim { .. } => {
            from && token
                && t.claimable_at.is_some()
                && t.expires_at > now_sec
                && t.retry_at.is_none_or(|r| r <= now)
                && unmarked
        }
        Move::Reclaim { max_attempts, .. } => {
            from && token
                && below(t.lease_until, now)
                && t.attempts < max_attempts
                && t.expires_at > now_sec
                && unmarked
        }
        Move::Succeed { .. } | Move::Fail { .. } | Move::Start { .. } | Move::Cancel => {
            from && token
        }
        Move::Abandon { .. } => from && token && below(t.lease_until, now),
        Move::RetryLater { .. } | Move::RetryAfterError { .. } => from && token && unmarked,
        Move::Redrive { .. } => {
            token
                && (from
                    || t.task_status == TaskStatus::Expired
                    || (t.expires_at <= now_sec
                        && (t.task_status == TaskStatus::Pending
                            || (t.task_status == TaskStatus::Taken && below(t.lease_until, now)))))
        }
        Move::Shed { .. } => {
            (from || (t.task_status == TaskStatus::Taken && below(t.lease_until, now)))
                && token
                && t.expires_at <= now_sec
        }
        // The newer task's writer does not know the token: status and key.
        Move::Supersede { key, .. } => from && t.supersede_key.as_deref() == Some(key),
        Move::EndSuperseded => from && token && !unmarked,
    }
}

/// `t` after `mv` at `step` (its condition held).
pub fn apply(mv: &Move<'_>, step: &Step, t: &Task) -> Task {
    let tr = mv.transition();
    let now = step.now_ms;
    let entry = mv.entry(step);
    let mut t = t.clone();
    t.task_status = tr.to();
    t.task_updated = now;
    // The worker's moves rewrite the history it read, trimmed, with the
    // new entry; the others append theirs.
    let rewrite = |earlier: &[HistoryEntry]| {
        let keep = earlier.len().saturating_sub(MAX_HISTORY - 1);
        let mut h = earlier[keep..].to_vec();
        h.push(entry.clone());
        h
    };
    let reason = || Some(crate::expr::truncate(mv.reason()));
    // A new life's key and times (a start, a redrive).
    let new_life = |t: &mut Task, ttl_default: u64, retention: u64| {
        let ttl = t.ttl_seconds.unwrap_or(ttl_default);
        t.ready_at = now;
        t.claimable_at = Some(t.priority_shift.unwrap_or(0) + now as i64);
        t.expires_at = ttl + now / 1000;
        t.delete_at = ttl + now / 1000 + retention;
    };
    match *mv {
        Move::Claim {
            lease_until,
            claimed_by,
        }
        | Move::Reclaim {
            lease_until,
            claimed_by,
            ..
        } => {
            t.started_at = Some(now);
            t.lease_until = Some(lease_until);
            t.claimed_by = Some(claimed_by.to_owned());
            t.token = step.token + 1;
            t.attempts = step.attempts;
            t.history.push(entry);
            t.retry_at = None;
        }
        Move::Succeed { history } => {
            t.history = rewrite(history);
            t.claimable_at = None;
            t.lease_until = None;
        }
        Move::Fail { history, .. } => {
            t.last_error = reason();
            t.failed_at = Some(now);
            t.history = rewrite(history);
            t.claimable_at = None;
            t.lease_until = None;
        }
        Move::Abandon { .. } => {
            t.last_error = reason();
            t.failed_at = Some(now);
            t.history.push(entry);
            t.claimable_at = None;
            t.lease_until = None;
        }
        Move::RetryLater {
            history, retry_at, ..
        } => {
            t.attempts = step.attempts;
            t.last_error = reason();
            t.retry_at = Some(retry_at);
            t.history = rewrite(history);
            t.lease_until = None;
        }
        Move::RetryAfterError {
            history, retry_at, ..
        } => {
            t.last_error = reason();
            t.retry_at = Some(retry_at);
            t.history = rewrite(history);
            t.lease_until = None;
        }
        Move::Start { life } => {
            new_life(&mut t, life.ttl_seconds, life.retention_seconds);
            t.history.push(entry);
            t.due_key = None;
        }
        Move::Cancel => {
            t.history.push(entry);
            t.due_key = None;
        }
        Move::Redrive { life, .. } => {
            new_life(&mut t, life.ttl_seconds, life.retention_seconds);
            t.attempts = 0;
            t.history.push(entry);
            t.failed_at = None;
            t.shed_at = None;
            t.lease_until = None;
            t.started_at = None;
            t.retry_at = None;
            t.superseded_by = None;
        }
        Move::Shed { .. } => {
            t.shed_at = Some(now);
            t.history.push(entry);
            t.claimable_at = None;
            t.lease_until = None;
            t.retry_at = None;
        }
        Move::Supersede { by, .. } => {
            t.superseded_by = Some(by.to_owned());
            t.superseded_at = Some(now);
            t.history.push(entry);
            t.claimable_at = None;
            t.retry_at = None;
        }
        Move::EndSuperseded => {
            t.superseded_at = Some(now);
            t.history.push(entry);
            t.claimable_at = None;
            t.lease_until = None;
            t.retry_at = None;
        }
    }
    t
}
