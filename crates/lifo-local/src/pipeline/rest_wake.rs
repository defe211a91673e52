//! The rest-wake queue's event source mapping: what Lambda's SQS poller
//! does in AWS. It long-polls the queue (a delayed message is received as
//! soon as its delay ends), hands up to the template's BatchSize messages
//! to `trigger` in one synchronous invocation with an SQS event, and
//! deletes them when it succeeds; after an error they come back once their
//! visibility timeout ends, as in AWS.

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

/// Polls `url` into `trigger` until shutdown.
pub(super) async fn poll(
    sqs: aws_sdk_sqs::Client,
    url: String,
    batch_size: i32,
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
        let Some(messages) = super::sqs::receive(&sqs, &url, batch_size, &stats, &mut rx).await
        else {
            return;
        };
        if messages.is_empty() {
            continue;
        }
        stats
            .rest_alarms
            .fetch_add(messages.len(), Ordering::Relaxed);
        stats.trigger_invocations.fetch_add(1, Ordering::Relaxed);
        match trigger.measured(sqs_event_json(&messages, &arn)).await {
            Ok(outcome) => {
                stats.shed.fetch_add(outcome.shed, Ordering::Relaxed);
                super::sqs::delete(&sqs, &url, &messages).await;
            }
            Err(e) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %lifo_core::error::Chain(&e), "trigger failed on rest alarms; SQS delivers them again");
            }
        }
    }
}
