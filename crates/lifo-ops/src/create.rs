//! Create tasks: create's request (`{"tasks": [...]}` or `{"count": N}`),
//! with create's validation and limits, through the queue's producer.

use crate::{OpsError, Queue};
pub use create::CreateResponse;
use serde_json::Value;

/// Writes `request`, whole or not at all (create's rules); a request over
/// create's size limit is refused before it reaches the producer.
pub async fn create(q: &Queue, request: Value) -> Result<CreateResponse, OpsError> {
    let size = serde_json::to_vec(&request).map_or(usize::MAX, |v| v.len());
    create::check_request_size(size)?;
    q.producer.create(request).await
}
