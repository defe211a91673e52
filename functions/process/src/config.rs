//! Settings of the process function, from its environment.

use crate::select::rest::RestPolicy;
use lifo_core::Order;
use lifo_lambda::config::{self, ConfigError, Source};
use std::num::NonZeroU32;
use std::time::Duration;

/// Settings of the process function.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessConfig {
    pub table_name: String,
    pub trigger_topic_arn: String,
    pub shard_count: u32,
    pub max_ttl_seconds: u64,
    /// Stop claiming after this long.
    pub time_budget: Duration,
    /// Safety margin kept before the invocation deadline.
    pub deadline_margin: Duration,
    /// How long to wait before looking again when tasks are running but no
    /// new claimable task was found.
    pub idle_poll: Duration,
    /// How long an invocation keeps looking (every `idle_poll`) once it
    /// found nothing to claim and nothing runs, before it ends: a wake-up
    /// can arrive a moment before its task is visible in the index (GSIs
    /// are updated asynchronously), and a task created while the processor
    /// is about to end would otherwise wait for a throttled wake-up's
    /// retry.
    pub linger: Duration,
    /// How often a running invocation reads the control item (paused or
    /// not). Each read is one eventually consistent GetItem (0.5 read
    /// units): 6 read units a minute at the default 5 s.
    pub pause_poll: Duration,
    /// Claims a task may get; errors burn one, "retry later" does not.
    pub max_attempts: u32,
    /// How long a task put back rests before it is claimable again
    /// (`RETRY_BACKOFF_SECONDS`, doubling per failed attempt).
    pub rest: RestPolicy,
    /// The downstream's rate limit: at most this many tasks started per
    /// second (`RUNNER_MAX_PER_SECOND`; `None`: no limit), with this burst
    /// (`RUNNER_BURST`): in any one second, at most rate + burst start.
    pub rate_limit: Option<RateLimit>,
    /// Added to the invocation deadline to form the lease end (clock skew
    /// between hosts).
    pub lease_margin: Duration,
    /// Processors claiming at once (`PROCESSOR_COUNT`, the function's
    /// reserved concurrency): each takes a shard group. At most the shard
    /// count and the runner's concurrency.
    pub processors: u32,
    /// Which claimable tasks go first (`SELECTION_ORDER`): newest first
    /// (the default); `adaptive`, newest first but a task near its
    /// deadline that can still start first (`select::deadline`); `fifo`,
    /// to compare the same pipeline as a FIFO queue (`lifo simulate
    /// --compare`).
    pub order: Order,
    /// A fair share per tenant (`FAIR_SHARE`, default on): when several
    /// tenants have work, those served less lately go first, and one past
    /// its share of the rate limit last ([`crate::select::fair`]).
    pub fair_share: bool,
    /// The opt-in per-tenant cap (`TENANT_MAX_IN_FLIGHT`; unset or 0:
    /// none): a tenant never holds more of the runner's slots than this,
    /// nor more than the same fraction of the rate limit, even when slots
    /// are free ([`crate::select::fair::Cap`]). Needs the fair share.
    pub tenant_max_in_flight: Option<NonZeroU32>,
}

impl ProcessConfig {
    /// The defaults (the template's), for `table_name` and the topic the
    /// processor tail-calls through.
    pub fn new(table_name: impl Into<String>, trigger_topic_arn: impl Into<String>) -> Self {
        Self {
            table_name: table_name.into(),
            trigger_topic_arn: trigger_topic_arn.into(),
            shard_count: 1,
            max_ttl_seconds: 604_800,
            time_budget: Duration::from_secs(60),
            deadline_margin: Duration::from_secs(2),
            idle_poll: Duration::from_millis(250),
            linger: Duration::from_secs(1),
            pause_poll: Duration::from_secs(5),
            max_attempts: 3,
            rest: RestPolicy {
                base: Duration::from_secs(10),
            },
            rate_limit: None,
            lease_margin: Duration::from_secs(2),
            processors: 1,
            order: Order::Lifo,
            fair_share: true,
            tenant_max_in_flight: None,
        }
    }

    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        let shard_count = config::shard_count(src)?;
        let processors = config::processor_count(src)?;
        if processors > shard_count {
            return Err(ConfigError::Invalid {
                name: "PROCESSOR_COUNT",
                value: processors.to_string(),
                reason: format!(
                    "must be at most SHARD_COUNT ({shard_count}): each processor takes whole shards"
                ),
            });
        }
        let rate_limit = RateLimit::from_source(src)?;
        if let Some(limit) = rate_limit {
            // Each processor gets a share of the rate and of the burst, at
            // least one of each: fewer than one per processor would add up
            // to more than was asked for.
            for (name, value) in [
                ("RUNNER_MAX_PER_SECOND", limit.per_second.get()),
                ("RUNNER_BURST", limit.burst.get()),
            ] {
                if value < processors {
                    return Err(ConfigError::Invalid {
                        name,
                        value: value.to_string(),
                        reason: format!(
                            "must be at least PROCESSOR_COUNT ({processors}): \
                             each processor takes an even share"
                        ),
                    });
                }
            }
        }
        // The defaults are `new()`'s, held once.
        let d = Self::new(
            config::required(src, "TABLE_NAME")?,
            config::required(src, "TRIGGER_TOPIC_ARN")?,
        );
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let fair_share = config::value(src, "FAIR_SHARE", d.fair_share)?;
        let tenant_max_in_flight = NonZeroU32::new(config::parsed(
            src,
            "TENANT_MAX_IN_FLIGHT",
            0u32,
            0..=10_000,
        )?);
        if let Some(cap) = tenant_max_in_flight {
            let reason = if !fair_share {
                Some("needs FAIR_SHARE=true: the cap is the fair share's".to_owned())
            } else if cap.get() < processors {
                Some(format!(
                    "must be at least PROCESSOR_COUNT ({processors}): each processor takes an even share"
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(ConfigError::Invalid {
                    name: "TENANT_MAX_IN_FLIGHT",
                    value: cap.to_string(),
                    reason,
                });
            }
        }
        Ok(Self {
            shard_count,
            processors,
            max_ttl_seconds: config::max_ttl_seconds(src)?,
            time_budget: Duration::from_secs(config::parsed(
                src,
                "TIME_BUDGET_SECONDS",
                d.time_budget.as_secs(),
                1..=900,
            )?),
            deadline_margin: config::millis(
                src,
                "DEADLINE_MARGIN_MS",
                ms(d.deadline_margin),
                0..=60_000,
            )?,
            idle_poll: config::millis(src, "IDLE_POLL_MS", ms(d.idle_poll), 10..=10_000)?,
            linger: config::millis(src, "LINGER_MS", ms(d.linger), 0..=60_000)?,
            pause_poll: config::millis(src, "PAUSE_POLL_MS", ms(d.pause_poll), 100..=60_000)?,
            max_attempts: config::parsed(src, "MAX_ATTEMPTS", d.max_attempts, 1..=100)?,
            rest: RestPolicy {
                base: Duration::from_secs(config::parsed(
                    src,
                    "RETRY_BACKOFF_SECONDS",
                    d.rest.base.as_secs(),
                    0..=3600,
                )?),
            },
            rate_limit,
            lease_margin: config::millis(src, "LEASE_MARGIN_MS", ms(d.lease_margin), 0..=60_000)?,
            order: config::value(src, "SELECTION_ORDER", d.order)?,
            fair_share,
            tenant_max_in_flight,
            ..d
        })
    }
}

impl ProcessConfig {
    /// Refuses a runner with fewer slots than processors: each processor
    /// runs an even share of `capacity`, at least one task.
    pub fn check_capacity(&self, capacity: usize) -> Result<(), ConfigError> {
        if capacity < self.processors as usize {
            return Err(ConfigError::Invalid {
                name: "RUNNER_MAX_CONCURRENCY",
                value: capacity.to_string(),
                reason: format!(
                    "must be at least PROCESSOR_COUNT ({}): each processor takes an even share",
                    self.processors
                ),
            });
        }
        Ok(())
    }
}

/// A downstream's rate limit (a GCRA token bucket, `governor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: NonZeroU32,
    pub burst: NonZeroU32,
}

impl RateLimit {
    /// `RUNNER_MAX_PER_SECOND` (0 = off, up to 10000) and `RUNNER_BURST`
    /// (1 to 1000, default 1).
    pub fn from_source(src: &impl Source) -> Result<Option<Self>, ConfigError> {
        let per_second: u32 = config::parsed(src, "RUNNER_MAX_PER_SECOND", 0u32, 0..=10_000)?;
        let burst: u32 = config::parsed(src, "RUNNER_BURST", 1u32, 1..=1000)?;
        Ok(NonZeroU32::new(per_second).map(|per_second| Self {
            per_second,
            burst: NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(extra: &[(&str, &str)]) -> HashMap<String, String> {
        [("TABLE_NAME", "Q"), ("TRIGGER_TOPIC_ARN", "arn:t")]
            .iter()
            .chain(extra)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn unset_settings_are_the_defaults_of_new() {
        assert_eq!(
            ProcessConfig::from_source(&env(&[])).unwrap(),
            ProcessConfig::new("Q", "arn:t")
        );
        let fifo = ProcessConfig::from_source(&env(&[("SELECTION_ORDER", "fifo")])).unwrap();
        assert_eq!(fifo.order, Order::Fifo);
    }

    #[test]
    fn the_tenant_cap_is_opt_in_and_needs_the_fair_share() {
        let off = ProcessConfig::from_source(&env(&[("TENANT_MAX_IN_FLIGHT", "0")])).unwrap();
        assert_eq!(off.tenant_max_in_flight, None);
        let on = ProcessConfig::from_source(&env(&[("TENANT_MAX_IN_FLIGHT", "4")])).unwrap();
        assert_eq!(on.tenant_max_in_flight, NonZeroU32::new(4));
        let err = ProcessConfig::from_source(&env(&[
            ("TENANT_MAX_IN_FLIGHT", "4"),
            ("FAIR_SHARE", "false"),
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable TENANT_MAX_IN_FLIGHT=\"4\" is invalid: \
             needs FAIR_SHARE=true: the cap is the fair share's"
        );
        let err = ProcessConfig::from_source(&env(&[
            ("TENANT_MAX_IN_FLIGHT", "2"),
            ("SHARD_COUNT", "4"),
            ("PROCESSOR_COUNT", "3"),
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains(
                "TENANT_MAX_IN_FLIGHT=\"2\" is invalid: must be at least PROCESSOR_COUNT (3)"
            ),
            "{err}"
        );
    }

    #[test]
    fn processors_need_whole_shards_and_a_share_of_the_runner() {
        let three = [("SHARD_COUNT", "8"), ("PROCESSOR_COUNT", "3")];
        let config = ProcessConfig::from_source(&env(&three)).unwrap();
        assert_eq!(config.processors, 3);
        assert!(config.check_capacity(3).is_ok());
        assert_eq!(
            config.check_capacity(2).unwrap_err().to_string(),
            "environment variable RUNNER_MAX_CONCURRENCY=\"2\" is invalid: \
             must be at least PROCESSOR_COUNT (3): each processor takes an even share"
        );
        let few_shards = [("SHARD_COUNT", "2"), ("PROCESSOR_COUNT", "3")];
        let err = ProcessConfig::from_source(&env(&few_shards)).unwrap_err();
        assert!(
            err.to_string()
                .contains("PROCESSOR_COUNT=\"3\" is invalid: must be at most SHARD_COUNT (2)"),
            "{err}"
        );
        let rate = [three[0], three[1], ("RUNNER_MAX_PER_SECOND", "10")];
        let err = ProcessConfig::from_source(&env(&rate)).unwrap_err();
        assert!(
            err.to_string()
                .contains("RUNNER_BURST=\"1\" is invalid: must be at least PROCESSOR_COUNT (3)"),
            "{err}"
        );
        let rate = [
            three[0],
            three[1],
            ("RUNNER_MAX_PER_SECOND", "2"),
            ("RUNNER_BURST", "3"),
        ];
        let err = ProcessConfig::from_source(&env(&rate)).unwrap_err();
        assert!(
            err.to_string()
                .contains("RUNNER_MAX_PER_SECOND=\"2\" is invalid"),
            "{err}"
        );
        let rate = [
            three[0],
            three[1],
            ("RUNNER_MAX_PER_SECOND", "10"),
            ("RUNNER_BURST", "3"),
        ];
        assert!(
            ProcessConfig::from_source(&env(&rate))
                .unwrap()
                .rate_limit
                .is_some()
        );
    }
}
