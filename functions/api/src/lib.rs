//! The HTTP API function (`api`): one axum router for every route, served
//! by API Gateway's HTTP API in AWS (through `lambda_http`) and on loopback
//! by `lifo local up --api`. Every route calls one operation of `lifo-ops`,
//! the same the `lifo` command and its console call.
//!
//! - [`routes`]: the routes and their handlers (docs/openapi.yaml is
//!   checked against [`routes::routes`]);
//! - [`access`]: one log line per request;
//! - [`body`]: JSON bodies and query parameters, refused naming the field;
//! - [`raw_path`]: routing on the path API Gateway handed over;
//! - [`problem`]: every error as an RFC 9457 problem document;
//! - [`scopes`]: the JWT scopes, when API Gateway's JWT authorizer let the
//!   request in (IAM-signed requests are checked by API Gateway alone).

pub mod access;
pub mod body;
pub mod problem;
pub mod raw_path;
pub mod routes;
pub mod scopes;

pub use body::MAX_BODY_BYTES;
pub use routes::{Api, router};
