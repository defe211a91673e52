//! The console's actions: each calls the operation the CLI and the HTTP
//! API call (`lifo-ops`) with the page's inputs, so there is one
//! implementation of every move, then redirects to a page that shows what
//! it did (post, redirect, get). The guard has checked the token, the Host and the
//! Origin; the form's CSRF token is checked here.

use super::console::{Console, PageError, Shared};
use super::pages::{MAX_REDRIVE_FAILED, task_path};
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use lifo_ops::OpsError;
use lifo_ops::redrive::{Redrive, Selection};
use lifo_ops::since::Since;
use lifo_ops::tasks::FailedFilter;
use serde::Deserialize;

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

/// Runs `op` when the form carries this console's CSRF token, then
/// redirects to `to`.
async fn run<T>(
    c: &Console,
    form: &ActionForm,
    op: impl std::future::Future<Output = Result<T, OpsError>>,
    to: String,
) -> Response {
    if !csrf_ok(c, form) {
        return csrf_refused();
    }
    match op.await {
        Ok(_) => Redirect::to(&to).into_response(),
        Err(e) => PageError(e).into_response(),
    }
}

/// A redrive by id refused (not FAILURE or shed) is an error here.
async fn redrive_one(c: &Console, id: String) -> Result<(), OpsError> {
    let report =
        lifo_ops::redrive::redrive(&c.queue, &Redrive::ids(vec![id], REASON), &|_, _| {}).await?;
    report.into_single().map(drop)
}

pub async fn redrive(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let id = match lifo_ops::path_id::task(&id) {
        Ok(id) => id,
        Err(e) => return PageError(e).into_response(),
    };
    let to = format!("{}?done=retried", task_path(&id));
    run(&c, &f, redrive_one(&c, id), to).await
}

pub async fn delete(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let id = match lifo_ops::path_id::task(&id) {
        Ok(id) => id,
        Err(e) => return PageError(e).into_response(),
    };
    let ids = [id];
    let deleted = async {
        lifo_ops::tasks::delete(&c.queue, &ids)
            .await?
            .into_single()
            .map(drop)
    };
    run(&c, &f, deleted, "/?done=deleted".into()).await
}

pub async fn cancel(
    State(c): Shared,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let id = match lifo_ops::path_id::task(&id) {
        Ok(id) => id,
        Err(e) => return PageError(e).into_response(),
    };
    let to = format!("{}?done=cancelled", task_path(&id));
    run(&c, &f, lifo_ops::tasks::cancel(&c.queue, &id), to).await
}

pub async fn redrive_failed(State(c): Shared, Form(f): Form<ActionForm>) -> Response {
    if !csrf_ok(&c, &f) {
        return csrf_refused();
    }
    let since: Since = match f.since.trim() {
        "" => Since::At(0),
        s => match s.parse() {
            Ok(since) => since,
            Err(e) => return PageError(OpsError::invalid("since", e)).into_response(),
        },
    };
    let r = Redrive {
        selection: Selection::Failed(FailedFilter {
            since_ms: since.epoch_ms(lifo_core::now_ms()),
            error_prefix: f.error_prefix.trim().to_owned(),
            limit: MAX_REDRIVE_FAILED,
        }),
        ..Redrive::ids(Vec::new(), REASON)
    };
    match lifo_ops::redrive::redrive(&c.queue, &r, &|_, _| {}).await {
        Ok(report) => {
            Redirect::to(&format!("/?done=retried-failed&n={}", report.done.len())).into_response()
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
    match lifo_ops::control::set(&c.queue, paused, reason).await {
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
