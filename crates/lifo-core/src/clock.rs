//! The handlers' clock, injectable (issue 53, item 2): epoch milliseconds
//! and a monotonic [`tokio::time::Instant`] from one place, so that a
//! simulation can run them in virtual time.
//!
//! Tokio's paused clock (`#[tokio::test(start_paused = true)]`,
//! `tokio::time::pause`) moves `tokio::time::Instant` on whenever every task
//! waits on a timer; `SystemTime` and `std::time::Instant` do not follow it.
//! [`TokioClock`] derives its epoch milliseconds from tokio's instant, so
//! both follow the paused clock; [`SystemClock`], the handlers' default,
//! reads the system's time as before.

use std::fmt::Debug;
use std::sync::Arc;

/// The clock's instant: tokio's, which a paused runtime controls.
pub type Instant = tokio::time::Instant;

/// Where a handler reads the time.
pub trait Clock: Send + Sync + Debug {
    /// Epoch milliseconds.
    fn now_ms(&self) -> u64;
    /// A monotonic instant (tokio's, which a paused runtime controls).
    fn instant(&self) -> Instant;
}

/// A clock to share between a handler's parts.
pub type SharedClock = Arc<dyn Clock>;

/// The system's time (what the handlers read in AWS).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// Milliseconds since the Unix epoch, by the system's clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn instant(&self) -> Instant {
        tokio::time::Instant::now()
    }
}

/// Time as tokio's clock tells it, from an epoch millisecond chosen at its
/// start: under a paused runtime, virtual time.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    start_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock that reads `start_ms` now (call it inside the runtime).
    pub fn starting_at(start_ms: u64) -> Self {
        Self {
            start_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.start_ms.saturating_add(elapsed)
    }

    fn instant(&self) -> Instant {
        tokio::time::Instant::now()
    }
}

/// The default clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Under a paused runtime, a minute passes in no time: the tokio clock's
    /// epoch milliseconds and instant move by it; the system's do not.
    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_follows_a_paused_runtime() {
        let wall = std::time::Instant::now();
        let clock = TokioClock::starting_at(1_800_000_000_000);
        let system = SystemClock;
        let (start, system_start) = (clock.instant(), system.now_ms());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(clock.now_ms(), 1_800_000_060_000);
        assert_eq!(clock.instant() - start, Duration::from_secs(60));
        assert!(system.now_ms() - system_start < 60_000);
        assert!(wall.elapsed() < Duration::from_secs(30), "no real minute");
    }
}
