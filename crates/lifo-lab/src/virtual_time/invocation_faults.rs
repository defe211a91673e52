//! The functions' faults for a chaos run in virtual time
//! ([`super::chaos`]), drawn from the run's seed: process invocations cut
//! short (the handler's future dropped at a random point, as Lambda's
//! timeout or a crash ends it: its claims' leases must run out) and SNS
//! messages delivered twice (SNS delivers at least once).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How many faults the functions met, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InvocationFaultCounts {
    /// Process invocations cut short.
    pub cut_short: u64,
    /// SNS messages delivered twice.
    pub duplicated: u64,
    /// The most process invocations that ran at once (not a fault: what
    /// the run did).
    pub most_at_once: u64,
}

/// Process invocations cut short, SNS deliveries made twice (see the
/// module's documentation).
#[derive(Debug)]
pub struct InvocationFaults {
    /// An invocation is cut short with this probability …
    cut_rate: f64,
    /// … at a point drawn uniformly in `[0, cut_within)`.
    cut_within: Duration,
    /// A delivery is made twice with this probability.
    duplicate_rate: f64,
    rng: Mutex<fastrand::Rng>,
    cut_short: AtomicU64,
    duplicated: AtomicU64,
    at_once: AtomicU64,
    most_at_once: AtomicU64,
}

/// A process invocation running ([`InvocationFaults::enter`]), until dropped.
pub struct Running<'a>(&'a InvocationFaults);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.at_once.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InvocationFaults {
    pub fn new(cut_rate: f64, cut_within: Duration, duplicate_rate: f64, seed: u64) -> Self {
        Self {
            cut_rate,
            cut_within,
            duplicate_rate,
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            cut_short: AtomicU64::new(0),
            duplicated: AtomicU64::new(0),
            at_once: AtomicU64::new(0),
            most_at_once: AtomicU64::new(0),
        }
    }

    /// Counts a process invocation as running until the guard drops.
    pub fn enter(&self) -> Running<'_> {
        let now = self.at_once.fetch_add(1, Ordering::Relaxed) + 1;
        self.most_at_once.fetch_max(now, Ordering::Relaxed);
        Running(self)
    }

    fn rng(&self) -> std::sync::MutexGuard<'_, fastrand::Rng> {
        self.rng.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When this invocation ends at the latest: its `timeout`, or a crash
    /// before it.
    pub fn cut(&self, timeout: Duration) -> Duration {
        let mut rng = self.rng();
        if rng.f64() >= self.cut_rate {
            return timeout;
        }
        let ms = self.cut_within.as_millis().max(1) as u64;
        Duration::from_millis(rng.u64(0..ms)).min(timeout)
    }

    /// Counts an invocation that its cut ended.
    pub fn count_cut(&self) {
        self.cut_short.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether this delivery is made twice.
    pub fn duplicate(&self) -> bool {
        let twice = self.rng().f64() < self.duplicate_rate;
        if twice {
            self.duplicated.fetch_add(1, Ordering::Relaxed);
        }
        twice
    }

    pub fn injected(&self) -> InvocationFaultCounts {
        InvocationFaultCounts {
            cut_short: self.cut_short.load(Ordering::Relaxed),
            duplicated: self.duplicated.load(Ordering::Relaxed),
            most_at_once: self.most_at_once.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half the invocations cut short, each within its bound; duplicates
    /// at their rate; the same seed, the same draws.
    #[test]
    fn invocation_faults_are_drawn_from_the_seed() {
        let draws = |seed| {
            let f = InvocationFaults::new(0.5, Duration::from_secs(10), 0.25, seed);
            let cuts: Vec<Duration> = (0..400).map(|_| f.cut(Duration::from_secs(900))).collect();
            let twice: Vec<bool> = (0..400).map(|_| f.duplicate()).collect();
            (cuts, twice, f.injected())
        };
        let (cuts, twice, counts) = draws(5);
        let short = cuts
            .iter()
            .filter(|c| **c < Duration::from_secs(10))
            .count();
        assert!((150..250).contains(&short), "{short} cut short");
        assert!(
            cuts.iter()
                .all(|c| *c < Duration::from_secs(10) || *c == Duration::from_secs(900))
        );
        assert_eq!(
            counts.duplicated as usize,
            twice.iter().filter(|t| **t).count()
        );
        assert!((60..140).contains(&counts.duplicated), "{counts:?}");
        assert_eq!(draws(5).0, cuts);
        assert_ne!(draws(6).0, cuts);
    }
}
