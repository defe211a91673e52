//! The downstream's pacing flags, shared by `lifo local up` and `lifo simulate`.

/// The downstream's pacing, as the template's RunnerMaxPerSecond, RunnerBurst,
/// RetryBackoffSeconds and TenantMaxInFlight set it in AWS.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Pacing {
    /// Tasks started per second at most (0: no limit).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub rate_limit: u32,
    /// Starts allowed above the rate at once: in any second, at most rate + burst start.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub burst: u32,
    /// Seconds a failed task rests before its next attempt (doubling per attempt; 0: off).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub retry_backoff: u64,
    /// Most of the runner's slots one tenant may hold (and the same fraction of the rate
    /// limit), even when slots are free (0: no cap).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub tenant_max_in_flight: u32,
}

impl Pacing {
    pub fn rate_limit(&self) -> Option<process::RateLimit> {
        Some(process::RateLimit {
            per_second: std::num::NonZeroU32::new(self.rate_limit)?,
            burst: std::num::NonZeroU32::new(self.burst)?,
        })
    }

    pub fn tenant_max_in_flight(&self) -> Option<std::num::NonZeroU32> {
        std::num::NonZeroU32::new(self.tenant_max_in_flight)
    }
}
