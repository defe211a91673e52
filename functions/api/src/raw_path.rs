//! Routing on the path API Gateway handed over. Behind API Gateway,
//! `lambda_http` builds the request's URI by parsing `rawPath` as a URL,
//! and a URL parser drops tabs and newlines, trims control characters and
//! spaces from the end, turns `\` into `/` and resolves `.` and `..`:
//! `/tasks/%00` would reach the router as `/tasks/` (no route) and
//! `/tasks/a%0Ab` as `/tasks/ab` (another task). The router therefore
//! routes the raw path itself (`lambda_http`'s `raw_http_path`), with
//! the characters a path cannot hold percent-encoded, so a path parameter
//! holds exactly what the client sent and its checks name it (`taskId`).

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::RequestExt;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// What a path segment cannot hold as itself.
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

pub async fn route(mut req: Request, next: Next) -> Response {
    let raw = req.extensions().raw_http_path();
    if raw.starts_with('/') {
        let path = utf8_percent_encode(raw, PATH).to_string();
        if path != req.uri().path() {
            let uri = match req.uri().query() {
                Some(q) => format!("{path}?{q}"),
                None => path,
            };
            if let Ok(uri) = uri.parse() {
                *req.uri_mut() = uri;
            }
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_path_cannot_hold_is_encoded_and_the_rest_kept() {
        let e = |raw: &str| utf8_percent_encode(raw, PATH).to_string();
        assert_eq!(e("/tasks/\0"), "/tasks/%00");
        assert_eq!(e("/tasks/a\nb"), "/tasks/a%0Ab");
        assert_eq!(e("/tasks/a \\b"), "/tasks/a%20%5Cb");
        assert_eq!(e("/tasks/order-1:x@y.z_~"), "/tasks/order-1:x@y.z_~");
        assert_eq!(e("/tasks/J\u{fa}"), "/tasks/J%C3%BA");
        assert_eq!(e("/tasks/50%"), "/tasks/50%25");
    }
}
