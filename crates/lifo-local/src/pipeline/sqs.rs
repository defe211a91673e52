//! Reading the local SQS queues: a long poll, and deleting what was
//! handed over.

use super::PipelineStats;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;

/// Deletes `messages` from queue `url` (best effort: one that stays is
/// delivered again after its visibility timeout, as in AWS).
pub async fn delete(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    messages: &[aws_sdk_sqs::types::Message],
) {
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
pub(super) async fn receive(
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
