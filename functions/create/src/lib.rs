//! `create` as Lambda runs it: the event into [`lifo_ops::create::Creator`]
//! (the request's checks, the writes, the wake-ups), and its error into
//! the invocation's error type. Everything else is the operation's.

use lifo_ops::create::{CreateError, CreateResponse, Creator};
use serde_json::value::RawValue;

/// A refused or failed create, as Lambda reports it: `errorType`
/// `InvalidRequest` (the request named a bad field; nothing was written)
/// or `StoreError`, and the whole chain of causes.
#[derive(Debug)]
pub struct Failure(pub CreateError);

impl From<Failure> for lambda_runtime::Diagnostic {
    fn from(Failure(e): Failure) -> Self {
        let error_type = match &e {
            CreateError::Invalid { .. } => "InvalidRequest",
            CreateError::Store(_) => "StoreError",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: lifo_core::error::chain(&e),
        }
    }
}

/// One invocation: `event` as the runtime hands it over.
pub async fn handle(creator: &Creator, event: &RawValue) -> Result<CreateResponse, Failure> {
    creator.handle_raw(event).await.map_err(Failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_an_invalid_request_naming_the_field() {
        let d: lambda_runtime::Diagnostic = Failure(CreateError::Invalid {
            field: "tasks[0].ttlSeconds".into(),
            message: "must be between 1 and 604800 seconds, got 0".into(),
        })
        .into();
        assert_eq!(d.error_type, "InvalidRequest");
        assert_eq!(
            d.error_message,
            "invalid request: tasks[0].ttlSeconds: must be between 1 and 604800 seconds, got 0"
        );
    }
}
