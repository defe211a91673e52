//! The topics' subscriptions: SNS hands each message to Lambda's
//! asynchronous queue of the function it invokes. Locally each topic
//! delivers to an SQS queue, read here into [`crate::invoke`].

use super::PipelineStats;
use super::sqs::{delete, receive};
use crate::invoke::AsyncFunction;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::watch;

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

/// A topic's subscription of a function: SNS hands each message to
/// Lambda's asynchronous queue of `function` ([`AsyncFunction::deliver`]).
/// Locally the topic delivers to an SQS queue, read here; a message is
/// deleted as soon as Lambda has it (Lambda's queue retries, not SQS).
/// `tail_calls`: the trigger topic, whose messages are tail calls.
pub(super) async fn subscribe(
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
