//! Lambda entry point of `api`: clients, the queue's settings from the
//! environment, then the router under `lambda_http`.

use api::{Api, router};
use create::{CreateConfig, Creator, Wakeups};
use lifo_core::config::{Env, Source};
use lifo_core::{Notifier, Store};
use lifo_ops::{Queue, Settings};
use std::sync::Arc;

// One thread, as the other functions: one event at a time per sandbox.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    lifo_core::logging::init();
    let config = CreateConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let store = Store::new(aws_sdk_dynamodb::Client::new(&aws), &config.table_name);
    let settings = Settings {
        shards: config.shard_count,
        due_shards: config.due_shard_count,
        max_ttl_seconds: config.max_ttl_seconds,
        task_ttl_seconds: config.default_ttl_seconds,
        retention_seconds: config.retention_seconds,
    };
    // Tasks created over the API wake the processor as create's do.
    let mut creator = Creator::new(store.clone(), config);
    if let Some(topic) = Env.get("PROCESS_TOPIC_ARN").filter(|t| !t.is_empty()) {
        creator = creator.with_wakeups(Wakeups {
            notifier: Notifier::new(aws_sdk_sns::Client::new(&aws), topic),
            processors: lifo_core::config::processor_count(&Env)?,
        });
    }
    let queue = Queue::new(store, settings).with_producer(Arc::new(creator));
    lambda_http::run(router(Arc::new(Api { queue }))).await
}
