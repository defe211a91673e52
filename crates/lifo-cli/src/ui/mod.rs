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
//!   `/resume`: the CLI's own commands (`tasks::run`, `queue::set`), absent
//!   with `--read-only`.

mod actions;
pub mod freshness;
pub mod guard;
mod pages;
pub mod serve;
mod task;
pub mod text;

use crate::Target;
use anyhow::Context as _;
use axum::Router;
use axum::routing::{get, post};
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug, Clone, clap::Args)]
pub struct UiArgs {
    /// Address to listen on. The default, loopback only, is what the token
    /// and the Host check are designed for; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Show the queue, never act on it: no action buttons, every POST refused.
    #[arg(long)]
    pub read_only: bool,
}

/// Where the freshness chart comes from.
#[derive(Debug, Clone)]
pub enum FreshnessSource {
    /// A scan of the table (local tables: free there, never in AWS).
    Table,
    /// A stack's `AgeAtStartMs` metric (dimension `Service` = `service`,
    /// the stack's name).
    CloudWatch {
        client: aws_sdk_cloudwatch::Client,
        namespace: String,
        service: String,
    },
    /// Neither (a table in AWS given without its stack): no chart.
    None,
}

/// What every handler shares.
pub struct Console {
    pub target: Target,
    pub read_only: bool,
    /// Required on every request (`?token=` once, then a cookie).
    pub token: String,
    /// Required in every form POST.
    pub csrf: String,
    /// `Host` values accepted (DNS rebinding: a page of another site that
    /// resolves its name to 127.0.0.1 sends its own name).
    pub hosts: Vec<String>,
    pub freshness: FreshnessSource,
}

impl Console {
    pub fn new(
        target: Target,
        read_only: bool,
        addr: SocketAddr,
        freshness: FreshnessSource,
    ) -> Self {
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{}", addr.port()));
        }
        Self {
            target,
            read_only,
            token: random_token(),
            csrf: random_token(),
            hosts,
            freshness,
        }
    }
}

/// 244 random bits (two v4 UUIDs, from the OS's generator), hex.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The console's routes over `console`.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/api/overview", get(pages::overview_json))
        .route("/tasks", get(pages::tasks))
        .route("/tasks/{id}", get(task::task))
        .route("/scheduled", get(pages::scheduled))
        .route("/tasks/{id}/retry", post(actions::retry))
        .route("/tasks/{id}/delete", post(actions::delete))
        .route("/tasks/{id}/cancel", post(actions::cancel))
        .route("/retry-failed", post(actions::retry_failed))
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

/// Binds `args.listen` and serves the console for `target` until stopped.
pub async fn start(
    target: Target,
    args: &UiArgs,
    freshness: FreshnessSource,
) -> anyhow::Result<Running> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the console to {}", args.listen))?;
    let addr = listener.local_addr()?;
    let console = Arc::new(Console::new(target, args.read_only, addr, freshness));
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
