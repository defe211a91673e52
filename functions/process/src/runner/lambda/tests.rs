//! Every answer mapping of the worker Lambda runner, against the real SDK
//! client with mocked responses (aws-smithy-mocks).

use super::*;
use aws_sdk_lambda::Client;
use aws_sdk_lambda::operation::invoke::InvokeOutput;
use aws_sdk_lambda::types::error::{
    ResourceNotFoundException, ResourceNotReadyException, ServiceException,
    TooManyRequestsException,
};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use serde_json::Map;

fn task() -> Task {
    let mut payload = Map::new();
    payload.insert("orderId".into(), Value::from(1001));
    let mut t = Task::new_pending("order-1001".into(), payload, 1_764_547_200_000, 3600, 1);
    t.attempts = 2;
    t.user_id = Some("u-7".into());
    t
}

async fn run(rule: &Rule) -> RunOutcome {
    let client = mock_client!(aws_sdk_lambda, RuleMode::MatchAny, [rule]);
    LambdaRunner::with_client(client, "worker".into(), 4, Duration::from_secs(30))
        .run(&task())
        .await
}

fn answer(function_error: Option<&'static str>, body: &'static str) -> Rule {
    mock!(Client::invoke).then_output(move || {
        InvokeOutput::builder()
            .status_code(200)
            .set_function_error(function_error.map(str::to_owned))
            .payload(Blob::new(body))
            .build()
    })
}

#[tokio::test]
async fn the_request_is_the_documented_one() {
    let fixture: Value =
        serde_json::from_str(include_str!("../../../../../events/worker-request.json")).unwrap();
    let rule = mock!(Client::invoke)
        .match_requests(move |r| {
            r.function_name() == Some("worker")
                && r.invocation_type() == Some(&InvocationType::RequestResponse)
                && r.payload()
                    .and_then(|p| serde_json::from_slice::<Value>(p.as_ref()).ok())
                    .as_ref()
                    == Some(&fixture)
        })
        .then_output(|| InvokeOutput::builder().status_code(200).build());
    assert_eq!(run(&rule).await, RunOutcome::Success);
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn a_normal_answer_is_success() {
    for body in [
        "{\"thumbnail\": \"s3://b/k\"}",
        "null",
        "",
        "{\"outcome\": \"success\"}",
        "42",
    ] {
        assert_eq!(
            run(&answer(None, body)).await,
            RunOutcome::Success,
            "{body}"
        );
    }
}

#[tokio::test]
async fn retry_later_gives_the_attempt_back_with_the_workers_hint() {
    assert_eq!(
        run(&answer(None, r#"{"outcome": "retry-later"}"#)).await,
        RunOutcome::RetryLater("worker asked to retry later".into())
    );
    assert_eq!(
        run(&answer(
            None,
            r#"{"outcome": "retry-later", "reason": "quota", "retryAfterSeconds": 30}"#
        ))
        .await,
        RunOutcome::RetryAfter("quota".into(), Duration::from_secs(30))
    );
    assert_eq!(
        run(&answer(None, r#"{"outcome": "done"}"#)).await,
        RunOutcome::Failure(
            "worker answered outcome \"done\"; expected \"success\" or \"retry-later\"".into()
        )
    );
}

#[tokio::test]
async fn a_function_error_is_a_failed_run_with_its_type_and_message() {
    assert_eq!(
        run(&answer(
            Some("Unhandled"),
            r#"{"errorType": "ValueError", "errorMessage": "no such order", "stackTrace": []}"#
        ))
        .await,
        RunOutcome::Failure("ValueError: no such order".into())
    );
    assert_eq!(
        run(&answer(Some("Handled"), r#"{"errorMessage": "bad input"}"#)).await,
        RunOutcome::Failure("Handled error: bad input".into())
    );
    let long = format!(
        r#"{{"errorType": "E", "errorMessage": "{}"}}"#,
        "x".repeat(5000)
    );
    let body: &'static str = Box::leak(long.into_boxed_str());
    let RunOutcome::Failure(m) = run(&answer(Some("Unhandled"), body)).await else {
        panic!("a failure")
    };
    assert_eq!(m.len(), ERROR_SNIPPET);
}

#[tokio::test]
async fn a_timed_out_worker_is_a_timed_out_run() {
    assert_eq!(
        run(&answer(
            Some("Unhandled"),
            r#"{"errorType": "Sandbox.Timedout", "errorMessage": "RequestId: r Error: Task timed out after 3.00 seconds"}"#
        ))
        .await,
        RunOutcome::TimedOut(
            "worker timed out: RequestId: r Error: Task timed out after 3.00 seconds".into()
        )
    );
}

#[tokio::test]
async fn lambdas_refusals_burn_no_attempt_unless_they_are_permanent() {
    let throttled = mock!(Client::invoke).then_error(|| {
        InvokeError::TooManyRequestsException(
            TooManyRequestsException::builder()
                .message("Rate Exceeded.")
                .retry_after_seconds("7")
                .build(),
        )
    });
    assert_eq!(
        run(&throttled).await,
        RunOutcome::RetryAfter(
            "Lambda TooManyRequestsException: Rate Exceeded.".into(),
            Duration::from_secs(7)
        )
    );
    let not_ready = mock!(Client::invoke).then_error(|| {
        InvokeError::ResourceNotReadyException(
            ResourceNotReadyException::builder()
                .message("Functions creating")
                .build(),
        )
    });
    assert!(
        matches!(run(&not_ready).await, RunOutcome::RetryLater(m) if m.contains("ResourceNotReadyException"))
    );
    let service = mock!(Client::invoke).then_error(|| {
        InvokeError::ServiceException(ServiceException::builder().message("oops").build())
    });
    assert!(
        matches!(run(&service).await, RunOutcome::RetryLater(m) if m.contains("ServiceException"))
    );
    let gone = mock!(Client::invoke).then_error(|| {
        InvokeError::ResourceNotFoundException(
            ResourceNotFoundException::builder()
                .message("Function not found")
                .build(),
        )
    });
    assert_eq!(
        run(&gone).await,
        RunOutcome::Failure("Lambda ResourceNotFoundException: Function not found".into())
    );
}

/// A Lambda endpoint on loopback that answers every request with `head`
/// and then `body`, repeated `repeat` times (`usize::MAX`: without end).
async fn raw_endpoint(head: &'static str, body: &'static str, repeat: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let _ = sock.read(&mut buf).await;
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..repeat {
                    let framed = format!("{:x}\r\n{body}\r\n", body.len());
                    if sock.write_all(framed.as_bytes()).await.is_err() {
                        return;
                    }
                }
                let _ = sock.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    format!("http://{addr}")
}

/// The runner as process builds it (bounded answers, no SDK retries),
/// against `endpoint`.
async fn run_against(endpoint: String) -> RunOutcome {
    let conf = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_lambda::config::SharedCredentialsProvider::new(
            aws_sdk_lambda::config::Credentials::new("a", "b", None, None, "t"),
        ))
        .endpoint_url(endpoint)
        .build();
    LambdaRunner::new(&conf, "worker".into(), 1, Duration::from_secs(20))
        .run(&task())
        .await
}

const CHUNKED: &str = "transfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n";

#[tokio::test]
async fn garbage_refusals_are_mapped_by_their_status() {
    let head = |status: &'static str| -> &'static str {
        Box::leak(format!("HTTP/1.1 {status}\r\n{CHUNKED}").into_boxed_str())
    };
    let throttled =
        run_against(raw_endpoint(head("429 Too Many"), "<html>slow down", 1).await).await;
    assert_eq!(
        throttled,
        RunOutcome::RetryLater("Lambda answered HTTP 429 with no error code it documents".into())
    );
    let broken = run_against(raw_endpoint(head("500 Oops"), "\u{0}\u{1}garbage", 1).await).await;
    assert_eq!(
        broken,
        RunOutcome::RetryLater("Lambda answered HTTP 500 with no error code it documents".into())
    );
    let moved = run_against(
        raw_endpoint(
            "HTTP/1.1 307 Moved\r\nlocation: http://elsewhere.example/\r\ntransfer-encoding: chunked\r\n\r\n",
            "x",
            1,
        )
        .await,
    )
    .await;
    assert_eq!(
        moved,
        RunOutcome::Failure(
            "Lambda answered HTTP 307 (Location http://elsewhere.example/) with no error code it documents"
                .into()
        )
    );
}

#[tokio::test]
async fn a_malformed_function_error_shows_what_came_back() {
    let head =
        "HTTP/1.1 200 OK\r\nx-amz-function-error: Unhandled\r\ntransfer-encoding: chunked\r\n\r\n";
    assert_eq!(
        run_against(raw_endpoint(head, "Traceback\n  boom", 1).await).await,
        RunOutcome::Failure(
            "Unhandled error, and its answer is not Lambda's error JSON: Traceback\\n  boom".into()
        )
    );
    assert_eq!(
        run(&answer(Some("Unhandled"), "")).await,
        RunOutcome::Failure(
            "Unhandled error, and its answer is not Lambda's error JSON: (empty)".into()
        )
    );
}

#[tokio::test]
async fn an_endless_answer_is_not_read_past_the_bound() {
    let chunk: &'static str = Box::leak("x".repeat(16 * 1024).into_boxed_str());
    let ok = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
    let started = std::time::Instant::now();
    assert_eq!(
        run_against(raw_endpoint(ok, chunk, usize::MAX).await).await,
        RunOutcome::Success
    );
    let failed =
        "HTTP/1.1 200 OK\r\nx-amz-function-error: Unhandled\r\ntransfer-encoding: chunked\r\n\r\n";
    assert_eq!(
        run_against(raw_endpoint(failed, chunk, usize::MAX).await).await,
        RunOutcome::Failure("Unhandled error; its answer is over 64 KB and was not read".into())
    );
    let throttled = "HTTP/1.1 429 X\r\ntransfer-encoding: chunked\r\n\r\n";
    assert_eq!(
        run_against(raw_endpoint(throttled, chunk, usize::MAX).await).await,
        RunOutcome::RetryLater(
            "Lambda answered HTTP 429; its answer is over 64 KB and was not read".into()
        )
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}
