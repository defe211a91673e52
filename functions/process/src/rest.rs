//! When a task that was put back may be claimed again: the rest a run's
//! outcome earns (`finish`), written as its `retryAt`.
//!
//! - A run that **failed** with attempts left rests for
//!   `base × 2^(attempt − 1)`, plus up to half of that again at random (so
//!   tasks that failed together do not come back together), and never past
//!   the task's expiry. Without it, a downstream outage burns every attempt
//!   in seconds.
//! - A run the downstream **refused as busy** ("retry later": the attempt
//!   is given back) rests for the downstream's own hint (`Retry-After`, a
//!   Lambda throttle's `retryAfterSeconds`), else for `base`, with the same
//!   jitter and cap, and no exponent: its attempt count does not grow, and
//!   a busy downstream gains nothing from an immediate retry.
//! - A busy rest is never shorter than [`MIN_BUSY_REST`] (one second),
//!   whatever the downstream asked: `Retry-After: 0`, a worker's
//!   `retryAfterSeconds: 0.001`, or a queue whose `base` is zero. One
//!   second is `Retry-After`'s own unit (RFC 9110 counts it in whole
//!   seconds), so a downstream that means "soon" gets it, while one task
//!   can never bounce more than once a second: at most
//!   ⌈TTL / 1 s⌉ + 1 requests in its life, where an unfloored 0 let one
//!   task with a 20 s TTL draw 587.
//!
//! The rest is the task's `retryAt`: the claim query skips the task until
//! then (everything else keeps its LIFO order), and the claim condition
//! refuses it. A `base` of zero turns the rest after a failure off (a
//! failure burns an attempt, so it is bounded by `MaxAttempts`).

use std::time::Duration;

/// The rests of a queue (`RetryBackoffSeconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestPolicy {
    pub base: Duration,
}

/// Longest rest before jitter, whatever the attempt: one hour (so at most
/// an hour and a half with it, and never past the task's expiry).
pub const MAX_REST: Duration = Duration::from_secs(3600);

/// Shortest rest after "retry later", whatever the hint (see the module's
/// documentation for why one second).
pub const MIN_BUSY_REST: Duration = Duration::from_secs(1);

impl RestPolicy {
    /// `retryAt` (epoch ms; 0 for none) after a failed run that was the
    /// task's `attempt`-th, at `now_ms`, for a task expiring at
    /// `expires_at` (epoch s).
    pub fn after_failure(&self, attempt: u32, now_ms: u64, expires_at: u64) -> u64 {
        let rest = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        self.rest_until(rest, now_ms, expires_at, fastrand::f64())
    }

    /// `retryAt` after the downstream answered "busy", with its `hint`:
    /// the hint, else `base`, never less than [`MIN_BUSY_REST`].
    pub fn after_busy(&self, hint: Option<Duration>, now_ms: u64, expires_at: u64) -> u64 {
        self.rest_until(
            Self::busy_rest(hint.unwrap_or(self.base)),
            now_ms,
            expires_at,
            fastrand::f64(),
        )
    }

    /// The rest a busy answer asking for `asked` gets (before jitter).
    pub fn busy_rest(asked: Duration) -> Duration {
        asked.clamp(MIN_BUSY_REST, MAX_REST)
    }

    /// `now + min(rest, MAX_REST) × (1 + jitter / 2)`, `jitter` in [0, 1),
    /// and never past the expiry.
    fn rest_until(&self, rest: Duration, now_ms: u64, expires_at: u64, jitter: f64) -> u64 {
        if rest.is_zero() {
            return 0;
        }
        let rest = rest.min(MAX_REST).as_millis() as f64 * (1.0 + jitter.clamp(0.0, 1.0) / 2.0);
        (now_ms + rest as u64).min(expires_at.saturating_mul(1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000_000;
    const LATER: u64 = NOW / 1000 + 86_400;

    #[test]
    fn failures_rest_twice_as_long_each_attempt_with_up_to_half_again() {
        let p = RestPolicy {
            base: Duration::from_secs(10),
        };
        for (attempt, rest) in [(1u32, 10_000u64), (2, 20_000), (3, 40_000)] {
            assert_eq!(
                p.rest_until(p.base * (1 << (attempt - 1)), NOW, LATER, 0.0),
                NOW + rest
            );
            assert_eq!(
                p.rest_until(p.base * (1 << (attempt - 1)), NOW, LATER, 0.999_999),
                NOW + rest * 3 / 2 - 1
            );
            let drawn = p.after_failure(attempt, NOW, LATER);
            assert!(
                (NOW + rest..NOW + rest * 3 / 2).contains(&drawn),
                "{attempt}: {drawn}"
            );
        }
        // Capped by the expiry and by an hour.
        assert_eq!(p.after_failure(3, NOW, NOW / 1000 + 5), NOW + 5_000);
        assert!(p.after_failure(30, NOW, LATER) <= NOW + 5_400_000);
    }

    #[test]
    fn busy_rests_for_the_hint_or_the_base_and_zero_is_off() {
        let p = RestPolicy {
            base: Duration::from_secs(2),
        };
        let hinted = p.after_busy(Some(Duration::from_secs(30)), NOW, LATER);
        assert!((NOW + 30_000..NOW + 45_000).contains(&hinted));
        let plain = p.after_busy(None, NOW, LATER);
        assert!((NOW + 2_000..NOW + 3_000).contains(&plain));
        let off = RestPolicy::default();
        assert_eq!(off.after_failure(2, NOW, LATER), 0);
        assert!(off.after_busy(Some(Duration::from_secs(1)), NOW, LATER) >= NOW + 1_000);
    }

    /// A hint of 0, a millisecond, or none on a queue whose base is 0
    /// still rests a second (and at most half again); a huge one an hour.
    #[test]
    fn a_busy_rest_is_never_shorter_than_the_floor() {
        for base in [Duration::ZERO, Duration::from_secs(10)] {
            let p = RestPolicy { base };
            for hint in [
                Some(Duration::ZERO),
                Some(Duration::from_millis(1)),
                Some(Duration::from_millis(999)),
            ] {
                let at = p.after_busy(hint, NOW, LATER);
                assert!(
                    (NOW + 1_000..NOW + 1_500).contains(&at),
                    "{base:?} {hint:?}: {at}"
                );
            }
            let huge = p.after_busy(Some(Duration::from_secs(u64::MAX / 4)), NOW, LATER);
            assert!((NOW + 3_600_000..=NOW + 5_400_000).contains(&huge));
        }
        let off = RestPolicy::default().after_busy(None, NOW, LATER);
        assert!((NOW + 1_000..NOW + 1_500).contains(&off));
        // Never past the expiry, floor or not.
        assert_eq!(
            RestPolicy::default().after_busy(Some(Duration::ZERO), NOW, NOW / 1000),
            NOW / 1000 * 1000
        );
        assert_eq!(RestPolicy::busy_rest(Duration::ZERO), MIN_BUSY_REST);
        assert_eq!(
            RestPolicy::busy_rest(Duration::from_secs(30)),
            Duration::from_secs(30)
        );
    }
}
