//! Lambda entry point of `scheduler-start`: set up tracing and clients, run the handler.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lifo_core::Store;
use lifo_lambda::config::Env;
use lifo_lambda::event::RawEvent;
use lifo_lambda::{Notifier, xray};
use scheduler_start::{Scheduler, SchedulerConfig};

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups. (Measured on
// process, which does the most per invocation: 10 % less CPU per task in
// `lifo bench --only process`; not measured for this function.)
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lifo_lambda::logging::init();
    let config = SchedulerConfig::from_source(&Env)?;
    let aws = aws_config::load_from_env().await;
    let store = Store::new(xray::dynamodb(&aws, &config.table_name), &config.table_name);
    let wake = Notifier::new(
        xray::sns(&aws, &config.process_topic_arn),
        &config.process_topic_arn,
    );
    let scheduler = Scheduler::new(store, wake, config);
    let scheduler = &scheduler;
    let tracer = &xray::Tracer::from_env();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<RawEvent>| async move {
        let trace = event.context.xray_trace_id.as_deref();
        let run = Box::pin(scheduler.handle_raw(&event.payload, event.context.deadline()));
        xray::invocation(tracer, trace, run).await
    }))
    .await
}
