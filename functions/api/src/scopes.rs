//! JWT scopes. With the optional JWT authorizer, API Gateway checks the
//! token and each route's scopes (reads need `lifo/read`, writes
//! `lifo/write`) and passes the token's scopes in the request context;
//! the function checks them again, so a route wired without its scope
//! still refuses. IAM-signed requests (the default) carry no scopes: API
//! Gateway has already checked the caller's `execute-api:Invoke`.

use crate::problem::Problem;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lambda_http::request::RequestContext;

pub const READ: &str = "lifo/read";
pub const WRITE: &str = "lifo/write";

/// The scope `method` needs.
pub fn needed(method: &Method) -> &'static str {
    if method == Method::GET || method == Method::HEAD {
        READ
    } else {
        WRITE
    }
}

/// The token's scopes, when a JWT authorizer let the request in.
fn jwt_scopes(req: &Request) -> Option<Vec<String>> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(ctx) => {
            let jwt = ctx.authorizer.as_ref()?.jwt.as_ref()?;
            Some(jwt.scopes.clone().unwrap_or_default())
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

pub async fn check(req: Request, next: Next) -> Response {
    if let Some(scopes) = jwt_scopes(&req) {
        let want = needed(req.method());
        if !scopes.iter().any(|s| s == want) {
            return Problem::forbidden(format!(
                "{} needs the scope {want}; the token has {}",
                req.method(),
                if scopes.is_empty() {
                    "none".to_owned()
                } else {
                    scopes.join(" ")
                }
            ))
            .into_response();
        }
    }
    next.run(req).await
}
