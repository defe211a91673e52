//! The in-process pipeline: what Lambda's event source mappings, SNS
//! subscriptions and asynchronous invocations do in AWS, done by pollers
//! that call the real handlers, with AWS's timings ([`crate::aws`]) and the
//! template's settings by default.
//!
//! - table stream → (template's filter, batch size, window; polled 4 times
//!   a second) → `trigger`
//! - process topic → SQS → SNS-shaped event → Lambda's asynchronous queue
//!   ([`crate::invoke`]: delivery delay, reserved concurrency `ProcessorCount`
//!   with throttle retries, event age, cold starts) → `process`
//! - trigger topic (tail calls) → SQS → the same, unreserved → `trigger`
//! - the rest-wake queue (rest alarms, delayed messages) → its event source
//!   mapping ([`rest_wake`]) → `trigger`
//! - the sweep rule (the template's rate) → `trigger`

use crate::aws::AwsTiming;
use crate::invoke::{AsyncFunction, Handler};
use crate::stack::LocalStack;
use anyhow::Result;
use lifo_lambda::xray::Trace;
use process::Processor;
use process::runner::TaskRunner;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use trigger::Trigger;

/// How often the safety sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SweepRate {
    /// The template's rule (`rate(1 minute)`).
    #[default]
    Template,
    Every(Duration),
    Off,
}

/// How the pipeline behaves. The default is AWS: the template's batch
/// size, batching window, sweep rate, timeouts, reserved concurrency and
/// asynchronous invocation settings, and [`AwsTiming::default`] for what
/// the template does not decide. A test that needs it faster says so
/// ([`PipelineOptions::fast`]).
#[derive(Debug, Clone, Default)]
pub struct PipelineOptions {
    /// AWS's own timings (stream polling, SNS delivery, cold starts,
    /// throttle retries).
    pub timing: AwsTiming,
    /// Overrides the template's MaximumBatchingWindowInSeconds.
    pub batching_window: Option<Duration>,
    pub sweep: SweepRate,
    /// Read the stream from now on (LATEST) instead of TRIM_HORIZON: tasks
    /// written before the pipeline started are then found only by the sweep,
    /// like tasks already pending when the stack is deployed.
    pub stream_from_latest: bool,
    /// Overrides the process function's Timeout (its invocation deadline,
    /// and so how long a claim's lease runs): shorter locally, so that a
    /// restart reclaims what a killed run held sooner.
    pub process_timeout: Option<Duration>,
    /// X-Ray as Lambda runs it: with a tracer, every invocation is sampled.
    /// One that a stream batch or the sweep starts gets a new trace; one a
    /// wake-up starts continues the trace the wake-up names
    /// ([`lifo_lambda::xray::TRACE_ATTRIBUTE`]). Off by default.
    pub tracer: lifo_lambda::xray::Tracer,
}

/// The trace header of the invocation a wake-up (an SNS-shaped event)
/// starts: the trace the wake-up names, under a new function segment of
/// its own, as Lambda gives each invocation.
fn wakeup_trace(event: &Value) -> Option<String> {
    let named = event["Records"][0]["Sns"]["MessageAttributes"][lifo_lambda::xray::TRACE_ATTRIBUTE]
        ["Value"]
        .as_str()?;
    let h = lifo_lambda::xray::TraceHeader::parse(named)?;
    Some(h.with_parent(&lifo_lambda::xray::new_id()))
}

impl PipelineOptions {
    /// Faster than AWS, for tests that say so: a 500 ms batching window, a
    /// sweep every 5 s, [`AwsTiming::fast`].
    pub fn fast() -> Self {
        Self {
            timing: AwsTiming::fast(),
            batching_window: Some(Duration::from_millis(500)),
            sweep: SweepRate::Every(Duration::from_secs(5)),
            ..Self::default()
        }
    }

    /// The batching window and sweep rate these options give with
    /// `template` (the sweep's `None`: off).
    pub fn resolve(&self, template: &crate::Template) -> Result<(Duration, Option<Duration>)> {
        let source = template.stream_source(crate::stack::TRIGGER_STREAM)?;
        let window = self
            .batching_window
            .unwrap_or(Duration::from_secs(source.batching_window_seconds));
        let sweep = match self.sweep {
            SweepRate::Template => Some(template.schedule_rate("TriggerFunction", "Sweep")?),
            SweepRate::Every(d) => Some(d),
            SweepRate::Off => None,
        };
        Ok((window, sweep))
    }
}

/// The EventBridge event of the sweep rule.
pub fn scheduled_event_json() -> Value {
    json!({
        "version": "0",
        "id": "local-sweep",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": "1970-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:000000000000:rule/local-sweep"],
        "detail": {}
    })
}

/// The running pollers. Call [`Pipeline::stop`] to end them.
pub struct Pipeline {
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    functions: Vec<Arc<AsyncFunction>>,
    pub stats: Arc<PipelineStats>,
}

impl Pipeline {
    /// Starts the pollers: the stream (polled per [`AwsTiming::stream_poll`],
    /// batched by the template's BatchSize and window, filtered by its
    /// FilterCriteria) into `trigger`; each topic's queue into its
    /// function through Lambda's asynchronous invocation
    /// ([`crate::invoke`]): the process topic into `processor` under its
    /// reserved concurrency, the trigger topic (tail calls) into `trigger`;
    /// and the sweep rule into `trigger`.
    pub async fn start<R: TaskRunner>(
        stack: &LocalStack,
        trigger: Arc<Trigger>,
        processor: Arc<Processor<R>>,
        options: PipelineOptions,
    ) -> Result<Self> {
        let (shutdown, rx) = watch::channel(false);
        let stats = Arc::new(PipelineStats::default());
        let source = stack.template.stream_source(crate::stack::TRIGGER_STREAM)?;
        let (window, sweep_every) = options.resolve(&stack.template)?;
        let process_timeout = match options.process_timeout {
            Some(t) => t,
            None => Duration::from_secs(stack.template.function_timeout("ProcessFunction")?),
        };
        let timing = options.timing;

        // The functions as Lambda invokes them asynchronously.
        let mut process_config = stack.template.async_config("ProcessFunction")?;
        // The reserved concurrency is ProcessorCount, as this processor
        // was configured.
        process_config.reserved = Some(processor.config().processors.max(1) as usize);
        let process_fn = {
            let (processor, counts) = (processor.clone(), stats.clone());
            let tracer = options.tracer.clone();
            let handler: Handler = Arc::new(move |event| {
                let (processor, stats) = (processor.clone(), counts.clone());
                let tracer = tracer.clone();
                Box::pin(async move {
                    stats.process_invocations.fetch_add(1, Ordering::Relaxed);
                    let trace = tracer.is_enabled().then(|| wakeup_trace(&event)).flatten();
                    let wake = process::Wakeups::parse(event).map_err(|e| e.to_string())?;
                    let run = processor.handle(&wake, SystemTime::now() + process_timeout);
                    lifo_lambda::xray::invocation(&tracer, trace.as_deref(), run)
                        .await
                        .map(|_| ())
                        .map_err(|e| lifo_core::error::chain(&e))
                })
            });
            AsyncFunction::new(process_config, timing, handler, stats.clone(), rx.clone())
        };
        let trigger_fn = {
            let (trigger, counts) = (trigger.clone(), stats.clone());
            let tracer = options.tracer.clone();
            let handler: Handler = Arc::new(move |event| {
                let (trigger, stats) = (trigger.clone(), counts.clone());
                let tracer = tracer.clone();
                Box::pin(async move {
                    stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
                    // A tail call continues its trace; the sweep starts one.
                    let trace = tracer
                        .is_enabled()
                        .then(|| wakeup_trace(&event))
                        .flatten()
                        .or_else(|| tracer.is_enabled().then(Trace::new_root_header));
                    let outcome = lifo_lambda::xray::invocation(
                        &tracer,
                        trace.as_deref(),
                        trigger.measured(event),
                    )
                    .await
                    .map_err(|e| lifo_core::error::chain(&e))?;
                    stats.shed.fetch_add(outcome.shed, Ordering::Relaxed);
                    Ok(())
                })
            });
            let config = stack.template.async_config("TriggerFunction")?;
            AsyncFunction::new(config, timing, handler, stats.clone(), rx.clone())
        };

        // Iterators are taken now, so nothing written after start is missed.
        let (stream_arn, iterators) = stream_iterators(stack, options.stream_from_latest).await?;
        let mut tasks = Vec::new();
        if let Some(every) = sweep_every {
            let (f, stats, mut rx) = (trigger_fn.clone(), stats.clone(), rx.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(every) => {}
                        _ = rx.changed() => return,
                    }
                    stats.sweeps.fetch_add(1, Ordering::Relaxed);
                    f.deliver(scheduled_event_json());
                }
            }));
        }
        tasks.push(tokio::spawn(poll_stream(
            stack.streams.clone(),
            stream_arn,
            iterators,
            StreamBatching {
                filters: source.filters.clone(),
                batch_size: source.batch_size.max(1),
                window,
                poll: timing.stream_poll,
                tracer: options.tracer.clone(),
            },
            trigger.clone(),
            stats.clone(),
            rx.clone(),
        )));
        let rest_wake_source = stack
            .template
            .stream_source(crate::stack::TRIGGER_REST_WAKE)?;
        tasks.push(tokio::spawn(rest_wake::poll(
            stack.sqs.clone(),
            stack.rest_wake_queue_url.clone(),
            rest_wake::Mapping {
                batch_size: i32::try_from(rest_wake_source.batch_size).unwrap_or(10),
                report_batch_item_failures: rest_wake_source.report_batch_item_failures,
            },
            trigger.clone(),
            stats.clone(),
            rx.clone(),
        )));
        tasks.push(tokio::spawn(subscribe(
            stack.sqs.clone(),
            stack.trigger_queue_url.clone(),
            trigger_fn.clone(),
            stats.clone(),
            rx.clone(),
            true,
        )));
        tasks.push(tokio::spawn(subscribe(
            stack.sqs.clone(),
            stack.process_queue_url.clone(),
            process_fn.clone(),
            stats.clone(),
            rx.clone(),
            false,
        )));
        Ok(Self {
            shutdown,
            tasks,
            functions: vec![process_fn, trigger_fn],
            stats,
        })
    }

    /// Runs scheduler-start now and then every `every`, with an EventBridge
    /// event stamped with the current time (in AWS: hourly, 00–05 UTC).
    /// Each run gets `timeout` (the function's Timeout) before its deadline.
    pub fn run_scheduler(
        &mut self,
        scheduler: Arc<scheduler_start::Scheduler>,
        every: Duration,
        timeout: Duration,
    ) {
        let (stats, mut rx) = (self.stats.clone(), self.shutdown.subscribe());
        self.tasks.push(tokio::spawn(async move {
            loop {
                stats.scheduler_runs.fetch_add(1, Ordering::Relaxed);
                let event = json!({
                    "version": "0",
                    "id": "local-scheduler-start",
                    "detail-type": "Scheduled Event",
                    "source": "aws.events",
                    "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    "detail": {}
                });
                match scheduler.handle(event, SystemTime::now() + timeout).await {
                    Ok(report) => {
                        stats
                            .scheduled_started
                            .fetch_add(report.started, Ordering::Relaxed);
                    }
                    Err(e) => {
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "scheduler-start failed");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = rx.changed() => return,
                }
            }
        }));
    }

    /// Invocations in flight now (running, or waiting for a retry).
    pub fn running(&self) -> usize {
        self.functions.iter().map(|f| f.running()).sum()
    }

    /// [`Pipeline::stop`], waiting at most `grace` for what runs: then it is
    /// ended, as Lambda ends an invocation at its timeout (tasks it held
    /// keep their claim until the caller puts them back or the lease ends).
    /// `false` when something was cut short.
    pub async fn stop_within(self, grace: Duration) -> bool {
        let _ = self.shutdown.send(true);
        let deadline = tokio::time::Instant::now() + grace;
        let mut all_done = true;
        for t in self.tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                abort.abort();
                all_done = false;
            }
        }
        for f in &self.functions {
            all_done &= f.drain_until(deadline).await;
        }
        all_done
    }

    /// Asks every poller to stop after its current invocation and waits
    /// (events waiting for a retry are dropped).
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        for f in &self.functions {
            f.drain().await;
        }
    }
}

pub mod rest_wake;
mod sqs;
pub mod stats;
mod stream;
mod subscriptions;

pub use sqs::delete as delete_messages;
pub use stats::PipelineStats;
pub use stream::stream_record_json;
use stream::{StreamBatching, poll_stream, stream_iterators};
pub use subscriptions::sns_event_json;
use subscriptions::subscribe;

#[cfg(test)]
mod tests;
