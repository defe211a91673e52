//! The console's pages. Every value from the table (ids, payloads, errors,
//! reasons, user ids) goes through maud's `(…)` splice, which escapes it:
//! task data is shown as text, never as markup.

use super::console::{Console, FreshnessSource, PageError, Shared};
use super::freshness;
use super::text::{Cut, LIST_ERROR_CHARS, LIST_ID_CHARS, Shown, seconds};
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use futures::StreamExt;
use lifo_core::store::FailedQuery;
use lifo_core::{Task, TaskStatus, now_ms};
use lifo_ops::since::Since;
use lifo_ops::stats::{self, ShardStats, age_ms};
use lifo_ops::{OpsError, Queue};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;
use serde_json::json;

/// Most rows a list shows.
const LIST_LIMIT: usize = 200;

/// What an action did, shown once on the page it leads to. A fixed set:
/// the query string can only pick one of these, never put text on a page.
pub fn notice(done: Option<&str>, n: Option<u64>) -> Option<String> {
    Some(match done? {
        "retried" => "Retried: the task is pending again, as new work.".to_owned(),
        "deleted" => "Deleted.".to_owned(),
        "cancelled" => "Cancelled.".to_owned(),
        "paused" => "Paused: nothing is claimed until you resume.".to_owned(),
        "resumed" => "Resumed: the processor has been woken.".to_owned(),
        "retried-failed" => format!("Retried {} failed task(s).", n.unwrap_or(0)),
        _ => return None,
    })
}

#[derive(Debug, Default, Deserialize)]
pub struct Notice {
    pub(super) done: Option<String>,
    pub(super) n: Option<u64>,
}

/// `s` percent-encoded as one path segment or query value.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The path of task `id`: plain ids as themselves, any other id (`a/b`,
/// `..`, `sp ace`) encoded ([`lifo_ops::path_id`]), as the HTTP API names
/// them.
pub fn task_path(id: &str) -> String {
    format!("/tasks/{}", lifo_ops::path_id::encode(id))
}

/// A list's error cell: its start ([`Cut`]), and a title saying how long
/// it is when cut (the task's page shows it whole).
fn error_cell(error: Option<&str>) -> maud::Markup {
    let e = error.unwrap_or("");
    let cut = Cut(e, LIST_ERROR_CHARS);
    maud::html! {
        @if cut.is_cut() {
            td.error title=(format!("{} characters; the task's page shows it whole", e.chars().count())) { (cut) }
        } @else {
            td.error { (cut) }
        }
    }
}

pub(super) fn time(ms: u64, now: u64) -> String {
    let at = chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default();
    let d = now as i64 - ms as i64;
    let rel = if d >= 0 {
        format!("{} ago", seconds(d as u64))
    } else {
        format!("in {}", seconds((-d) as u64))
    };
    format!("{at} ({rel})")
}

pub(super) fn age(at: Option<u64>, now: u64) -> String {
    age_ms(at, now).map_or("-".to_owned(), seconds)
}

/// Most failed tasks one click retries (at the default pace,
/// [`lifo_ops::redrive::DEFAULT_PACE`] per second); the overview's hint says so.
pub const MAX_REDRIVE_FAILED: usize = 1000;

pub(super) fn status_badge(s: TaskStatus) -> Markup {
    html! { span class=(format!("badge s-{}", s.as_str().to_lowercase())) { (s.as_str()) } }
}

/// The page around `body`.
pub(super) fn layout(c: &Console, title: &str, notice: Option<String>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "lifo: " (Shown(title)) }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "lifo" }
                    nav {
                        a href="/" { "Overview" }
                        a href="/tasks?failed=1&since=1d" { "Failed" }
                        a href="/scheduled" { "Scheduled" }
                    }
                    form.find method="get" action="/tasks" {
                        input type="search" name="id" placeholder="task id" aria-label="task id";
                        input type="search" name="user" placeholder="user id" aria-label="user id";
                        button type="submit" { "Find" }
                    }
                    span.table title="table" { (Shown(c.queue.store.table())) }
                    @if c.read_only { span.badge.readonly { "read-only" } }
                }
                main {
                    @if let Some(n) = notice { p.notice role="status" { (n) } }
                    (body)
                }
            }
        }
    }
}

/// A POST button with the CSRF token; `confirm`: asked first (by console.js).
pub(super) fn action(
    c: &Console,
    path: &str,
    label: &str,
    confirm: Option<&str>,
    class: &str,
) -> Markup {
    html! {
        @if !c.read_only {
            form.action method="post" action=(path) data-confirm=[confirm] {
                input type="hidden" name="csrf" value=(c.csrf);
                button type="submit" class=(class) { (label) }
            }
        }
    }
}

/// The overview's live figures, by the `data-field` that shows each: the
/// page and `/api/overview` both come from here.
pub fn fields(shards: &[ShardStats], failed_last_hour: usize, now: u64) -> Vec<(String, String)> {
    let total = |f: fn(&ShardStats) -> usize| shards.iter().map(f).sum::<usize>().to_string();
    let capped = if shards.iter().any(|s| s.expired_capped) {
        "+"
    } else {
        ""
    };
    let newest = shards.iter().filter_map(|s| s.newest_claimable_at).max();
    let oldest = shards.iter().filter_map(|s| s.oldest_claimable_at).min();
    let mut out = vec![
        ("pending".to_owned(), total(|s| s.pending)),
        ("running".to_owned(), total(|s| s.running)),
        ("backing-off".to_owned(), total(|s| s.backing_off)),
        ("shed".to_owned(), total(|s| s.expired_last_hour) + capped),
        (
            "superseded".to_owned(),
            total(|s| s.superseded_last_hour)
                + if shards.iter().any(|s| s.superseded_capped) {
                    "+"
                } else {
                    ""
                },
        ),
        ("failed".to_owned(), failed_last_hour.to_string()),
        ("newest-age".to_owned(), age(newest, now)),
        ("oldest-age".to_owned(), age(oldest, now)),
    ];
    for s in shards {
        let n = s.shard;
        out.extend([
            (format!("shard-{n}-pending"), s.pending.to_string()),
            (format!("shard-{n}-running"), s.running.to_string()),
            (format!("shard-{n}-backing-off"), s.backing_off.to_string()),
            (format!("shard-{n}-shed"), stats::shed_shown(s)),
            (format!("shard-{n}-superseded"), stats::superseded_shown(s)),
            (
                format!("shard-{n}-newest-age"),
                age(s.newest_claimable_at, now),
            ),
            (
                format!("shard-{n}-oldest-age"),
                age(s.oldest_claimable_at, now),
            ),
        ]);
    }
    out
}

/// What a refresh reads: the control item, six queries per shard, and the
/// failed-task index for the last hour.
async fn live(
    q: &Queue,
    now: u64,
) -> Result<(lifo_core::store::QueueControl, Vec<ShardStats>, usize), OpsError> {
    let failed = FailedQuery {
        shard_count: q.settings.shards,
        since_ms: now.saturating_sub(3_600_000),
        until_ms: now,
        error_prefix: "",
        limit: 1000,
    };
    let (control, shards, failed) = futures::try_join!(
        async { Ok::<_, OpsError>(q.store.control(true).await?) },
        stats::shard_stats(q, now),
        async { Ok::<_, OpsError>(q.store.failed(failed).await?) },
    )?;
    Ok((control, shards, failed.len()))
}

pub async fn overview_json(State(c): Shared) -> Result<Response, PageError> {
    let now = now_ms();
    let (control, shards, failed) = live(&c.queue, now).await?;
    let fields: serde_json::Map<String, serde_json::Value> = fields(&shards, failed, now)
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    Ok(axum::Json(json!({"paused": control.paused, "fields": fields, "at": now})).into_response())
}

pub async fn overview(State(c): Shared, Query(q): Query<Notice>) -> Result<Markup, PageError> {
    let now = now_ms();
    let ((control, shards, failed), scheduled) = futures::try_join!(
        live(&c.queue, now),
        stats::scheduled(&c.queue, now, stats::PAST_DAYS, 7),
    )?;
    let paused = control.paused;
    let chart = match &c.freshness {
        FreshnessSource::Table => {
            let starts = c
                .queue
                .store
                .started_since(freshness::first_bucket(now))
                .await?;
            Ok(freshness::chart(&freshness::buckets(&starts, now)))
        }
        FreshnessSource::CloudWatch {
            client,
            namespace,
            service,
        } => freshness::from_cloudwatch(client, namespace, service, now)
            .await
            .map(|b| freshness::chart(&b)),
        FreshnessSource::None => Err(
            "no chart: give --stack to read the AgeAtStartMs metric of its dashboard".to_owned(),
        ),
    };
    let f: std::collections::HashMap<String, String> =
        fields(&shards, failed, now).into_iter().collect();
    let field = |k: &str| html! { span data-field=(k) { (f.get(k).map_or("-", String::as_str)) } };
    let scheduled_total: usize = scheduled.iter().map(|(_, n)| n).sum();
    let body = html! {
        section.state data-paused=(paused) {
            @if paused {
                p.paused role="status" {
                    strong { "Paused" }
                    @if let Some(r) = control.reason.as_deref().filter(|r| !r.is_empty()) { ": " (Shown(r)) }
                    ". Nothing is claimed; tasks keep expiring (it is a LIFO queue)."
                }
                (action(&c, "/resume", "Resume", None, "primary"))
            } @else {
                p.running { strong { "Running" } }
                (action(&c, "/pause", "Pause", Some("Pause processing? Running tasks finish; nothing new starts."), "warn"))
            }
        }
        section.cards {
            div.card { span.label { "Pending" } span.value { (field("pending")) } }
            div.card { span.label { "Running" } span.value { (field("running")) } }
            div.card { span.label { "Backing off" } span.value { (field("backing-off")) } }
            div.card.bad { span.label { a href="/tasks?failed=1&since=1h" { "Failed (1 h)" } } span.value { (field("failed")) } }
            div.card { span.label { "Shed (1 h)" } span.value { (field("shed")) } }
            div.card { span.label { "Superseded (1 h)" } span.value { (field("superseded")) } }
            div.card { span.label { a href="/scheduled" { "Scheduled" } } span.value { (scheduled_total) } }
            div.card { span.label { "Newest claimable" } span.value { (field("newest-age")) } }
            div.card { span.label { "Oldest claimable" } span.value { (field("oldest-age")) } }
        }
        p.updated { "Live: refreshed every 3 s. " span data-field="updated" {} }
        section {
            h2 { "Freshness" }
            @match chart {
                Ok(chart) => (chart),
                Err(why) => p.hint { (why) },
            }
        }
        section {
            h2 { "Shards" }
            table.grid {
                thead { tr { th { "Shard" } th { "Pending" } th { "Running" } th { "Backing off" } th { "Shed (1 h)" } th { "Superseded (1 h)" } th { "Newest" } th { "Oldest" } } }
                tbody {
                    @for s in &shards {
                        @let n = s.shard;
                        tr {
                            td { (n) }
                            @for k in ["pending", "running", "backing-off", "shed", "superseded", "newest-age", "oldest-age"] {
                                td.num { (field(&format!("shard-{n}-{k}"))) }
                            }
                        }
                    }
                }
            }
        }
        @if !c.read_only {
            section {
                h2 { "Retry failed tasks" }
                form.inline method="post" action="/retry-failed" data-confirm="Retry every failed task of this window, as new work?" {
                    input type="hidden" name="csrf" value=(c.csrf);
                    label { "failed since " input name="since" value="1h" size="6"; }
                    label { "last error starts with " input name="error_prefix" size="16"; }
                    button type="submit" { "Retry failed" }
                }
                p.hint {
                    "At most " (MAX_REDRIVE_FAILED) " at a time, "
                    (lifo_ops::redrive::DEFAULT_PACE) " per second (3 write units each); "
                    code { "lifo tasks retry --failed" } " for more."
                }
            }
        }
    };
    Ok(layout(&c, "overview", notice(q.done.as_deref(), q.n), body))
}

#[derive(Debug, Default, Deserialize)]
pub struct TasksQuery {
    id: Option<String>,
    user: Option<String>,
    failed: Option<String>,
    since: Option<String>,
    error_prefix: Option<String>,
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

pub async fn tasks(State(c): Shared, Query(q): Query<TasksQuery>) -> Result<Response, PageError> {
    let now = now_ms();
    if let Some(id) = nonempty(&q.id) {
        return Ok(Redirect::to(&task_path(id)).into_response());
    }
    if let Some(user) = nonempty(&q.user) {
        let tasks = lifo_ops::tasks::list_user(&c.queue, user, LIST_LIMIT, None)
            .await?
            .items;
        let body = html! {
            h1 { "Tasks of user " (Shown(user)) }
            (task_table(&tasks, now))
        };
        return Ok(layout(&c, "user", None, body).into_response());
    }
    if q.failed.is_none() {
        return Err(PageError(OpsError::invalid(
            "(query)",
            "look up a task by id, a user's tasks (user=…) or the failed ones (failed=1)",
        )));
    }
    let since_text = nonempty(&q.since).unwrap_or("1d");
    let since: Since = since_text
        .parse()
        .map_err(|e: String| PageError(OpsError::invalid("since", e)))?;
    let prefix = nonempty(&q.error_prefix).unwrap_or("");
    let failed = lifo_ops::tasks::failed(
        &c.queue,
        &lifo_ops::tasks::FailedFilter {
            since_ms: since.epoch_ms(now),
            error_prefix: prefix.to_owned(),
            limit: LIST_LIMIT,
        },
    )
    .await?;
    let body = html! {
        h1 { "Failed tasks" }
        form.inline method="get" action="/tasks" {
            input type="hidden" name="failed" value="1";
            label { "since " input name="since" value=(since_text) size="6"; }
            label { "last error starts with " input name="error_prefix" value=(prefix) size="16"; }
            button type="submit" { "Show" }
        }
        p.hint { (failed.len()) " failed task(s), newest first" @if failed.len() == LIST_LIMIT { " (the first " (LIST_LIMIT) ")" } }
        table.grid.failed {
            thead { tr { th { "Task" } th { "Failed" } th { "Last error" } } }
            tbody {
                @for f in &failed {
                    tr {
                        td.id { a href=(task_path(&f.task_id)) { (Cut(&f.task_id, LIST_ID_CHARS)) } }
                        td { (seconds(now.saturating_sub(f.failed_at))) " ago" }
                        (error_cell(f.last_error.as_deref()))
                    }
                }
            }
        }
    };
    Ok(layout(&c, "failed tasks", None, body).into_response())
}

#[derive(Debug, Default, Deserialize)]
pub struct ScheduledQuery {
    date: Option<String>,
}

pub async fn scheduled(
    State(c): Shared,
    Query(q): Query<ScheduledQuery>,
) -> Result<Markup, PageError> {
    let now = now_ms();
    let counts = stats::scheduled(&c.queue, now, stats::PAST_DAYS, 30).await?;
    let date = match nonempty(&q.date) {
        Some(d) => Some(
            chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d")
                .map_err(|_| {
                    PageError(OpsError::invalid(
                        "date",
                        format!("expected YYYY-MM-DD, got {d:?}"),
                    ))
                })?
                .format("%Y-%m-%d")
                .to_string(),
        ),
        None => None,
    };
    let mut tasks = Vec::new();
    if let Some(d) = &date {
        let mut ids = Vec::new();
        for shard in 0..c.queue.settings.due_shards.max(1) {
            let (page, _) = c
                .queue
                .store
                .due_page(
                    &lifo_core::model::due_key(d, shard),
                    LIST_LIMIT as i32,
                    None,
                )
                .await?;
            ids.extend(page);
            if ids.len() >= LIST_LIMIT {
                break;
            }
        }
        ids.truncate(LIST_LIMIT);
        let store = &c.queue.store;
        let found: Vec<Result<Option<Task>, lifo_core::StoreError>> = futures::stream::iter(ids)
            .map(|id| async move { store.get(&id).await })
            .buffered(16)
            .collect()
            .await;
        for t in found {
            tasks.extend(t?);
        }
    }
    let body = html! {
        h1 { "Scheduled tasks" }
        table.grid {
            thead { tr { th { "Due date" } th { "Scheduled" } } }
            tbody {
                @for (d, n) in &counts {
                    tr { td { a href=(format!("/scheduled?date={d}")) { (d) } } td.num { (n) } }
                }
            }
        }
        @if counts.is_empty() { p.hint { "Nothing scheduled from 7 days ago to 30 days ahead." } }
        @if let Some(d) = &date {
            h2 { "Due " (d) }
            (task_table(&tasks, now))
        }
    };
    Ok(layout(&c, "scheduled", None, body))
}

pub async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
        .into_response()
}

pub async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
        .into_response()
}

pub(super) fn task_table(tasks: &[Task], now: u64) -> Markup {
    html! {
        table.grid {
            thead { tr { th { "Task" } th { "Status" } th { "Attempts" } th { "Created" } th { "Due" } th { "Last error" } } }
            tbody {
                @for t in tasks {
                    tr {
                        td.id { a href=(task_path(&t.task_id)) { (Cut(&t.task_id, LIST_ID_CHARS)) } }
                        td { (status_badge(t.task_status)) }
                        td.num { (t.attempts) }
                        td { (seconds(now.saturating_sub(t.task_created))) " ago" }
                        td { (t.due_date.as_deref().unwrap_or("-")) }
                        (error_cell(t.last_error.as_deref()))
                    }
                }
            }
        }
        p.hint { (tasks.len()) " task(s), newest first" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_encoded_into_one_path_segment() {
        assert_eq!(task_path("order-1001"), "/tasks/order-1001");
        assert_eq!(task_path("a:b@c.d"), "/tasks/a:b@c.d");
        assert_eq!(task_path("a/b"), "/tasks/~YS9i");
        assert_eq!(task_path("<x>\"'"), "/tasks/~PHg-Iic");
    }

    #[test]
    fn a_notice_is_one_of_a_fixed_set() {
        assert_eq!(notice(Some("deleted"), None).as_deref(), Some("Deleted."));
        assert_eq!(
            notice(Some("retried-failed"), Some(3)).as_deref(),
            Some("Retried 3 failed task(s).")
        );
        assert_eq!(notice(Some("<script>alert(1)</script>"), None), None);
        assert_eq!(notice(None, Some(1)), None);
    }

    #[test]
    fn task_data_is_rendered_as_text() {
        let hostile = "\"><img src=x onerror=alert(1)><script>alert(2)</script>";
        let html = html! { td.error { (hostile) } }.into_string();
        assert!(
            !html.contains("<img") && !html.contains("<script"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }
}
