//! `lifo pause` and `lifo resume`: the queue's control item.

use crate::{CliError, Target};
use lifo_core::now_ms;
use lifo_core::store::QueueControl;

fn describe(c: &QueueControl, as_json: bool) -> String {
    if as_json {
        return serde_json::to_value(c).unwrap_or_default().to_string();
    }
    let why = c
        .reason
        .as_deref()
        .filter(|r| !r.is_empty())
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    if c.paused {
        format!(
            "paused{why}: processors claim nothing (within their 5 s poll), finish what runs, \
             and tasks keep expiring; `lifo resume` wakes the queue"
        )
    } else {
        format!("running{why}: the processor is woken")
    }
}

/// Pauses (`paused`) or resumes the queue. Resume wakes the processor
/// through the table's stream; pause wakes nobody.
pub async fn set(
    target: &Target,
    paused: bool,
    reason: Option<&str>,
    as_json: bool,
) -> Result<String, CliError> {
    let c = target
        .store
        .set_paused(paused, reason.unwrap_or(""), now_ms())
        .await?;
    Ok(describe(&c, as_json))
}
