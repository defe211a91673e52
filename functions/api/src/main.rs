//! Lambda entry point of `api`: clients, the queue's settings from the
//! environment, then the router under `lambda_http`.

use api::{Api, router};
use lifo_core::Store;
use lifo_lambda::config::{Env, Source};
use lifo_lambda::{Notifier, xray};
use lifo_ops::create::{CreateConfig, Creator};
use lifo_ops::{Queue, Settings};
use std::sync::Arc;

// One thread, as the other functions: one event at a time per sandbox.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    lifo_lambda::logging::init();
    let config = CreateConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let store = Store::new(xray::dynamodb(&aws, &config.table_name), &config.table_name);
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
        creator = creator.with_wakeups(lifo_lambda::notify::Fanout::new(
            Notifier::new(xray::sns(&aws, &topic), topic),
            lifo_lambda::config::processor_count(&Env)?,
        ));
    }
    let queue = Queue::new(store, settings).with_producer(Arc::new(creator));
    let tracer = xray::Tracer::from_env();
    let app = router(Arc::new(Api { queue })).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            // The invocation's trace, from the Lambda context lambda_http
            // puts on the request.
            let trace = req
                .extensions()
                .get::<lambda_http::Context>()
                .and_then(|c| c.xray_trace_id.clone());
            let tracer = tracer.clone();
            async move { xray::invocation(&tracer, trace.as_deref(), next.run(req)).await }
        },
    ));
    lambda_http::run(app).await
}
