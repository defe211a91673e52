//! What AWS does between the functions, which no emulator does: how often
//! Lambda reads a stream, how long SNS takes to hand a message to Lambda,
//! a new instance's start, and Lambda's asynchronous queue under reserved
//! concurrency (throttles retried with growing gaps until the event is too
//! old). Every value the local pipeline models is here, with the AWS page
//! it comes from; a value AWS does not document is marked **guess**.
//!
//! And the account, region and credentials the local stack stands for.
//!
//! What the template decides (batch size, batching window, sweep rate,
//! timeouts, reserved concurrency, event age) is read from template.yaml
//! by [`crate::pipeline`], never written here.

use aws_credential_types::Credentials;
use std::time::Duration;

/// The region and account the local stack's ARNs name.
pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "000000000000";

/// The local stack's credentials: every local client signs with them, and
/// the local API Gateway ([`crate::api_gateway`]) knows them.
pub fn credentials() -> Credentials {
    Credentials::new("local", "local", None, None, "lifo-local")
}

/// The modelled timings. [`AwsTiming::default`] is AWS; a test may shorten
/// them through [`AwsTiming::fast`], explicitly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AwsTiming {
    /// How often Lambda polls each shard of a DynamoDB stream: "at a base
    /// rate of 4 times per second"
    /// (<https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html>).
    pub stream_poll: Duration,
    /// From an SNS publish to the Lambda service invoking the subscribed
    /// function (delivery, plus Lambda's asynchronous queue). **Guess**:
    /// SNS and Lambda document no figure; tens of milliseconds are
    /// commonly reported, 100 ms is the pessimistic side of that.
    pub sns_to_lambda: Duration,
    /// A new instance's start before our handler runs: the sandbox and the
    /// `provided.al2023` bootstrap. **Guess** for the platform's share
    /// (Lambda reports only the runtime's "Init Duration"); our binaries'
    /// own init, from exec to their first request for an event, is
    /// measured by `lifo bench --only cold-start` (≈ 10 ms).
    pub cold_start: Duration,
    /// How long an idle instance stays warm. **Guess**: AWS documents no
    /// figure; five minutes is a common observation.
    pub keep_warm: Duration,
    /// A throttled asynchronous event is retried "from 1 second after the
    /// first attempt", the gap growing "exponentially … to a maximum of 5
    /// minutes", for up to the function's `MaximumEventAgeInSeconds`
    /// (<https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html>).
    pub throttle_first_retry: Duration,
    pub throttle_max_gap: Duration,
    /// A function error is retried "two more times, with a one-minute wait
    /// between the first two attempts, and two minutes between the second
    /// and third" (same page), as many as `MaximumRetryAttempts` allows.
    pub error_retry_gaps: [Duration; 2],
}

impl Default for AwsTiming {
    fn default() -> Self {
        Self {
            stream_poll: Duration::from_millis(250),
            sns_to_lambda: Duration::from_millis(100),
            cold_start: Duration::from_millis(150),
            keep_warm: Duration::from_secs(300),
            throttle_first_retry: Duration::from_secs(1),
            throttle_max_gap: Duration::from_secs(300),
            error_retry_gaps: [Duration::from_secs(60), Duration::from_secs(120)],
        }
    }
}

impl AwsTiming {
    /// Shorter than AWS, for tests that say so: fast polls, no delivery
    /// delay or cold start, short retries.
    pub fn fast() -> Self {
        Self {
            stream_poll: Duration::from_millis(50),
            sns_to_lambda: Duration::ZERO,
            cold_start: Duration::ZERO,
            keep_warm: Duration::from_secs(300),
            throttle_first_retry: Duration::from_millis(200),
            throttle_max_gap: Duration::from_secs(2),
            error_retry_gaps: [Duration::from_millis(500), Duration::from_secs(1)],
        }
    }

    /// The gap before throttled attempt `n` (1, 2, …) is retried: 1 s, 2 s,
    /// 4 s, … at most [`AwsTiming::throttle_max_gap`].
    pub fn throttle_gap(&self, n: u32) -> Duration {
        self.throttle_first_retry
            .saturating_mul(1u32 << n.saturating_sub(1).min(20))
            .min(self.throttle_max_gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_events_are_retried_after_1_s_then_doubling_up_to_5_minutes() {
        let t = AwsTiming::default();
        let gaps: Vec<u64> = (1..=11).map(|n| t.throttle_gap(n).as_secs()).collect();
        assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(
            t.stream_poll,
            Duration::from_millis(250),
            "4 polls a second"
        );
    }
}
