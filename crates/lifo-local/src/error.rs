//! One error type for the local tooling: a message with its context.

/// Something in the local stack failed; the message says what and where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LocalError(pub String);

pub type Result<T> = std::result::Result<T, LocalError>;

/// Adds context to any displayable error.
pub trait Context<T> {
    fn context(self, what: impl std::fmt::Display) -> Result<T>;
}

impl<T, E: std::fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl std::fmt::Display) -> Result<T> {
        self.map_err(|e| LocalError(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl std::fmt::Display) -> Result<T> {
        self.ok_or_else(|| LocalError(what.to_string()))
    }
}
