//! A bound on how much of an answer an AWS SDK client reads.
//!
//! The SDK reads a whole response body into memory before it parses it, and
//! a peer that never stops answering (a broken proxy, a hostile local
//! endpoint, a worker that streams garbage) would grow the process until
//! Lambda kills it, with every task it holds. [`BoundedAnswers`] is an
//! interceptor that wraps each response body in [`http_body_util::Limited`]:
//! past `limit` bytes the read fails, the connection is dropped, and the
//! call ends in `SdkError::ResponseError`, whose raw response still carries
//! the status and headers.
//!
//! The bounds are far above what AWS itself answers: Lambda's synchronous
//! response is at most 6 MB, a DynamoDB page at most 1 MB of items.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;

/// Most bytes of a DynamoDB (or DynamoDB Streams, SNS, CloudFormation,
/// CloudWatch) answer read: a page is at most 1 MB of items, whose JSON
/// encoding stays well under this.
pub const AWS_ANSWER_LIMIT: usize = 8 * 1024 * 1024;

/// Reads at most `limit` bytes of every response body.
#[derive(Debug, Clone, Copy)]
pub struct BoundedAnswers {
    pub limit: usize,
}

impl BoundedAnswers {
    pub const fn new(limit: usize) -> Self {
        Self { limit }
    }
}

impl Intercept for BoundedAnswers {
    fn name(&self) -> &'static str {
        "BoundedAnswers"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let limit = self.limit;
        map_body(context, |body| {
            SdkBody::from_body_1_x(http_body_util::Limited::new(body, limit))
        });
        Ok(())
    }
}

/// Replaces the response body of `context` with `f(body)`: what an
/// interceptor that reads answers differently does.
pub fn map_body(
    context: &mut BeforeDeserializationInterceptorContextMut<'_>,
    f: impl FnOnce(SdkBody) -> SdkBody,
) {
    let body = std::mem::replace(context.response_mut().body_mut(), SdkBody::taken());
    *context.response_mut().body_mut() = f(body);
}

/// True when `err` (an SDK error's source chain) is the bound being hit.
pub fn is_over_limit(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_dynamodb::error::SdkError;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers 200 and then streams a body without end.
    async fn endless() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let _ = sock.read(&mut buf).await;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n\
                                transfer-encoding: chunked\r\n\r\n";
                    if sock.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = format!("{:x}\r\n{}\r\n", 65_536, "x".repeat(65_536));
                    while sock.write_all(chunk.as_bytes()).await.is_ok() {}
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn an_endless_answer_is_cut_at_the_limit() {
        let endpoint = endless().await;
        let conf = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("a", "b", None, None, "t"))
            .endpoint_url(endpoint)
            .interceptor(BoundedAnswers::new(256 * 1024))
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(conf);
        let started = std::time::Instant::now();
        let err = client.list_tables().send().await.unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        match &err {
            SdkError::ResponseError(r) => {
                assert_eq!(r.raw().status().as_u16(), 200);
                assert!(is_over_limit(&err), "{err:?}");
            }
            other => panic!("expected a response error, got {other:?}"),
        }
    }
}
