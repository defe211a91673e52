//! What every handler of the console shares: its state, the command's
//! arguments, where the freshness chart comes from and how a failed page
//! answers.

use super::text::Shown;
use crate::connect::Connection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use lifo_lambda::bounded::{AWS_ANSWER_LIMIT, BoundedAnswers};
use lifo_ops::{OpsError, Queue};
use maud::{DOCTYPE, html};
use std::net::SocketAddr;
use std::sync::Arc;

pub type Shared = State<Arc<Console>>;

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
    pub queue: Queue,
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
        queue: Queue,
        read_only: bool,
        addr: SocketAddr,
        freshness: FreshnessSource,
    ) -> Self {
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{}", addr.port()));
        }
        Self {
            queue,
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

/// A failed page: the error's one line, as text, with its status.
pub struct PageError(pub OpsError);

impl From<OpsError> for PageError {
    fn from(e: OpsError) -> Self {
        Self(e)
    }
}

impl From<lifo_core::StoreError> for PageError {
    fn from(e: lifo_core::StoreError) -> Self {
        Self(OpsError::Store(e))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            OpsError::NotFound { .. } | OpsError::NamesNothing { .. } => StatusCode::NOT_FOUND,
            OpsError::Gone { .. } => StatusCode::GONE,
            OpsError::Conflict(_) => StatusCode::CONFLICT,
            OpsError::Contended(_) => StatusCode::SERVICE_UNAVAILABLE,
            OpsError::Store(e) if e.is_conflict() => StatusCode::SERVICE_UNAVAILABLE,
            OpsError::Invalid { .. } | OpsError::Rejected(_) => StatusCode::BAD_REQUEST,
            OpsError::Store(_) | OpsError::Interrupted { .. } | OpsError::Unavailable(_) => {
                StatusCode::BAD_GATEWAY
            }
        };
        let message = self.0.to_string();
        let body = html! {
            (DOCTYPE)
            html lang="en" {
                head { meta charset="utf-8"; title { "lifo: error" } link rel="stylesheet" href="/assets/console.css"; }
                body { main {
                    p.error role="alert" { (Shown(&message)) }
                    p { a href="/" { "Back to the overview" } }
                } }
            }
        };
        (status, body).into_response()
    }
}

/// Where the console's freshness chart comes from: a local table
/// (`--endpoint-url`) is scanned; a stack's `AgeAtStartMs` metric is read
/// from CloudWatch (the usual way: `AWS_ENDPOINT_URL_CLOUDWATCH` works; the
/// namespace is `METRICS_NAMESPACE`, as in the functions, or `LifoQueue`).
pub async fn source(cli: &Connection) -> FreshnessSource {
    if cli.endpoint_url.is_some() {
        return FreshnessSource::Table;
    }
    match &cli.stack {
        Some(stack) => FreshnessSource::CloudWatch {
            client: aws_sdk_cloudwatch::Client::from_conf(
                aws_sdk_cloudwatch::config::Builder::from(
                    &crate::connect::aws_config(cli, None).await,
                )
                .interceptor(BoundedAnswers::new(AWS_ANSWER_LIMIT))
                .build(),
            ),
            namespace: std::env::var("METRICS_NAMESPACE").unwrap_or_else(|_| "LifoQueue".into()),
            service: stack.clone(),
        },
        None => FreshnessSource::None,
    }
}
