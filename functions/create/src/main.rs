//! Lambda entry point of `create`: set up tracing and clients, run the
//! handler (`lifo_ops::create`).

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::Store;
use lifo_lambda::config::{Env, Source};
use lifo_lambda::event::RawEvent;
use lifo_lambda::notify::Fanout;
use lifo_lambda::{Notifier, xray};
use lifo_ops::create::{CreateConfig, Creator};

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups. (Measured on
// process, which does the most per invocation: 10 % less CPU per task in
// `lifo bench --only process`; not measured for this function.)
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_lambda::logging::init();
    let config = CreateConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let mut creator = Creator::new(
        Store::new(xray::dynamodb(&aws, &config.table_name), &config.table_name),
        config,
    );
    // PROCESS_TOPIC_ARN: create wakes the processor itself (the template
    // sets it); without it, the stream does.
    if let Some(topic) = Env.get("PROCESS_TOPIC_ARN").filter(|t| !t.is_empty()) {
        creator = creator.with_wakeups(Fanout::new(
            Notifier::new(xray::sns(&aws, &topic), topic),
            lifo_lambda::config::processor_count(&Env)?,
        ));
    }
    let creator = &creator;
    let tracer = &xray::Tracer::from_env();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        let trace = event.context.xray_trace_id.as_deref();
        xray::invocation(
            tracer,
            trace,
            Box::pin(create::handle(creator, &event.payload)),
        )
        .await
    }))
    .await
}
