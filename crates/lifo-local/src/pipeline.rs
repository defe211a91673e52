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
use crate::filter;
use crate::invoke::{AsyncFunction, Handler};
use crate::stack::LocalStack;
use anyhow::{Context, Result};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use lifo_core::xray::Trace;
use process::Processor;
use process::runner::TaskRunner;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use trigger::Trigger;

/// Counters of what the pipeline did.
#[derive(Debug, Default)]
pub struct PipelineStats {
    pub stream_records: AtomicUsize,
    pub filtered_out: AtomicUsize,
    pub trigger_invocations: AtomicUsize,
    pub process_invocations: AtomicUsize,
    pub tail_calls: AtomicUsize,
    /// SNS messages delivered: wake-ups and tail calls.
    pub published: AtomicUsize,
    /// scheduler-start runs, and the tasks they started.
    pub scheduler_runs: AtomicUsize,
    pub scheduled_started: AtomicUsize,
    pub sweeps: AtomicUsize,
    /// Rest alarms delivered to trigger.
    pub rest_alarms: AtomicUsize,
    /// Tasks shed by expiry (the trigger's `TasksExpired`: the sweep's
    /// reaper, TTL deletions of tasks never shed).
    pub expired: AtomicUsize,
    /// Asynchronous attempts Lambda throttled (reserved concurrency busy).
    pub throttles: AtomicUsize,
    /// Invocations that started a new instance.
    pub cold_starts: AtomicUsize,
    /// Events Lambda gave up on, sent to the on-failure destination.
    pub dead_lettered: AtomicUsize,
    /// Events Lambda gave up on, with no destination: gone.
    pub dropped: AtomicUsize,
    pub errors: AtomicUsize,
}

impl PipelineStats {
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

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
    /// ([`lifo_core::xray::TRACE_ATTRIBUTE`]). Off by default.
    pub tracer: lifo_core::xray::Tracer,
}

/// The trace header of the invocation a wake-up (an SNS-shaped event)
/// starts: the trace the wake-up names, under a new function segment of
/// its own, as Lambda gives each invocation.
fn wakeup_trace(event: &Value) -> Option<String> {
    let named =
        event["Records"][0]["Sns"]["MessageAttributes"][lifo_core::xray::TRACE_ATTRIBUTE]["Value"]
            .as_str()?;
    let h = lifo_core::xray::TraceHeader::parse(named)?;
    Some(h.with_parent(&lifo_core::xray::new_id()))
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

/// The Lambda-shaped JSON of a stream record.
pub fn stream_record_json(r: &Record, stream_arn: &str) -> Value {
    let image = |m: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
        m.map(|m| serde_json::to_value(serde_dynamo::Item::from(m.clone())).unwrap_or(Value::Null))
    };
    let mut change = serde_json::Map::new();
    if let Some(sr) = r.dynamodb() {
        let created = sr.approximate_creation_date_time().map_or(0, |t| t.secs());
        change.insert("ApproximateCreationDateTime".into(), json!(created));
        for (name, img) in [
            ("Keys", sr.keys.as_ref()),
            ("NewImage", sr.new_image.as_ref()),
            ("OldImage", sr.old_image.as_ref()),
        ] {
            if let Some(v) = image(img) {
                change.insert(name.into(), v);
            }
        }
        change.insert("SequenceNumber".into(), json!(sr.sequence_number()));
        change.insert("SizeBytes".into(), json!(sr.size_bytes().unwrap_or(0)));
        change.insert(
            "StreamViewType".into(),
            json!(sr.stream_view_type().map(|v| v.as_str())),
        );
    }
    json!({
        "eventID": r.event_id(),
        "eventName": r.event_name().map(|n| n.as_str()),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": stream_arn,
        "dynamodb": change,
    })
}

/// An SNS-shaped Lambda event from the SNS envelope SQS received.
pub fn sns_event_json(envelope: &Value, queue: &str) -> Value {
    let s = |k: &str| envelope.get(k).cloned().unwrap_or(Value::Null);
    json!({"Records": [{
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": format!("{}:local-subscription", s("TopicArn").as_str().unwrap_or(queue)),
        "Sns": {
            "Type": s("Type"),
            "MessageId": s("MessageId"),
            "TopicArn": s("TopicArn"),
            "Subject": s("Subject"),
            "Message": s("Message"),
            "Timestamp": s("Timestamp"),
            "SignatureVersion": envelope.get("SignatureVersion").cloned().unwrap_or(json!("1")),
            "Signature": envelope.get("Signature").cloned().unwrap_or(json!("local")),
            "SigningCertUrl": envelope.get("SigningCertURL").cloned().unwrap_or(json!("https://local/cert.pem")),
            "UnsubscribeUrl": envelope.get("UnsubscribeURL").cloned().unwrap_or(json!("https://local/unsubscribe")),
            "MessageAttributes": envelope.get("MessageAttributes").cloned().unwrap_or(json!({})),
        }
    }]})
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
                    let wake = process::Wake::parse(event).map_err(|e| e.to_string())?;
                    let run = processor.handle(&wake, SystemTime::now() + process_timeout);
                    lifo_core::xray::invocation(&tracer, trace.as_deref(), run)
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
                    let outcome = lifo_core::xray::invocation(
                        &tracer,
                        trace.as_deref(),
                        trigger.measured(event),
                    )
                    .await
                    .map_err(|e| lifo_core::error::chain(&e))?;
                    stats.expired.fetch_add(outcome.expired, Ordering::Relaxed);
                    Ok(())
                })
            });
            let config = stack.template.async_config("TriggerFunction")?;
            AsyncFunction::new(config, timing, handler, stats.clone(), rx.clone())
        };

        // Iterators are taken now, so nothing written after start is missed.
        let iterators = stream_iterators(stack, options.stream_from_latest).await?;
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
            stack.stream_arn.clone(),
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
        tasks.push(tokio::spawn(rest_wake::poll(
            stack.sqs.clone(),
            stack.rest_wake_queue_url.clone(),
            i32::try_from(
                stack
                    .template
                    .stream_source(crate::stack::TRIGGER_REST_WAKE)?
                    .batch_size,
            )
            .unwrap_or(10),
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

/// A shard iterator per stream shard, from now on or from the start.
async fn stream_iterators(stack: &LocalStack, from_latest: bool) -> Result<Vec<String>> {
    let shards = stack
        .streams
        .describe_stream()
        .stream_arn(&stack.stream_arn)
        .send()
        .await
        .context("describing the stream")?
        .stream_description
        .map(|d| d.shards.unwrap_or_default())
        .unwrap_or_default();
    let mut iterators = Vec::new();
    for shard in shards {
        let it = stack
            .streams
            .get_shard_iterator()
            .stream_arn(&stack.stream_arn)
            .shard_id(shard.shard_id().unwrap_or_default())
            .shard_iterator_type(if from_latest {
                ShardIteratorType::Latest
            } else {
                ShardIteratorType::TrimHorizon
            })
            .send()
            .await
            .context("getting a shard iterator")?
            .shard_iterator;
        iterators.extend(it);
    }
    Ok(iterators)
}

/// How the event source mapping batches stream records.
struct StreamBatching {
    filters: Vec<Value>,
    batch_size: usize,
    window: Duration,
    poll: Duration,
    /// X-Ray: each batch a new trace when enabled.
    tracer: lifo_core::xray::Tracer,
}

/// The stream's event source mapping: reads every shard each `poll`,
/// passes the records its filters match, and invokes `trigger`
/// (synchronously, as the mapping does) with a batch once it holds
/// `batch_size` records or its first record has waited `window`.
async fn poll_stream(
    streams: aws_sdk_dynamodbstreams::Client,
    arn: String,
    mut iterators: Vec<String>,
    b: StreamBatching,
    trigger: Arc<Trigger>,
    stats: Arc<PipelineStats>,
    rx: watch::Receiver<bool>,
) {
    let mut rx = rx;
    let mut batch: Vec<Value> = Vec::new();
    let mut first_at: Option<Instant> = None;
    loop {
        let mut next = Vec::new();
        for it in iterators.drain(..) {
            match streams
                .get_records()
                .shard_iterator(&it)
                .limit(100)
                .send()
                .await
            {
                Ok(out) => {
                    for r in out.records() {
                        stats.stream_records.fetch_add(1, Ordering::Relaxed);
                        let event = stream_record_json(r, &arn);
                        if b.filters.is_empty()
                            || b.filters.iter().any(|f| filter::matches(f, &event))
                        {
                            first_at.get_or_insert_with(Instant::now);
                            batch.push(event);
                        } else {
                            stats.filtered_out.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    next.extend(out.next_shard_iterator);
                }
                Err(e) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e), "GetRecords failed");
                    next.push(it);
                }
            }
        }
        iterators = next;
        let stopping = *rx.borrow();
        while !batch.is_empty()
            && (batch.len() >= b.batch_size
                || first_at.is_some_and(|t| t.elapsed() >= b.window)
                || stopping)
        {
            let take = batch.len().min(b.batch_size);
            let records: Vec<Value> = batch.drain(..take).collect();
            stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
            // Each stream batch is a new trace (AWS carries none through a stream).
            let trace = b.tracer.is_enabled().then(Trace::new_root_header);
            let run = trigger.measured(json!({ "Records": records }));
            match lifo_core::xray::invocation(&b.tracer, trace.as_deref(), run).await {
                Ok(outcome) => {
                    stats.expired.fetch_add(outcome.expired, Ordering::Relaxed);
                }
                Err(e) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "trigger (stream) failed");
                }
            }
            first_at = (!batch.is_empty()).then(Instant::now);
        }
        if stopping {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(b.poll) => {}
            _ = rx.changed() => {}
        }
    }
}

/// A topic's subscription of a function: SNS hands each message to
/// Lambda's asynchronous queue of `function` ([`AsyncFunction::deliver`]).
/// Locally the topic delivers to an SQS queue, read here; a message is
/// deleted as soon as Lambda has it (Lambda's queue retries, not SQS).
/// `tail_calls`: the trigger topic, whose messages are tail calls.
async fn subscribe(
    sqs: aws_sdk_sqs::Client,
    url: String,
    function: Arc<AsyncFunction>,
    stats: Arc<PipelineStats>,
    mut rx: watch::Receiver<bool>,
    tail_calls: bool,
) {
    loop {
        if *rx.borrow() {
            return;
        }
        let Some(messages) = receive(&sqs, &url, 10, &stats, &mut rx).await else {
            return;
        };
        for m in messages {
            let envelope: Value = m
                .body()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null);
            stats.published.fetch_add(1, Ordering::Relaxed);
            if tail_calls {
                stats.tail_calls.fetch_add(1, Ordering::Relaxed);
            }
            function.deliver(sns_event_json(&envelope, &url));
            delete(&sqs, &url, std::slice::from_ref(&m)).await;
        }
    }
}

pub mod rest_wake;

/// Deletes `messages` from queue `url` (best effort: one that stays is
/// delivered again after its visibility timeout, as in AWS).
async fn delete(sqs: &aws_sdk_sqs::Client, url: &str, messages: &[aws_sdk_sqs::types::Message]) {
    for h in messages.iter().filter_map(|m| m.receipt_handle()) {
        let _ = sqs
            .delete_message()
            .queue_url(url)
            .receipt_handle(h)
            .send()
            .await;
    }
}

/// One long poll (1 s) of queue `url` for up to `max` messages: empty
/// after a failed ReceiveMessage (counted, then a pause), `None` once the
/// pipeline stops.
async fn receive(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    max: i32,
    stats: &PipelineStats,
    rx: &mut watch::Receiver<bool>,
) -> Option<Vec<aws_sdk_sqs::types::Message>> {
    let received = tokio::select! {
        r = sqs.receive_message().queue_url(url).max_number_of_messages(max).wait_time_seconds(1).send() => r,
        _ = rx.changed() => return None,
    };
    match received {
        Ok(out) => Some(out.messages.unwrap_or_default()),
        Err(e) => {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(queue = url, error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "ReceiveMessage failed");
            tokio::time::sleep(Duration::from_millis(200)).await;
            Some(Vec::new())
        }
    }
}

#[cfg(test)]
mod tests;
