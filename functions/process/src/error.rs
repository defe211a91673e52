//! Why an invocation failed, and how Lambda reports it.

use lifo_core::StoreError;
use lifo_lambda::NotifyError;
use std::time::Duration;

/// Why an invocation failed. Lambda retries it (and then sends it to the
/// on-failure destination); tasks already claimed were finished first.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("reading or claiming tasks failed")]
    Store(#[from] StoreError),
    #[error("tail call failed")]
    TailCall(#[from] NotifyError),
    #[error("malformed SNS event: {0}")]
    Malformed(String),
    /// The runner's longest run does not fit in the invocation: raise the
    /// function's Timeout or lower RunnerTimeoutMs / the runner's
    /// max_duration.
    #[error(
        "no run fits before the deadline: a run may take {max_run:?}, {left:?} are left \
         (minus the deadline margin); raise the function's Timeout or lower the runner's"
    )]
    NoTimeToRun { max_run: Duration, left: Duration },
}

impl From<ProcessError> for lambda_runtime::Diagnostic {
    fn from(e: ProcessError) -> Self {
        let error_type = match &e {
            ProcessError::Store(_) => "StoreError",
            ProcessError::TailCall(_) => "TailCallFailed",
            ProcessError::Malformed(_) => "MalformedEvent",
            ProcessError::NoTimeToRun { .. } => "NoTimeToRun",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: lifo_core::error::chain(&e),
        }
    }
}
