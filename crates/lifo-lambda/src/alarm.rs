//! The rest alarm: a wake-up that arrives when a resting task may run
//! again, so that nothing has to stay awake (or poll) to start it on time.
//!
//! A task put back after a failure or a busy answer rests until its
//! `retryAt`. An invocation that ends while rests it started are still
//! running sends, for each cluster of rest ends ([`clusters`]: the ends
//! within [`CLUSTER`] of the cluster's first), one message to the
//! rest-wake queue (SQS, `RestWakeQueue` in template.yaml), ten to a
//! request, delayed until the cluster's first end and naming its last as
//! [`Wakeup::wake_at`]. SQS hides each until then, and the queue's event
//! source mapping hands it to `trigger`, which publishes the wake-up with
//! that `wakeAt`; the processor it wakes keeps looking until then, so
//! every task of the cluster starts when its rest ends, not up to a minute
//! later at the next sweep. (An alarm without `wakeAt` would not do: the
//! invocation it wakes knows nothing of the rests an earlier one started.)
//! SQS delays a message by at most 15 minutes: a longer rest's message
//! arrives early, and trigger sets the alarm again for what is left.
//!
//! The delay is rounded down to a whole second ([`PRECISION`]), so a
//! wake-up comes at most [`MAX_REST_SLEEP`] before the last end it names.
//!
//! Cost per alarm: a tenth of a SendMessageBatch, its share of the
//! mapping's ReceiveMessage and DeleteMessage, one trigger invocation, one
//! SNS publish and one process invocation (the wake-up it would need
//! anyway); tasks whose rests end together share one.

use crate::notify::{Wakeup, retry_config};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::ProvideErrorMetadata;
use lifo_core::error::BoxError;
use std::time::Duration;

/// The longest delay SQS gives one message.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// A delay is whole seconds, rounded down: an alarm comes up to this much
/// early.
pub const PRECISION: Duration = Duration::from_secs(1);

/// Rest ends this close to a cluster's first share its alarm.
pub const CLUSTER: Duration = Duration::from_secs(2);

/// A rest that ends within this long is waited for in the invocation (a
/// second of a 256 MB Lambda costs about what an alarm's requests do, and
/// an alarm comes up to [`CLUSTER`] + [`PRECISION`] before the last end
/// it names); a later one is left to the alarm.
pub const MAX_REST_SLEEP: Duration = Duration::from_secs(3);

/// A message that could not be sent after the SDK's retries.
#[derive(Debug, thiserror::Error)]
#[error("setting the rest alarm on {queue_url} failed ({code})")]
pub struct AlarmError {
    pub queue_url: String,
    pub code: String,
    #[source]
    pub source: BoxError,
}

/// Sends delayed wake-ups to the rest-wake queue.
#[derive(Debug, Clone)]
pub struct RestAlarm {
    client: Client,
    queue_url: String,
}

impl RestAlarm {
    /// An alarm on `client` (its endpoint, credentials and interceptors),
    /// retrying as wake-ups do ([`retry_config`]).
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        // No trace header: SQS would link the trace of the invocation it
        // wakes to this one, and X-Ray keeps at most 20 links a segment and
        // 100 a trace, so an invocation that sets hundreds of alarms would
        // leave its trace incomplete. The wake-up names the trace instead
        // ([`Wakeup::previous_trace`]), as a tail call's does.
        let config = client
            .config()
            .to_builder()
            .retry_config(retry_config())
            .interceptor(crate::notify::NoTraceHeader)
            .build();
        Self {
            client: Client::from_conf(config),
            queue_url: queue_url.into(),
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// The `DelaySeconds` of a wake-up due at `wake_at` (epoch ms), seen
    /// at `now_ms`: whole seconds rounded down, at most [`MAX_DELAY`].
    pub fn delay(wake_at: u64, now_ms: u64) -> Duration {
        Duration::from_secs(wake_at.saturating_sub(now_ms) / 1000).min(MAX_DELAY)
    }

    /// Sends each of `alarms`, a wake-up to deliver at an epoch ms, in
    /// batches of ten; returns how many.
    pub async fn set_all(
        &self,
        alarms: &[(u64, Wakeup)],
        now_ms: u64,
    ) -> Result<usize, AlarmError> {
        let fail = |code: &str, source: BoxError| AlarmError {
            queue_url: self.queue_url.clone(),
            code: code.to_owned(),
            source,
        };
        for (b, batch) in alarms.chunks(10).enumerate() {
            let mut send = self.client.send_message_batch().queue_url(&self.queue_url);
            for (i, (deliver_at, w)) in batch.iter().enumerate() {
                let delay = Self::delay(*deliver_at, now_ms);
                let body = serde_json::to_string(w).map_err(|e| fail("Serialize", e.into()))?;
                let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(format!("a{}", b * 10 + i))
                    .message_body(body)
                    .delay_seconds(delay.as_secs() as i32)
                    .build()
                    .map_err(|e| fail("Build", e.into()))?;
                send = send.entries(entry);
            }
            let out = send.send().await.map_err(|e| {
                let code = e.code().unwrap_or("Unknown").to_owned();
                fail(&code, e.into())
            })?;
            if let Some(f) = out.failed.first() {
                return Err(fail(
                    f.code(),
                    format!(
                        "{} of {} entries refused: {}",
                        out.failed.len(),
                        batch.len(),
                        f.message().unwrap_or_default()
                    )
                    .into(),
                ));
            }
        }
        Ok(alarms.len())
    }

    /// Sends `wakeup` (its [`Wakeup::wake_at`] set) to arrive when it is
    /// due, or [`MAX_DELAY`] from now if that is sooner; returns the delay.
    pub async fn set(&self, wakeup: &Wakeup, now_ms: u64) -> Result<Duration, AlarmError> {
        let fail = |code: &str, source: BoxError| AlarmError {
            queue_url: self.queue_url.clone(),
            code: code.to_owned(),
            source,
        };
        let delay = Self::delay(wakeup.wake_at.unwrap_or(now_ms), now_ms);
        let body = serde_json::to_string(wakeup).map_err(|e| fail("Serialize", e.into()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(delay.as_secs() as i32)
            .send()
            .await
            .map_err(|e| {
                let code = e.code().unwrap_or("Unknown").to_owned();
                fail(&code, e.into())
            })?;
        Ok(delay)
    }
}

/// The clusters of rest ends `ends` (epoch ms, sorted), as `(first,
/// last)`: each run of ends within [`CLUSTER`] of its first. One alarm
/// wakes a cluster at its first end, and the processor looks until its
/// last.
pub fn clusters(ends: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let window = CLUSTER.as_millis() as u64;
    let mut out: Vec<(u64, u64)> = Vec::new();
    for end in ends {
        match out.last_mut() {
            Some((first, last)) if end <= *first + window => *last = end,
            _ => out.push((end, end)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::operation::send_message::SendMessageOutput;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    #[test]
    fn the_delay_is_whole_seconds_down_to_the_rest_end_and_at_most_fifteen_minutes() {
        assert_eq!(RestAlarm::delay(10_999, 1_000), Duration::from_secs(9));
        assert_eq!(RestAlarm::delay(11_000, 1_000), Duration::from_secs(10));
        assert_eq!(RestAlarm::delay(500, 1_000), Duration::ZERO);
        assert_eq!(RestAlarm::delay(3_600_000, 0), MAX_DELAY);
    }

    #[test]
    fn rest_ends_within_two_seconds_of_a_clusters_first_share_its_alarm() {
        assert_eq!(
            clusters([1_000, 2_500, 3_000, 3_001, 9_000]),
            [(1_000, 3_000), (3_001, 3_001), (9_000, 9_000)]
        );
        assert!(clusters([]).is_empty());
    }

    #[tokio::test]
    async fn alarms_go_ten_to_a_request_each_with_its_delay() {
        let batch = mock!(aws_sdk_sqs::Client::send_message_batch)
            .match_requests(|r| {
                r.entries().len() <= 10
                    && r.entries().iter().all(|e| {
                        serde_json::from_str::<Wakeup>(e.message_body()).is_ok_and(|w| {
                            w.wake_at.map(|at| (at - 1_000) / 1000)
                                == e.delay_seconds().map(|d| d as u64)
                        })
                    })
            })
            .sequence()
            .output(|| {
                aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput::builder()
                    .set_successful(Some(vec![]))
                    .set_failed(Some(vec![]))
                    .build()
                    .unwrap()
            })
            .times(2)
            .build();
        let client = mock_client!(aws_sdk_sqs, RuleMode::Sequential, [&batch]);
        let alarms: Vec<(u64, Wakeup)> = (0..12u64)
            .map(|i| {
                let at = 1_000 + i * 5_000;
                let w = Wakeup {
                    wake_at: Some(at),
                    ..Wakeup::new("process", "rest-end", 1_000)
                };
                (at, w)
            })
            .collect();
        let n = RestAlarm::new(client, "q")
            .set_all(&alarms, 1_000)
            .await
            .unwrap();
        assert_eq!(n, 12);
        assert_eq!(batch.num_calls(), 2);
    }

    #[tokio::test]
    async fn the_message_carries_the_wakeup_and_its_delay() {
        let sent = mock!(aws_sdk_sqs::Client::send_message)
            .match_requests(|r| {
                r.delay_seconds() == Some(5)
                    && r.queue_url() == Some("q")
                    && r.message_body().is_some_and(|b| {
                        serde_json::from_str::<Wakeup>(b).is_ok_and(|w| w.wake_at == Some(6_500))
                    })
            })
            .then_output(|| SendMessageOutput::builder().build());
        let client = mock_client!(aws_sdk_sqs, RuleMode::Sequential, [&sent]);
        let alarm = RestAlarm::new(client, "q");
        let wakeup = Wakeup {
            wake_at: Some(6_500),
            ..Wakeup::new("process", "rest-end", 1_000)
        };
        assert_eq!(
            alarm.set(&wakeup, 1_000).await.unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(sent.num_calls(), 1);
    }

    /// SQS links the traces of what a message wakes to the sender's
    /// trace header; an alarm sends none (issue 50, item 9).
    #[tokio::test]
    async fn an_alarm_goes_without_the_trace_header() {
        let wire = crate::testing::TraceWire::answering(r#"{"Successful":[],"Failed":[]}"#);
        let conf = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "a", "b", None, None, "t",
            ))
            .http_client(wire.http_client())
            .interceptor(crate::testing::LambdasTraceHeader)
            .build();
        let plain = Client::from_conf(conf);
        // The client as given sends the header: the test can see it.
        let _ = plain.get_queue_url().queue_name("q").send().await;
        let alarm = RestAlarm::new(plain, "https://sqs/q");
        let wakeup = Wakeup {
            wake_at: Some(6_500),
            ..Wakeup::new("process", "rest-end", 1_000)
        };
        alarm.set_all(&[(6_500, wakeup)], 1_000).await.unwrap();
        let headers = wire.headers();
        assert_eq!(headers.len(), 2, "{headers:?}");
        assert!(headers[0].is_some(), "{headers:?}");
        assert_eq!(headers[1], None, "the alarm carries no trace header");
    }

    #[tokio::test]
    async fn a_failed_send_names_the_queue_and_the_code() {
        let refused = mock!(aws_sdk_sqs::Client::send_message).then_error(|| {
            aws_sdk_sqs::operation::send_message::SendMessageError::QueueDoesNotExist(
                aws_sdk_sqs::types::error::QueueDoesNotExist::builder()
                    .message("gone")
                    .meta(
                        aws_sdk_sqs::error::ErrorMetadata::builder()
                            .code("QueueDoesNotExist")
                            .build(),
                    )
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_sqs, RuleMode::Sequential, [&refused]);
        let e = RestAlarm::new(client, "q")
            .set(&Wakeup::new("process", "rest-end", 0), 0)
            .await
            .unwrap_err();
        assert_eq!(e.queue_url, "q");
        assert_eq!(
            e.to_string(),
            "setting the rest alarm on q failed (QueueDoesNotExist)"
        );
    }
}
