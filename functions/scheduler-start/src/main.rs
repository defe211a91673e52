//! Lambda entry point of `scheduler-start`: set up tracing and clients, run the handler.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::config::Env;
use lifo_core::event::RawEvent;
use lifo_core::{Notifier, Store};
use scheduler_start::{Scheduler, SchedulerConfig};

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups (measured: 10 %
// less CPU per task in `lifo bench --only process`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_core::logging::init();
    let config = SchedulerConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let store = Store::new(aws_sdk_dynamodb::Client::new(&aws), &config.table_name);
    let wake = Notifier::new(aws_sdk_sns::Client::new(&aws), &config.process_topic_arn);
    let scheduler = Scheduler::new(store, wake, config);
    let scheduler = &scheduler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        scheduler
            .handle_raw(&event.payload, event.context.deadline())
            .await
    }))
    .await
}
