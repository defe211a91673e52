//! A complete process function around any [`TaskRunner`]: what the
//! `process` binary's `main` does, for a team whose work is Rust code of
//! its own.
//!
//! ```no_run
//! use lifo_core::Task;
//! use process::runner::{RunOutcome, TaskRunner};
//! use std::time::Duration;
//!
//! struct Thumbnails;
//!
//! impl TaskRunner for Thumbnails {
//!     fn capacity(&self) -> usize { 8 }
//!     fn max_duration(&self) -> Duration { Duration::from_secs(30) }
//!     async fn run(&self, task: &Task) -> RunOutcome {
//!         match task.payload.to_map().get("imageUrl") {
//!             Some(_) => RunOutcome::Success,
//!             None => RunOutcome::Failure("no imageUrl".into()),
//!         }
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), lambda_runtime::Error> {
//!     process::serve(Thumbnails).await
//! }
//! ```

use crate::runner::TaskRunner;
use crate::{ProcessConfig, Processor, Wakeups};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::Store;
use lifo_lambda::alarm::RestAlarm;
use lifo_lambda::config::{ConfigError, Env, Source};
use lifo_lambda::event::RawEvent;
use lifo_lambda::{Notifier, xray};
use std::sync::Arc;

/// Serves `runner` as the process function: JSON logs, settings from the
/// environment (`TABLE_NAME`, `TRIGGER_TOPIC_ARN`, `SHARD_COUNT`, …, as in
/// template.yaml), the SDK clients, then the Lambda runtime loop.
pub async fn serve<R: TaskRunner>(runner: R) -> Result<(), Error> {
    serve_with(move |_, _| Ok(runner)).await
}

/// [`serve`], for a runner built from the environment and the SDK
/// configuration (the built-in runners: `AnyRunner::from_source`).
pub async fn serve_with<R, F>(make_runner: F) -> Result<(), Error>
where
    R: TaskRunner,
    F: FnOnce(&Env, &aws_config::SdkConfig) -> Result<R, ConfigError>,
{
    lifo_lambda::logging::init();
    let config = ProcessConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let runner = Arc::new(make_runner(&Env, &aws)?);
    let store = Store::new(xray::dynamodb(&aws, &config.table_name), &config.table_name);
    let tail = Notifier::new(
        xray::sns(&aws, &config.trigger_topic_arn),
        &config.trigger_topic_arn,
    );
    let mut processor = Processor::new(store, tail, runner, config);
    // Once per cold start: what was clamped to work together.
    processor.config().log_clamps();
    if let Some(url) = Env.get("REST_WAKE_QUEUE_URL").filter(|u| !u.is_empty()) {
        processor = processor.with_rest_alarm(RestAlarm::new(xray::sqs(&aws, &url), url));
    }
    let processor = &processor;
    let tracer = &xray::Tracer::from_env();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        let wake = Wakeups::parse_raw(&event.payload)?;
        let trace = event.context.xray_trace_id.as_deref();
        // Boxed: the handler's future is deep, and a runner's own main
        // should not need a raised recursion limit to hold it.
        let run = Box::pin(processor.handle(&wake, event.context.deadline()));
        xray::invocation(tracer, trace, run).await
    }))
    .await
}
