//! CloudWatch metrics as Embedded Metric Format (EMF) log lines: one JSON
//! line per invocation, no PutMetricData calls. CloudWatch extracts the
//! metrics from the function's log group.
//!
//! Namespace `LifoQueue` (or `METRICS_NAMESPACE`), one dimension `Service`
//! = the stack name (`SERVICE_NAME`), so several stacks do not mix.

use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicBool, Ordering};

/// Unit of a metric, as EMF spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    Percent,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Milliseconds => "Milliseconds",
            Self::Percent => "Percent",
        }
    }
}

/// Most values EMF accepts for one metric in one line.
const MAX_VALUES: usize = 100;

/// The metrics of one invocation.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    values: Vec<(&'static str, Unit, Vec<f64>)>,
}

static COLD: AtomicBool = AtomicBool::new(true);

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `ColdStart = 1` on the first invocation of this process.
    pub fn cold_start(mut self) -> Self {
        if COLD.swap(false, Ordering::Relaxed) {
            self = self.count("ColdStart", 1);
        }
        self
    }

    /// A count (kept even when zero, so dashboards show zeros).
    pub fn count(mut self, name: &'static str, n: usize) -> Self {
        self.values.push((name, Unit::Count, vec![n as f64]));
        self
    }

    /// Individual values (e.g. every task's age at start), at most 100 kept;
    /// CloudWatch computes percentiles from them.
    pub fn values(mut self, name: &'static str, unit: Unit, values: &[f64]) -> Self {
        if !values.is_empty() {
            let step = values.len().div_ceil(MAX_VALUES);
            let kept: Vec<f64> = values.iter().step_by(step).copied().collect();
            self.values.push((name, unit, kept));
        }
        self
    }

    /// The EMF document at `timestamp_ms`.
    pub fn to_emf(&self, namespace: &str, service: &str, timestamp_ms: u64) -> Value {
        let definitions: Vec<Value> = self
            .values
            .iter()
            .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let mut root = Map::new();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": namespace,
                    "Dimensions": [["Service"]],
                    "Metrics": definitions,
                }]
            }),
        );
        root.insert("Service".into(), Value::from(service));
        for (name, _, values) in &self.values {
            let v = if values.len() == 1 {
                json!(values[0])
            } else {
                json!(values)
            };
            root.insert((*name).into(), v);
        }
        Value::Object(root)
    }

    /// Writes the EMF line to stdout when running in Lambda (or when
    /// `LIFO_EMF=1`); elsewhere (tests, the local pipeline) it is a debug log.
    pub fn emit(&self) {
        if self.values.is_empty() {
            return;
        }
        let namespace = std::env::var("METRICS_NAMESPACE").unwrap_or_else(|_| "LifoQueue".into());
        let service = std::env::var("SERVICE_NAME").unwrap_or_else(|_| "lifo-queue".into());
        let mut doc = self.to_emf(&namespace, &service, lifo_core::now_ms());
        let level = emf_level(std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref());
        doc["level"] = Value::from(level);
        let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
        if in_lambda || std::env::var("LIFO_EMF").is_ok_and(|v| v == "1") {
            println!("{doc}");
        } else {
            tracing::debug!(emf = %doc, "metrics");
        }
    }
}

/// The `level` of an EMF line: the function's own application log level
/// (`AWS_LAMBDA_LOG_LEVEL`, set by Lambda from `ApplicationLogLevel`) when
/// it is above INFO, else INFO. Lambda's JSON log filtering drops a line
/// below the function's level and counts a line without a level as INFO,
/// so with `LogLevel` WARN or ERROR an EMF line without a level (or at
/// INFO) would be dropped, and every metric with it.
pub fn emf_level(function_level: Option<&str>) -> &'static str {
    match function_level.map(str::to_ascii_uppercase).as_deref() {
        Some("WARN") => "WARN",
        Some("ERROR") => "ERROR",
        Some("FATAL") => "FATAL",
        _ => "INFO",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emf_line_is_never_below_the_functions_log_level() {
        assert_eq!(emf_level(None), "INFO");
        for (function, line) in [
            ("TRACE", "INFO"),
            ("DEBUG", "INFO"),
            ("INFO", "INFO"),
            ("WARN", "WARN"),
            ("error", "ERROR"),
            ("FATAL", "FATAL"),
        ] {
            assert_eq!(emf_level(Some(function)), line, "{function}");
        }
        // Every LogLevel the template allows keeps the metrics.
        let template = include_str!("../../../template.yaml");
        let allowed = template
            .split("  LogLevel:")
            .nth(1)
            .and_then(|s| s.split("AllowedValues:").nth(1))
            .map(|s| {
                s.lines()
                    .skip(1)
                    .take_while(|l| l.trim_start().starts_with("- "))
                    .map(|l| l.trim().trim_start_matches("- ").to_owned())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        assert_eq!(allowed, ["DEBUG", "INFO", "WARN", "ERROR"]);
        let rank = |l: &str| {
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
                .iter()
                .position(|x| *x == l)
        };
        for level in allowed {
            assert!(rank(emf_level(Some(&level))) >= rank(&level), "{level}");
        }
    }

    #[test]
    fn emf_document_is_valid() {
        let ages: Vec<f64> = (0..250).map(f64::from).collect();
        let doc = Metrics::new()
            .count("TasksClaimed", 3)
            .count("ClaimConflicts", 0)
            .values("AgeAtStartMs", Unit::Milliseconds, &ages)
            .to_emf("LifoQueue", "my-stack", 1_764_547_200_000);
        let aws = &doc["_aws"];
        assert_eq!(aws["Timestamp"], 1_764_547_200_000u64);
        let directive = &aws["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "LifoQueue");
        assert_eq!(directive["Dimensions"], json!([["Service"]]));
        assert_eq!(doc["Service"], "my-stack");
        // Every declared metric has a value at the root, and every
        // dimension too: what CloudWatch requires to extract them.
        for m in directive["Metrics"].as_array().unwrap() {
            let name = m["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some(), "{name} has no value");
            assert!(["Count", "Milliseconds"].contains(&m["Unit"].as_str().unwrap()));
        }
        assert_eq!(doc["TasksClaimed"], 3.0);
        assert_eq!(
            doc["AgeAtStartMs"].as_array().unwrap().len(),
            84,
            "at most 100 values"
        );
    }
}
