//! A failed command: one line for the user.

use lifo_ops::OpsError;

/// A failed command: one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An operation's failure.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// The command line or its files (the operation never ran).
    #[error("{0}")]
    Other(String),
}

impl From<lifo_core::StoreError> for CliError {
    fn from(e: lifo_core::StoreError) -> Self {
        Self::Ops(OpsError::Store(e))
    }
}
