//! Settings of the process function, from its environment.

use crate::rest::RestPolicy;
use crate::runner::Concurrency;
use crate::select::Tuning;
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
    /// Runs in flight (`RUNNER_CONCURRENCY`): always `RunnerMaxConcurrency`
    /// (`fixed`), or the adaptive limit under it (`adaptive`,
    /// [`crate::runner::limit`]).
    pub concurrency: Concurrency,
    /// The settings changed to work together ([`Clamp`]).
    pub clamps: Vec<Clamp>,
    /// The claim policy's and the claim loop's constants: always
    /// [`Tuning::default`] as deployed (never read from the environment);
    /// the lab changes one to measure what it does (`lifo simulate
    /// --constants`).
    pub tuning: Tuning,
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
            concurrency: Concurrency::Fixed,
            clamps: Vec::new(),
            tuning: Tuning::default(),
        }
    }

    /// The settings in `src`. Relations between settings that the template
    /// cannot enforce (CloudFormation's rules compare no numbers) are
    /// settled here, never refused: see [`Clamp`].
    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        let shard_count = config::shard_count(src)?;
        let processors = config::processor_count(src)?;
        let rate_limit = RateLimit::from_source(src)?;
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
        if tenant_max_in_flight.is_some() && !fair_share {
            // The template's rule TenantCapNeedsTheFairShare refuses this.
            return Err(ConfigError::Invalid {
                name: "TENANT_MAX_IN_FLIGHT",
                value: tenant_max_in_flight.map_or(0, NonZeroU32::get).to_string(),
                reason: "needs FAIR_SHARE=true: the cap is the fair share's".to_owned(),
            });
        }
        let mut clamps = Vec::new();
        let mut processors = processors;
        // Each processor takes whole shards, at least one start a second of
        // the rate and at least one slot of the tenant cap: fewer
        // processors keep every limit as given.
        for (because, limit) in [
            ("SHARD_COUNT", Some(shard_count)),
            (
                "RUNNER_MAX_PER_SECOND",
                rate_limit.map(|r| r.per_second.get()),
            ),
            (
                "TENANT_MAX_IN_FLIGHT",
                tenant_max_in_flight.map(NonZeroU32::get),
            ),
        ] {
            if let Some(limit) = limit.filter(|l| *l < processors) {
                clamps.push(Clamp::processors(processors, limit, because));
                processors = limit;
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
            concurrency: config::value(src, "RUNNER_CONCURRENCY", d.concurrency)?,
            clamps,
            ..d
        })
    }
}

impl ProcessConfig {
    /// Fits the processors to a runner of `capacity` slots (each processor
    /// runs an even share, at least one task), then the burst to the
    /// processors (each takes at least one start of it): what cannot work
    /// as given is clamped and recorded in [`ProcessConfig::clamps`].
    pub fn fit_capacity(mut self, capacity: usize) -> Self {
        let capacity = u32::try_from(capacity.max(1)).unwrap_or(u32::MAX);
        if capacity < self.processors {
            self.clamps.push(Clamp::processors(
                self.processors,
                capacity,
                "RUNNER_MAX_CONCURRENCY",
            ));
            self.processors = capacity;
        }
        if let Some(limit) = &mut self.rate_limit
            && limit.burst.get() < self.processors
        {
            self.clamps.push(Clamp {
                name: "RUNNER_BURST",
                asked: limit.burst.get(),
                used: self.processors,
                because: "PROCESSOR_COUNT",
            });
            limit.burst = NonZeroU32::new(self.processors).unwrap_or(NonZeroU32::MIN);
        }
        self
    }

    /// Logs each clamp once (at a cold start): the setting, the one it
    /// conflicts with, and the value used.
    pub fn log_clamps(&self) {
        for c in &self.clamps {
            tracing::warn!(
                event = "process.setting_clamped",
                setting = c.name,
                parameter = parameter_of(c.name),
                asked = c.asked,
                used = c.used,
                because = c.because,
                becauseParameter = parameter_of(c.because),
                "{c}"
            );
        }
    }
}

/// A setting that process changed because, as given, it cannot work with
/// another one, where the template could not refuse the pair.
/// `ProcessorCount` comes down to `ShardCount`, `RunnerMaxPerSecond`,
/// `TenantMaxInFlight` and the runner's capacity (fewer processors keep
/// every limit); `RunnerBurst` goes up to the processors (each processor
/// needs one start of it). Logged once per cold start and counted in the
/// `SettingsClamped` metric (`SettingsClampedAlarm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clamp {
    /// The environment variable changed.
    pub name: &'static str,
    pub asked: u32,
    pub used: u32,
    /// The environment variable it conflicts with.
    pub because: &'static str,
}

impl Clamp {
    fn processors(asked: u32, used: u32, because: &'static str) -> Self {
        Self {
            name: "PROCESSOR_COUNT",
            asked,
            used,
            because,
        }
    }
}

impl std::fmt::Display for Clamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let relation = if self.used < self.asked {
            "at most"
        } else {
            "at least"
        };
        write!(
            f,
            "{} ({}) {} is used as {}: it must be {relation} {} ({})",
            parameter_of(self.name),
            self.name,
            self.asked,
            self.used,
            parameter_of(self.because),
            self.because,
        )
    }
}

/// The template parameter behind an environment variable.
fn parameter_of(name: &str) -> &'static str {
    match name {
        "PROCESSOR_COUNT" => "ProcessorCount",
        "SHARD_COUNT" => "ShardCount",
        "RUNNER_MAX_PER_SECOND" => "RunnerMaxPerSecond",
        "RUNNER_BURST" => "RunnerBurst",
        "TENANT_MAX_IN_FLIGHT" => "TenantMaxInFlight",
        "RUNNER_MAX_CONCURRENCY" => "RunnerMaxConcurrency",
        _ => "?",
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
    fn runner_concurrency_is_fixed_or_adaptive_and_a_bad_value_is_named() {
        let on = ProcessConfig::from_source(&env(&[("RUNNER_CONCURRENCY", "adaptive")])).unwrap();
        assert_eq!(on.concurrency, Concurrency::Adaptive);
        let err = ProcessConfig::from_source(&env(&[("RUNNER_CONCURRENCY", "auto")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable RUNNER_CONCURRENCY=\"auto\" is invalid: \
             expected fixed or adaptive, got \"auto\""
        );
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
    }

    /// The relations CloudFormation cannot check are clamped, not refused
    /// (a refusal would fail every invocation of a deployed stack): fewer
    /// processors, or a larger burst, each recorded.
    #[test]
    fn settings_that_cannot_work_together_are_clamped_and_recorded() {
        let three = [("SHARD_COUNT", "8"), ("PROCESSOR_COUNT", "3")];
        let config = ProcessConfig::from_source(&env(&three)).unwrap();
        assert_eq!((config.processors, config.clamps.len()), (3, 0));
        let fitted = config.clone().fit_capacity(3);
        assert_eq!((fitted.processors, fitted.clamps.len()), (3, 0));
        let fitted = config.fit_capacity(2);
        assert_eq!(fitted.processors, 2);
        assert_eq!(
            fitted.clamps[0].to_string(),
            "ProcessorCount (PROCESSOR_COUNT) 3 is used as 2: \
             it must be at most RunnerMaxConcurrency (RUNNER_MAX_CONCURRENCY)"
        );

        let few_shards = [("SHARD_COUNT", "2"), ("PROCESSOR_COUNT", "3")];
        let config = ProcessConfig::from_source(&env(&few_shards)).unwrap();
        assert_eq!(config.processors, 2);
        assert_eq!(config.clamps, vec![Clamp::processors(3, 2, "SHARD_COUNT")]);

        let cap = [three[0], three[1], ("TENANT_MAX_IN_FLIGHT", "2")];
        let config = ProcessConfig::from_source(&env(&cap)).unwrap();
        assert_eq!(config.processors, 2);
        assert_eq!(config.tenant_max_in_flight, NonZeroU32::new(2));
        assert_eq!(
            config.clamps,
            vec![Clamp::processors(3, 2, "TENANT_MAX_IN_FLIGHT")]
        );

        // A rate under the processors: fewer processors; a burst under
        // them: a larger burst, after the processors are known.
        let rate = [three[0], three[1], ("RUNNER_MAX_PER_SECOND", "2")];
        let config = ProcessConfig::from_source(&env(&rate))
            .unwrap()
            .fit_capacity(10);
        assert_eq!(config.processors, 2);
        let limit = config.rate_limit.unwrap();
        assert_eq!((limit.per_second.get(), limit.burst.get()), (2, 2));
        assert_eq!(
            config.clamps,
            vec![
                Clamp::processors(3, 2, "RUNNER_MAX_PER_SECOND"),
                Clamp {
                    name: "RUNNER_BURST",
                    asked: 1,
                    used: 2,
                    because: "PROCESSOR_COUNT"
                }
            ]
        );
        let rate = [
            three[0],
            three[1],
            ("RUNNER_MAX_PER_SECOND", "10"),
            ("RUNNER_BURST", "3"),
        ];
        let config = ProcessConfig::from_source(&env(&rate))
            .unwrap()
            .fit_capacity(3);
        assert_eq!((config.processors, config.clamps.len()), (3, 0));
    }
}
