//! Every error answer is a problem document (RFC 9457,
//! `application/problem+json`) that names what was wrong: the field of
//! the request (`tasks[3].ttlSeconds`, `limit`, `cursor`, `(body)`), or the
//! task's state. Nothing is ever partly written: the operations validate
//! a whole request before they write.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lifo_ops::OpsError;
use serde::Serialize;

pub const CONTENT_TYPE: &str = "application/problem+json";

/// A problem document.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// A URI naming the kind of problem (relative: `docs/api.md` lists them).
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
    /// The part of the request that was wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A bulk operation that stopped part-way: the tasks it did write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done: Option<Vec<String>>,
    /// The call the function's role was refused (action, resource), for the
    /// request's log line; not part of the answer.
    #[serde(skip)]
    pub denied: Option<Box<(String, String)>>,
}

/// What the request's log line says of a problem answer (the response
/// carries it as an extension, [`crate::access`] reads it).
#[derive(Debug, Clone)]
pub struct Logged {
    pub kind: &'static str,
    pub detail: String,
    pub denied: Option<Box<(String, String)>>,
}

impl Problem {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: String,
    ) -> Self {
        Self {
            kind,
            title,
            status: status.as_u16(),
            detail,
            field: None,
            done: None,
            denied: None,
        }
    }

    /// 400: the request is malformed, naming `field`.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        let field = field.into();
        let detail = detail.into();
        Self {
            field: Some(field.clone()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "/problems/invalid-request",
                "Invalid request",
                format!("{field}: {detail}"),
            )
        }
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "/problems/not-found",
            "Not found",
            detail.into(),
        )
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "/problems/conflict",
            "The task is not in a state this takes",
            detail.into(),
        )
    }

    /// 503: a transaction held the task (`Retry-After: 1`).
    pub fn contention(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "/problems/contention",
            "Another write held the task; retry shortly",
            detail.into(),
        )
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "/problems/forbidden",
            "Forbidden",
            detail.into(),
        )
    }
}

impl From<OpsError> for Problem {
    fn from(e: OpsError) -> Self {
        match e {
            OpsError::NotFound { task_id } => Self::not_found(format!("no task {task_id}")),
            OpsError::NamesNothing { field, message } => Self {
                field: Some(field.clone()),
                ..Self::not_found(format!("{field}: {message}"))
            },
            e @ OpsError::Gone { .. } => Self::new(
                StatusCode::GONE,
                "/problems/gone",
                "The task passed its retention",
                e.to_string(),
            ),
            OpsError::Invalid { field, message } => Self::invalid(field, message),
            OpsError::Conflict(detail) => Self::conflict(detail),
            OpsError::Rejected(detail) => Self::new(
                StatusCode::BAD_REQUEST,
                "/problems/invalid-request",
                "Invalid request",
                detail,
            ),
            OpsError::Interrupted {
                verb,
                done,
                asked,
                error,
            } => Self {
                done: Some(done.clone()),
                ..Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "/problems/interrupted",
                    "Stopped part-way",
                    format!(
                        "{verb} {} of {asked}, then: {}",
                        done.len(),
                        lifo_core::error::chain(&error)
                    ),
                )
            },
            // A supersede transaction held the task through the store's
            // resends: the same request in a moment will go through.
            OpsError::Store(e) if e.is_conflict() => Self::contention(lifo_core::error::chain(&e)),
            OpsError::Contended(detail) => Self::contention(detail),
            // The role lacks a permission: the deployment's fault, which no
            // retry mends (not a 502: DynamoDB answered).
            OpsError::Store(e) if e.access_denied().is_some() => Self {
                denied: e
                    .access_denied()
                    .map(|(a, r)| Box::new((a.to_owned(), r.to_owned()))),
                ..Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "/problems/access-denied",
                    "The function's role does not allow a call it makes",
                    lifo_core::error::chain(&e),
                )
            },
            OpsError::Store(e) if e.is_throttled() => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "/problems/throttled",
                "DynamoDB is throttling; retry later",
                lifo_core::error::chain(&e),
            ),
            e @ (OpsError::Store(_) | OpsError::Unavailable(_)) => Self::new(
                StatusCode::BAD_GATEWAY,
                "/problems/unavailable",
                "The queue's table could not be reached",
                e.to_string(),
            ),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_string(&self).unwrap_or_default();
        let logged = Logged {
            kind: self.kind,
            detail: self.detail,
            denied: self.denied,
        };
        let mut res = (status, body).into_response();
        res.extensions_mut().insert(logged);
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        res
    }
}

/// Turns any error answer that is not yet a problem document (axum's own
/// rejections: a path that is not UTF-8, a body over the limit) into one,
/// with the rejection's text as its detail.
pub async fn ensure(res: Response) -> Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == CONTENT_TYPE.as_bytes());
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return res;
    }
    let text = axum::body::to_bytes(res.into_body(), 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut p = Problem::new(status, "/problems/invalid-request", "Invalid request", text);
    if status == StatusCode::BAD_REQUEST {
        // axum's own: a path parameter that does not decode (`%FF`) names
        // it between backticks; anything else of the URL is the path.
        let named =
            p.detail.split('`').nth(1).filter(|n| {
                !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        p.field = Some(named.map_or_else(|| "(path)".to_owned(), str::to_owned));
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        p.kind = "/problems/too-large";
        p.title = "Request body too large";
    } else if status.is_server_error() {
        p.kind = "/problems/unavailable";
        p.title = "Internal error";
    }
    p.into_response()
}
