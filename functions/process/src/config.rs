//! Settings of the process function, from its environment.

use lifo_core::Order;
use lifo_core::config::{self, ConfigError, Source};
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
    /// How often a running invocation reads the control item (paused or
    /// not). Each read is one eventually consistent GetItem (0.5 read
    /// units): 6 read units a minute at the default 5 s.
    pub pause_poll: Duration,
    /// Claims a task may get; errors burn one, "retry later" does not.
    pub max_attempts: u32,
    /// Added to the invocation deadline to form the lease end (clock skew
    /// between hosts).
    pub lease_margin: Duration,
    /// Newest first (the default). `fifo` exists only to compare the same
    /// pipeline as a FIFO queue (`lifo simulate --compare`).
    pub order: Order,
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
            pause_poll: Duration::from_secs(5),
            max_attempts: 3,
            lease_margin: Duration::from_secs(2),
            order: Order::Lifo,
        }
    }

    pub fn from_source(src: &impl Source) -> Result<Self, ConfigError> {
        Ok(Self {
            table_name: config::required(src, "TABLE_NAME")?,
            trigger_topic_arn: config::required(src, "TRIGGER_TOPIC_ARN")?,
            shard_count: config::shard_count(src)?,
            max_ttl_seconds: config::max_ttl_seconds(src)?,
            time_budget: Duration::from_secs(config::parsed(
                src,
                "TIME_BUDGET_SECONDS",
                60u64,
                1..=900,
            )?),
            deadline_margin: config::millis(src, "DEADLINE_MARGIN_MS", 2_000, 0..=60_000)?,
            idle_poll: config::millis(src, "IDLE_POLL_MS", 250, 10..=10_000)?,
            pause_poll: config::millis(src, "PAUSE_POLL_MS", 5_000, 100..=60_000)?,
            max_attempts: config::parsed(src, "MAX_ATTEMPTS", 3u32, 1..=100)?,
            lease_margin: config::millis(src, "LEASE_MARGIN_MS", 2_000, 0..=60_000)?,
            order: config::value(src, "SELECTION_ORDER", Order::Lifo)?,
        })
    }
}
