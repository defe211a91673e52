//! Lambda entry point of `create`: set up tracing and clients, run the handler.

use create::{CreateConfig, Creator};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::event::RawEvent;
use lifo_core::{Store, config::Env};

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups (measured: 10 %
// less CPU per task in `lifo bench --only process`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_core::logging::init();
    let config = CreateConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let creator = Creator::new(
        Store::new(aws_sdk_dynamodb::Client::new(&aws), &config.table_name),
        config,
    );
    let creator = &creator;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        creator.handle_raw(&event.payload).await
    }))
    .await
}
