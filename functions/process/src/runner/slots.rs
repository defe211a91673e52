//! The runner-side layer that says how many runs may start now: a fixed
//! number (`RunnerMaxConcurrency`) or the adaptive limit
//! ([`super::limit::Gradient`]) under it. [`Limited`] wraps a runner, times
//! each run and tells [`Slots`] how it ended; the claim loop only asks
//! [`Slots::free`].

use super::limit::{Change, Gradient, Handed, Sample};
use super::{RunOutcome, TaskRunner};
use lifo_core::Task;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How many runs may be in flight (`RUNNER_CONCURRENCY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Concurrency {
    /// Always `RunnerMaxConcurrency`.
    #[default]
    Fixed,
    /// Found from the downstream's latency and refusals, at most
    /// `RunnerMaxConcurrency`.
    Adaptive,
}

impl Concurrency {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Adaptive => "adaptive",
        }
    }
}

impl std::str::FromStr for Concurrency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fixed" => Ok(Self::Fixed),
            "adaptive" => Ok(Self::Adaptive),
            other => Err(format!("expected fixed or adaptive, got {other:?}")),
        }
    }
}

impl std::fmt::Display for Concurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The handover's key for the limit: only [`Slots`] reads what is under it.
pub const HANDOVER_KEY: &str = "limit";

/// Whether an outcome says the downstream is over its capacity.
pub fn refused(outcome: &RunOutcome) -> bool {
    matches!(
        outcome,
        RunOutcome::RetryLater(_) | RunOutcome::RetryAfter(..) | RunOutcome::TimedOut(_)
    )
}

/// What one invocation's slots saw, for its report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlotsSeen {
    /// Latency (ms) of each run that ended, refused ones included.
    pub latencies_ms: Vec<u64>,
    /// Runs refused or timed out.
    pub refused: usize,
    /// Times the limit halved.
    pub halvings: usize,
}

/// An invocation's slots: its share of the runner (`ceiling`), and with
/// the adaptive limit, how much of it the downstream takes now.
#[derive(Debug)]
pub struct Slots {
    ceiling: usize,
    adaptive: Option<Mutex<Gradient>>,
    origin: tokio::time::Instant,
    running: AtomicUsize,
    seen: Mutex<SlotsSeen>,
}

impl Slots {
    /// Slots of `ceiling` runs; adaptive ones resume `handed` (a tail
    /// call's handover, or the sandbox's last) when given.
    pub fn new(mode: Concurrency, ceiling: usize, handed: Option<&Handed>) -> Self {
        let ceiling = ceiling.max(1);
        let adaptive = (mode == Concurrency::Adaptive).then(|| {
            Mutex::new(
                handed.map_or_else(|| Gradient::new(ceiling), |h| Gradient::resume(ceiling, h)),
            )
        });
        Self {
            ceiling,
            adaptive,
            origin: tokio::time::Instant::now(),
            running: AtomicUsize::new(0),
            seen: Mutex::new(SlotsSeen::default()),
        }
    }

    /// The limit a tail call's handover carries (`HANDOVER_KEY`), if it
    /// reads as one.
    pub fn handed(handover: Option<&crate::select::Handover>) -> Option<Handed> {
        let value = handover?.get(HANDOVER_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Runs that may be in flight now.
    pub fn limit(&self) -> usize {
        match &self.adaptive {
            Some(g) => g.lock().map_or(self.ceiling, |g| g.limit()),
            None => self.ceiling,
        }
    }

    /// The adaptive limit's state, to hand over; `None` when fixed.
    pub fn state(&self) -> Option<Handed> {
        self.adaptive.as_ref()?.lock().ok().map(|g| g.handed())
    }

    /// Adds the limit to a tail call's handover.
    pub fn hand_over(&self, out: &mut crate::select::Handover) {
        if let Some(value) = self.state().and_then(|h| serde_json::to_value(h).ok()) {
            out.insert(HANDOVER_KEY.to_owned(), value);
        }
    }

    /// Slots free when `taken` are (claims sent and not yet ended).
    pub fn free(&self, taken: usize) -> usize {
        self.limit().saturating_sub(taken)
    }

    pub fn seen(&self) -> SlotsSeen {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Books a run that ended.
    fn record(&self, sample: Sample, outcome: &RunOutcome) {
        let change = self
            .adaptive
            .as_ref()
            .and_then(|g| g.lock().ok().and_then(|mut g| g.tell(sample)));
        if let Ok(mut seen) = self.seen.lock() {
            seen.latencies_ms.push(sample.latency_ms());
            seen.refused += usize::from(sample.refused);
            seen.halvings += usize::from(matches!(change, Some(Change::Halved { .. })));
        }
        match change {
            Some(Change::Halved { from, to }) => tracing::warn!(
                event = "process.limit_halved",
                from,
                to,
                reason = outcome.reason(),
                "the downstream refused a run or it timed out: the limit halves"
            ),
            Some(Change::Fell {
                from,
                to,
                latency_ms,
                unloaded_ms,
            }) => tracing::info!(
                event = "process.limit_fell",
                from,
                to,
                latencyMs = latency_ms as u64,
                unloadedMs = unloaded_ms as u64
            ),
            Some(Change::Rose { from, to }) => {
                tracing::debug!(event = "process.limit_rose", from, to)
            }
            None => {}
        }
    }
}

/// A runner whose runs [`Slots`] counts and times.
#[derive(Debug)]
pub struct Limited<R> {
    inner: Arc<R>,
    slots: Arc<Slots>,
}

impl<R> Limited<R> {
    pub fn new(inner: Arc<R>, slots: Arc<Slots>) -> Self {
        Self { inner, slots }
    }
}

struct Running<'a>(&'a AtomicUsize);
impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<R: TaskRunner> TaskRunner for Limited<R> {
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    fn max_duration(&self) -> Duration {
        self.inner.max_duration()
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        let in_flight = self.slots.running.fetch_add(1, Ordering::AcqRel) + 1;
        let _running = Running(&self.slots.running);
        let started_ms = self.slots.now_ms();
        let outcome = self.inner.run(task).await;
        let sample = Sample {
            started_ms,
            ended_ms: self.slots.now_ms(),
            refused: refused(&outcome),
            in_flight,
        };
        self.slots.record(sample, &outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A downstream answering each run from a script, after its delay.
    struct Scripted(Mutex<Vec<(u64, RunOutcome)>>);
    impl TaskRunner for Scripted {
        fn capacity(&self) -> usize {
            8
        }
        fn max_duration(&self) -> Duration {
            Duration::from_secs(30)
        }
        async fn run(&self, _task: &Task) -> RunOutcome {
            let (ms, out) = self.0.lock().unwrap().remove(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            out
        }
    }

    fn task() -> Task {
        Task::new_pending("t".into(), lifo_core::Payload::new(), 0, 60, 1)
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_and_timeouts_halve_the_adaptive_limit_and_the_fixed_one_stays() {
        for (mode, expected) in [
            (Concurrency::Adaptive, [4, 2, 2]),
            (Concurrency::Fixed, [8; 3]),
        ] {
            let slots = Arc::new(Slots::new(mode, 8, None));
            let script = vec![
                (100, RunOutcome::RetryLater("HTTP 429".into())),
                (100, RunOutcome::TimedOut("timed out after 30s".into())),
                (100, RunOutcome::Failure("HTTP 500".into())),
            ];
            let r = Limited::new(Arc::new(Scripted(Mutex::new(script))), Arc::clone(&slots));
            let mut limits = Vec::new();
            for _ in 0..3 {
                r.run(&task()).await;
                limits.push(slots.limit());
            }
            assert_eq!(limits, expected, "{mode}");
            assert_eq!(slots.free(1), expected[2] - 1);
            let seen = slots.seen();
            assert_eq!(seen.latencies_ms, [100, 100, 100]);
            assert_eq!(seen.refused, 2);
            assert_eq!(
                seen.halvings,
                if mode == Concurrency::Adaptive { 2 } else { 0 }
            );
        }
    }

    #[test]
    fn the_limit_goes_through_the_handover_under_its_own_key() {
        let slots = Slots::new(Concurrency::Adaptive, 10, None);
        let mut handover = crate::select::Handover::new();
        handover.insert("fair".into(), serde_json::json!({"x": 1}));
        slots.hand_over(&mut handover);
        assert_eq!(
            handover.get(HANDOVER_KEY),
            Some(&serde_json::json!({"limit": 10.0, "unloadedAge": 0}))
        );
        let handed = Slots::handed(Some(&handover)).unwrap();
        assert_eq!(handed.limit, 10.0);
        // Fixed slots hand nothing over; a value of another shape is
        // ignored.
        let mut none = crate::select::Handover::new();
        Slots::new(Concurrency::Fixed, 10, None).hand_over(&mut none);
        assert!(none.is_empty());
        none.insert(HANDOVER_KEY.into(), serde_json::json!("seven"));
        assert_eq!(Slots::handed(Some(&none)), None);
    }

    #[test]
    fn the_setting_reads_fixed_or_adaptive() {
        assert_eq!(" Adaptive".parse(), Ok(Concurrency::Adaptive));
        assert_eq!("fixed".parse(), Ok(Concurrency::Fixed));
        assert_eq!(
            "auto".parse::<Concurrency>(),
            Err("expected fixed or adaptive, got \"auto\"".to_owned())
        );
    }
}
