//! Reading settings from the environment with errors that name the variable.

use std::str::FromStr;

/// A setting that is missing or does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// Looks settings up in a source (the process environment, or a map in tests).
pub trait Source {
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Env;

impl Source for Env {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Source for std::collections::HashMap<String, String> {
    fn get(&self, name: &str) -> Option<String> {
        std::collections::HashMap::get(self, name).cloned()
    }
}

/// A required string setting.
pub fn required(src: &impl Source, name: &'static str) -> Result<String, ConfigError> {
    match src.get(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

/// An optional setting parsed as `T`, `default` when absent or empty.
pub fn value<T>(src: &impl Source, name: &'static str, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match src.get(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(raw) => raw
            .trim()
            .parse()
            .map_err(|e: T::Err| ConfigError::Invalid {
                name,
                value: raw.clone(),
                reason: e.to_string(),
            }),
    }
}

/// An optional setting parsed as `T`, `default` when absent or empty, and
/// checked against `range`.
pub fn parsed<T>(
    src: &impl Source,
    name: &'static str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
    T::Err: std::fmt::Display,
{
    let value = self::value(src, name, default)?;
    if !range.contains(&value) {
        return Err(ConfigError::Invalid {
            name,
            value: value.to_string(),
            reason: format!("must be between {} and {}", range.start(), range.end()),
        });
    }
    Ok(value)
}

/// An optional duration in milliseconds (`…_MS`), `default_ms` when absent,
/// checked against `range_ms`.
pub fn millis(
    src: &impl Source,
    name: &'static str,
    default_ms: u64,
    range_ms: std::ops::RangeInclusive<u64>,
) -> Result<std::time::Duration, ConfigError> {
    parsed(src, name, default_ms, range_ms).map(std::time::Duration::from_millis)
}

/// The template's bounds (`MinValue`..=`MaxValue`) of the settings that
/// more than one reader takes: the functions from their environment, the
/// `lifo` command from its flags and a stack's outputs. lifo-local's
/// template tests hold each to template.yaml.
pub mod bounds {
    use std::ops::RangeInclusive;
    /// `ShardCount`.
    pub const SHARD_COUNT: RangeInclusive<u32> = 1..=100;
    /// `ProcessorCount`.
    pub const PROCESSOR_COUNT: RangeInclusive<u32> = 1..=32;
    /// `MaxTaskTtlSeconds` (60 s to a year).
    pub const MAX_TTL_SECONDS: RangeInclusive<u64> = 60..=31_536_000;
    /// `TaskTtlSeconds` (a minute to a week).
    pub const TASK_TTL_SECONDS: RangeInclusive<u64> = 60..=604_800;
    /// `DueShardCount`.
    pub const DUE_SHARD_COUNT: RangeInclusive<u32> = 1..=100;
    /// `CatchUpDays`.
    pub const CATCH_UP_DAYS: RangeInclusive<u32> = 0..=60;
    /// `RetentionSeconds` (none to a year).
    pub const RETENTION_SECONDS: RangeInclusive<u64> = 0..=31_536_000;
    /// `RunnerLatencyMs`.
    pub const RUNNER_LATENCY_MS: RangeInclusive<u64> = 0..=240_000;
}

/// The settings several functions share, with the template's ranges
/// ([`bounds`]).
/// `SHARD_COUNT`: claimable index shards (1..=100, default 1).
pub fn shard_count(src: &impl Source) -> Result<u32, ConfigError> {
    parsed(src, "SHARD_COUNT", 1u32, bounds::SHARD_COUNT)
}

/// `PROCESSOR_COUNT`: processors at once, each over a shard group
/// (1..=32, default 1; process also checks it against `SHARD_COUNT`).
pub fn processor_count(src: &impl Source) -> Result<u32, ConfigError> {
    parsed(src, "PROCESSOR_COUNT", 1u32, bounds::PROCESSOR_COUNT)
}

/// `MAX_TTL_SECONDS`: the largest TTL a producer may ask for; also bounds
/// the claimable index query (60..=1 year, default 7 days).
pub fn max_ttl_seconds(src: &impl Source) -> Result<u64, ConfigError> {
    parsed(src, "MAX_TTL_SECONDS", 604_800u64, bounds::MAX_TTL_SECONDS)
}

/// `TASK_TTL_SECONDS`: the time to live of a task whose producer gives none
/// (create), or of a scheduled task once started (scheduler-start):
/// `1..=max_ttl_seconds`, default one hour (or the maximum, if lower).
pub fn task_ttl_seconds(src: &impl Source, max_ttl_seconds: u64) -> Result<u64, ConfigError> {
    parsed(
        src,
        "TASK_TTL_SECONDS",
        3600u64.min(max_ttl_seconds),
        1..=max_ttl_seconds,
    )
}

/// `DUE_SHARD_COUNT`: write shards of the due-date index (1..=100, default 50).
pub fn due_shard_count(src: &impl Source) -> Result<u32, ConfigError> {
    parsed(src, "DUE_SHARD_COUNT", 50u32, bounds::DUE_SHARD_COUNT)
}

/// `CATCH_UP_DAYS`: past due dates a scheduler-start run also covers, and
/// so how long after its due date a task may still start (0..=60, default 7).
pub fn catch_up_days(src: &impl Source) -> Result<u32, ConfigError> {
    parsed(src, "CATCH_UP_DAYS", 7u32, bounds::CATCH_UP_DAYS)
}

/// `RETENTION_SECONDS`: how long tasks stay readable after they expire.
pub fn retention_seconds(src: &impl Source) -> Result<u64, ConfigError> {
    parsed(
        src,
        "RETENTION_SECONDS",
        lifo_core::model::DEFAULT_RETENTION_SECONDS,
        bounds::RETENTION_SECONDS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn src(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn errors_name_the_variable() {
        let s = src(&[("SHARD_COUNT", "zero"), ("RATE", "2")]);
        assert_eq!(
            required(&s, "TABLE_NAME").unwrap_err().to_string(),
            "environment variable TABLE_NAME is required"
        );
        assert_eq!(
            parsed(&s, "SHARD_COUNT", 1u32, 1..=100)
                .unwrap_err()
                .to_string(),
            "environment variable SHARD_COUNT=\"zero\" is invalid: invalid digit found in string"
        );
        assert_eq!(
            parsed(&s, "RATE", 0.0f64, 0.0..=1.0)
                .unwrap_err()
                .to_string(),
            "environment variable RATE=\"2\" is invalid: must be between 0 and 1"
        );
        assert_eq!(parsed(&s, "ABSENT", 7u32, 1..=10), Ok(7));
    }

    /// create and scheduler-start read the task TTL through one parser, so
    /// both refuse a TTL above MAX_TTL_SECONDS with the same error.
    #[test]
    fn the_task_ttl_is_bounded_by_the_largest_ttl() {
        let s = src(&[("MAX_TTL_SECONDS", "600"), ("TASK_TTL_SECONDS", "3600")]);
        let max = max_ttl_seconds(&s).unwrap();
        assert_eq!(
            task_ttl_seconds(&s, max).unwrap_err().to_string(),
            "environment variable TASK_TTL_SECONDS=\"3600\" is invalid: must be between 1 and 600"
        );
        // Absent, it defaults to an hour, or to the largest TTL if lower.
        assert_eq!(task_ttl_seconds(&src(&[]), 604_800), Ok(3600));
        assert_eq!(task_ttl_seconds(&src(&[]), 600), Ok(600));
        assert_eq!(
            due_shard_count(&src(&[("DUE_SHARD_COUNT", "0")]))
                .unwrap_err()
                .to_string(),
            "environment variable DUE_SHARD_COUNT=\"0\" is invalid: must be between 1 and 100"
        );
        assert_eq!(catch_up_days(&src(&[])), Ok(7));
    }

    #[test]
    fn selection_order_parses_or_names_the_variable() {
        use lifo_core::Order;
        let s = src(&[("SELECTION_ORDER", "FIFO"), ("BAD", "newest")]);
        assert_eq!(value(&s, "SELECTION_ORDER", Order::Lifo), Ok(Order::Fifo));
        assert_eq!(value(&s, "ABSENT", Order::Lifo), Ok(Order::Lifo));
        assert_eq!(
            value(&s, "BAD", Order::Lifo).unwrap_err().to_string(),
            "environment variable BAD=\"newest\" is invalid: expected lifo, fifo or adaptive, got \"newest\""
        );
    }
}
