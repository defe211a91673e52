//! `lifo ui`: the console. One binary serves it (axum over the hyper
//! already in the tree; HTML from `maud`, which escapes every value it
//! prints; the stylesheet and the one script embedded), on 127.0.0.1 by
//! default, behind a random token (see [`guard`]).
//!
//! - `/`: the overview (counts per status and shard, claimable ages,
//!   paused or not, the freshness chart), refreshed every 3 s by
//!   `/assets/console.js` from `/api/overview`;
//! - `/tasks?id=…`, `/tasks?user=…`, `/tasks?failed=…`, `/scheduled`: find
//!   tasks; `/tasks/{id}`: one task's fields, payload and history;
//! - POST `/tasks/{id}/retry|delete|cancel`, `/retry-failed`, `/pause`,
//!   `/resume`: the operations the CLI and the HTTP API call (`lifo-ops`),
//!   absent with `--read-only`.

mod actions;
pub mod console;
pub mod freshness;
pub mod guard;
mod pages;
pub mod serve;
mod task;
pub mod text;

use anyhow::Context as _;
use axum::Router;
use axum::routing::{get, post};
use console::{Console, FreshnessSource, UiArgs};
use lifo_ops::Queue;
use std::net::SocketAddr;
use std::sync::Arc;

/// The console's routes over `console`.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/api/overview", get(pages::overview_json))
        .route("/tasks", get(pages::tasks))
        .route("/tasks/{id}", get(task::task))
        .route("/scheduled", get(pages::scheduled))
        .route("/tasks/{id}/retry", post(actions::redrive))
        .route("/tasks/{id}/delete", post(actions::delete))
        .route("/tasks/{id}/cancel", post(actions::cancel))
        .route("/retry-failed", post(actions::redrive_failed))
        .route("/pause", post(actions::pause))
        .route("/resume", post(actions::resume))
        .route("/assets/console.css", get(pages::css))
        .route("/assets/console.js", get(pages::js))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            guard::guard,
        ))
        .with_state(console)
}

/// A console being served.
pub struct Running {
    /// The URL to open, token included.
    pub url: String,
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops serving: lets requests in progress finish for up to 2 s (an
    /// open browser keeps idle connections), then closes everything.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut self.task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `args.listen` and serves the console for `queue` until stopped.
pub async fn start(
    queue: Queue,
    args: &UiArgs,
    freshness: FreshnessSource,
) -> anyhow::Result<Running> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the console to {}", args.listen))?;
    let addr = listener.local_addr()?;
    let console = Arc::new(Console::new(queue, args.read_only, addr, freshness));
    let url = format!("http://{addr}/?token={}", console.token);
    let app = router(console);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve::serve(listener, app, stopped));
    Ok(Running {
        url,
        addr,
        stop: Some(stop),
        task,
    })
}
