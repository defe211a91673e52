//! Lambda entry point of `process`: set up tracing and clients, run the handler.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::config::Env;
use lifo_core::event::RawEvent;
use lifo_core::{Notifier, Store};
use process::runner::AnyRunner;
use process::{ProcessConfig, Processor};
use std::sync::Arc;

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups (measured: 10 %
// less CPU per task in `lifo bench --only process`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_core::logging::init();
    let config = ProcessConfig::from_source(&Env)?;
    let runner = Arc::new(AnyRunner::from_source(&Env)?);
    let aws = aws_config::load_from_env().await;
    let store = Store::new(aws_sdk_dynamodb::Client::new(&aws), &config.table_name);
    let tail = Notifier::new(aws_sdk_sns::Client::new(&aws), &config.trigger_topic_arn);
    let processor = Processor::new(store, tail, runner, config);
    let processor = &processor;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        let wakeups = process::wakeups_in_raw(&event.payload)?;
        processor.handle(wakeups, event.context.deadline()).await
    }))
    .await
}
