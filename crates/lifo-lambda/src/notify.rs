//! Wake-ups: one small SNS message that says "there may be work", and
//! the one fan-out of them ([`Fanout`]): a wake-up per shard group with
//! work when more than one processor claims.

use aws_sdk_sns::Client;
use aws_sdk_sns::config::retry::RetryConfig;
use aws_sdk_sns::error::ProvideErrorMetadata;
use lifo_core::error::BoxError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The body of a wake-up message. Receivers do not depend on it (any message
/// wakes them); it is there for logs and traces, and a tail call's hands
/// over what the next invocation of the loop starts from (`handover`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeup {
    /// Which function sent it: `trigger`, `process`, …
    pub source: String,
    /// Why: `stream-insert`, `tail-call`, …
    pub reason: String,
    /// Epoch milliseconds when it was sent.
    pub at: u64,
    /// The shard group with work (more than one processor): the processor
    /// it wakes takes that group first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The X-Ray trace of the invocation that tail-called: each invocation
    /// of the loop starts a trace of its own (a busy queue's loop would
    /// grow one trace past X-Ray's size limits), and names the one before.
    #[serde(
        default,
        rename = "previousTrace",
        skip_serializing_if = "Option::is_none"
    )]
    pub previous_trace: Option<String>,
    /// A rest alarm's ([`crate::alarm`]): epoch ms when the rest it is
    /// for ends.
    #[serde(default, rename = "wakeAt", skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<u64>,
    /// A tail call's: what the processor's claim policy hands to the next
    /// invocation (process's `select::Handover`), forwarded as it came. Its
    /// contents are the processor's alone; an old or unknown one is
    /// ignored there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<serde_json::Value>,
}

impl Wakeup {
    /// A wake-up from `source` for `reason`, sent at `at` (epoch ms), for
    /// every group.
    pub fn new(source: &str, reason: &str, at: u64) -> Self {
        Self {
            source: source.to_owned(),
            reason: reason.to_owned(),
            at,
            group: None,
            previous_trace: None,
            wake_at: None,
            handover: None,
        }
    }
}

/// Tries of one publish (the first and up to four retries).
pub const PUBLISH_ATTEMPTS: u32 = 5;

/// The one retry policy of wake-ups: the SDK's standard retries (throttling,
/// 5xx, connection errors), [`PUBLISH_ATTEMPTS`] tries with exponential
/// backoff and jitter from 200 ms: at most about 3 s of waiting, well inside
/// the trigger's 30 s timeout.
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(PUBLISH_ATTEMPTS)
        .with_initial_backoff(Duration::from_millis(200))
}

/// A publish that failed after the retries.
#[derive(Debug, thiserror::Error)]
#[error("publishing a wake-up to {topic_arn} failed ({code})")]
pub struct NotifyError {
    pub topic_arn: String,
    pub code: String,
    #[source]
    pub source: BoxError,
}

/// Where a function sends its wake-ups: an SNS topic ([`Notifier`]) as
/// deployed, or a simulation's own delivery of them. The answer is the
/// message's id.
pub trait Wake: Send + Sync + std::fmt::Debug {
    fn wake<'a>(
        &'a self,
        wakeup: &'a Wakeup,
    ) -> Pin<Box<dyn Future<Output = Result<String, NotifyError>> + Send + 'a>>;
}

impl Wake for Notifier {
    fn wake<'a>(
        &'a self,
        wakeup: &'a Wakeup,
    ) -> Pin<Box<dyn Future<Output = Result<String, NotifyError>> + Send + 'a>> {
        Box::pin(Notifier::wake(self, wakeup))
    }
}

/// Publishes wake-ups to one topic.
#[derive(Debug, Clone)]
pub struct Notifier {
    client: Client,
    topic_arn: String,
    /// Its wake-ups start new traces (a tail call): no trace header.
    new_traces: bool,
}

/// Takes the X-Ray trace header off a request: the SDK adds it from
/// `_X_AMZN_TRACE_ID`, and SNS carries it to the functions it invokes. It
/// is not signed, so it may go after signing.
#[derive(Debug)]
pub(crate) struct NoTraceHeader;

impl aws_smithy_runtime_api::client::interceptors::Intercept for NoTraceHeader {
    fn name(&self) -> &'static str {
        "NoTraceHeader"
    }

    fn modify_before_transmit(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        context
            .request_mut()
            .headers_mut()
            .remove("x-amzn-trace-id");
        Ok(())
    }
}

impl Notifier {
    /// A notifier on `client` (its endpoint, credentials and interceptors),
    /// retrying with [`retry_config`].
    pub fn new(client: Client, topic_arn: impl Into<String>) -> Self {
        let config = client
            .config()
            .to_builder()
            .retry_config(retry_config())
            .build();
        Self {
            client: Client::from_conf(config),
            topic_arn: topic_arn.into(),
            new_traces: false,
        }
    }

    /// Its wake-ups start a new X-Ray trace in the function they invoke
    /// (the tail call): neither the SDK's trace header nor the
    /// `AWSTraceHeader` attribute goes with them. Put the current trace in
    /// [`Wakeup::previous_trace`] to keep the chain.
    pub fn starting_new_traces(mut self) -> Self {
        if !self.new_traces {
            let config = self
                .client
                .config()
                .to_builder()
                .interceptor(NoTraceHeader)
                .build();
            self.client = Client::from_conf(config);
            self.new_traces = true;
        }
        self
    }

    pub fn topic_arn(&self) -> &str {
        &self.topic_arn
    }

    /// Publishes `wakeup` and returns the SNS message id. A failed publish
    /// is retried by the SDK ([`retry_config`]) and then returned as an
    /// error: a wake-up is never dropped silently.
    pub async fn wake(&self, wakeup: &Wakeup) -> Result<String, NotifyError> {
        let body = serde_json::to_string(wakeup).map_err(|e| NotifyError {
            topic_arn: self.topic_arn.clone(),
            code: "Serialize".into(),
            source: e.into(),
        })?;
        let mut publish = self
            .client
            .publish()
            .topic_arn(&self.topic_arn)
            .message(body);
        // Under a sampled trace, the wake-up names it (`AWSTraceHeader`,
        // parent: the current subsegment or function segment). In AWS, SNS
        // active tracing carries the trace by itself; the local pipeline
        // reads this attribute to continue the trace in the next hop.
        if let Some(trace) = crate::xray::current().filter(|_| !self.new_traces) {
            publish = publish.message_attributes(
                crate::xray::TRACE_ATTRIBUTE,
                aws_sdk_sns::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(trace.header())
                    .build()
                    .map_err(|e| NotifyError {
                        topic_arn: self.topic_arn.clone(),
                        code: "MessageAttribute".into(),
                        source: e.into(),
                    })?,
            );
        }
        let out = publish.send().await.map_err(|e| NotifyError {
            topic_arn: self.topic_arn.clone(),
            code: e.code().unwrap_or("Unknown").to_owned(),
            source: e.into(),
        })?;
        Ok(out.message_id.unwrap_or_default())
    }
}

/// Publishes wake-ups to the process topic: one per shard group with work
/// when `processors` (`PROCESSOR_COUNT`) is more than one, each naming its
/// group; else one naming none. create, trigger and scheduler-start wake
/// the processor through it.
#[derive(Debug, Clone)]
pub struct Fanout {
    pub notifier: Arc<dyn Wake>,
    pub processors: u32,
}

impl Fanout {
    pub fn new(notifier: impl Wake + 'static, processors: u32) -> Self {
        Self::over(Arc::new(notifier), processors)
    }

    /// Sending through a shared [`Wake`].
    pub fn over(notifier: Arc<dyn Wake>, processors: u32) -> Self {
        Self {
            notifier,
            processors: processors.max(1),
        }
    }

    /// The wake-ups to publish (each a group, or none) for work in every
    /// group (`all`) or in `groups`: nothing for no work.
    pub fn targets(&self, all: bool, groups: &BTreeSet<u32>) -> Vec<Option<u32>> {
        if self.processors <= 1 {
            if all || !groups.is_empty() {
                vec![None]
            } else {
                Vec::new()
            }
        } else if all {
            (0..self.processors).map(Some).collect()
        } else {
            groups.iter().copied().map(Some).collect()
        }
    }

    /// Publishes `wakeup` for `group`, logging it (`wakeup.published`);
    /// its message id.
    pub async fn wake(&self, wakeup: &Wakeup, group: Option<u32>) -> Result<String, NotifyError> {
        let wakeup = Wakeup {
            group,
            ..wakeup.clone()
        };
        let message_id = self.notifier.wake(&wakeup).await?;
        tracing::info!(
            event = "wakeup.published",
            source = %wakeup.source,
            reason = %wakeup.reason,
            group,
            messageId = message_id,
            "woke the processor"
        );
        Ok(message_id)
    }

    /// Publishes `wakeup` for each of `targets`, in order, stopping at the
    /// first failure; how many were published.
    pub async fn wake_all(
        &self,
        wakeup: &Wakeup,
        targets: &[Option<u32>],
    ) -> Result<usize, NotifyError> {
        for group in targets {
            self.wake(wakeup, *group).await?;
        }
        Ok(targets.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sns::operation::publish::PublishOutput;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    fn wakeup() -> Wakeup {
        Wakeup::new("trigger", "stream-insert", 1)
    }

    #[test]
    fn a_handover_travels_as_it_came_and_old_fields_are_ignored() {
        let mut w = Wakeup::new("process", "tail-call", 10_000);
        w.handover = Some(serde_json::json!({"someLayer": {"at": 1, "n": [1, 2]}}));
        let json = serde_json::to_string(&w).unwrap();
        let back: Wakeup = serde_json::from_str(&json).unwrap();
        assert_eq!(back, w);
        // The previous version's fields read as a wake-up without one.
        let old = r#"{"source":"process","reason":"tail-call","at":1,"served":{"a":[0]},"kept":[{"taskId":"t"}]}"#;
        let old: Wakeup = serde_json::from_str(old).unwrap();
        assert_eq!(old, Wakeup::new("process", "tail-call", 1));
        // Whatever its shape, it does not stop the wake-up being read.
        let odd: Wakeup =
            serde_json::from_str(r#"{"source":"x","reason":"y","at":1,"handover":5}"#).unwrap();
        assert_eq!(odd.handover, Some(serde_json::json!(5)));
        let plain = serde_json::to_string(&Wakeup::new("trigger", "x", 1)).unwrap();
        assert!(!plain.contains("handover"), "{plain}");
    }

    /// The header is what SNS carries to the function it invokes, so the
    /// tail call must not send it (issue 32, item 4); other wake-ups do.
    #[tokio::test]
    async fn a_tail_call_goes_without_the_trace_header_other_wake_ups_keep_it() {
        let wire = crate::testing::TraceWire::answering(
            "<PublishResponse><PublishResult><MessageId>m-1</MessageId></PublishResult>\
             <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishResponse>",
        );
        let conf = aws_sdk_sns::Config::builder()
            .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sns::config::Credentials::new(
                "a", "b", None, None, "t",
            ))
            .http_client(wire.http_client())
            .interceptor(crate::testing::LambdasTraceHeader)
            .build();
        let plain = Notifier::new(Client::from_conf(conf), "arn:topic");
        let tail = plain.clone().starting_new_traces();
        plain.wake(&wakeup()).await.unwrap();
        tail.wake(&wakeup()).await.unwrap();
        let headers = wire.headers();
        assert_eq!(headers.len(), 2);
        assert!(
            headers[0]
                .as_deref()
                .is_some_and(|h| h.starts_with("Root=1-")),
            "{headers:?}"
        );
        assert_eq!(headers[1], None, "the tail call carries no trace header");
    }

    const INTERNAL_ERROR: &str = "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalError</Code>\
        <Message>boom</Message></Error><RequestId>r</RequestId></ErrorResponse>";

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

    /// One policy: the SDK's retries, whatever the client was built with
    /// (here: none), and nothing on top of them.
    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_by_the_sdk_policy() {
        let rule = mock!(Client::publish)
            .sequence()
            .http_status(500, Some(INTERNAL_ERROR.into()))
            .times(2)
            .output(|| PublishOutput::builder().message_id("m-2").build())
            .build();
        let client = mock_client!(aws_sdk_sns, RuleMode::Sequential, [&rule], |c| {
            c.retry_config(RetryConfig::disabled())
        });
        let n = Notifier::new(client, "arn:topic");
        assert_eq!(n.wake(&wakeup()).await.unwrap(), "m-2");
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_publish_is_an_error_naming_the_topic_after_every_attempt() {
        let rule = mock!(Client::publish)
            .sequence()
            .http_status(500, Some(INTERNAL_ERROR.into()))
            .repeatedly()
            .build();
        let client = mock_client!(aws_sdk_sns, RuleMode::Sequential, [&rule]);
        let err = Notifier::new(client, "arn:topic")
            .wake(&wakeup())
            .await
            .unwrap_err();
        assert_eq!(rule.num_calls(), PUBLISH_ATTEMPTS as usize);
        assert_eq!(err.topic_arn, "arn:topic");
        assert_eq!(err.code, "InternalError");
        let chain = lifo_core::error::chain(&err);
        assert!(
            chain.starts_with("publishing a wake-up to arn:topic failed (InternalError): ")
                && chain.contains("boom"),
            "{chain}"
        );
    }

    #[test]
    fn a_fanout_wakes_one_per_group_with_work_or_one_for_a_single_processor() {
        let unused = mock!(aws_sdk_sns::Client::publish)
            .then_output(|| PublishOutput::builder().message_id("m").build());
        let client = mock_client!(aws_sdk_sns, [&unused]);
        let one = Fanout::new(Notifier::new(client.clone(), "t"), 1);
        let three = Fanout::new(Notifier::new(client, "t"), 3);
        let some = BTreeSet::from([2, 0]);
        assert_eq!(one.targets(false, &some), [None]);
        assert_eq!(one.targets(true, &BTreeSet::new()), [None]);
        assert!(one.targets(false, &BTreeSet::new()).is_empty());
        assert_eq!(three.targets(false, &some), [Some(0), Some(2)]);
        assert_eq!(three.targets(true, &some), [Some(0), Some(1), Some(2)]);
    }
}
