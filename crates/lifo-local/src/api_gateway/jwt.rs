//! API Gateway's JWT authorizer, as template.yaml wires the optional JWT
//! API (`JwtIssuer`, `JwtAudience`): each route names the scopes it needs
//! (`JwtReadRoute`: `GET /{proxy+}` needs `lifo/read`; the POST and DELETE
//! routes `lifo/write`), and a method no route names is not found.
//!
//! What API Gateway checks, from its guide ("Control access to HTTP APIs
//! with JWT authorizers"), and so what [`JwtAuthorizer::verify`] checks:
//! - the token is the `Authorization` header, with or without `Bearer `;
//! - it is signed with a key of the issuer's JWKS, found by `kid`; only
//!   RSA algorithms are supported;
//! - `iss` is the issuer; `aud`, or `client_id` when there is no `aud`,
//!   is one of the audiences; `exp` is after now; `nbf` and `iat` are
//!   before now (no leeway: AWS documents none);
//! - `scope` (space-separated) or `scp` holds at least one of the route's
//!   scopes.
//!
//! A missing or invalid token is answered 401 `{"message":"Unauthorized"}`
//! with a `www-authenticate` header saying why; a valid token without the
//! route's scope 403 `{"message":"Forbidden"}`. A request that passes
//! reaches the function with `requestContext.authorizer.jwt` filled: the
//! claims as strings (an array flattened to `[a b]`) and the token's
//! scopes.
//!
//! [`LocalIssuer`] stands for the identity provider: an RSA key made at
//! start, its JWKS, and tokens minted with the scopes a test or a local
//! user asks for.

use crate::template::Template;
use axum::http::{HeaderMap, Method};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Why a request was refused: API Gateway's status, `{"message"}` and, for
/// a 401, its `www-authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: &'static str,
    pub www_authenticate: Option<String>,
}

impl Refusal {
    fn unauthorized(why: &str) -> Self {
        Self {
            status: 401,
            message: "Unauthorized",
            www_authenticate: Some(format!(
                "Bearer scope=\"\" error=\"invalid_token\" error_description=\"{why}\""
            )),
        }
    }

    fn forbidden(scopes: &[String]) -> Self {
        Self {
            status: 403,
            message: "Forbidden",
            www_authenticate: Some(format!(
                "Bearer scope=\"{}\" error=\"insufficient_scope\" error_description=\"the token \
                 does not have the scope the route needs\"",
                scopes.join(" ")
            )),
        }
    }

    fn not_found() -> Self {
        Self {
            status: 404,
            message: "Not Found",
            www_authenticate: None,
        }
    }
}

/// What the function receives under `requestContext.authorizer.jwt`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Passed {
    pub claims: HashMap<String, String>,
    pub scopes: Vec<String>,
}

/// One JWT API: its issuer, audiences, the issuer's keys, and its routes.
#[derive(Clone)]
pub struct JwtAuthorizer {
    issuer: String,
    audiences: Vec<String>,
    keys: JwkSet,
    /// `(method, scopes)` per route of the API.
    routes: Vec<(String, Vec<String>)>,
}

impl std::fmt::Debug for JwtAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthorizer")
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl JwtAuthorizer {
    /// The JWT API of `template` (its `AWS::ApiGatewayV2::Route`s with
    /// `AuthorizationType: JWT`), trusting `issuer`'s keys.
    pub fn from_template(template: &Template, issuer: &LocalIssuer) -> anyhow::Result<Self> {
        Ok(Self {
            issuer: issuer.issuer.clone(),
            audiences: vec![issuer.audience.clone()],
            keys: issuer.jwks(),
            routes: routes_by_method(&template.jwt_routes()?),
        })
    }

    /// The claims and scopes, if API Gateway would let this request through
    /// to the function; else its answer.
    pub fn verify(&self, method: &Method, headers: &HeaderMap) -> Result<Passed, Refusal> {
        let Some((_, route_scopes)) = self.routes.iter().find(|(m, _)| m == method.as_str()) else {
            return Err(Refusal::not_found());
        };
        let token = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Refusal::unauthorized("the token is missing"))?;
        let claims = self.claims(token)?;
        let scopes = token_scopes(&claims);
        if !route_scopes.is_empty() && !route_scopes.iter().any(|s| scopes.contains(s)) {
            return Err(Refusal::forbidden(route_scopes));
        }
        Ok(Passed {
            claims: claims
                .iter()
                .map(|(k, v)| (k.clone(), claim_text(v)))
                .collect(),
            scopes,
        })
    }

    /// The token's claims once its signature, issuer, audience and times
    /// hold.
    fn claims(&self, token: &str) -> Result<serde_json::Map<String, Value>, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::unauthorized("the token is not a JWT"))?;
        let rsa = [
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ];
        if !rsa.contains(&header.alg) {
            return Err(Refusal::unauthorized(
                "the token's algorithm is not supported (only RSA)",
            ));
        }
        let jwk = header
            .kid
            .as_deref()
            .and_then(|kid| self.keys.find(kid))
            .ok_or_else(|| Refusal::unauthorized("the token's kid is not in the issuer's JWKS"))?;
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|_| Refusal::unauthorized("the issuer's key is not usable"))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = 0;
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.validate_nbf = true;
        // `aud`, else `client_id`: checked below, as API Gateway does.
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind as K;
                Refusal::unauthorized(match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet",
                    K::InvalidIssuer => "the token does not have a valid issuer",
                    K::InvalidSignature => "the token's signature is not valid",
                    K::MissingRequiredClaim(_) => "the token lacks exp or iss",
                    _ => "the token is not valid",
                })
            })?;
        let claims = data.claims;
        let now = jsonwebtoken::get_current_timestamp();
        if claims
            .get("iat")
            .and_then(Value::as_u64)
            .is_some_and(|iat| iat > now)
        {
            return Err(Refusal::unauthorized("the token was issued in the future"));
        }
        let audiences: Vec<String> = match claims.get("aud").or_else(|| claims.get("client_id")) {
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        if !audiences.iter().any(|a| self.audiences.contains(a)) {
            return Err(Refusal::unauthorized(
                "the token does not have a valid audience",
            ));
        }
        Ok(claims)
    }
}

/// The token's scopes: `scope` (space-separated) and `scp` (a list or a
/// space-separated string).
fn token_scopes(claims: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut scopes = Vec::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(list)) => {
                scopes.extend(list.iter().filter_map(|v| v.as_str().map(str::to_owned)))
            }
            _ => {}
        }
    }
    scopes
}

/// A claim as API Gateway hands it to the function: a string as itself,
/// an array as `[a b]`, anything else as its JSON.
fn claim_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(claim_text).collect::<Vec<_>>().join(" ")
        ),
        other => other.to_string(),
    }
}

/// A local identity provider: one RSA key, made at start.
#[derive(Clone)]
pub struct LocalIssuer {
    pub issuer: String,
    pub audience: String,
    kid: String,
    key: EncodingKey,
}

impl std::fmt::Debug for LocalIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalIssuer")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl LocalIssuer {
    /// An issuer named `issuer` (a URL, as `JwtIssuer` is) with a fresh
    /// 2048-bit RSA key, issuing tokens for `audience`.
    pub fn new(issuer: &str, audience: &str) -> anyhow::Result<Self> {
        use aws_lc_rs::encoding::AsDer;
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .map_err(|_| anyhow::anyhow!("generating the local issuer's RSA key failed"))?;
        let der = pair
            .as_der()
            .map_err(|_| anyhow::anyhow!("encoding the local issuer's RSA key failed"))?;
        let pem = pem::encode(&pem::Pem::new("PRIVATE KEY", der.as_ref().to_vec()));
        Ok(Self {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            kid: format!("local-{}", fastrand::u32(..)),
            key: EncodingKey::from_rsa_pem(pem.as_bytes())?,
        })
    }

    /// The issuer's JWKS: what API Gateway reads from its `jwks_uri`.
    pub fn jwks(&self) -> JwkSet {
        let mut keys = Vec::new();
        if let Ok(mut jwk) = Jwk::from_encoding_key(&self.key, Algorithm::RS256) {
            jwk.common.key_id = Some(self.kid.clone());
            keys.push(jwk);
        }
        JwkSet { keys }
    }

    /// A token for this issuer's audience with `scopes`, valid for
    /// `valid_for` from now.
    pub fn mint(&self, scopes: &[&str], valid_for: std::time::Duration) -> anyhow::Result<String> {
        let now = jsonwebtoken::get_current_timestamp();
        self.mint_claims(serde_json::json!({
            "iss": self.issuer,
            "aud": self.audience,
            "sub": "local-user",
            "iat": now,
            "exp": now + valid_for.as_secs(),
            "scope": scopes.join(" "),
        }))
    }

    /// A token with exactly `claims`, signed with this issuer's key.
    pub fn mint_claims(&self, claims: Value) -> anyhow::Result<String> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        Ok(jsonwebtoken::encode(&header, &claims, &self.key)?)
    }
}

/// The scopes each method's route needs, from `(route key, scopes)`
/// pairs: `GET /{proxy+}` → `GET`.
pub fn routes_by_method(routes: &[(String, Vec<String>)]) -> Vec<(String, Vec<String>)> {
    let mut seen = HashSet::new();
    routes
        .iter()
        .filter_map(|(key, scopes)| {
            let method = key.split_whitespace().next()?.to_owned();
            seen.insert(method.clone())
                .then_some((method, scopes.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn authorizer(issuer: &LocalIssuer) -> JwtAuthorizer {
        JwtAuthorizer::from_template(&Template::workspace().unwrap(), issuer).unwrap()
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("authorization", format!("Bearer {token}").parse().unwrap());
        h
    }

    #[test]
    fn the_routes_and_their_scopes_come_from_the_template() {
        let issuer = LocalIssuer::new("https://issuer.example", "lifo-clients").unwrap();
        let jwt = authorizer(&issuer);
        let mut routes = jwt.routes.clone();
        routes.sort();
        assert_eq!(
            routes,
            vec![
                ("DELETE".to_owned(), vec!["lifo/write".to_owned()]),
                ("GET".to_owned(), vec!["lifo/read".to_owned()]),
                ("POST".to_owned(), vec!["lifo/write".to_owned()]),
            ]
        );
    }

    #[test]
    fn a_token_passes_only_with_its_issuers_key_audience_times_and_the_routes_scope() {
        let issuer = LocalIssuer::new("https://issuer.example", "lifo-clients").unwrap();
        let jwt = authorizer(&issuer);
        let hour = Duration::from_secs(3600);
        let read = issuer.mint(&["lifo/read"], hour).unwrap();
        let passed = jwt.verify(&Method::GET, &bearer(&read)).unwrap();
        assert_eq!(passed.scopes, vec!["lifo/read"]);
        assert_eq!(passed.claims["sub"], "local-user");
        // Without "Bearer " too.
        let mut bare = HeaderMap::new();
        bare.insert("authorization", read.parse().unwrap());
        jwt.verify(&Method::GET, &bare).unwrap();

        let refusal = jwt.verify(&Method::POST, &bearer(&read)).unwrap_err();
        assert_eq!((refusal.status, refusal.message), (403, "Forbidden"));
        let refusal = jwt.verify(&Method::PUT, &bearer(&read)).unwrap_err();
        assert_eq!((refusal.status, refusal.message), (404, "Not Found"));
        let refusal = jwt.verify(&Method::GET, &HeaderMap::new()).unwrap_err();
        assert_eq!((refusal.status, refusal.message), (401, "Unauthorized"));

        let now = jsonwebtoken::get_current_timestamp();
        let with = |claims: Value| {
            let token = issuer.mint_claims(claims).unwrap();
            jwt.verify(&Method::GET, &bearer(&token)).unwrap_err()
        };
        let base = |k: &str, v: Value| {
            let mut c = serde_json::json!({
                "iss": "https://issuer.example", "aud": "lifo-clients",
                "exp": now + 600, "iat": now, "scope": "lifo/read"
            });
            c[k] = v;
            c
        };
        let why = |r: Refusal| r.www_authenticate.unwrap();
        assert!(why(with(base("exp", (now - 1).into()))).contains("expired"));
        assert!(why(with(base("nbf", (now + 60).into()))).contains("not valid yet"));
        assert!(why(with(base("iat", (now + 60).into()))).contains("future"));
        assert!(why(with(base("iss", "https://other.example".into()))).contains("issuer"));
        assert!(why(with(base("aud", "someone-else".into()))).contains("audience"));
        // client_id stands for a missing aud (Cognito access tokens).
        let mut cognito = base("client_id", "lifo-clients".into());
        cognito.as_object_mut().unwrap().remove("aud");
        let token = issuer.mint_claims(cognito).unwrap();
        jwt.verify(&Method::GET, &bearer(&token)).unwrap();
        // scp as a list (Okta, Azure AD) is read too.
        let token = issuer
            .mint_claims(base("scp", serde_json::json!(["lifo/read"])))
            .unwrap();
        let passed = jwt.verify(&Method::GET, &bearer(&token)).unwrap();
        assert_eq!(passed.claims["scp"], "[lifo/read]");

        // Another issuer's key with the same names does not pass.
        let forger = LocalIssuer::new("https://issuer.example", "lifo-clients").unwrap();
        let forged = forger.mint(&["lifo/read"], hour).unwrap();
        let r = jwt.verify(&Method::GET, &bearer(&forged)).unwrap_err();
        assert_eq!(r.status, 401);
        // Nor a token that is not a JWT, nor an HS256 one.
        assert_eq!(
            jwt.verify(&Method::GET, &bearer("x.y.z"))
                .unwrap_err()
                .status,
            401
        );
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &base("sub", "x".into()),
            &EncodingKey::from_secret(b"secret"),
        )
        .unwrap();
        assert!(why(jwt.verify(&Method::GET, &bearer(&hs)).unwrap_err()).contains("RSA"));
    }
}
