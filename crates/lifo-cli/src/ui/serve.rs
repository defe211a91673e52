//! The console's HTTP server: hyper's HTTP/1 connection loop around the
//! router, with the two limits `axum::serve` does not set.
//!
//! - **Header-read timeout** ([`HEADER_READ_TIMEOUT`]): a connection that
//!   has not sent a whole request head within it, including one idle
//!   between two requests, is closed. Without it, half-open connections
//!   stay forever.
//! - **At most [`MAX_CONNECTIONS`] connections** at once: the next one is
//!   accepted only when one closes (the kernel's backlog holds it until
//!   then).

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot, watch};

/// Longest wait for a request's head (and between requests).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: u32 = 64;

/// Serves `app` on `listener` until `stopped`, then lets each open
/// connection finish the request it is in.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, stopped: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS as usize));
    let (drain, draining) = watch::channel(false);
    tokio::pin!(stopped);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut stopped => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "console: accept failed");
                    continue;
                }
            },
            _ = &mut stopped => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut draining = draining.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = async { draining.wait_for(|d| *d).await.map(|_| ()) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = drain.send(true);
    // Every connection gives its slot back when it ends.
    let _ = slots.acquire_many(MAX_CONNECTIONS).await;
}
