//! API Gateway as deployed, in front of the local HTTP API. axum, run
//! locally, routes on the path as the client sent it and lets anyone in;
//! an HTTP API in AWS does neither. What this layer does, as API Gateway
//! does, in its order:
//! - **Sizes.** A request body over 10 MB (declared or sent) is refused
//!   with 413 before it is read. The Lambda invoke carries at most 6 MB,
//!   and that counts the whole event (headers, request context, the body as
//!   a JSON string, binary bodies in base64): an event over it never
//!   reaches the function, and API Gateway answers 500.
//! - **Authorization.** The HttpApi's routes require IAM ([`sigv4`]: a
//!   SigV4 signature by a known key, else 403); the optional JWT API's
//!   routes a token of the issuer with the route's scope ([`jwt`]: 401,
//!   403, or 404 for a method no route names). A request that passes
//!   carries `requestContext.authorizer` (`iam` or `jwt`) to the function,
//!   as `lambda_http` hands it over.
//! - **Paths decoded.** HTTP APIs hand Lambda a percent-decoded path
//!   (`rawPath`, cut at a decoded `?`), and `lambda_http` then parses it
//!   as a URL (dot segments resolved): `/tasks/a%2Fb` reaches the function
//!   as `/tasks/a/b`. The decoded path is also passed as `lambda_http`'s
//!   raw path, as in AWS. The signature is checked over the path as sent.
//! - **Bodies that stop.** A body that sends nothing for 10 s gets 408 and
//!   its connection is closed. A body declared larger than the function
//!   takes ([`ApiGateway::function_max_body`]) is not read at all: the
//!   function refuses it by its declared length.
//! - **Time.** The integration is cut at 30 s: 504.
//!
//! [`ApiGateway::default`] is all of it with IAM and the local stack's
//! credentials; a field turns a part off.

pub mod jwt;
pub mod sigv4;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerIamDescription,
    ApiGatewayRequestAuthorizerJwtDescription, ApiGatewayV2httpRequestContext,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// API Gateway's HTTP API payload limit.
pub const MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;
/// Lambda's synchronous invoke limit, for the whole event.
pub const MAX_EVENT_BYTES: usize = 6 * 1024 * 1024;
/// Most an HTTP API waits for its integration.
pub const INTEGRATION_TIMEOUT: Duration = Duration::from_secs(30);
/// What a payload format 2.0 event holds besides the body and headers
/// (request context, route key, raw path and query): about 1 KB.
const EVENT_OVERHEAD: usize = 1024;

/// Who may call the API: the authorizer of its routes.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Routes with `AuthorizationType: NONE`: anyone on loopback.
    None,
    /// `AWS_IAM`, as the HttpApi of template.yaml has on every route.
    Iam(Arc<sigv4::IamAuthorizer>),
    /// The JWT API's authorizer and routes.
    Jwt(Arc<jwt::JwtAuthorizer>),
}

/// How long a request's body may stop arriving before the local API
/// Gateway gives up on it (408).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which parts of API Gateway's behaviour apply.
#[derive(Debug, Clone)]
pub struct ApiGateway {
    pub auth: Auth,
    pub decode_paths: bool,
    pub limit_sizes: bool,
    pub timeout: Option<Duration>,
    /// A body that sends nothing for this long is answered 408 and its
    /// connection closed (`None`: wait for it as long as it takes).
    pub body_idle_timeout: Option<Duration>,
    /// The function refuses a body whose declared length is over this
    /// before it reads it (the `api` function's `MAX_BODY_BYTES`). API
    /// Gateway would read such a body whole (up to 10 MB) and invoke the
    /// function only to hear that; here, once the headers pass the
    /// authorizer, the request goes to the function without its body, so
    /// the client hears at once instead of after its upload. (The one
    /// difference: a body's signature is never checked, as it is never
    /// read.)
    pub function_max_body: Option<usize>,
}

impl Default for ApiGateway {
    /// As the stack's HttpApi: IAM, with the local stack's credentials.
    fn default() -> Self {
        Self {
            auth: Auth::Iam(Arc::new(sigv4::IamAuthorizer::local())),
            decode_paths: true,
            limit_sizes: true,
            timeout: Some(INTEGRATION_TIMEOUT),
            body_idle_timeout: Some(BODY_IDLE_TIMEOUT),
            function_max_body: None,
        }
    }
}

impl ApiGateway {
    /// The JWT API of template.yaml, trusting `issuer`.
    pub fn jwt(issuer: &jwt::LocalIssuer) -> anyhow::Result<Self> {
        Self::jwt_of(&crate::Template::workspace()?, issuer)
    }

    /// The JWT API of `template`, trusting `issuer`.
    pub fn jwt_of(template: &crate::Template, issuer: &jwt::LocalIssuer) -> anyhow::Result<Self> {
        Ok(Self {
            auth: Auth::Jwt(Arc::new(jwt::JwtAuthorizer::from_template(
                template, issuer,
            )?)),
            ..Self::default()
        })
    }

    /// `router` behind API Gateway: the layer checks and rewrites the
    /// request before `router` routes it.
    pub fn wrap(self, router: Router) -> Router {
        let gateway = Arc::new(self);
        Router::new()
            .fallback_service(router)
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let gateway = gateway.clone();
                    async move { gateway.handle(req, next).await }
                },
            ))
    }

    /// The function refuses bodies declared over `bytes` by their length
    /// (see [`ApiGateway::function_max_body`]).
    pub fn with_function_max_body(mut self, bytes: usize) -> Self {
        self.function_max_body = Some(bytes);
        self
    }

    async fn handle(&self, req: Request, next: Next) -> Response {
        let declared = declared_length(req.headers());
        if self.limit_sizes
            && let Some(res) = refused_by_length(declared)
        {
            return res;
        }
        if let (Some(limit), Some(n)) = (self.function_max_body, declared)
            && n > limit
        {
            // The function refuses it by its length: hand it over without
            // waiting for a body that is never read. What the client still
            // sends is read and dropped meanwhile (until it stops for the
            // idle timeout), so it can finish writing and read the answer:
            // a connection closed under its upload would fail its write.
            let (parts, body) = req.into_parts();
            tokio::spawn(drain(body, self.body_idle_timeout));
            let req = Request::from_parts(parts, Body::empty());
            return match self.authorize_headers(req).await {
                Ok(req) => self.forward(req, next).await,
                Err(res) => res,
            };
        }
        let req = if self.limit_sizes || matches!(self.auth, Auth::Iam(_)) {
            let (parts, body) = req.into_parts();
            let bytes = match read_body(body, self.body_idle_timeout).await {
                Ok(bytes) => bytes,
                Err(res) => return res,
            };
            if self.limit_sizes
                && event_bytes(&parts.headers, parts.uri.path(), &bytes) > MAX_EVENT_BYTES
            {
                return invoke_refused();
            }
            Request::from_parts(parts, Body::from(bytes))
        } else {
            req
        };
        let req = match self.authorize(req).await {
            Ok(req) => req,
            Err(res) => return res,
        };
        self.forward(req, next).await
    }

    /// The request as the function gets it (its path decoded, and the
    /// decoded path kept as `lambda_http`'s raw path), within the
    /// integration's timeout.
    async fn forward(&self, req: Request, next: Next) -> Response {
        let req = if self.decode_paths {
            let raw = raw_path(req.uri());
            let (mut parts, body) = req.into_parts();
            if let Some(uri) = decoded(&parts.uri) {
                parts.uri = uri;
            }
            let extensions = std::mem::take(&mut parts.extensions);
            parts.extensions = lambda_http::RequestExt::with_raw_http_path(extensions, raw);
            Request::from_parts(parts, body)
        } else {
            req
        };
        match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, next.run(req)).await {
                Ok(res) => res,
                Err(_) => gateway_message(StatusCode::GATEWAY_TIMEOUT, "Gateway Timeout"),
            },
            None => next.run(req).await,
        }
    }
}

impl ApiGateway {
    /// The request with its `requestContext.authorizer`, if the authorizer
    /// lets it through; else API Gateway's answer.
    async fn authorize(&self, req: Request) -> Result<Request, Response> {
        let authorizer = match &self.auth {
            Auth::None => return Ok(req),
            Auth::Iam(iam) => {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
                    .await
                    .map_err(|_| {
                        gateway_message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large")
                    })?;
                let caller = iam
                    .verify(
                        &parts.method,
                        &parts.uri,
                        &parts.headers,
                        &bytes,
                        SystemTime::now(),
                    )
                    .map_err(|message| gateway_message(StatusCode::FORBIDDEN, &message))?;
                let req = Request::from_parts(parts, Body::from(bytes));
                return Ok(with_context(req, iam_authorizer(caller)));
            }
            Auth::Jwt(jwt) => match jwt.verify(req.method(), req.headers()) {
                Ok(passed) => {
                    let mut authorizer = ApiGatewayRequestAuthorizer::default();
                    let mut jwt_ctx = ApiGatewayRequestAuthorizerJwtDescription::default();
                    jwt_ctx.claims = passed.claims;
                    jwt_ctx.scopes = Some(passed.scopes);
                    authorizer.jwt = Some(jwt_ctx);
                    authorizer
                }
                Err(refusal) => {
                    let status =
                        StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::FORBIDDEN);
                    let mut res = gateway_message(status, refusal.message);
                    if let Some(v) = refusal
                        .www_authenticate
                        .and_then(|v| HeaderValue::from_str(&v).ok())
                    {
                        res.headers_mut().insert(header::WWW_AUTHENTICATE, v);
                    }
                    return Err(res);
                }
            },
        };
        Ok(with_context(req, authorizer))
    }

    /// [`ApiGateway::authorize`] of a request whose body is not read: IAM
    /// checks everything but the signature over the body.
    async fn authorize_headers(&self, req: Request) -> Result<Request, Response> {
        match &self.auth {
            Auth::Iam(iam) => {
                let caller = iam
                    .verify_headers(req.headers(), SystemTime::now())
                    .map_err(|message| gateway_message(StatusCode::FORBIDDEN, &message))?;
                Ok(with_context(req, iam_authorizer(caller)))
            }
            _ => self.authorize(req).await,
        }
    }
}

/// What API Gateway passes of an IAM caller.
fn iam_authorizer(caller: sigv4::Caller) -> ApiGatewayRequestAuthorizer {
    let mut authorizer = ApiGatewayRequestAuthorizer::default();
    let mut iam_ctx = ApiGatewayRequestAuthorizerIamDescription::default();
    iam_ctx.access_key = Some(caller.access_key);
    iam_ctx.account_id = Some(crate::aws::ACCOUNT.to_owned());
    iam_ctx.user_arn = Some(caller.user_arn);
    authorizer.iam = Some(iam_ctx);
    authorizer
}

/// `req` with the payload format 2.0 request context the function gets,
/// holding `authorizer`, where `lambda_http` puts it.
fn with_context(mut req: Request, authorizer: ApiGatewayRequestAuthorizer) -> Request {
    let mut ctx = ApiGatewayV2httpRequestContext::default();
    ctx.account_id = Some(crate::aws::ACCOUNT.to_owned());
    ctx.stage = Some("$default".to_owned());
    ctx.authorizer = Some(authorizer);
    req.extensions_mut()
        .insert(lambda_http::request::RequestContext::ApiGatewayV2(ctx));
    req
}

/// API Gateway's own error answers: `{"message": …}`.
fn gateway_message(status: StatusCode, message: &str) -> Response {
    let mut res = (
        status,
        serde_json::json!({ "message": message }).to_string(),
    )
        .into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// The path API Gateway hands the function (`rawPath`): decoded, cut at a
/// decoded `?` or `#`; as sent when it does not decode to UTF-8.
pub fn raw_path(uri: &Uri) -> String {
    let raw = uri.path();
    match percent_encoding::percent_decode_str(raw).decode_utf8() {
        Ok(decoded) => decoded.split(['?', '#']).next().unwrap_or("").to_owned(),
        Err(_) => raw.to_owned(),
    }
}

/// The URI as the function sees it behind an HTTP API: the path decoded,
/// cut at a decoded `?` or `#`, then parsed as a URL as `lambda_http`
/// does; the query string as sent. `None` when nothing changes (or the
/// decoded path is not UTF-8, which API Gateway would not pass either).
pub fn decoded(uri: &Uri) -> Option<Uri> {
    let raw = uri.path();
    if !raw.contains('%') && !raw.contains("/.") {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?
        .into_owned();
    let cut = decoded.split(['?', '#']).next().unwrap_or("");
    let url = url::Url::parse(&format!("http://localhost{cut}")).ok()?;
    let mut s = url.path().to_owned();
    if let Some(q) = uri.query() {
        s.push('?');
        s.push_str(q);
    }
    s.parse().ok()
}

fn too_large() -> Response {
    gateway_message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large")
}

/// The request's `Content-Length`.
fn declared_length(headers: &axum::http::HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
}

/// What API Gateway answers, before reading, a body declared larger than
/// any request or any event.
fn refused_by_length(declared: Option<usize>) -> Option<Response> {
    if declared.is_some_and(|n| n > MAX_REQUEST_BYTES) {
        return Some(too_large());
    }
    if declared.is_some_and(|n| n > MAX_EVENT_BYTES) {
        // No event can carry it: what API Gateway answers once Lambda
        // refuses the invoke, without waiting for a body that cannot pass.
        return Some(invoke_refused());
    }
    None
}

/// Reads and drops what is left of a body, at most [`MAX_REQUEST_BYTES`],
/// until it ends or sends nothing for `idle`.
async fn drain(body: Body, idle: Option<Duration>) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut read = 0;
    let idle = idle.unwrap_or(BODY_IDLE_TIMEOUT);
    while read <= MAX_REQUEST_BYTES {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => read += frame.data_ref().map_or(0, |d| d.len()),
            _ => return,
        }
    }
}

/// The whole body, at most [`MAX_REQUEST_BYTES`] (else 413); 408 when it
/// sends nothing for `idle`.
async fn read_body(body: Body, idle: Option<Duration>) -> Result<axum::body::Bytes, Response> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut out = Vec::new();
    loop {
        let frame = match idle {
            Some(idle) => tokio::time::timeout(idle, body.frame())
                .await
                .map_err(|_| {
                    let mut res = gateway_message(StatusCode::REQUEST_TIMEOUT, "Request Timeout");
                    res.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                    res
                })?,
            None => body.frame().await,
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|_| gateway_message(StatusCode::BAD_REQUEST, "Bad Request"))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > MAX_REQUEST_BYTES {
                return Err(too_large());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.into())
}

/// Lambda refuses the invoke (`RequestEntityTooLargeException`): the
/// function never runs, and API Gateway answers 500.
fn invoke_refused() -> Response {
    gateway_message(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
}

/// The size of the payload format 2.0 event for this request: headers
/// (twice: `headers` and, for cookies, `cookies`, counted once here), path,
/// the body as a JSON string (escaped), or base64 when it is not UTF-8.
pub fn event_bytes(headers: &axum::http::HeaderMap, path: &str, body: &[u8]) -> usize {
    let headers: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.as_bytes().len() + 6)
        .sum();
    let body = match std::str::from_utf8(body) {
        Ok(text) => serde_json::to_string(text).map_or(body.len() * 2, |s| s.len()),
        Err(_) => body.len().div_ceil(3) * 4 + 2,
    };
    EVENT_OVERHEAD + 2 * path.len() + headers + body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(path: &str) -> String {
        decoded(&path.parse().unwrap()).map_or_else(|| path.to_owned(), |u| u.to_string())
    }

    #[test]
    fn paths_reach_the_function_decoded_as_api_gateway_hands_them() {
        assert_eq!(d("/tasks/order%2F1"), "/tasks/order/1");
        assert_eq!(d("/tasks/x%2Fhistory"), "/tasks/x/history");
        assert_eq!(d("/tasks/a%3Fb?limit=1"), "/tasks/a?limit=1");
        assert_eq!(d("/tasks/sp%20ace"), "/tasks/sp%20ace");
        assert_eq!(d("/tasks/..%2F..%2Fetc"), "/etc");
        assert_eq!(d("/tasks/plain-1"), "/tasks/plain-1");
        assert_eq!(d("/tasks/~YS9i"), "/tasks/~YS9i");
    }

    /// The integration is cut at its timeout with 504, as API Gateway
    /// does; a body whose event would pass Lambda's 6 MB gets 500 at once.
    #[tokio::test]
    async fn a_slow_integration_is_cut_with_504_and_an_oversized_event_with_500() {
        let slow = Router::new().route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
        let gateway = ApiGateway {
            auth: Auth::None,
            timeout: Some(Duration::from_millis(200)),
            ..ApiGateway::default()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, gateway.wrap(slow)).await;
        });
        let client = reqwest::Client::new();
        let started = std::time::Instant::now();
        let res = client
            .get(format!("http://{addr}/slow"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 504);
        assert!(started.elapsed() < Duration::from_secs(2));
        let res = client
            .post(format!("http://{addr}/slow"))
            .body(vec![b'"'; 3_300_000])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 500, "escaped, the event passes 6 MB");
        server.abort();
    }

    #[test]
    fn a_json_body_counts_escaped_in_the_event() {
        let h = axum::http::HeaderMap::new();
        let quotes = vec![b'"'; 1000];
        let plain = vec![b'a'; 1000];
        assert_eq!(
            event_bytes(&h, "/x", &quotes) - event_bytes(&h, "/x", &plain),
            1000,
            "each quote is escaped"
        );
        assert!(event_bytes(&h, "/x", &[0xff; 300]) >= 400, "base64");
    }
}
