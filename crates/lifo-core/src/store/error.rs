//! What went wrong talking to the table. Each error keeps its cause (the
//! SDK's error, the parser's) as `source()`; [`crate::error::Chain`] prints
//! the whole story.

use super::Item;
use crate::error::BoxError;
use crate::model::{Task, TaskStatus};
use crate::state::IllegalTransition;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

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
    #[error("{operation} throttled")]
    Throttled {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
    /// A transaction was writing the item at that moment
    /// (`TransactionConflictException`), and it still was after our
    /// resends ([`super::resend_conflicts`]). Nothing was written; the
    /// same request a moment later may succeed. The SDK does not retry it.
    #[error(
        "{operation}: a transaction was writing the same item (TransactionConflictException); \
             nothing was written, retry shortly"
    )]
    Conflict {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
    /// Items a batch request left unprocessed after our retries (DynamoDB
    /// does this under throttling).
    #[error("{operation}: {remaining} items still unprocessed after {retries} retries")]
    Unprocessed {
        operation: &'static str,
        remaining: usize,
        retries: u32,
    },
    /// A write of several tasks stopped part-way: the first `written` are in
    /// the table, the rest are not.
    #[error("{written} of {total} tasks were written, then writing failed")]
    PartialWrite {
        written: usize,
        total: usize,
        #[source]
        source: Box<StoreError>,
    },
    /// The state machine refused the move; nothing was sent.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// A task's payload item is gone or does not decode.
    #[error("task {task_id}'s payload: {reason}")]
    Payload { task_id: String, reason: String },
    /// An item that does not parse as a task.
    #[error("task {task_id} is malformed")]
    Malformed {
        task_id: String,
        #[source]
        source: serde_dynamo::Error,
    },
    /// The caller's role does not allow the call (`AccessDeniedException`):
    /// a deployment fault, not the request's nor DynamoDB's. `action` and
    /// `resource` are what AWS named in its refusal, `principal` whom it
    /// refused (the role's session, e.g. `assumed-role/R/F`).
    #[error(
        "the function's role does not allow {} on {} ({ACCESS_DENIED_CODE} for {})",
        refusal.action,
        refusal.resource,
        refusal.principal
    )]
    AccessDenied {
        operation: &'static str,
        refusal: Box<Refusal>,
    },
    /// Anything else (network, validation).
    #[error("{operation} failed")]
    Other {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
}

/// What AWS named in an `AccessDeniedException`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub action: String,
    pub resource: String,
    pub principal: String,
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

    /// Another transaction held the item: contention, not a fault.
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Conflict { .. } => true,
            Self::PartialWrite { source, .. } => source.is_conflict(),
            _ => false,
        }
    }

    /// The role refused the call: `(action, resource)`.
    pub fn access_denied(&self) -> Option<(&str, &str)> {
        match self {
            Self::AccessDenied { refusal, .. } => Some((&refusal.action, &refusal.resource)),
            Self::PartialWrite { source, .. } => source.access_denied(),
            _ => None,
        }
    }

    /// This error, met after `written` of `total` tasks were written: a
    /// [`StoreError::PartialWrite`] unless none were.
    pub fn after_writing(self, written: usize, total: usize) -> Self {
        match written {
            0 => self,
            written => Self::PartialWrite {
                written,
                total,
                source: Box::new(self),
            },
        }
    }

    /// DynamoDB asked us to slow down (a retry later may succeed).
    pub fn is_throttled(&self) -> bool {
        match self {
            Self::Throttled { .. } | Self::Unprocessed { .. } => true,
            Self::PartialWrite { source, .. } => source.is_throttled(),
            _ => false,
        }
    }
}

/// The code of a single-item write that met a transaction on its item.
pub const CONFLICT_CODE: &str = "TransactionConflictException";

const THROTTLE_CODES: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "ThrottlingError",
];

pub(super) fn classify<E, R>(operation: &'static str, err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let throttled = err
        .code()
        .is_some_and(|code| THROTTLE_CODES.contains(&code));
    let conflict = err.code() == Some(CONFLICT_CODE);
    if err.code() == Some(ACCESS_DENIED_CODE) {
        return StoreError::AccessDenied {
            operation,
            refusal: Box::new(refused(operation, err.message().unwrap_or(""))),
        };
    }
    // A service's answer as its code and message: the SDK's own chain ends
    // in its error metadata's Debug form (`Error { code: … }`).
    let source: BoxError = match err.code() {
        Some(code) => Box::new(ServiceError(match err.message() {
            Some(m) => format!("{code}: {m}"),
            None => code.to_owned(),
        })),
        None => err.into(),
    };
    if throttled {
        StoreError::Throttled { operation, source }
    } else if conflict {
        StoreError::Conflict { operation, source }
    } else {
        StoreError::Other { operation, source }
    }
}

/// The code of a call the caller's policy does not allow.
pub const ACCESS_DENIED_CODE: &str = "AccessDeniedException";

/// A service's refusal, as its code and message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ServiceError(String);

/// The action, resource and principal an `AccessDeniedException` names
/// ("User: arn:… is not authorized to perform: dynamodb:PutItem on resource:
/// arn:… because …"); the operation, "the table" and "the caller" when its
/// message says none.
fn refused(operation: &str, message: &str) -> Refusal {
    let after = |marker: &str| message.split_once(marker).map(|(_, rest)| rest);
    let action = after("to perform: ")
        .and_then(|rest| rest.split_whitespace().next())
        .map_or_else(|| format!("dynamodb:{operation}"), str::to_owned);
    let resource = after(" on resource: ")
        .and_then(|rest| rest.split_whitespace().next())
        .map_or_else(|| "the table".to_owned(), str::to_owned);
    let principal = after("User: ")
        .and_then(|rest| rest.split_whitespace().next())
        .map_or_else(|| "the caller".to_owned(), str::to_owned);
    Refusal {
        action,
        resource,
        principal,
    }
}

pub(super) fn parse_task(item: Item) -> Result<Task, StoreError> {
    super::item::from_item(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::chain;

    #[test]
    fn a_partial_write_says_what_was_written_and_why_it_stopped() {
        let e = StoreError::PartialWrite {
            written: 25,
            total: 30,
            source: Box::new(StoreError::Unprocessed {
                operation: "BatchWriteItem",
                remaining: 5,
                retries: 8,
            }),
        };
        assert!(e.is_throttled());
        assert_eq!(
            chain(&e),
            "25 of 30 tasks were written, then writing failed: \
             BatchWriteItem: 5 items still unprocessed after 8 retries"
        );
    }

    #[test]
    fn a_refusal_names_the_action_and_resource_aws_named() {
        let message = "User: arn:aws:sts::1:assumed-role/R/F is not authorized to perform: \
                       dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:1:table/Q \
                       because no identity-based policy allows the dynamodb:PutItem action";
        assert_eq!(
            refused("PutItem", message),
            Refusal {
                action: "dynamodb:PutItem".to_owned(),
                resource: "arn:aws:dynamodb:us-east-1:1:table/Q".to_owned(),
                principal: "arn:aws:sts::1:assumed-role/R/F".to_owned()
            }
        );
        assert_eq!(
            refused("Query", "Access denied"),
            Refusal {
                action: "dynamodb:Query".to_owned(),
                resource: "the table".to_owned(),
                principal: "the caller".to_owned()
            }
        );
    }
}
