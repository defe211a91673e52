//! Find, list, cancel and delete tasks.

use crate::{OpsError, Queue, cursor};
use lifo_core::store::{Failed, FailedQuery, OperateError};
use lifo_core::{HistoryEntry, Task, TaskStatus, now_ms};
use serde::Serialize;

/// Most tasks one list or one bulk retry returns.
pub const MAX_LIST: usize = 10_000;
/// Tasks read per index page of a user's list.
const USER_PAGE: usize = 100;

pub use lifo_core::model::MAX_KEY_BYTES;

/// An id of a task that may already be in the table. New ids keep
/// create's rules ([`crate::create::check_id`]); an operator must still reach a
/// task that an older version, a migration or a producer writing straight
/// to the table gave any id (`a/b`, `sp ace`, `..`, 1,500 characters), so
/// this takes any key DynamoDB can hold. The queue's own items (`#…`) are
/// not tasks.
pub fn check_id(field: &str, id: &str) -> Result<(), OpsError> {
    if id.is_empty() {
        return Err(OpsError::invalid(field, "must not be empty"));
    }
    if id.len() > MAX_KEY_BYTES {
        return Err(OpsError::invalid(
            field,
            format!(
                "is {} bytes; DynamoDB keys hold at most {MAX_KEY_BYTES}",
                id.len()
            ),
        ));
    }
    if lifo_core::store::is_queue_item(id) {
        return Err(OpsError::invalid(
            field,
            format!("{id:?} is one of the queue's own items, not a task"),
        ));
    }
    Ok(())
}

/// One task, its payload included.
pub async fn get(q: &Queue, id: &str) -> Result<Task, OpsError> {
    check_id("taskId", id)?;
    let t = q.store.get(id).await?.ok_or_else(|| OpsError::NotFound {
        task_id: id.to_owned(),
    })?;
    if t.is_past_retention(now_ms()) {
        return Err(OpsError::Gone {
            task_id: t.task_id,
            status: t.task_status,
            deleted_at: t.delete_at,
        });
    }
    Ok(t)
}

/// A task's transitions, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub task_id: String,
    pub task_status: TaskStatus,
    pub history: Vec<HistoryEntry>,
}

pub async fn history(q: &Queue, id: &str) -> Result<History, OpsError> {
    let t = get(q, id).await?;
    Ok(History {
        task_id: t.task_id,
        task_status: t.task_status,
        history: t.history,
    })
}

/// A page of a list, and where the next one starts (`None`: the last).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// `user`'s tasks, newest first (every status), at most `limit`
/// (1 to [`MAX_LIST`]), from `cursor` (a previous page's `next_cursor`).
pub async fn list_user(
    q: &Queue,
    user: &str,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page<Task>, OpsError> {
    check_id("userId", user)?;
    check_limit(limit)?;
    let mut start = cursor.map(|c| cursor::decode(c, user)).transpose()?;
    let mut items = Vec::new();
    loop {
        let want = (limit - items.len()).min(USER_PAGE);
        let (page, next) = q
            .store
            .user_tasks(user, i32::try_from(want).unwrap_or(100), start)
            .await?;
        items.extend(page);
        start = next;
        if start.is_none() || items.len() >= limit {
            break;
        }
    }
    Ok(Page {
        items,
        next_cursor: start.as_ref().and_then(cursor::encode),
    })
}

fn check_limit(limit: usize) -> Result<(), OpsError> {
    if limit == 0 || limit > MAX_LIST {
        return Err(OpsError::invalid(
            "limit",
            format!("must be 1 to {MAX_LIST}, not {limit}"),
        ));
    }
    Ok(())
}

/// Which failures: a window of the failed-task index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailedFilter {
    /// Failed at or after (epoch ms; 0: any time).
    pub since_ms: u64,
    /// Only those whose `lastError` starts with this ("" for all).
    pub error_prefix: String,
    /// At most this many, newest first (1 to [`MAX_LIST`]).
    pub limit: usize,
}

/// The failed tasks of a window, newest first (the failed-task index, no
/// scan).
pub async fn failed(q: &Queue, f: &FailedFilter) -> Result<Vec<Failed>, OpsError> {
    check_limit(f.limit)?;
    Ok(q.store
        .failed(FailedQuery {
            shard_count: q.settings.shards,
            since_ms: f.since_ms,
            until_ms: now_ms(),
            error_prefix: &f.error_prefix,
            limit: f.limit,
        })
        .await?)
}

/// Cancels a task that is still SCHEDULED.
pub async fn cancel(q: &Queue, id: &str) -> Result<Task, OpsError> {
    check_id("taskId", id)?;
    Ok(q.store.cancel(id, now_ms()).await?)
}

/// What a command on several tasks did: the ids it wrote, and each one it
/// refused with why.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchReport {
    pub done: Vec<String>,
    pub refused: Vec<Refusal>,
    /// A dry run: `done` lists what would have been written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The queue is paused: what was retried runs after a resume.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Stopped at its deadline before every task was done: `remaining`
    /// lists the ones not tried, newest first. To go on, send the same
    /// request again (the tasks retried have left the failed window), or
    /// these ids.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remaining: Vec<String>,
}

impl BatchReport {
    /// A batch of one task as one outcome: its refusal is the error (no
    /// such task, or a state the move does not take).
    pub fn into_single(self) -> Result<Self, OpsError> {
        match self.refused.first() {
            Some(r) if r.not_found => Err(OpsError::NotFound {
                task_id: r.task_id.clone(),
            }),
            Some(r) if r.contended => Err(OpsError::Contended(r.reason.clone())),
            Some(r) => Err(OpsError::Conflict(r.reason.clone())),
            None => Ok(self),
        }
    }

    /// Records one task's outcome: written, or refused with why. A store
    /// failure ends the batch: the error says what was written before it.
    pub(crate) fn record(
        &mut self,
        verb: &'static str,
        asked: usize,
        id: &str,
        outcome: Result<Task, OperateError>,
    ) -> Result<(), OpsError> {
        match outcome {
            Ok(t) => self.done.push(t.task_id),
            // A transaction held this task through the store's resends:
            // refused for now, and the batch goes on.
            Err(OperateError::Store(error)) if error.is_conflict() => self.refused.push(Refusal {
                task_id: id.to_owned(),
                not_found: false,
                contended: true,
                reason: lifo_core::error::chain(&error),
            }),
            Err(OperateError::Store(error)) => {
                return Err(OpsError::Interrupted {
                    verb,
                    done: std::mem::take(&mut self.done),
                    asked,
                    error,
                });
            }
            Err(e) => self.refused.push(Refusal {
                task_id: id.to_owned(),
                not_found: matches!(e, OperateError::NotFound { .. }),
                contended: false,
                reason: e.to_string(),
            }),
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub task_id: String,
    pub reason: String,
    /// The task does not exist (not a state it is in).
    #[serde(skip)]
    pub not_found: bool,
    /// Another write (a supersede transaction) held the task: the same
    /// request in a moment may go through.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub contended: bool,
}

/// Deletes tasks (any status but one running under a live lease). Every id
/// is checked before anything is deleted.
pub async fn delete(q: &Queue, ids: &[String]) -> Result<BatchReport, OpsError> {
    for (i, id) in ids.iter().enumerate() {
        check_id(&format!("ids[{i}]"), id)?;
    }
    let mut report = BatchReport::default();
    for id in ids {
        let deleted = q.store.delete(id, now_ms()).await;
        report.record("deleted", ids.len(), id, deleted)?;
    }
    Ok(report)
}
