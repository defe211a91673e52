//! An SNS topic in virtual time: a published wake-up goes to Lambda's
//! asynchronous queue of the function subscribed to it, as the local
//! pipeline's topic → SQS → subscription does, without the servers. In a
//! chaos run, some deliveries are made twice (SNS delivers at least once).

use super::invocation_faults::InvocationFaults;
use super::log::EventLog;
use lifo_lambda::notify::Wake;
use lifo_lambda::{NotifyError, Wakeup};
use lifo_local::invoke::AsyncFunction;
use lifo_local::pipeline::{PipelineStats, sns_event_json};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A topic and its one subscription.
#[derive(Clone)]
pub struct Topic(Arc<Inner>);

struct Inner {
    name: &'static str,
    subscriber: OnceLock<Arc<AsyncFunction>>,
    published: AtomicU64,
    stats: Arc<PipelineStats>,
    log: EventLog,
    faults: Option<Arc<InvocationFaults>>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic").field("name", &self.0.name).finish()
    }
}

impl Topic {
    /// A topic; with `faults`, some deliveries are made twice.
    pub fn new(
        name: &'static str,
        stats: Arc<PipelineStats>,
        log: EventLog,
        faults: Option<Arc<InvocationFaults>>,
    ) -> Self {
        Self(Arc::new(Inner {
            name,
            subscriber: OnceLock::new(),
            published: AtomicU64::new(0),
            stats,
            log,
            faults,
        }))
    }

    /// Subscribes `function` (once; a second subscription is ignored).
    pub fn deliver_to(&self, function: &Arc<AsyncFunction>) {
        let _ = self.0.subscriber.set(Arc::clone(function));
    }
}

impl Wake for Topic {
    fn wake<'a>(
        &'a self,
        wakeup: &'a Wakeup,
    ) -> Pin<Box<dyn Future<Output = Result<String, NotifyError>> + Send + 'a>> {
        Box::pin(async move {
            let inner = &self.0;
            let n = inner.published.fetch_add(1, Ordering::Relaxed) + 1;
            let message_id = format!("{}-{n}", inner.name);
            let topic_arn = format!("arn:aws:sns:us-east-1:000000000000:{}", inner.name);
            let message = serde_json::to_string(wakeup).map_err(|e| NotifyError {
                topic_arn: topic_arn.clone(),
                code: "Serialization".into(),
                source: e.into(),
            })?;
            inner.stats.published.fetch_add(1, Ordering::Relaxed);
            if wakeup.reason == "tail-call" && inner.name == "trigger" {
                inner.stats.tail_calls.fetch_add(1, Ordering::Relaxed);
            }
            inner.log.wakeup(inner.name, wakeup);
            let envelope = serde_json::json!({
                "Type": "Notification",
                "MessageId": message_id,
                "TopicArn": topic_arn,
                "Message": message,
                "Timestamp": "1970-01-01T00:00:00Z",
            });
            match inner.subscriber.get() {
                Some(f) => {
                    let event = sns_event_json(&envelope, inner.name);
                    if inner.faults.as_ref().is_some_and(|x| x.duplicate()) {
                        f.deliver(event.clone());
                    }
                    f.deliver(event);
                }
                None => {
                    return Err(NotifyError {
                        topic_arn,
                        code: "NotFound".into(),
                        source: "no function subscribes to the topic".into(),
                    });
                }
            }
            Ok(message_id)
        })
    }
}
