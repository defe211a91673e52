//! Lambda entry point of `trigger`: set up tracing and clients, run the handler.

#![recursion_limit = "256"]

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::Store;
use lifo_lambda::alarm::RestAlarm;
use lifo_lambda::config::{Env, Source, required};
use lifo_lambda::event::RawEvent;
use lifo_lambda::{Notifier, xray};
use trigger::{Sweep, Trigger};

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups. (Measured on
// process, which does the most per invocation: 10 % less CPU per task in
// `lifo bench --only process`; not measured for this function.)
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_lambda::logging::init();
    let topic = required(&Env, "PROCESS_TOPIC_ARN")?;
    let table = required(&Env, "TABLE_NAME")?;
    let aws = aws_config::load_from_env().await;
    let store = Store::new(xray::dynamodb(&aws, &table), table);
    let mut trigger = Trigger::new(Notifier::new(xray::sns(&aws, &topic), topic))
        .with_sweep(Sweep::from_source(store, &Env)?)
        .with_processors(lifo_lambda::config::processor_count(&Env)?);
    if let Some(url) = Env.get("REST_WAKE_QUEUE_URL").filter(|u| !u.is_empty()) {
        trigger = trigger.with_rest_alarm(RestAlarm::new(xray::sqs(&aws, &url), url));
    }
    let trigger = &trigger;
    let tracer = &xray::Tracer::from_env();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        let trace = event.context.xray_trace_id.as_deref();
        xray::invocation(tracer, trace, Box::pin(trigger.handle_raw(&event.payload))).await
    }))
    .await
}
