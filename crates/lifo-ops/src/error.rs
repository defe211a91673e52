//! Why an operation did nothing, or stopped part-way.

use lifo_core::store::OperateError;
use lifo_core::{CancelError, StoreError};

/// An operation's failure. The faces map each kind to their own form (an
/// exit code and a line, a page, an HTTP status and a problem document).
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No such task.
    #[error("no task {task_id}")]
    NotFound { task_id: String },
    /// The task passed its deletion time (`ttl`): DynamoDB's TTL deletes it
    /// within days, its payload perhaps first. What is known of it.
    #[error(
        "task {task_id} passed its retention at {deleted_at} (epoch s) as {status}; \
             DynamoDB's TTL deletes it within days"
    )]
    Gone {
        task_id: String,
        status: lifo_core::TaskStatus,
        deleted_at: u64,
    },
    /// A well-formed part of the request names nothing there is (a cursor
    /// this API did not give out for this list); `field` names it.
    #[error("{field}: {message}")]
    NamesNothing { field: String, message: String },
    /// The request is malformed; `field` names the part (e.g.
    /// `tasks[3].ttlSeconds`, `cursor`). Nothing was written.
    #[error("invalid request: {field}: {message}")]
    Invalid { field: String, message: String },
    /// The task is in a state the operation does not take, or changed
    /// meanwhile. Nothing was written.
    #[error("{0}")]
    Conflict(String),
    /// Another write (a supersede transaction) held the task through the
    /// store's resends; nothing was written, and the same request in a
    /// moment may go through.
    #[error("{0}")]
    Contended(String),
    /// The create function refused the request (its message says why).
    #[error("{0}")]
    Rejected(String),
    /// A bulk operation stopped part-way: `done` were written, then the
    /// store failed.
    #[error("{verb} {} of {asked}, then: {}", .done.len(), lifo_core::error::chain(.error))]
    Interrupted {
        verb: &'static str,
        done: Vec<String>,
        asked: usize,
        error: StoreError,
    },
    /// DynamoDB (or the create function) could not be reached or failed.
    #[error("{}", lifo_core::error::chain(.0))]
    Store(#[from] StoreError),
    /// Anything else that is not the request's fault.
    #[error("{0}")]
    Unavailable(String),
}

impl OpsError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<OperateError> for OpsError {
    fn from(e: OperateError) -> Self {
        match e {
            OperateError::NotFound { task_id } => Self::NotFound { task_id },
            OperateError::Store(e) => Self::Store(e),
            e => Self::Conflict(e.to_string()),
        }
    }
}

impl From<CancelError> for OpsError {
    fn from(e: CancelError) -> Self {
        match e {
            CancelError::NotFound { task_id } => Self::NotFound { task_id },
            CancelError::Store(e) => Self::Store(e),
            e => Self::Conflict(e.to_string()),
        }
    }
}
