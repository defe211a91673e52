//! The local stack: Amazon DynamoDB Local and moto started on loopback, the
//! resources of template.yaml created in them, an in-process pipeline that
//! feeds the real handlers the events Lambda would, and the guards and lags
//! AWS has that the emulators lack. The lab (`lifo-lab`) runs on it.

pub mod api_gateway;
pub mod aws;
pub mod contention;
pub mod empty_maps;
pub mod filter;
pub mod http_downstream;
pub mod iam;
pub mod index_lag;
pub mod invoke;
pub mod lambda_api;
pub mod loopback;
pub mod pacing;
pub mod payloads;
pub mod pipeline;
pub mod rie;
pub mod runtime_api;
pub mod servers;
pub mod stack;
pub mod template;

pub use pipeline::{Pipeline, PipelineOptions, SweepRate};
pub use stack::LocalStack;
pub use template::Template;

/// Resolves when the user presses Ctrl-C or the process gets SIGTERM.
pub async fn interrupted() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        } => {}
    }
}
