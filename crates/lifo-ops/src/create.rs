//! Create tasks: create's request (`{"tasks": [...]}` or `{"count": N}`),
//! with create's validation and limits, through the queue's producer.

use crate::{OpsError, Queue};
pub use create::CreateResponse;
use serde_json::Value;

/// Writes `request`, whole or not at all (create's rules). Its size is
/// checked where its bytes are: by the API on the body's length, by the CLI
/// on the file's, and by create itself (in process, or in the function a
/// stack's producer invokes); not here again.
pub async fn create(q: &Queue, request: Value) -> Result<CreateResponse, OpsError> {
    q.producer.create(request).await
}
