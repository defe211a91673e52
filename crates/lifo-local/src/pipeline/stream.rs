//! The table stream's event source mapping: every shard polled as Lambda
//! polls it, records filtered by the template's FilterCriteria, batched by
//! its BatchSize and window, handed to `trigger` synchronously.

use super::PipelineStats;
use crate::filter;
use crate::stack::LocalStack;
use anyhow::{Context, Result};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use lifo_lambda::xray::Trace;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use trigger::Trigger;

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

/// The stream's ARN and a shard iterator per stream shard, from now on or
/// from the start.
pub(super) async fn stream_iterators(
    stack: &LocalStack,
    from_latest: bool,
) -> Result<(String, Vec<String>)> {
    let Some(arn) = stack.stream_arn.clone() else {
        anyhow::bail!(
            "the stream of {} is in a shared DynamoDB Local, which fails a read of one table's \
             stream once another table is written (TrimmedDataAccessException), so its tables \
             are made without one: start the stack with a DynamoDB Local of its own \
             (Servers::SharedMoto or Own)",
            stack.table
        );
    };
    let shards = stack
        .streams
        .describe_stream()
        .stream_arn(&arn)
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
            .stream_arn(&arn)
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
    Ok((arn, iterators))
}

/// How the event source mapping batches stream records.
pub(super) struct StreamBatching {
    pub(super) filters: Vec<Value>,
    pub(super) batch_size: usize,
    pub(super) window: Duration,
    pub(super) poll: Duration,
    /// X-Ray: each batch a new trace when enabled.
    pub(super) tracer: lifo_lambda::xray::Tracer,
}

/// The stream's event source mapping: reads every shard each `poll`,
/// passes the records its filters match, and invokes `trigger`
/// (synchronously, as the mapping does) with a batch once it holds
/// `batch_size` records or its first record has waited `window`.
pub(super) async fn poll_stream(
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
            match lifo_lambda::xray::invocation(&b.tracer, trace.as_deref(), run).await {
                Ok(outcome) => {
                    stats.shed.fetch_add(outcome.shed, Ordering::Relaxed);
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
