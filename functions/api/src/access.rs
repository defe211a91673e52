//! One JSON log line per request (`event: api.request`): the route as the
//! router names it (`/tasks/{taskId}`, none when no route matched), the
//! method, the status, the caller and the time the function took. A
//! problem answer adds its type; a 5xx its detail, and a call the
//! function's role was refused its action and resource. Answers under 400
//! log at INFO, 4xx at WARN, 5xx at ERROR, so a read that found nothing
//! is as visible as a create. (API Gateway's access log has its own line
//! per request, with its latency; this one says what the function did.)

use crate::problem::Logged;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;
use std::time::Instant;

/// Who called, as API Gateway's authorizer passed it: the IAM principal
/// (`userArn`, else the access key) or the JWT's subject.
pub fn caller(req: &Request) -> Option<String> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(ctx) => {
            let authorizer = ctx.authorizer.as_ref()?;
            if let Some(iam) = &authorizer.iam {
                return iam
                    .user_arn
                    .clone()
                    .or_else(|| iam.caller_id.clone())
                    .or_else(|| iam.access_key.clone());
            }
            authorizer
                .jwt
                .as_ref()
                .and_then(|jwt| jwt.claims.get("sub").cloned())
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

pub async fn log(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let caller = caller(&req);
    let res = next.run(req).await;
    let status = res.status().as_u16();
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let problem = res.extensions().get::<Logged>();
    let kind = problem.map(|p| p.kind);
    let (action, resource) = problem
        .and_then(|p| p.denied.as_deref().cloned())
        .map_or((None, None), |(a, r)| (Some(a), Some(r)));
    let route = route.as_deref();
    let caller = caller.as_deref();
    if status >= 500 {
        let detail = problem.map(|p| p.detail.as_str());
        tracing::error!(
            event = "api.request",
            method,
            route,
            status,
            caller,
            durationMs = duration_ms,
            problem = kind,
            detail,
            action,
            resource
        );
    } else if status >= 400 {
        tracing::warn!(
            event = "api.request",
            method,
            route,
            status,
            caller,
            durationMs = duration_ms,
            problem = kind
        );
    } else {
        tracing::info!(
            event = "api.request",
            method,
            route,
            status,
            caller,
            durationMs = duration_ms
        );
    }
    res
}
