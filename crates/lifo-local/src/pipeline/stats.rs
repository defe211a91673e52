//! What the pipeline counts: a leaf that every part of it, and the
//! asynchronous invocations ([`crate::invoke`]), add to.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Counters of what the pipeline did.
#[derive(Debug, Default)]
pub struct PipelineStats {
    pub stream_records: AtomicUsize,
    pub filtered_out: AtomicUsize,
    pub trigger_invocations: AtomicUsize,
    pub process_invocations: AtomicUsize,
    pub tail_calls: AtomicUsize,
    /// SNS messages delivered: wake-ups and tail calls.
    pub published: AtomicUsize,
    /// scheduler-start runs, and the tasks they started.
    pub scheduler_runs: AtomicUsize,
    pub scheduled_started: AtomicUsize,
    pub sweeps: AtomicUsize,
    /// Rest alarms delivered to trigger.
    pub rest_alarms: AtomicUsize,
    /// Tasks shed by expiry (the trigger's `TasksShed`: the sweep's
    /// reaper, TTL deletions of tasks never shed).
    pub shed: AtomicUsize,
    /// Asynchronous attempts Lambda throttled (reserved concurrency busy).
    pub throttles: AtomicUsize,
    /// Invocations that started a new instance.
    pub cold_starts: AtomicUsize,
    /// Events Lambda gave up on, sent to the on-failure destination.
    pub dead_lettered: AtomicUsize,
    /// Events Lambda gave up on, with no destination: gone.
    pub dropped: AtomicUsize,
    pub errors: AtomicUsize,
}

impl PipelineStats {
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}
