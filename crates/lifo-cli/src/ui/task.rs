//! One task's page (its fields, payload, history and the moves an operator
//! may make on it).

use super::console::{PageError, Shared};
use super::pages::{Notice, action, encode, layout, notice, status_badge, task_path, time};
use super::text::Shown;
use axum::extract::{Path, Query, State};
use lifo_core::{TaskStatus, now_ms};
use maud::{Markup, html};

pub async fn task(
    State(c): Shared,
    Path(id): Path<String>,
    Query(q): Query<Notice>,
) -> Result<Markup, PageError> {
    let now = now_ms();
    let id = lifo_ops::path_id::task(&id)?;
    let t = lifo_ops::tasks::get(&c.queue, &id).await?;
    let path = task_path(&t.task_id);
    let shed = t.expires_at * 1000 <= now
        && matches!(t.task_status, TaskStatus::Pending | TaskStatus::Taken);
    let live_lease = t.task_status == TaskStatus::Taken && t.lease_until.is_some_and(|l| l > now);
    let payload = serde_json::to_string_pretty(&t.payload).unwrap_or_default();
    let row = |label: &str, value: Markup| html! { tr { th { (label) } td { (value) } } };
    let body = html! {
        h1 { "Task " span.id { (Shown(&t.task_id)) } " " (status_badge(t.task_status)) @if shed { " " span.badge.s-shed { "SHED" } } }
        div.actions {
            @if matches!(t.task_status, TaskStatus::Failure | TaskStatus::Expired) || shed {
                (action(&c, &format!("{path}/retry"), "Retry", None, "primary"))
            }
            @if t.task_status == TaskStatus::Scheduled {
                (action(&c, &format!("{path}/cancel"), "Cancel", Some("Cancel this scheduled task?"), "warn"))
            }
            @if !live_lease {
                (action(&c, &format!("{path}/delete"), "Delete", Some("Delete this task for good?"), "danger"))
            }
        }
        table.fields {
            (row("Attempts", html! { (t.attempts) }))
            (row("Created", html! { (time(t.task_created, now)) }))
            (row("Updated", html! { (time(t.task_updated, now)) }))
            (row("Ready", html! { (time(t.ready_at, now)) }))
            @if let Some(at) = t.claimable_at { (row("Claimable since", html! { (time(lifo_core::priority::at_ms(at), now)) })) }
            @if t.priority() != lifo_core::Priority::Normal { (row("Priority", html! { (t.priority().as_str()) })) }
            @if let Some(tenant) = &t.tenant { (row("Tenant", html! { (Shown(tenant)) })) }
            @if let Some(at) = t.started_at { (row("Started", html! { (time(at, now)) })) }
            @if let Some(at) = t.shed_at { (row("Shed", html! { (time(at, now)) })) }
            (row("Expires", html! { (time(t.expires_at * 1000, now)) }))
            @if let Some(at) = t.lease_until { (row("Lease until", html! { (time(at, now)) })) }
            @if let Some(by) = &t.claimed_by { (row("Claimed by", html! { code { (Shown(by)) } })) }
            (row("Token", html! { (t.token) }))
            (row("Shard", html! { (t.lifo_shard) }))
            @if let Some(u) = &t.user_id { (row("User", html! { a href=(format!("/tasks?user={}", encode(u))) { (Shown(u)) } })) }
            @if let Some(d) = &t.due_date { (row("Due date", html! { (Shown(d)) })) }
            @if let Some(k) = &t.supersede_key { (row("Supersede key", html! { code { (Shown(k)) } })) }
            @if let Some(by) = &t.superseded_by { (row("Superseded by", html! { a href=(task_path(by)) { (Shown(by)) } })) }
            @if let Some(at) = t.superseded_at { (row("Superseded", html! { (time(at, now)) })) }
            @if let Some(e) = &t.last_error { (row("Last error", html! { pre.error { (Shown(e)) } })) }
        }
        h2 { "Payload" }
        pre.payload { (Shown(&payload)) }
        h2 { "History" }
        table.grid.history {
            thead { tr { th { "Status" } th { "At" } th { "Attempt" } th { "Token" } th { "Reason" } } }
            tbody {
                @for h in &t.history {
                    tr {
                        td { (status_badge(h.status)) }
                        td { (time(h.at, now)) }
                        td.num { (h.attempt) }
                        td.num { (h.token) }
                        td.error { (Shown(h.reason.as_deref().unwrap_or(""))) }
                    }
                }
            }
        }
    };
    Ok(layout(&c, &t.task_id, notice(q.done.as_deref(), q.n), body))
}
