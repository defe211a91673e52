//! The reference demo's legacy system: a fixed number of tasks at once,
//! each taking a fixed time, failing or answering "busy" at set rates; or,
//! given a [`Downstream`], one that queues runs past its capacity.

use super::downstream::Downstream;
use super::{RunOutcome, TaskRunner};
use lifo_core::Task;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A simulated legacy system: at most `max_concurrency` tasks at once (more
/// are answered "busy"), each taking `latency` (± `jitter` of it, uniform,
/// when set), failing with probability `failure_rate` and answering "busy"
/// with probability `busy_rate`.
#[derive(Debug)]
pub struct SimulatedRunner {
    pub max_concurrency: usize,
    pub latency: Duration,
    pub failure_rate: f64,
    pub busy_rate: f64,
    /// Each run takes `latency × (1 ± jitter)` (0: exactly `latency`).
    pub jitter: f64,
    /// When set, runs go through it (its capacity, queue and timeout)
    /// instead of being answered "busy" past `max_concurrency`, which is
    /// then only what the processor claims at most.
    pub downstream: Option<std::sync::Arc<Downstream>>,
    in_flight: AtomicUsize,
}

impl SimulatedRunner {
    pub fn new(
        max_concurrency: usize,
        latency: Duration,
        failure_rate: f64,
        busy_rate: f64,
    ) -> Self {
        Self {
            max_concurrency,
            latency,
            failure_rate,
            busy_rate,
            jitter: 0.0,
            downstream: None,
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Runs go through `downstream` ([`Downstream`]): queued past its
    /// capacity, refused past its queue, given up after its timeout.
    pub fn with_downstream(mut self, downstream: std::sync::Arc<Downstream>) -> Self {
        self.downstream = Some(downstream);
        self
    }

    /// Runs take `latency × (1 ± jitter)`, uniform (a real downstream's
    /// runs do not all take the same time); `jitter` in `[0, 1]`.
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.clamp(0.0, 1.0);
        self
    }
}

struct Slot<'a>(&'a AtomicUsize);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl TaskRunner for SimulatedRunner {
    fn capacity(&self) -> usize {
        self.max_concurrency
    }

    fn max_duration(&self) -> Duration {
        match &self.downstream {
            Some(d) => d.timeout(),
            None => self.latency.mul_f64(1.0 + self.jitter),
        }
    }

    async fn run(&self, _task: &Task) -> RunOutcome {
        if let Some(d) = &self.downstream {
            let spread = 1.0 + self.jitter * (2.0 * fastrand::f64() - 1.0);
            return d.run(self.latency.mul_f64(spread)).await;
        }
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _slot = Slot(&self.in_flight);
        if before >= self.max_concurrency {
            return RunOutcome::RetryLater(format!("busy: {} tasks already running", before));
        }
        if fastrand::f64() < self.busy_rate {
            return RunOutcome::RetryLater("busy: downstream asked to retry later".into());
        }
        let spread = 1.0 + self.jitter * (2.0 * fastrand::f64() - 1.0);
        tokio::time::sleep(self.latency.mul_f64(spread)).await;
        if fastrand::f64() < self.failure_rate {
            return RunOutcome::Failure("simulated failure".into());
        }
        RunOutcome::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::new_pending("t".into(), lifo_core::Payload::new(), 0, 60, 1)
    }

    #[tokio::test]
    async fn simulated_runner_answers_busy_beyond_its_capacity() {
        let r = std::sync::Arc::new(SimulatedRunner::new(2, Duration::from_millis(50), 0.0, 0.0));
        let t = task();
        let outs = futures::future::join_all((0..3).map(|_| r.run(&t))).await;
        assert_eq!(
            outs.iter().filter(|o| **o == RunOutcome::Success).count(),
            2
        );
        assert!(matches!(outs[2], RunOutcome::RetryLater(ref m) if m.starts_with("busy")));
        // slots are released afterwards
        assert_eq!(r.run(&t).await, RunOutcome::Success);
    }

    /// On tokio's paused clock, so each run takes exactly its jittered
    /// latency, whatever else the machine is doing.
    #[tokio::test(start_paused = true)]
    async fn jitter_spreads_the_runs_within_its_bounds() {
        let r = SimulatedRunner::new(64, Duration::from_millis(40), 0.0, 0.0).with_jitter(0.5);
        assert_eq!(r.max_duration(), Duration::from_millis(60));
        let t = task();
        let mut took: Vec<u128> = Vec::new();
        for _ in 0..12 {
            let start = tokio::time::Instant::now();
            r.run(&t).await;
            took.push(start.elapsed().as_millis());
        }
        assert!(took.iter().all(|ms| (20..=60).contains(ms)), "{took:?}");
        let (min, max) = (took.iter().min().unwrap(), took.iter().max().unwrap());
        assert!(max - min >= 5, "spread: {took:?}");
    }

    #[tokio::test]
    async fn simulated_failure_and_busy_rates_apply() {
        let fail = SimulatedRunner::new(1, Duration::ZERO, 1.0, 0.0);
        assert_eq!(
            fail.run(&task()).await,
            RunOutcome::Failure("simulated failure".into())
        );
        let busy = SimulatedRunner::new(1, Duration::ZERO, 0.0, 1.0);
        assert!(matches!(busy.run(&task()).await, RunOutcome::RetryLater(_)));
    }
}
