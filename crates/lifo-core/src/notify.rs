//! Wake-ups: one small SNS message that says "there may be work".

use aws_sdk_sns::Client;
use aws_sdk_sns::error::{DisplayErrorContext, ProvideErrorMetadata};
use serde::{Deserialize, Serialize};

/// The body of a wake-up message. Receivers do not depend on it (any message
/// wakes them); it is there for logs and traces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeup {
    /// Which function sent it: `trigger`, `process`, …
    pub source: String,
    /// Why: `stream-insert`, `tail-call`, …
    pub reason: String,
    /// Epoch milliseconds when it was sent.
    pub at: u64,
}

/// Publish attempts before giving up.
const PUBLISH_ATTEMPTS: u32 = 3;

/// A publish that failed after the SDK's own retries.
#[derive(Debug, thiserror::Error)]
#[error("publishing a wake-up to {topic_arn} failed ({code}): {message}")]
pub struct NotifyError {
    pub topic_arn: String,
    pub code: String,
    pub message: String,
}

/// Publishes wake-ups to one topic.
#[derive(Debug, Clone)]
pub struct Notifier {
    client: Client,
    topic_arn: String,
}

impl Notifier {
    pub fn new(client: Client, topic_arn: impl Into<String>) -> Self {
        Self {
            client,
            topic_arn: topic_arn.into(),
        }
    }

    pub fn topic_arn(&self) -> &str {
        &self.topic_arn
    }

    /// Publishes `wakeup`; returns the SNS message id. On top of the SDK's
    /// own retries, a failed publish is tried again (3 attempts in all, with
    /// backoff) before the error is returned: a wake-up is never dropped
    /// silently.
    pub async fn wake(&self, wakeup: &Wakeup) -> Result<String, NotifyError> {
        let mut attempt = 1;
        loop {
            match self.publish(wakeup).await {
                Ok(id) => return Ok(id),
                Err(e) if attempt < PUBLISH_ATTEMPTS => {
                    tracing::warn!(event = "wakeup.publish_retry", attempt, error = %e);
                    tokio::time::sleep(crate::store::backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn publish(&self, wakeup: &Wakeup) -> Result<String, NotifyError> {
        let body = serde_json::to_string(wakeup).map_err(|e| NotifyError {
            topic_arn: self.topic_arn.clone(),
            code: "Serialize".into(),
            message: e.to_string(),
        })?;
        let out = self
            .client
            .publish()
            .topic_arn(&self.topic_arn)
            .message(body)
            .send()
            .await
            .map_err(|e| NotifyError {
                topic_arn: self.topic_arn.clone(),
                code: e.code().unwrap_or("Unknown").to_owned(),
                message: DisplayErrorContext(&e).to_string(),
            })?;
        Ok(out.message_id.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sns::operation::publish::{PublishError, PublishOutput};
    use aws_sdk_sns::types::error::InternalErrorException;
    use aws_smithy_mocks::{mock, mock_client};

    fn wakeup() -> Wakeup {
        Wakeup {
            source: "trigger".into(),
            reason: "stream-insert".into(),
            at: 1,
        }
    }

    #[tokio::test]
    async fn publishes_the_wakeup_as_json() {
        let rule = mock!(Client::publish)
            .match_requests(|r| {
                r.topic_arn() == Some("arn:topic")
                    && r.message()
                        == Some(r#"{"source":"trigger","reason":"stream-insert","at":1}"#)
            })
            .then_output(|| PublishOutput::builder().message_id("m-1").build());
        let n = Notifier::new(mock_client!(aws_sdk_sns, [&rule]), "arn:topic");
        assert_eq!(n.wake(&wakeup()).await.unwrap(), "m-1");
        assert_eq!(rule.num_calls(), 1);
    }

    #[tokio::test]
    async fn a_transient_failure_is_retried() {
        let rule = mock!(Client::publish)
            .sequence()
            .error(|| {
                PublishError::InternalErrorException(
                    InternalErrorException::builder().message("blip").build(),
                )
            })
            .output(|| PublishOutput::builder().message_id("m-2").build())
            .build();
        let client = mock_client!(
            aws_sdk_sns,
            aws_smithy_mocks::RuleMode::MatchAny,
            [&rule],
            |c| { c.retry_config(aws_sdk_sns::config::retry::RetryConfig::disabled()) }
        );
        assert_eq!(
            Notifier::new(client, "arn:topic")
                .wake(&wakeup())
                .await
                .unwrap(),
            "m-2"
        );
        assert_eq!(rule.num_calls(), 2);
    }

    #[tokio::test]
    async fn a_failed_publish_is_an_error_naming_the_topic() {
        let rule = mock!(Client::publish).then_error(|| {
            PublishError::InternalErrorException(
                InternalErrorException::builder()
                    .message("boom")
                    .meta(
                        aws_sdk_sns::error::ErrorMetadata::builder()
                            .code("InternalError")
                            .message("boom")
                            .build(),
                    )
                    .build(),
            )
        });
        let client = mock_client!(
            aws_sdk_sns,
            aws_smithy_mocks::RuleMode::MatchAny,
            [&rule],
            |c| { c.retry_config(aws_sdk_sns::config::retry::RetryConfig::disabled()) }
        );
        let err = Notifier::new(client, "arn:topic")
            .wake(&wakeup())
            .await
            .unwrap_err();
        assert_eq!(err.topic_arn, "arn:topic");
        assert_eq!(err.code, "InternalError");
        assert!(err.to_string().contains("arn:topic"), "{err}");
    }
}
