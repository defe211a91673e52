//! Pause and resume: the queue's control item.

use crate::{OpsError, Queue};
use lifo_core::now_ms;
pub use lifo_core::store::QueueControl;

/// Processors claim nothing more (they finish what runs) and nobody is
/// woken; tasks keep expiring.
pub async fn pause(q: &Queue, reason: &str) -> Result<QueueControl, OpsError> {
    Ok(q.store.set_paused(true, reason, now_ms()).await?)
}

/// Processing starts again; the change wakes the processor through the
/// table's stream.
pub async fn resume(q: &Queue, reason: &str) -> Result<QueueControl, OpsError> {
    Ok(q.store.set_paused(false, reason, now_ms()).await?)
}

/// The control state, strongly consistent (an operator who just changed it
/// sees the change).
pub async fn state(q: &Queue) -> Result<QueueControl, OpsError> {
    Ok(q.store.control(true).await?)
}
