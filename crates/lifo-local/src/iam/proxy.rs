//! IAM as deployed for a function's own binary (`lifo local invoke`): the
//! binary runs in another process, with its own SDK clients, so the guard
//! of the in-process clients ([`super::IamGuard`]) cannot reach it. It is
//! given this loopback proxy as its DynamoDB, SNS and SQS endpoint instead.
//! Each request's action and resource are read as the guard reads them
//! (the `X-Amz-Target` header and the JSON body for DynamoDB and SQS, the
//! Query API's `Action` and `TopicArn` for SNS); one the function's policy
//! does not allow is answered as AWS answers it (`AccessDeniedException`,
//! `AuthorizationError`, naming the role, the action and the resource), the
//! others are passed on, unchanged, to DynamoDB Local (DynamoDB's targets)
//! or moto (the rest).

use super::Policy;
use crate::loopback::{Loopback, serve};
use anyhow::Result;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use std::sync::Arc;

/// The largest request or answer passed on (DynamoDB's largest request,
/// a 16 MB BatchWriteItem, with room to spare).
const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// A running proxy; stops when dropped.
pub struct IamProxy {
    /// `http://127.0.0.1:PORT`: the endpoint to give the binary for
    /// DynamoDB, SNS and SQS.
    pub endpoint: String,
    _server: Loopback,
}

struct State {
    policy: Arc<Policy>,
    /// `127.0.0.1:PORT` of DynamoDB Local and of moto.
    dynamodb: String,
    moto: String,
}

impl IamProxy {
    /// A proxy holding calls to `policy`, in front of DynamoDB Local and
    /// moto (`http://127.0.0.1:PORT` each).
    pub async fn start(policy: Arc<Policy>, dynamodb: &str, moto: &str) -> Result<Self> {
        let host = |url: &str| {
            url.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned()
        };
        let state = Arc::new(State {
            policy,
            dynamodb: host(dynamodb),
            moto: host(moto),
        });
        let server = serve("IAM proxy", state, handle).await?;
        Ok(Self {
            endpoint: format!("http://{}", server.address),
            _server: server,
        })
    }
}

fn answer(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body.into()));
    *res.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        res.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    res
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return answer(413, "text/plain", format!("IAM proxy: request body: {e}")),
    };
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let policy = &state.policy;
    let calls = policy.calls_of(target.as_deref(), &body);
    if let Some((action, resource)) = policy.refused(&calls) {
        tracing::warn!(function = %policy.function, action, resource, "IAM as deployed: refused");
        let r = policy.refusal_of(target.is_some(), action, resource);
        return answer(r.status, r.content_type, r.body);
    }
    let upstream = match target.as_deref() {
        Some(t) if t.starts_with("DynamoDB") => &state.dynamodb,
        _ => &state.moto,
    };
    match forward(upstream, parts, body).await {
        Ok(res) => res,
        Err(e) => answer(
            502,
            "text/plain",
            format!("IAM proxy: {upstream}: {}", lifo_core::error::chain(&*e)),
        ),
    }
}

/// Sends the request to `upstream` (`host:port`) on a connection of its
/// own, and returns its answer whole.
async fn forward(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> std::result::Result<Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::from_parts(parts, Full::new(body));
    let res = sender.send_request(request).await?;
    let (parts, body) = res.into_parts();
    let body = Limited::new(body, BODY_LIMIT).collect().await?.to_bytes();
    Ok(Response::from_parts(parts, Full::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &[(&str, &str)]) -> Arc<Policy> {
        Arc::new(super::super::tests::policy(allowed))
    }

    /// An upstream that answers every request `200 {"upstream": true}`
    /// and counts them.
    async fn upstream() -> (Loopback, Arc<std::sync::atomic::AtomicUsize>) {
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let server = serve("upstream", seen.clone(), |seen, _req| async move {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            answer(200, "application/json", r#"{"upstream": true}"#)
        })
        .await
        .unwrap();
        (server, seen)
    }

    async fn post(endpoint: &str, target: Option<&str>, body: &str) -> (u16, String) {
        let http = reqwest::Client::new();
        let mut req = http.post(endpoint).body(body.to_owned());
        if let Some(t) = target {
            req = req.header("x-amz-target", t);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }

    #[tokio::test]
    async fn a_call_the_policy_allows_passes_and_one_it_does_not_is_refused_as_aws_does() {
        let (ddb, ddb_seen) = upstream().await;
        let (moto, moto_seen) = upstream().await;
        let proxy = IamProxy::start(
            policy(&[("dynamodb:GetItem", "!GetAtt QueueTable.Arn")]),
            &format!("http://{}", ddb.address),
            &format!("http://{}", moto.address),
        )
        .await
        .unwrap();
        let (status, body) = post(
            &proxy.endpoint,
            Some("DynamoDB_20120810.GetItem"),
            r#"{"TableName": "QueueTable"}"#,
        )
        .await;
        assert_eq!((status, body.as_str()), (200, r#"{"upstream": true}"#));
        let (status, body) = post(
            &proxy.endpoint,
            Some("DynamoDB_20120810.PutItem"),
            r#"{"TableName": "QueueTable"}"#,
        )
        .await;
        assert_eq!(status, 400);
        assert!(body.contains("AccessDeniedException"), "{body}");
        assert!(
            body.contains("assumed-role/CreateFunctionRole/CreateFunction")
                && body.contains("dynamodb:PutItem")
                && body.contains("arn:aws:dynamodb:us-east-1:000000000000:table/QueueTable"),
            "{body}"
        );
        let (status, body) = post(
            &proxy.endpoint,
            None,
            "Action=Publish&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3AProcessTopic&Message=x",
        )
        .await;
        assert_eq!(status, 403);
        assert!(body.contains("<Code>AuthorizationError</Code>") && body.contains("sns:Publish"));
        // What no policy judges (SNS's other actions) goes to moto.
        let (status, _) = post(&proxy.endpoint, None, "Action=ListTopics").await;
        assert_eq!(status, 200);
        let n = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!((n(&ddb_seen), n(&moto_seen)), (1, 1));
    }
}
