//! Pause and resume: the queue's control item.

use crate::{OpsError, Queue};
use lifo_core::now_ms;
pub use lifo_core::store::QueueControl;

/// Pauses (`paused`: processors claim nothing more, finish what runs, and
/// nobody is woken; tasks keep expiring) or resumes the queue (the change
/// wakes the processor through the table's stream). `reason` is kept on
/// the control item.
pub async fn set(q: &Queue, paused: bool, reason: &str) -> Result<QueueControl, OpsError> {
    Ok(q.store.set_paused(paused, reason, now_ms()).await?)
}
