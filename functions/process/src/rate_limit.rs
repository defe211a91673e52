//! `RunnerMaxPerSecond`'s limiter: governor's GCRA on tokio's clock, so
//! that a simulation's paused clock moves it as it moves everything else
//! the handler reads (governor's default clock is the system's, which a
//! paused runtime does not move).

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use std::num::NonZeroU32;
use std::time::Duration;

/// governor's clock over [`tokio::time::Instant`]: nanoseconds since the
/// limiter was made.
#[derive(Debug, Clone)]
pub(crate) struct TokioTime {
    origin: tokio::time::Instant,
}

impl Clock for TokioTime {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

/// A limiter of starts, one per shard group.
pub(crate) type Limiter =
    governor::RateLimiter<NotKeyed, InMemoryState, TokioTime, NoOpMiddleware<Nanos>>;

/// A limiter of `per_second` starts with bursts of `burst`.
pub(crate) fn limiter(per_second: u32, burst: u32) -> Limiter {
    let quota = governor::Quota::per_second(NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
    governor::RateLimiter::direct_with_clock(
        quota,
        TokioTime {
            origin: tokio::time::Instant::now(),
        },
    )
}

/// Takes one start from `limiter`: `Ok` (or no limit), or how long until
/// one is free.
pub(crate) fn take_start(limiter: Option<&Limiter>) -> Result<(), Duration> {
    let Some(limiter) = limiter else {
        return Ok(());
    };
    limiter
        .check()
        .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 starts a second, bursts of 2: two now, the third in half a second
    /// of tokio's paused clock, which the system's clock never sees pass.
    #[tokio::test(start_paused = true)]
    async fn the_limit_follows_tokios_clock() {
        let l = limiter(2, 2);
        assert_eq!(take_start(Some(&l)), Ok(()));
        assert_eq!(take_start(Some(&l)), Ok(()));
        assert_eq!(take_start(Some(&l)), Err(Duration::from_millis(500)));
        tokio::time::sleep(Duration::from_millis(499)).await;
        assert_eq!(take_start(Some(&l)), Err(Duration::from_millis(1)));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(take_start(Some(&l)), Ok(()));
        assert_eq!(take_start(None), Ok(()));
    }
}
