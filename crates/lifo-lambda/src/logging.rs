//! Log set-up for the Lambda functions: like lambda_runtime's default
//! subscriber (JSON when the function's LoggingConfig says `LogFormat: JSON`,
//! level from `AWS_LAMBDA_LOG_LEVEL`), but with the event's fields at the
//! top level of each JSON line (`taskId`, not `fields.taskId`), so Logs
//! Insights queries read naturally. lambda_runtime's per-invocation span
//! adds `span.requestId` and `span.xrayTraceId`.

use tracing_subscriber::EnvFilter;

/// The tracing level for Lambda's `AWS_LAMBDA_LOG_LEVEL` value.
pub fn level(lambda_level: Option<&str>) -> &'static str {
    match lambda_level.map(str::to_ascii_uppercase).as_deref() {
        Some("TRACE") => "trace",
        Some("DEBUG") => "debug",
        Some("WARN") => "warn",
        Some("ERROR" | "FATAL") => "error",
        _ => "info",
    }
}

/// Installs the global subscriber (call once, first thing in `main`).
pub fn init() {
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let lambda_level = std::env::var("AWS_LAMBDA_LOG_LEVEL").ok();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(level(lambda_level.as_deref())));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init();
    } else {
        builder.without_time().init();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lambda_levels_map_to_tracing_levels() {
        assert_eq!(super::level(Some("DEBUG")), "debug");
        assert_eq!(super::level(Some("fatal")), "error");
        assert_eq!(super::level(None), "info");
    }
}
