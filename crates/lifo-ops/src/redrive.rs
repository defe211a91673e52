//! Redrive: run failed tasks (or tasks shed by expiry) again as new work,
//! by id or every failure of a window, paced; then one nudge so the
//! processor wakes for them.

use crate::tasks::{BatchReport, FailedFilter, check_id, failed};
use crate::{OpsError, Queue};
use governor::{Quota, RateLimiter};
use lifo_core::now_ms;
use lifo_core::store::{OperateError, RedriveSettings};
use std::num::NonZeroU32;

/// Redrives per second unless told otherwise: each is 3 write units, and
/// the retried tasks wake a processor whose downstream may just have
/// recovered.
pub const DEFAULT_PACE: NonZeroU32 = match NonZeroU32::new(25) {
    Some(n) => n,
    None => NonZeroU32::MIN,
};
/// Fastest pace accepted.
pub const MAX_PACE: u32 = 1000;

/// Which tasks to redrive.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// These (each refused by name if it is not FAILURE or shed).
    Ids(Vec<String>),
    /// Every failure of a window, newest first; one redriven by someone
    /// else meanwhile is skipped, not refused.
    Failed(FailedFilter),
}

/// A redrive request.
#[derive(Debug, Clone, PartialEq)]
pub struct Redrive {
    pub selection: Selection,
    /// Redrives per second at most (1 to [`MAX_PACE`]).
    pub per_second: NonZeroU32,
    /// Why (kept in each task's history).
    pub reason: String,
    /// List what would be redriven; write nothing.
    pub dry_run: bool,
    /// Start no redrive at or after this moment (an HTTP request's
    /// deadline): the report then says `interrupted` and lists what is
    /// left, so a caller can go on.
    pub until: Option<std::time::Instant>,
}

impl Redrive {
    pub fn ids(ids: Vec<String>, reason: impl Into<String>) -> Self {
        Self {
            selection: Selection::Ids(ids),
            per_second: DEFAULT_PACE,
            reason: reason.into(),
            dry_run: false,
            until: None,
        }
    }
}

/// Runs `r`; `progress(done, of)` is called after each task.
pub async fn redrive(
    q: &Queue,
    r: &Redrive,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<BatchReport, OpsError> {
    if r.per_second.get() > MAX_PACE {
        return Err(OpsError::invalid(
            "perSecond",
            format!("must be 1 to {MAX_PACE}"),
        ));
    }
    let (ids, by_window) = match &r.selection {
        Selection::Ids(ids) if ids.is_empty() => {
            return Err(OpsError::invalid(
                "ids",
                "give the ids to retry, or a window of failures",
            ));
        }
        Selection::Ids(ids) => {
            for (i, id) in ids.iter().enumerate() {
                check_id(&format!("ids[{i}]"), id)?;
            }
            (ids.clone(), false)
        }
        Selection::Failed(f) => (
            failed(q, f).await?.into_iter().map(|f| f.task_id).collect(),
            true,
        ),
    };
    if r.dry_run {
        return Ok(BatchReport {
            done: ids,
            dry_run: true,
            ..BatchReport::default()
        });
    }
    let pace = RateLimiter::direct(Quota::per_second(r.per_second));
    let mut report = BatchReport::default();
    for (i, id) in ids.iter().enumerate() {
        pace.until_ready().await;
        if r.until
            .is_some_and(|until| std::time::Instant::now() >= until)
        {
            report.interrupted = true;
            report.remaining = ids[i..].to_vec();
            break;
        }
        let settings = RedriveSettings {
            now_ms: now_ms(),
            default_ttl_seconds: q.settings.task_ttl_seconds,
            retention_seconds: q.settings.retention_seconds,
            reason: &r.reason,
        };
        match q.store.redrive(id, settings).await {
            // A failure redriven by someone else meanwhile is not ours to
            // report in a window; by id, it is.
            Err(OperateError::Changed { .. }) if by_window => {}
            outcome => report.record("retried", ids.len(), id, outcome)?,
        }
        progress(i + 1, ids.len());
    }
    if !report.done.is_empty() {
        // The redrives are MODIFYs, which the stream filter does not pass:
        // one nudge of the control item wakes the processor (unless paused).
        report.paused = q.store.nudge(now_ms()).await?.paused;
    }
    Ok(report)
}
