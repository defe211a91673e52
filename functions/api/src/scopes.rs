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

/// The token's scopes, when a JWT authorizer let the request in. API
/// Gateway's `scopes` can be null (it is filled only when the route names
/// scopes); the token's own are then in its claims: `scope` (OAuth 2.0,
/// space-separated) or `scp` (Okta, Azure AD; an array arrives flattened
/// as `[a b]`).
fn jwt_scopes(req: &Request) -> Option<Vec<String>> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(ctx) => {
            let jwt = ctx.authorizer.as_ref()?.jwt.as_ref()?;
            Some(match &jwt.scopes {
                Some(scopes) => scopes.clone(),
                None => ["scope", "scp"]
                    .iter()
                    .filter_map(|k| jwt.claims.get(*k))
                    .flat_map(|v| claim_scopes(v))
                    .collect(),
            })
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The scopes of a `scope` or `scp` claim as API Gateway passes it: a
/// space-separated string, or an array flattened to `[a b]` (or JSON).
fn claim_scopes(value: &str) -> Vec<String> {
    let v = value.trim();
    if let Ok(list) = serde_json::from_str::<Vec<String>>(v) {
        return list;
    }
    v.trim_start_matches('[')
        .trim_end_matches(']')
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_holds_scopes_space_separated_or_as_a_flattened_array() {
        assert_eq!(
            claim_scopes("lifo/read lifo/write"),
            ["lifo/read", "lifo/write"]
        );
        assert_eq!(
            claim_scopes("[lifo/read lifo/write]"),
            ["lifo/read", "lifo/write"]
        );
        assert_eq!(claim_scopes(r#"["lifo/read","x"]"#), ["lifo/read", "x"]);
        assert!(claim_scopes("").is_empty());
    }
}
