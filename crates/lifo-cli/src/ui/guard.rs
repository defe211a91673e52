//! What every request to the console passes, before any handler runs:
//!
//! - **Host** must be the address the console listens on (or `localhost`
//!   with its port): a page of another site whose name resolves to
//!   127.0.0.1 (DNS rebinding) sends its own name and is refused.
//! - **Token**: the random token printed in the URL at start, once as
//!   `?token=` (answered with a cookie and a redirect that drops it from
//!   the address bar), then the cookie (`HttpOnly`, `SameSite=Strict`, named
//!   after the port: cookies are not per port).
//! - **POST**: refused with `--read-only`; the `Origin` header must be the
//!   console's own; the form's `csrf` field is checked by the handler
//!   ([`super::actions`]).
//!
//! Every answer carries a Content-Security-Policy that allows nothing but
//! the console's own script, style and requests, so even markup that got
//! into a page could not run or load anything.

use super::console::Console;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use std::sync::Arc;

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; \
    frame-ancestors 'none'";

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Host,
    Token,
    ReadOnly,
    Origin,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Self::Host => StatusCode::MISDIRECTED_REQUEST,
            Self::Token => StatusCode::UNAUTHORIZED,
            Self::ReadOnly | Self::Origin => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Self::Host => "refused: this console answers only to the address it listens on",
            Self::Token => "refused: open the URL that `lifo ui` printed (it carries the token)",
            Self::ReadOnly => "refused: this console is read-only (--read-only)",
            Self::Origin => "refused: a change must come from the console's own pages",
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.status(), self.message()).into_response()
    }
}

/// What the checks let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The cookie holds the token.
    Cookie,
    /// `?token=` holds it: set the cookie and drop it from the URL.
    Query,
}

/// Compares without stopping at the first difference.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

/// The cookie's name: per port, as cookies are shared by all ports of a host.
pub fn cookie_name(hosts: &[String]) -> String {
    let port = hosts
        .first()
        .and_then(|h| h.rsplit(':').next())
        .unwrap_or("0");
    format!("lifo_console_{port}")
}

/// The checks, on what the request says.
pub fn check(
    c: &Console,
    method: &Method,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Pass, Refusal> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = text(header::HOST).unwrap_or("");
    if !c.hosts.iter().any(|h| h == host) {
        return Err(Refusal::Host);
    }
    let cookie = cookie_name(&c.hosts);
    let by_cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == cookie && same(v, &c.token));
    let by_query = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.split_once('='))
        .any(|(k, v)| k == "token" && same(v, &c.token));
    let pass = match (by_cookie, by_query) {
        (true, _) => Pass::Cookie,
        (false, true) => Pass::Query,
        (false, false) => return Err(Refusal::Token),
    };
    if method != Method::GET && method != Method::HEAD {
        if c.read_only {
            return Err(Refusal::ReadOnly);
        }
        let origin = text(header::ORIGIN).unwrap_or("");
        if !c.hosts.iter().any(|h| origin == format!("http://{h}")) {
            return Err(Refusal::Origin);
        }
    }
    Ok(pass)
}

/// Where a browser that brought the token in the query goes next: the same
/// path, always relative to this origin (`//evil.example/` and
/// `/\\evil.example/` become `/evil.example/`, never another site), with the
/// rest of the query and without the token.
pub fn without_token(path: &str, query: Option<&str>) -> String {
    let path = format!("/{}", path.trim_start_matches(['/', '\\']));
    let rest: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|kv| !kv.is_empty() && kv.split_once('=').map_or(*kv, |(k, _)| k) != "token")
        .collect();
    if rest.is_empty() {
        path
    } else {
        format!("{path}?{}", rest.join("&"))
    }
}

/// The middleware: [`check`], then the handler, then the headers every
/// answer carries.
pub async fn guard(State(c): State<Arc<Console>>, req: Request, next: Next) -> Response {
    let verdict = check(&c, req.method(), req.headers(), req.uri().query());
    let mut res = match verdict {
        Err(refusal) => refusal.into_response(),
        Ok(Pass::Query) if req.method() == Method::GET => {
            let to = without_token(req.uri().path(), req.uri().query());
            let mut res = match HeaderValue::from_str(&to) {
                Ok(location) => {
                    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
                }
                Err(_) => Redirect::to("/").into_response(),
            };
            let cookie = format!(
                "{}={}; Path=/; HttpOnly; SameSite=Strict",
                cookie_name(&c.hosts),
                c.token
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res
        }
        Ok(_) => next.run(req).await,
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::console::FreshnessSource;

    fn console(read_only: bool) -> Console {
        let conf = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let queue = lifo_ops::Queue::new(
            lifo_core::Store::new(aws_sdk_dynamodb::Client::from_conf(conf), "Q"),
            lifo_ops::Settings::default(),
        );
        let addr = "127.0.0.1:7070".parse().unwrap();
        Console::new(queue, read_only, addr, FreshnessSource::None)
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap()))
            .collect()
    }

    #[test]
    fn the_token_comes_by_query_once_then_by_cookie() {
        let c = console(false);
        let host = (header::HOST, "127.0.0.1:7070");
        let q = format!("token={}", c.token);
        let get = Method::GET;
        assert_eq!(
            check(&c, &get, &headers(std::slice::from_ref(&host)), Some(&q)),
            Ok(Pass::Query)
        );
        let cookie = format!("a=b; lifo_console_7070={}", c.token);
        let with_cookie = headers(&[host.clone(), (header::COOKIE, &cookie)]);
        assert_eq!(check(&c, &get, &with_cookie, None), Ok(Pass::Cookie));
        for bad in [None, Some("token="), Some("token=0000"), Some(&c.csrf[..])] {
            assert_eq!(
                check(&c, &get, &headers(std::slice::from_ref(&host)), bad),
                Err(Refusal::Token),
                "{bad:?}"
            );
        }
        // Another port's cookie is not this console's.
        let other = format!("lifo_console_7071={}", c.token);
        let other = headers(&[host, (header::COOKIE, &other)]);
        assert_eq!(check(&c, &get, &other, None), Err(Refusal::Token));
    }

    #[test]
    fn the_token_redirect_stays_on_this_origin_and_keeps_the_query() {
        assert_eq!(without_token("/", Some("token=abc")), "/");
        assert_eq!(
            without_token("//evil.example/", Some("token=abc")),
            "/evil.example/"
        );
        assert_eq!(without_token("/\\evil.example/x", None), "/evil.example/x");
        assert_eq!(without_token("///a//b", None), "/a//b");
        assert_eq!(
            without_token("/tasks", Some("failed=1&token=abc&since=1h&&")),
            "/tasks?failed=1&since=1h"
        );
        assert_eq!(without_token("/tasks", Some("token")), "/tasks");
        assert_eq!(without_token("/tasks", Some("tokens=1")), "/tasks?tokens=1");
    }

    #[test]
    fn another_host_is_refused_even_with_the_token() {
        let c = console(false);
        let q = format!("token={}", c.token);
        for host in ["evil.example:7070", "127.0.0.1:80", "", "localhost"] {
            let h = headers(&[(header::HOST, host)]);
            assert_eq!(
                check(&c, &Method::GET, &h, Some(&q)),
                Err(Refusal::Host),
                "{host}"
            );
        }
        let h = headers(&[(header::HOST, "localhost:7070")]);
        assert_eq!(check(&c, &Method::GET, &h, Some(&q)), Ok(Pass::Query));
    }

    #[test]
    fn a_post_needs_the_consoles_origin_and_a_writable_console() {
        let c = console(false);
        let cookie = format!("lifo_console_7070={}", c.token);
        let post = |origin: Option<&str>, c: &Console| {
            let mut pairs = vec![
                (header::HOST, "127.0.0.1:7070"),
                (header::COOKIE, cookie.as_str()),
            ];
            if let Some(o) = origin {
                pairs.push((header::ORIGIN, o));
            }
            check(c, &Method::POST, &headers(&pairs), None)
        };
        assert_eq!(post(Some("http://127.0.0.1:7070"), &c), Ok(Pass::Cookie));
        assert_eq!(post(Some("http://localhost:7070"), &c), Ok(Pass::Cookie));
        for origin in [
            None,
            Some("http://evil.example"),
            Some("null"),
            Some("https://127.0.0.1:7070"),
        ] {
            assert_eq!(post(origin, &c), Err(Refusal::Origin), "{origin:?}");
        }
        let read_only = Console {
            token: c.token.clone(),
            ..console(true)
        };
        assert_eq!(
            post(Some("http://127.0.0.1:7070"), &read_only),
            Err(Refusal::ReadOnly)
        );
    }
}
