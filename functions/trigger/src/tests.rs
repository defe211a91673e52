use super::*;
use aws_sdk_sns::Client;
use aws_sdk_sns::operation::publish::{PublishError, PublishOutput};
use aws_sdk_sns::types::error::InternalErrorException;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use serde_json::json;

fn fixture(name: &str) -> Value {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn ok_publish() -> Rule {
    mock!(Client::publish)
        .match_requests(|r| r.topic_arn() == Some("arn:process"))
        .sequence()
        .output(|| PublishOutput::builder().message_id("m").build())
        .repeatedly()
        .build()
}

fn trigger(rule: &Rule) -> Trigger {
    let client = mock_client!(aws_sdk_sns, RuleMode::MatchAny, [rule], |c| {
        c.retry_config(aws_sdk_sns::config::retry::RetryConfig::disabled())
    });
    Trigger::new(Notifier::new(client, "arn:process"))
}

#[tokio::test]
async fn stream_fixture_publishes_one_wakeup() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(fixture("trigger-stream-insert.json"))
        .await
        .unwrap();
    assert_eq!(
        out,
        TriggerOutcome {
            signals: 2,
            ignored: 0,
            published: true
        }
    );
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn tail_call_fixture_publishes_one_wakeup() {
    let rule = ok_publish();
    let out = trigger(&rule)
        .handle_outcome(fixture("trigger-tail-call.json"))
        .await
        .unwrap();
    assert_eq!(
        out,
        TriggerOutcome {
            signals: 1,
            ignored: 0,
            published: true
        }
    );
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn modify_and_unclaimable_inserts_do_not_wake() {
    let mut event = fixture("trigger-stream-insert.json");
    event["Records"][0]["eventName"] = json!("MODIFY");
    event["Records"][1]["dynamodb"]["NewImage"]
        .as_object_mut()
        .unwrap()
        .remove("claimableAt");
    let rule = ok_publish();
    let out = trigger(&rule).handle_outcome(event).await.unwrap();
    assert_eq!(
        out,
        TriggerOutcome {
            signals: 0,
            ignored: 2,
            published: false
        }
    );
    assert_eq!(rule.num_calls(), 0);
}

#[tokio::test]
async fn a_failed_publish_fails_the_invocation() {
    let rule = mock!(Client::publish).then_error(|| {
        PublishError::InternalErrorException(
            InternalErrorException::builder().message("down").build(),
        )
    });
    let err = trigger(&rule)
        .handle(fixture("trigger-stream-insert.json"))
        .await
        .unwrap_err();
    assert!(matches!(err, TriggerError::Publish(_)), "{err}");
    let diag: lambda_runtime::Diagnostic = err.into();
    assert_eq!(diag.error_type, "PublishFailed");
}

#[tokio::test]
async fn malformed_events_are_errors_not_panics() {
    let rule = ok_publish();
    let t = trigger(&rule);
    for (event, expected) in [
        (json!({}), "unrecognised event: expected a Records array"),
        (
            json!({"Records": [{"eventSource": "aws:s3"}]}),
            "unrecognised event: Records[0] has event source \"aws:s3\"",
        ),
        (
            json!({"Records": [{"eventSource": "aws:dynamodb", "eventName": 5}]}),
            "malformed DynamoDB stream event: ",
        ),
        (
            json!({"Records": [{"EventSource": "aws:sns", "Sns": "x"}]}),
            "malformed SNS event: ",
        ),
    ] {
        let err = t.handle(event.clone()).await.unwrap_err().to_string();
        assert!(err.starts_with(expected), "{event} gave {err}");
    }
    assert_eq!(rule.num_calls(), 0);
}
