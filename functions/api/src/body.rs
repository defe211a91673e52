//! Request bodies and query strings, read so that every refusal names its
//! field: JSON only (`Content-Type: application/json`), at most create's
//! request limit (refused by length before anything is parsed), objects
//! whose unknown fields are refused.

use crate::problem::Problem;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::str::FromStr;

/// The largest body accepted (3,137,536 bytes): what still fits Lambda's
/// 6 MiB synchronous invoke once API Gateway wraps it in its event. The
/// whole event counts, and the body travels in it as a JSON string, where
/// escaping can double it, beside up to 16 KiB of headers and request
/// context. A larger body never reaches the function (API Gateway answers
/// 500), so the function refuses it by its declared length.
pub const MAX_BODY_BYTES: usize = (6 * 1024 * 1024 - 16 * 1024) / 2;

/// The body as JSON. An empty body is `{}` when `empty_ok`.
pub fn json(headers: &HeaderMap, body: &Bytes, empty_ok: bool) -> Result<Value, Problem> {
    if body.is_empty() && empty_ok {
        return Ok(Value::Object(Default::default()));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "/problems/unsupported-media-type",
            "Send JSON",
            format!("Content-Type is {content_type:?}; this API takes application/json"),
        ));
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large(body.len()));
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| Problem::invalid("(body)", format!("not UTF-8: {e}")))?;
    lifo_lambda::event::parse_str(text).map_err(|e| match e {
        lifo_lambda::event::EventError::DuplicateKey { ref path, .. } => {
            Problem::invalid(path.clone(), e.to_string())
        }
        lifo_lambda::event::EventError::Syntax(inner) => {
            Problem::invalid("(body)", format!("not valid JSON: {inner}"))
        }
        e => Problem::invalid("(body)", e.to_string()),
    })
}

/// Refuses a body over [`MAX_BODY_BYTES`] by its declared length, before
/// a byte of it is read (a client that declares 7 MB and sends one byte is
/// answered at once, not when it gives up).
pub async fn declared_length(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    match declared {
        Some(n) if n > MAX_BODY_BYTES => too_large(n).into_response(),
        _ => next.run(req).await,
    }
}

pub fn too_large(len: usize) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "/problems/too-large",
        "Request body too large",
        format!("the body is {len} bytes; the limit is {MAX_BODY_BYTES}"),
    )
}

/// The body as `T` (a typed request, unknown fields refused), naming the
/// field that is wrong.
pub fn typed<T: DeserializeOwned>(value: Value) -> Result<T, Problem> {
    // serde would read a struct from an array too (`[]` as every field absent).
    if !value.is_object() {
        return Err(Problem::invalid("(body)", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "(body)".to_owned()
        } else {
            path
        };
        Problem::invalid(field, e.into_inner().to_string())
    })
}

/// A query parameter, parsed, or `default` when absent.
pub fn param<T: FromStr>(
    query: &HashMap<String, String>,
    name: &str,
    default: T,
) -> Result<T, Problem> {
    match query.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| Problem::invalid(name, format!("{v:?} is not a valid {name}"))),
    }
}

/// Refuses query parameters that are not in `known`.
pub fn only(query: &HashMap<String, String>, known: &[&str]) -> Result<(), Problem> {
    match query.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Problem::invalid(
            k.clone(),
            if known.is_empty() {
                "unknown query parameter; this route takes none".to_owned()
            } else {
                format!(
                    "unknown query parameter; this route takes {}",
                    known.join(", ")
                )
            },
        )),
        None => Ok(()),
    }
}
