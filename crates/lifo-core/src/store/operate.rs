//! An operator's moves on one task: redrive (run a failed or shed task
//! again, as new work) and delete. Both read the task first, so a refusal
//! says exactly why, then write with a condition on what was read.

use super::error::{classify, parse_task};
use super::queue::Queue;
use super::{Op, Store, StoreError};
use crate::expr::{self, Lifetime, Move, Step};
use crate::model::{Task, TaskStatus};
use crate::state;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity, ReturnValue};

/// Why an operator's move was refused; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum OperateError {
    #[error("no task {task_id}")]
    NotFound { task_id: String },
    /// The task is in a state the move does not take; `why` says which
    /// states it does.
    #[error("task {task_id} is {status}: {why}")]
    NotAllowed {
        task_id: String,
        status: TaskStatus,
        why: String,
    },
    /// The task changed between the read and the write (another worker or
    /// operator moved it); read it again.
    #[error("task {task_id} changed meanwhile (now {status}); nothing was written")]
    Changed { task_id: String, status: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a redrive needs besides the task: the time, the TTL of a task that
/// carries none, the retention, and why (kept in the task's history).
#[derive(Debug, Clone, Copy)]
pub struct RedriveSettings<'a> {
    pub now_ms: u64,
    pub default_ttl_seconds: u64,
    pub retention_seconds: u64,
    pub reason: &'a str,
}

fn not_redrivable(t: &Task, now_ms: u64) -> OperateError {
    let why = match t.task_status {
        TaskStatus::Pending => format!(
            "it is claimable for another {} s and will run without a retry",
            t.expires_at.saturating_sub(now_ms / 1000)
        ),
        TaskStatus::Taken if t.lease_is_live(now_ms) => format!(
            "it is running (lease until {}); wait for its outcome",
            t.lease_until.unwrap_or_default()
        ),
        TaskStatus::Taken => {
            "its lease lapsed and it will be claimed again before it expires".to_owned()
        }
        _ => "only FAILURE tasks and tasks shed by expiry can be retried".to_owned(),
    };
    OperateError::NotAllowed {
        task_id: t.task_id.clone(),
        status: t.task_status,
        why,
    }
}

impl Store {
    /// The task, read strongly consistent, or [`OperateError::NotFound`].
    async fn existing(&self, task_id: &str) -> Result<Task, OperateError> {
        self.get_item(task_id)
            .await?
            .ok_or_else(|| OperateError::NotFound {
                task_id: task_id.to_owned(),
            })
    }

    /// Runs a failed task, or one shed by expiry, again:
    /// PENDING with its attempts reset, a new expiry (its own `ttlSeconds`,
    /// else the default) and `claimableAt = now`, so it is the newest work
    /// in the LIFO order. Conditional on the token read, so a concurrent
    /// move wins and this one reports [`OperateError::Changed`].
    pub async fn redrive(
        &self,
        task_id: &str,
        settings: RedriveSettings<'_>,
    ) -> Result<Task, OperateError> {
        redrive(self, task_id, settings).await
    }

    /// Deletes a task, unless it is running under a live lease. Returns the
    /// task as it was. Conditional on the token read; a task already gone
    /// is never recreated.
    pub async fn delete(&self, task_id: &str, now_ms: u64) -> Result<Task, OperateError> {
        let task = self.existing(task_id).await?;
        if !state::may_delete(task.task_status, task.lease_is_live(now_ms)) {
            return Err(OperateError::NotAllowed {
                task_id: task_id.to_owned(),
                status: task.task_status,
                why: format!(
                    "it is running (lease until {}); delete it once it finishes or its lease ends",
                    task.lease_until.unwrap_or_default()
                ),
            });
        }
        let e = expr::delete(task.token, now_ms);
        let request = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
            .condition_expression(&e.condition)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let result = super::resend_conflicts(|| request.clone().send()).await;
        match result {
            Ok(out) => {
                self.meter.record(Op::Operate, out.consumed_capacity());
                match out.attributes {
                    Some(old) => {
                        let old = parse_task(old)?;
                        // The task is gone; then its payload item.
                        if old.payload_bytes.is_some()
                            && let Err(e) = self.delete_payload(task_id).await
                        {
                            tracing::warn!(event = "payload.orphaned", taskId = %task_id,
                                error = %crate::error::Chain(&e), "its TTL deletes it");
                        }
                        Ok(old)
                    }
                    None => Err(OperateError::NotFound {
                        task_id: task_id.to_owned(),
                    }),
                }
            }
            Err(err) => {
                use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
                if let Some(DeleteItemError::ConditionalCheckFailedException(ex)) =
                    err.as_service_error()
                {
                    self.meter.record_rejected();
                    let status = ex
                        .item()
                        .and_then(|item| parse_task(item.clone()).ok())
                        .map_or("deleted".to_owned(), |t| t.task_status.to_string());
                    return Err(OperateError::Changed {
                        task_id: task_id.to_owned(),
                        status,
                    });
                }
                Err(classify("DeleteItem", err).into())
            }
        }
    }
}

/// [`Store::redrive`] over any [`Queue`]: read the task, check that it may
/// be redriven, then the redrive move on the token read.
pub(super) async fn redrive<Q: Queue + ?Sized>(
    q: &Q,
    task_id: &str,
    settings: RedriveSettings<'_>,
) -> Result<Task, OperateError> {
    let now = settings.now_ms;
    let task = q
        .get_item(task_id)
        .await?
        .ok_or_else(|| OperateError::NotFound {
            task_id: task_id.to_owned(),
        })?;
    if !state::may_redrive(
        task.task_status,
        task.is_expired(now),
        task.lease_is_live(now),
    ) {
        return Err(not_redrivable(&task, now));
    }
    let step = Step {
        now_ms: now,
        token: task.token,
        attempts: 0,
    };
    let redrive = Move::Redrive {
        reason: settings.reason,
        life: Lifetime {
            ttl_seconds: settings.default_ttl_seconds,
            retention_seconds: settings.retention_seconds,
        },
    };
    match q.apply(task_id, &redrive, task.task_status, &step).await {
        Ok(t) => {
            q.after_redrive(&t).await?;
            Ok(t)
        }
        Err(StoreError::ConditionFailed { current, .. }) => Err(OperateError::Changed {
            task_id: task_id.to_owned(),
            status: current.map_or("deleted".to_owned(), |t| t.task_status.to_string()),
        }),
        Err(e) => Err(e.into()),
    }
}
