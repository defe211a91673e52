//! `trigger`: turns "something claimable arrived" into one wake-up of the
//! processor.
//!
//! It is invoked by the table's stream (the event source mapping's filter
//! lets only inserts of claimable tasks through) and by the trigger topic
//! (tail calls from `process`). Either way it publishes at most one wake-up
//! per invocation to the process topic. A failed publish is an error, so
//! Lambda retries the batch instead of silently losing the wake-up.

use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sns::SnsEvent;
use aws_lambda_events::streams::DynamoDbEventResponse;
use lifo_core::expr::attr;
use lifo_core::{Notifier, NotifyError, Wakeup, now_ms};
use serde_json::Value;

/// Why an invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    #[error("unrecognised event: {0}")]
    Unrecognised(String),
    #[error("malformed {source_name} event: {message}")]
    Malformed {
        source_name: &'static str,
        message: String,
    },
    #[error(transparent)]
    Publish(#[from] NotifyError),
}

impl From<TriggerError> for lambda_runtime::Diagnostic {
    fn from(e: TriggerError) -> Self {
        let error_type = match &e {
            TriggerError::Unrecognised(_) | TriggerError::Malformed { .. } => "MalformedEvent",
            TriggerError::Publish(_) => "PublishFailed",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: e.to_string(),
        }
    }
}

/// What one invocation saw and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TriggerOutcome {
    /// Records that announced claimable work (stream inserts or tail calls).
    pub signals: usize,
    /// Records ignored (not an insert of a claimable task).
    pub ignored: usize,
    /// Whether a wake-up was published.
    pub published: bool,
}

/// The trigger function's handler.
#[derive(Debug, Clone)]
pub struct Trigger {
    notifier: Notifier,
}

/// The two event shapes the trigger accepts.
enum Source {
    Stream(StreamEvent),
    Sns(SnsEvent),
}

fn classify(event: Value) -> Result<Source, TriggerError> {
    let first = event
        .get("Records")
        .and_then(|r| r.get(0))
        .cloned()
        .unwrap_or(Value::Null);
    let source = first
        .get("eventSource")
        .or_else(|| first.get("EventSource"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match source.as_deref() {
        Some("aws:dynamodb") => serde_json::from_value(event)
            .map(Source::Stream)
            .map_err(|e| TriggerError::Malformed { source_name: "DynamoDB stream", message: e.to_string() }),
        Some("aws:sns") => serde_json::from_value(event)
            .map(Source::Sns)
            .map_err(|e| TriggerError::Malformed { source_name: "SNS", message: e.to_string() }),
        Some(other) => Err(TriggerError::Unrecognised(format!("Records[0] has event source {other:?}; expected aws:dynamodb or aws:sns"))),
        None => Err(TriggerError::Unrecognised("expected a Records array whose first record has eventSource aws:dynamodb or EventSource aws:sns".into())),
    }
}

impl Trigger {
    pub fn new(notifier: Notifier) -> Self {
        Self { notifier }
    }

    /// Handles a raw invocation event. The response is the stream's partial
    /// batch response (always empty: records are only signals, and a failed
    /// publish fails the whole invocation so that Lambda retries it).
    pub async fn handle(&self, event: Value) -> Result<DynamoDbEventResponse, TriggerError> {
        self.handle_outcome(event)
            .await
            .map(|_| DynamoDbEventResponse::default())
    }

    /// As [`Trigger::handle`], returning what was done.
    pub async fn handle_outcome(&self, event: Value) -> Result<TriggerOutcome, TriggerError> {
        let (mut outcome, reason) = match classify(event)? {
            Source::Stream(e) => {
                // The event source mapping's filter already drops everything
                // else; checking again keeps the function correct without it.
                let signals = e
                    .records
                    .iter()
                    .filter(|r| {
                        r.event_name == "INSERT"
                            && r.change.new_image.get(attr::CLAIMABLE_AT).is_some()
                    })
                    .count();
                (
                    TriggerOutcome {
                        signals,
                        ignored: e.records.len() - signals,
                        published: false,
                    },
                    "stream-insert",
                )
            }
            Source::Sns(e) => (
                TriggerOutcome {
                    signals: e.records.len(),
                    ignored: 0,
                    published: false,
                },
                "tail-call",
            ),
        };
        if outcome.signals > 0 {
            let wakeup = Wakeup {
                source: "trigger".into(),
                reason: reason.into(),
                at: now_ms(),
            };
            let message_id = self.notifier.wake(&wakeup).await?;
            outcome.published = true;
            tracing::info!(
                event = "wakeup.published",
                reason,
                signals = outcome.signals,
                message_id,
                "woke the processor"
            );
        } else {
            tracing::info!(
                event = "wakeup.skipped",
                ignored = outcome.ignored,
                "no claimable work in this batch"
            );
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests;
