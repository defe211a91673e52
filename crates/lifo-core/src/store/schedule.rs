//! Scheduled tasks: start (SCHEDULED → PENDING), cancel, and the due index.

use super::{CancelError, Item, Store, StoreError};
use crate::expr::{self, Lifetime, Move, Step};
use crate::model::{Task, TaskStatus};

impl Store {
    /// Starts a scheduled task: SCHEDULED → PENDING, claimable from now,
    /// expiring `ttlSeconds` (or `default_ttl_seconds`) from now.
    pub async fn start(
        &self,
        task_id: &str,
        now_ms: u64,
        default_ttl_seconds: u64,
        retention_seconds: u64,
    ) -> Result<Task, StoreError> {
        let step = Step {
            now_ms,
            ..Step::default()
        };
        let life = Lifetime {
            ttl_seconds: default_ttl_seconds,
            retention_seconds,
        };
        self.apply(task_id, &Move::Start { life }, TaskStatus::Scheduled, &step)
            .await
    }

    /// Cancels a task, only while it is SCHEDULED.
    pub async fn cancel(&self, task_id: &str, now_ms: u64) -> Result<Task, CancelError> {
        let step = Step {
            now_ms,
            ..Step::default()
        };
        match self
            .apply(task_id, &Move::Cancel, TaskStatus::Scheduled, &step)
            .await
        {
            Ok(t) => Ok(t),
            Err(StoreError::ConditionFailed {
                current: Some(t), ..
            }) => Err(CancelError::NotScheduled {
                task_id: task_id.to_owned(),
                status: t.task_status,
            }),
            Err(StoreError::ConditionFailed { current: None, .. }) => Err(CancelError::NotFound {
                task_id: task_id.to_owned(),
            }),
            Err(e) => Err(CancelError::Store(e)),
        }
    }

    /// One page (up to `limit` ids) of a due index partition; `start` is
    /// the previous page's continuation.
    pub async fn due_page(
        &self,
        due_key: &str,
        limit: i32,
        start: Option<Item>,
    ) -> Result<(Vec<String>, Option<Item>), StoreError> {
        let q = expr::due_partition(due_key);
        self.index_ids(self.index_query(expr::DUE_INDEX, &q).limit(limit), start)
            .await
    }
}
