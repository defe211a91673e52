//! The in-process pipeline: what Lambda's event source mappings and SNS
//! subscriptions do in AWS, done by pollers that call the real handlers.
//!
//! - table stream → (template's filter, batch size, window) → `trigger`
//! - process topic → SQS → SNS-shaped event → `process`, one at a time
//!   (reserved concurrency 1)
//! - trigger topic (tail calls) → SQS → SNS-shaped event → `trigger`

use crate::filter;
use crate::stack::LocalStack;
use anyhow::{Context, Result};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
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
    /// SNS messages delivered (first deliveries): wake-ups and tail calls.
    pub published: AtomicUsize,
    /// scheduler-start runs, and the tasks they started.
    pub scheduler_runs: AtomicUsize,
    pub scheduled_started: AtomicUsize,
    pub sweeps: AtomicUsize,
    /// Tasks shed by expiry (the trigger's `TasksExpired`: the sweep's
    /// reaper, TTL deletions of tasks never shed).
    pub expired: AtomicUsize,
    pub errors: AtomicUsize,
}

impl PipelineStats {
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

/// Knobs that differ from AWS for a quick local run.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Overrides the template's MaximumBatchingWindowInSeconds (10 s in AWS).
    pub batching_window: Option<Duration>,
    /// How often the stream is polled.
    pub stream_poll: Duration,
    /// How often the safety sweep runs (the EventBridge rule; 1 minute in AWS).
    pub sweep_every: Option<Duration>,
    /// Read the stream from now on (LATEST) instead of TRIM_HORIZON: tasks
    /// written before the pipeline started are then found only by the sweep,
    /// like tasks already pending when the stack is deployed.
    pub stream_from_latest: bool,
    /// Overrides the process function's Timeout (its invocation deadline,
    /// and so how long a claim's lease runs): shorter locally, so that a
    /// restart reclaims what a killed run held sooner.
    pub process_timeout: Option<Duration>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            batching_window: Some(Duration::from_millis(500)),
            stream_poll: Duration::from_millis(100),
            sweep_every: Some(Duration::from_secs(5)),
            stream_from_latest: false,
            process_timeout: None,
        }
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
    /// Starts the pollers.
    pub async fn start<R: TaskRunner>(
        stack: &LocalStack,
        trigger: Arc<Trigger>,
        processor: Arc<Processor<R>>,
        options: PipelineOptions,
    ) -> Result<Self> {
        let (shutdown, rx) = watch::channel(false);
        let stats = Arc::new(PipelineStats::default());
        let source = stack.template.stream_source(crate::stack::TRIGGER_STREAM)?;
        let window = options
            .batching_window
            .unwrap_or(Duration::from_secs(source.batching_window_seconds));
        let process_timeout = match options.process_timeout {
            Some(t) => t,
            None => Duration::from_secs(stack.template.function_timeout("ProcessFunction")?),
        };

        // Iterators are taken now, so nothing written after start is missed.
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
                .shard_iterator_type(if options.stream_from_latest {
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

        let mut tasks = Vec::new();
        if let Some(every) = options.sweep_every {
            let (trigger, stats, mut rx) = (trigger.clone(), stats.clone(), rx.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(every) => {}
                        _ = rx.changed() => return,
                    }
                    stats.sweeps.fetch_add(1, Ordering::Relaxed);
                    stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
                    match trigger.measured(scheduled_event_json()).await {
                        Ok(outcome) => {
                            stats.expired.fetch_add(outcome.expired, Ordering::Relaxed);
                        }
                        Err(e) => {
                            stats.errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(error = %e, "trigger (sweep) failed");
                        }
                    }
                }
            }));
        }
        {
            let (streams, arn, trigger, stats, mut rx) = (
                stack.streams.clone(),
                stack.stream_arn.clone(),
                trigger.clone(),
                stats.clone(),
                rx.clone(),
            );
            let (filters, batch_size, poll) = (
                source.filters.clone(),
                source.batch_size.max(1),
                options.stream_poll,
            );
            tasks.push(tokio::spawn(async move {
                let mut batch: Vec<Value> = Vec::new();
                let mut first_at: Option<Instant> = None;
                loop {
                    let mut next = Vec::new();
                    for it in iterators.drain(..) {
                        match streams.get_records().shard_iterator(&it).limit(100).send().await {
                            Ok(out) => {
                                for r in out.records() {
                                    stats.stream_records.fetch_add(1, Ordering::Relaxed);
                                    let event = stream_record_json(r, &arn);
                                    if filters.is_empty() || filters.iter().any(|f| filter::matches(f, &event)) {
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
                    while !batch.is_empty() && (batch.len() >= batch_size || first_at.is_some_and(|t| t.elapsed() >= window) || stopping) {
                        let take = batch.len().min(batch_size);
                        let records: Vec<Value> = batch.drain(..take).collect();
                        stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
                        if let Err(e) = trigger.handle(json!({ "Records": records })).await {
                            stats.errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(error = %e, "trigger (stream) failed");
                        }
                        first_at = (!batch.is_empty()).then(Instant::now);
                    }
                    if stopping {
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = rx.changed() => {}
                    }
                }
            }));
        }
        {
            let (sqs, url, trigger, stats, rx) = (
                stack.sqs.clone(),
                stack.trigger_queue_url.clone(),
                trigger.clone(),
                stats.clone(),
                rx.clone(),
            );
            tasks.push(tokio::spawn(poll_queue(
                sqs,
                url,
                rx,
                stats.clone(),
                move |event| {
                    let (trigger, stats) = (trigger.clone(), stats.clone());
                    async move {
                        stats.tail_calls.fetch_add(1, Ordering::Relaxed);
                        stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
                        trigger
                            .handle(event)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    }
                },
            )));
        }
        {
            let (sqs, url, stats, rx) = (
                stack.sqs.clone(),
                stack.process_queue_url.clone(),
                stats.clone(),
                rx.clone(),
            );
            tasks.push(tokio::spawn(poll_queue(
                sqs,
                url,
                rx,
                stats.clone(),
                move |event| {
                    let (processor, stats) = (processor.clone(), stats.clone());
                    async move {
                        stats.process_invocations.fetch_add(1, Ordering::Relaxed);
                        let wakeups = process::wakeups_in(event).map_err(|e| e.to_string())?;
                        processor
                            .handle(wakeups, SystemTime::now() + process_timeout)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    }
                },
            )));
        }
        Ok(Self {
            shutdown,
            tasks,
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

    /// Asks every poller to stop after its current invocation and waits.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Polls an SQS queue subscribed to a topic and invokes `handler` once per
/// message, one at a time. A failed invocation leaves the message for a
/// retry (like Lambda's async retry); after 3 receives it is dropped.
async fn poll_queue<F, Fut>(
    sqs: aws_sdk_sqs::Client,
    url: String,
    mut rx: watch::Receiver<bool>,
    stats: Arc<PipelineStats>,
    handler: F,
) where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), String>>,
{
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    loop {
        if *rx.borrow() {
            return;
        }
        let received = tokio::select! {
            r = sqs.receive_message().queue_url(&url).max_number_of_messages(10).wait_time_seconds(1)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount).send() => r,
            _ = rx.changed() => return,
        };
        let messages = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "ReceiveMessage failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for m in messages {
            let envelope: Value = m
                .body()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null);
            let receives: u32 = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            if receives == 1 {
                stats.published.fetch_add(1, Ordering::Relaxed);
            }
            let result = handler(sns_event_json(&envelope, &url)).await;
            if let Err(e) = &result {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, receives, "invocation failed");
            }
            if (result.is_ok() || receives >= 3)
                && let Some(h) = m.receipt_handle()
            {
                let _ = sqs
                    .delete_message()
                    .queue_url(&url)
                    .receipt_handle(h)
                    .send()
                    .await;
            }
        }
    }
}
