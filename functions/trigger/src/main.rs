//! Lambda entry point of `trigger`: set up tracing and clients, run the handler.

use lambda_runtime::{Error, LambdaEvent, service_fn, tracing};
use lifo_core::Notifier;
use lifo_core::config::{Env, required};
use trigger::Trigger;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing::init_default_subscriber();
    let topic = required(&Env, "PROCESS_TOPIC_ARN")?;
    let aws = aws_config::load_from_env().await;
    let trigger = Trigger::new(Notifier::new(aws_sdk_sns::Client::new(&aws), topic));
    let trigger = &trigger;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        trigger.handle(event.payload).await
    }))
    .await
}
