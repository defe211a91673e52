//! The rest-wake queue's event source mapping: what Lambda's SQS poller
//! does in AWS. It long-polls the queue (a delayed message is received as
//! soon as its delay ends), hands up to the template's BatchSize messages
//! to `trigger` in one synchronous invocation with an SQS event, and
//! deletes them when it succeeds (with `ReportBatchItemFailures`, all but
//! the `batchItemFailures` it answers); after an error, and those, come
//! back once their visibility timeout ends, as in AWS.

use super::PipelineStats;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::watch;
use trigger::Trigger;

/// The SQS event of `messages`, as Lambda builds it
/// (`sam local generate-event sqs receive-message`).
pub fn sqs_event_json(messages: &[aws_sdk_sqs::types::Message], queue_arn: &str) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "messageId": m.message_id().unwrap_or_default(),
                "receiptHandle": m.receipt_handle().unwrap_or_default(),
                "body": m.body().unwrap_or_default(),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": m.md5_of_body().unwrap_or_default(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": crate::aws::REGION,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// The template's event source mapping of the queue.
#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    pub batch_size: i32,
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`.
    pub report_batch_item_failures: bool,
}

/// Polls `url` into `trigger` until shutdown.
pub(super) async fn poll(
    sqs: aws_sdk_sqs::Client,
    url: String,
    mapping: Mapping,
    trigger: Arc<Trigger>,
    stats: Arc<PipelineStats>,
    mut rx: watch::Receiver<bool>,
) {
    let arn = format!(
        "arn:aws:sqs:{}:{}:{}",
        crate::aws::REGION,
        crate::aws::ACCOUNT,
        url.rsplit('/').next().unwrap_or_default()
    );
    loop {
        if *rx.borrow() {
            return;
        }
        let Some(messages) =
            super::sqs::receive(&sqs, &url, mapping.batch_size, &stats, &mut rx).await
        else {
            return;
        };
        if messages.is_empty() {
            continue;
        }
        deliver(&sqs, &url, &arn, mapping, &trigger, messages, &stats).await;
    }
}

/// Hands `messages` (received from queue `url`, whose ARN is `arn`) to
/// `trigger` in one invocation, and deletes what it finished with: all of
/// them, or with `ReportBatchItemFailures` all but the ones it answered as
/// failed; the rest come back after their visibility timeout.
pub async fn deliver(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    arn: &str,
    mapping: Mapping,
    trigger: &Trigger,
    messages: Vec<aws_sdk_sqs::types::Message>,
    stats: &PipelineStats,
) {
    stats
        .rest_alarms
        .fetch_add(messages.len(), Ordering::Relaxed);
    stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
    match trigger.measured(sqs_event_json(&messages, arn)).await {
        Ok(outcome) => {
            stats.shed.fetch_add(outcome.shed, Ordering::Relaxed);
            // Without ReportBatchItemFailures Lambda ignores the list: an
            // answer is the whole batch's success.
            let done: Vec<_> = messages
                .into_iter()
                .filter(|m| {
                    !mapping.report_batch_item_failures
                        || !outcome
                            .failed_items
                            .iter()
                            .any(|f| Some(f.as_str()) == m.message_id())
                })
                .collect();
            super::sqs::delete(sqs, url, &done).await;
        }
        Err(e) => {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %lifo_core::error::Chain(&e), "trigger failed on rest alarms; SQS delivers them again");
        }
    }
}
