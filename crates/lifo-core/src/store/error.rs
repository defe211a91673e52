//! What went wrong talking to the table.

use super::Item;
use crate::model::{Task, TaskStatus};
use crate::state::IllegalTransition;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;

/// What went wrong talking to the table.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The condition did not hold: another worker moved the task first, or
    /// the id already exists. `current` is the item as DynamoDB saw it.
    #[error("condition failed for task {task_id} (current status: {})",
        current.as_ref().map_or("unknown", |t| t.task_status.as_str()))]
    ConditionFailed {
        task_id: String,
        current: Option<Box<Task>>,
    },
    /// DynamoDB throttled the request even after the SDK's retries.
    #[error("{operation} throttled: {message}")]
    Throttled {
        operation: &'static str,
        message: String,
    },
    /// The state machine refused the move; nothing was sent.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// An item that does not parse as a task.
    #[error("task {task_id} is malformed: {reason}")]
    Malformed { task_id: String, reason: String },
    /// Anything else (network, permissions, validation).
    #[error("{operation} failed: {message}")]
    Other {
        operation: &'static str,
        message: String,
    },
}

/// Why a cancel was refused.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error("no task {task_id}")]
    NotFound { task_id: String },
    #[error("task {task_id} is {status}; only SCHEDULED tasks can be cancelled")]
    NotScheduled { task_id: String, status: TaskStatus },
    #[error(transparent)]
    Store(StoreError),
}

impl StoreError {
    pub fn is_condition_failed(&self) -> bool {
        matches!(self, Self::ConditionFailed { .. })
    }
}

const THROTTLE_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "ThrottlingError",
];

pub(super) fn classify<E, R>(operation: &'static str, err: &SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let message = DisplayErrorContext(err).to_string();
    match err.code() {
        Some(code) if THROTTLE_CODES.contains(&code) => {
            StoreError::Throttled { operation, message }
        }
        _ => StoreError::Other { operation, message },
    }
}

pub(super) fn parse_task(item: Item) -> Result<Task, StoreError> {
    let task_id = match item.get(crate::expr::attr::TASK_ID) {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => "<no taskId>".to_owned(),
    };
    serde_dynamo::from_item(item).map_err(|e| StoreError::Malformed {
        task_id,
        reason: e.to_string(),
    })
}
