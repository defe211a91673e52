//! The routes: each parses its request, calls one operation of `lifo-ops`
//! (the same the `lifo` command and its console call) and answers JSON.

use crate::body::{self, MAX_BODY_BYTES};
use crate::problem::Problem;
use crate::scopes;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use lifo_core::{Task, now_ms};
use lifo_ops::Queue;
use lifo_ops::fields::{present, whole};
use lifo_ops::redrive::{Redrive, Selection};
use lifo_ops::since::Since;
use lifo_ops::tasks::FailedFilter;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Most tasks one page of a user's list holds.
pub const MAX_PAGE: usize = 100;
/// Tasks per page unless `limit` says otherwise.
pub const DEFAULT_PAGE: usize = 25;
/// Longest a bulk retry may take at its pace: API Gateway ends an HTTP API
/// integration after 30 s, so `limit / perSecond` must stay under this.
pub const MAX_BULK_SECONDS: usize = 25;
/// Most days ahead `GET /queue` counts scheduled tasks for.
pub const MAX_STATS_DAYS: u32 = 31;
/// Why a redrive over the API is recorded in the task's history.
pub const REDRIVE_REASON: &str = "retried over the HTTP API";

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct Api {
    pub queue: Queue,
}

type Shared = State<Arc<Api>>;
type Answer = Result<Response, Problem>;

/// Every route: method, path (as API Gateway and OpenAPI write it) and
/// handler. The router is built from this list, and docs/openapi.yaml is
/// checked against it.
pub fn routes() -> Vec<(Method, &'static str, MethodRouter<Arc<Api>>)> {
    vec![
        (Method::POST, "/tasks", post(create)),
        (Method::GET, "/tasks/{taskId}", get(get_task)),
        (Method::DELETE, "/tasks/{taskId}", delete(delete_task)),
        (Method::GET, "/tasks/{taskId}/history", get(history)),
        (Method::POST, "/tasks/{taskId}/retry", post(redrive_one)),
        (Method::POST, "/tasks/{taskId}/cancel", post(cancel)),
        (Method::POST, "/tasks/retry", post(redrive_failed)),
        (Method::GET, "/users/{userId}/tasks", get(user_tasks)),
        (Method::GET, "/queue", get(stats)),
        (Method::POST, "/queue/pause", post(pause)),
        (Method::POST, "/queue/resume", post(resume)),
    ]
}

/// The query parameters a route takes (none when it is not listed); any
/// other is refused, naming it, before the route runs.
pub const QUERY_PARAMETERS: &[(&str, &str, &[&str])] = &[
    ("GET", "/users/{userId}/tasks", &["limit", "cursor"]),
    ("GET", "/queue", &["days"]),
];

async fn known_query(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let known = QUERY_PARAMETERS
        .iter()
        .find(|(m, p, _)| *m == req.method().as_str() && Some(*p) == route.as_deref())
        .map_or(&[][..], |(_, _, k)| *k);
    let pairs: Vec<(String, String)> = match Query::try_from_uri(req.uri()) {
        Ok(Query(q)) => q,
        Err(e) => return Problem::invalid("(query)", e.body_text()).into_response(),
    };
    let mut q: HashMap<String, String> = HashMap::new();
    for (name, value) in pairs {
        // Which of two values a reader keeps is up to the reader (axum the
        // last, API Gateway's queryStringParameters a comma-joined list):
        // the sender's meaning is unknown.
        if q.contains_key(&name) {
            return Problem::invalid(name, "is given more than once; give it once").into_response();
        }
        q.insert(name, value);
    }
    if let Err(p) = body::only(&q, known) {
        return p.into_response();
    }
    next.run(req).await
}

/// The API's router over `api`: the routes, 404 and 405 as problem
/// documents, bodies over [`MAX_BODY_BYTES`] refused by length, and the
/// JWT scopes checked when API Gateway's JWT authorizer let the request in.
pub fn router(api: Arc<Api>) -> Router {
    let mut by_path: Vec<(&'static str, MethodRouter<Arc<Api>>)> = Vec::new();
    for (_, path, handler) in routes() {
        match by_path.iter_mut().find(|(p, _)| *p == path) {
            Some((_, existing)) => *existing = std::mem::take(existing).merge(handler),
            None => by_path.push((path, handler)),
        }
    }
    let mut router = Router::new();
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    let router = router
        .route_layer(axum::middleware::from_fn(known_query))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(scopes::check))
        .layer(axum::middleware::from_fn(body::declared_length))
        .layer(axum::middleware::map_response(crate::problem::ensure))
        // One byte over the limit: the handler names the limit itself.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES + 1))
        // Outermost: its line has the final status and the whole time.
        .layer(axum::middleware::from_fn(crate::access::log))
        .with_state(api);
    // Before routing: the path as API Gateway handed it over.
    Router::new()
        .fallback_service(router)
        .layer(axum::middleware::from_fn(crate::raw_path::route))
}

async fn not_found(method: Method, uri: axum::http::Uri) -> Problem {
    Problem::not_found(format!("no route {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> Problem {
    // `GET /tasks/retry` meets the bulk retry's route: say how a task
    // stored with that id is named.
    let word = uri
        .path()
        .rsplit('/')
        .next()
        .filter(|w| lifo_ops::path_id::ROUTE_WORDS.contains(w));
    let hint = word.map_or_else(String::new, |w| {
        format!(
            " ({w} is a route word: a task whose id is {w} is /tasks/{})",
            lifo_ops::path_id::encode(w)
        )
    });
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "/problems/method-not-allowed",
        "Method not allowed",
        format!("{} does not take {method}{hint}", uri.path()),
    )
}

fn ok<T: Serialize>(status: StatusCode, value: &T) -> Answer {
    Ok((status, axum::Json(value)).into_response())
}

/// A body read whole: over the limit, refused by length.
fn bytes(body: Result<Bytes, axum::extract::rejection::BytesRejection>) -> Result<Bytes, Problem> {
    body.map_err(|e| match e {
        axum::extract::rejection::BytesRejection::FailedToBufferBody(_) => {
            body::too_large(MAX_BODY_BYTES + 1)
        }
        e => Problem::invalid("(body)", e.body_text()),
    })
}

/// `POST /tasks`: create's request. 201 when it wrote, 200 when every
/// producer-chosen id already existed (an idempotent replay).
async fn create(
    State(api): Shared,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    let body = bytes(body)?;
    // Its media type, size, syntax and keys, each refusal naming its field.
    body::json(&headers, &body, false)?;
    // Create reads the text itself: a payload's numbers keep every digit.
    let text = String::from_utf8(body.to_vec())
        .map_err(|e| Problem::invalid("(body)", format!("not UTF-8: {e}")))?;
    let r = api.queue.create_json(text).await?;
    let status = if r.created.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    ok(status, &r)
}

/// The task id a path names (see [`lifo_ops::path_id`]); a well-formed
/// segment that can name no stored id names no task.
fn task_id(segment: &str) -> Result<String, Problem> {
    Ok(lifo_ops::path_id::task(segment)?)
}

async fn get_task(State(api): Shared, Path(id): Path<String>) -> Answer {
    let id = task_id(&id)?;
    ok(
        StatusCode::OK,
        &lifo_ops::tasks::get(&api.queue, &id).await?,
    )
}

async fn history(State(api): Shared, Path(id): Path<String>) -> Answer {
    let id = task_id(&id)?;
    ok(
        StatusCode::OK,
        &lifo_ops::tasks::history(&api.queue, &id).await?,
    )
}

/// A batch of one: what was refused is a conflict.
fn single(report: lifo_ops::tasks::BatchReport) -> Answer {
    let report = report.into_single()?;
    ok(
        StatusCode::OK,
        &json!({ "done": report.done, "paused": report.paused }),
    )
}

async fn delete_task(State(api): Shared, Path(id): Path<String>) -> Answer {
    let id = task_id(&id)?;
    lifo_ops::tasks::check_id("taskId", &id)?;
    single(lifo_ops::tasks::delete(&api.queue, &[id]).await?)
}

async fn cancel(State(api): Shared, Path(id): Path<String>) -> Answer {
    let id = task_id(&id)?;
    ok(
        StatusCode::OK,
        &lifo_ops::tasks::cancel(&api.queue, &id).await?,
    )
}

/// An optional `{"reason": "…"}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reason {
    #[serde(default, deserialize_with = "present")]
    reason: Option<String>,
}

/// Longest reason kept in a task's history or on the control item.
const MAX_REASON: usize = 500;

fn reason(headers: &HeaderMap, body: &Bytes, default: &str) -> Result<String, Problem> {
    let r: Reason = body::typed(body::json(headers, body, true)?)?;
    let text = r.reason.unwrap_or_else(|| default.to_owned());
    if text.chars().count() > MAX_REASON {
        return Err(Problem::invalid(
            "reason",
            format!(
                "is {} characters; the limit is {MAX_REASON}",
                text.chars().count()
            ),
        ));
    }
    Ok(text)
}

async fn redrive_one(
    State(api): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    let id = task_id(&id)?;
    lifo_ops::tasks::check_id("taskId", &id)?;
    let reason = reason(&headers, &bytes(body)?, REDRIVE_REASON)?;
    let r = Redrive::ids(vec![id], reason);
    single(lifo_ops::redrive::redrive(&api.queue, &r, &|_, _| {}).await?)
}

/// `POST /tasks/retry`: every failure of a window, paced (serde names it
/// `RetryFailed` in its messages, as the API's answers always have).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", rename = "RetryFailed")]
struct RedriveFailed {
    /// Failed since: `90s`, `15m`, `1h`, `2d`, an RFC 3339 time or epoch ms.
    #[serde(default, deserialize_with = "present")]
    since: Option<String>,
    #[serde(default, deserialize_with = "present")]
    error_prefix: Option<String>,
    #[serde(default, deserialize_with = "whole")]
    limit: Option<usize>,
    #[serde(default, deserialize_with = "whole")]
    per_second: Option<u32>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default, deserialize_with = "present")]
    reason: Option<String>,
}

async fn redrive_failed(
    State(api): Shared,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    let started = std::time::Instant::now();
    let r: RedriveFailed = body::typed(body::json(&headers, &bytes(body)?, true)?)?;
    let now = now_ms();
    let since: Since = match r.since.as_deref() {
        None | Some("") => Since::At(0),
        Some(s) => s
            .parse()
            .map_err(|e: String| Problem::invalid("since", e))?,
    };
    let per_second = r
        .per_second
        .unwrap_or(lifo_ops::redrive::DEFAULT_PACE.get());
    let per_second = NonZeroU32::new(per_second)
        .filter(|n| n.get() <= lifo_ops::redrive::MAX_PACE)
        .ok_or_else(|| {
            Problem::invalid(
                "perSecond",
                format!("must be 1 to {}", lifo_ops::redrive::MAX_PACE),
            )
        })?;
    // By default what fits the budget at this pace; more is allowed, and
    // what the budget leaves undone is listed under `remaining`.
    let fits = MAX_BULK_SECONDS * per_second.get() as usize;
    let limit = r.limit.unwrap_or(fits.min(lifo_ops::tasks::MAX_LIST));
    if limit == 0 || limit > lifo_ops::tasks::MAX_LIST {
        return Err(Problem::invalid(
            "limit",
            format!(
                "must be 1 to {} (a bulk retry stops after {MAX_BULK_SECONDS} s, API Gateway's \
                 30 s limit, and lists what is left; `lifo tasks retry --failed` has no limit)",
                lifo_ops::tasks::MAX_LIST
            ),
        ));
    }
    let reason = r.reason.unwrap_or_else(|| REDRIVE_REASON.to_owned());
    if reason.chars().count() > MAX_REASON {
        return Err(Problem::invalid(
            "reason",
            format!("the limit is {MAX_REASON} characters"),
        ));
    }
    let redrive = Redrive {
        selection: Selection::Failed(FailedFilter {
            since_ms: since.epoch_ms(now),
            error_prefix: r.error_prefix.unwrap_or_default(),
            limit,
        }),
        per_second,
        reason,
        dry_run: r.dry_run,
        // Whatever each redrive takes, the answer leaves before API
        // Gateway gives up: what is left is listed, to go on with.
        until: Some(started + std::time::Duration::from_secs(MAX_BULK_SECONDS as u64)),
    };
    ok(
        StatusCode::OK,
        &lifo_ops::redrive::redrive(&api.queue, &redrive, &|_, _| {}).await?,
    )
}

/// A task in a list: everything but its payload (`GET /tasks/{taskId}`
/// has it), so a page stays small whatever the payloads weigh.
fn summary(t: &Task) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("payload");
        o.remove("history");
    }
    v
}

async fn user_tasks(
    State(api): Shared,
    Path(user): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let user = lifo_ops::path_id::decode("userId", &user)?;
    let limit: usize = body::param(&q, "limit", DEFAULT_PAGE)?;
    if limit == 0 || limit > MAX_PAGE {
        return Err(Problem::invalid(
            "limit",
            format!("must be 1 to {MAX_PAGE}, not {limit}"),
        ));
    }
    let Some(user) = user else {
        // No stored user has this id: an empty list, and no page of it.
        if let Some(c) = q.get("cursor") {
            lifo_ops::cursor::no_page_of(c)?;
        }
        return ok(StatusCode::OK, &json!({"items": [], "nextCursor": null}));
    };
    let page = lifo_ops::tasks::list_user(
        &api.queue,
        &user,
        limit,
        q.get("cursor").map(String::as_str),
    )
    .await?;
    ok(
        StatusCode::OK,
        &json!({
            "items": page.items.iter().map(summary).collect::<Vec<_>>(),
            "nextCursor": page.next_cursor,
        }),
    )
}

async fn stats(State(api): Shared, Query(q): Query<HashMap<String, String>>) -> Answer {
    let days: u32 = body::param(&q, "days", 7)?;
    // One COUNT query per date and due shard: 32 dates at 50 due shards are
    // 1,600 queries, well inside API Gateway's 30 s.
    if days > MAX_STATS_DAYS {
        return Err(Problem::invalid(
            "days",
            format!("must be 0 to {MAX_STATS_DAYS} (`lifo stats --days` takes more)"),
        ));
    }
    let now = now_ms();
    // Today to `days` ahead: `days=0` reads one day's due shards, not the
    // week scheduler-start catches up (`lifo stats` counts that too).
    let s = lifo_ops::stats::collect(&api.queue, now, 0, days).await?;
    ok(StatusCode::OK, &s.json(now))
}

async fn pause(
    State(api): Shared,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    set_paused(&api, &headers, body, true).await
}

async fn resume(
    State(api): Shared,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Answer {
    set_paused(&api, &headers, body, false).await
}

async fn set_paused(
    api: &Api,
    headers: &HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    paused: bool,
) -> Answer {
    let default = if paused {
        "paused over the HTTP API"
    } else {
        "resumed over the HTTP API"
    };
    let reason = reason(headers, &bytes(body)?, default)?;
    ok(
        StatusCode::OK,
        &lifo_ops::control::set(&api.queue, paused, &reason).await?,
    )
}
