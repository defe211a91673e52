//! The console's actions: each runs the CLI's own command (`tasks::run`,
//! `queue::set`) with the page's inputs, so there is one implementation of
//! every move, then redirects to a page that shows what it did (post,
//! redirect, get). The guard has checked the token, the Host and the
//! Origin; the form's CSRF token is checked here.

use super::Console;
use super::pages::{PageError, Shared, task_path};
use crate::tasks::Since;
use crate::{CliError, RetryArgs, TasksCommand, queue, tasks};
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

/// Most failed tasks one click retries (25 per second: 40 s at most).
pub const MAX_RETRY_FAILED: usize = 1000;

/// Why a task's history says it moved.
const REASON: &str = "retried from the console";

/// A form's fields (all but `csrf` optional).
#[derive(Debug, Default, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    error_prefix: String,
}

/// What a form without this console's CSRF token gets.
fn csrf_refused() -> Response {
    (
        StatusCode::FORBIDDEN,
        "refused: the form's CSRF token is missing or wrong (reload the page)",
    )
        .into_response()
}

fn csrf_ok(c: &Console, form: &ActionForm) -> bool {
    super::guard::same(&form.csrf, &c.csrf)
}

async fn run(c: &Console, form: &ActionForm, cmd: TasksCommand, to: String) -> Response {
    if !csrf_ok(c, form) {
        return csrf_refused();
    }
    match tasks::run(&cmd, &c.target, true).await {
        Ok(_) => Redirect::to(&to).into_response(),
        Err(e) => PageError(e).into_response(),
    }
}

fn retry_args(ids: Vec<String>) -> RetryArgs {
    RetryArgs {
        ids,
        failed: false,
        since: None,
        error_prefix: None,
        limit: MAX_RETRY_FAILED,
        dry_run: false,
        rate: 25,
        reason: Some(REASON.to_owned()),
    }
}

pub async fn retry(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let to = format!("{}?done=retried", task_path(&id));
    run(&c, &f, TasksCommand::Retry(retry_args(vec![id])), to).await
}

pub async fn delete(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    run(
        &c,
        &f,
        TasksCommand::Delete { ids: vec![id] },
        "/?done=deleted".into(),
    )
    .await
}

pub async fn cancel(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let to = format!("{}?done=cancelled", task_path(&id));
    run(&c, &f, TasksCommand::Cancel { id }, to).await
}

pub async fn retry_failed(State(c): Shared, Form(f): Form<ActionForm>) -> Response {
    if !csrf_ok(&c, &f) {
        return csrf_refused();
    }
    let since: Since = match f.since.trim() {
        "" => Since::At(0),
        s => match s.parse() {
            Ok(since) => since,
            Err(e) => return PageError(CliError::Other(format!("since: {e}"))).into_response(),
        },
    };
    let prefix = f.error_prefix.trim();
    let args = RetryArgs {
        failed: true,
        since: Some(since),
        error_prefix: (!prefix.is_empty()).then(|| prefix.to_owned()),
        ..retry_args(Vec::new())
    };
    match tasks::run(&TasksCommand::Retry(args), &c.target, true).await {
        Ok(out) => {
            let n = serde_json::from_str::<serde_json::Value>(&out)
                .ok()
                .and_then(|v| v["retried"].as_array().map(Vec::len))
                .unwrap_or(0);
            Redirect::to(&format!("/?done=retried-failed&n={n}")).into_response()
        }
        Err(e) => PageError(e).into_response(),
    }
}

async fn set_paused(c: &Console, f: &ActionForm, paused: bool) -> Response {
    if !csrf_ok(c, f) {
        return csrf_refused();
    }
    let reason = match f.reason.trim() {
        "" if paused => "paused from the console",
        "" => "resumed from the console",
        r => r,
    };
    match queue::set(&c.target, paused, Some(reason), true).await {
        Ok(_) => Redirect::to(if paused {
            "/?done=paused"
        } else {
            "/?done=resumed"
        })
        .into_response(),
        Err(e) => PageError(e).into_response(),
    }
}

pub async fn pause(State(c): Shared, Form(f): Form<ActionForm>) -> Response {
    set_paused(&c, &f, true).await
}

pub async fn resume(State(c): Shared, Form(f): Form<ActionForm>) -> Response {
    set_paused(&c, &f, false).await
}
