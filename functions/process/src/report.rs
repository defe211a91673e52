//! What one invocation did, its metrics, and how each claimed task ended.

use serde::Serialize;

/// Why the claim loop stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The claim loop ended on an error, or never ran (the default: every
    /// other reason is set where the loop stops).
    #[default]
    Failed,
    /// No claimable task was left.
    Empty,
    /// The time budget (or the invocation deadline) was reached.
    Budget,
    /// The queue is paused (`lifo pause`): nothing more is claimed, what
    /// runs is finished, and there is no tail call.
    Paused,
    /// Every shard group is held by another processor (more than one
    /// processor): nothing to do here.
    Held,
    /// The program hosting the processor stopped it ([`crate::Halt`]: a
    /// local stack's graceful stop): nothing more is claimed, what runs is
    /// finished, and there is no tail call.
    Stopped,
}

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReport {
    /// The shard group this invocation claimed from (more than one
    /// processor).
    pub group: Option<u32>,
    /// Ids in the order they were claimed.
    pub claimed: Vec<String>,
    pub succeeded: usize,
    pub failed: usize,
    pub retried_later: usize,
    /// Of `claimed`, tasks taken over after another claim's lease expired.
    pub reclaimed: usize,
    /// Tasks whose lease expired with no attempts left: ended FAILURE.
    pub abandoned: usize,
    /// Runs that failed with attempts left: put back.
    pub retried_after_error: usize,
    /// Claimed tasks a newer task with the same key marked while they ran
    /// (or before their lapsed lease was read): ended SUPERSEDED, not put
    /// back and not claimed again.
    pub superseded: usize,
    /// Claims lost to another worker (normal when two processors race).
    pub conflicts: usize,
    /// Outcomes refused because the task was claimed again meanwhile
    /// (fencing token changed): the newer claim's outcome stands.
    pub stale_rejected: usize,
    /// Index entries skipped: unknown status or unparseable item.
    pub skipped: usize,
    /// Outcomes that could not be recorded (I/O errors after retries).
    pub finish_errors: usize,
    /// Expired tasks the claim reads met and shed on their way.
    pub shed: usize,
    /// With the adaptive order: claims of tasks near their deadline that
    /// went before newer ones (`select::deadline`).
    pub deadline_starts: usize,
    pub stop: StopReason,
    pub tail_call: bool,
    /// Rest alarms set at the end ([`lifo_lambda::alarm`]).
    pub rest_alarms: usize,
    /// Rest alarms that could not be sent (their tasks wait for the sweep).
    pub rest_alarms_failed: usize,
    /// Settings clamped to work together ([`crate::config::Clamp`]).
    pub settings_clamped: usize,
    pub elapsed_ms: u64,
    /// What the fair share saw, once tasks with a tenant were claimed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<crate::select::fair::Fairness>,
    /// Age at start (ms) of each claimed task, for the AgeAtStartMs metric.
    #[serde(skip)]
    pub ages_ms: Vec<u64>,
    /// Runs that may be in flight at the end: `RunnerMaxConcurrency` (this
    /// invocation's share of it), or the adaptive limit under it.
    pub downstream_limit: usize,
    /// Runs the downstream refused (429, 503, a throttle) or that timed out.
    pub runs_refused: usize,
    /// Times the adaptive limit halved on one.
    pub limit_halvings: usize,
    /// Latency (ms) of each run, for the DownstreamLatencyMs metric.
    #[serde(skip)]
    pub downstream_latencies_ms: Vec<u64>,
}

impl ProcessReport {
    /// Books what the invocation's slots saw, ending at `limit`.
    pub(crate) fn downstream(&mut self, limit: usize, seen: crate::runner::slots::SlotsSeen) {
        self.downstream_limit = limit;
        self.runs_refused = seen.refused;
        self.limit_halvings = seen.halvings;
        self.downstream_latencies_ms = seen.latencies_ms;
    }

    /// The invocation's metrics (EMF).
    pub fn metrics(&self) -> lifo_lambda::metrics::Metrics {
        use lifo_lambda::metrics::Unit;
        let ages: Vec<f64> = self.ages_ms.iter().map(|a| *a as f64).collect();
        let latencies: Vec<f64> = self
            .downstream_latencies_ms
            .iter()
            .map(|a| *a as f64)
            .collect();
        // An invocation that ran nothing says nothing of the downstream.
        let limit: Vec<f64> = (!latencies.is_empty())
            .then_some(self.downstream_limit as f64)
            .into_iter()
            .collect();
        // Fairness as SQS shows it for fair queues: how long the tenants
        // that are not flooding wait, and how much the flooding ones get.
        let fair = self.fairness.filter(|f| f.starts > 0);
        let quiet_oldest: Vec<f64> = fair
            .and_then(|f| f.quiet_oldest_age_ms)
            .map(|ms| ms as f64)
            .into_iter()
            .collect();
        lifo_lambda::metrics::Metrics::new()
            .cold_start()
            .count("TasksClaimed", self.claimed.len())
            .count("TasksSucceeded", self.succeeded)
            .count("TasksFailed", self.failed + self.abandoned)
            .count(
                "TasksRetried",
                self.retried_later + self.retried_after_error,
            )
            // Bounces alone: a downstream that keeps saying "later".
            .count("TasksRetriedLater", self.retried_later)
            .count("ClaimConflicts", self.conflicts)
            .count("StaleFinishRejected", self.stale_rejected)
            .count("TasksShed", self.shed)
            // The old name, for one release (dashboards and alarms built on it).
            .count("TasksExpired", self.shed)
            .count("TasksSuperseded", self.superseded)
            .count("TailCalls", usize::from(self.tail_call))
            .count("RestAlarms", self.rest_alarms)
            .count("RestAlarmsFailed", self.rest_alarms_failed)
            // Settings process clamped to work together: SettingsClampedAlarm.
            .count("SettingsClamped", self.settings_clamped)
            .values("AgeAtStartMs", Unit::Milliseconds, &ages)
            // The flooding tenants' share of starts is their sum over the
            // starts' sum (metric math on the dashboard): an average of
            // each invocation's share would weigh a short one like a long one.
            .count("TenantStarts", fair.map_or(0, |f| f.starts))
            .count(
                "FloodingTenantStarts",
                fair.map_or(0, |f| f.flooding_starts),
            )
            .values("QuietTenantsOldestAgeMs", Unit::Milliseconds, &quiet_oldest)
            // The downstream as the runs saw it: the limit the invocation
            // ended with, each run's latency, the refusals and timeouts.
            .values("DownstreamLimit", Unit::Count, &limit)
            .values("DownstreamLatencyMs", Unit::Milliseconds, &latencies)
            .count("RunsRefused", self.runs_refused)
    }
}

/// How one claimed task ended.
pub(crate) enum Finished {
    Succeeded,
    Failed,
    /// Put back, claimable again at this `retryAt` (epoch ms; 0: at once).
    Retried(u64),
    RetriedAfterError(u64),
    Stale,
    Error,
    /// Not put back: a newer task with its key was written while it ran.
    Superseded,
}

pub(crate) fn tally(report: &mut ProcessReport, done: Result<Finished, tokio::task::JoinError>) {
    match done {
        Ok(Finished::Succeeded) => report.succeeded += 1,
        Ok(Finished::Failed) => report.failed += 1,
        Ok(Finished::Retried(_)) => report.retried_later += 1,
        Ok(Finished::RetriedAfterError(_)) => report.retried_after_error += 1,
        Ok(Finished::Stale) => report.stale_rejected += 1,
        Ok(Finished::Error) => report.finish_errors += 1,
        Ok(Finished::Superseded) => report.superseded += 1,
        Err(e) => {
            tracing::error!(event = "task.run_panicked", error = %e);
            report.finish_errors += 1;
        }
    }
}
