//! A small HTTP/1 server on a free loopback port, for the local stand-ins
//! of AWS APIs (the Lambda Runtime API, the Lambda Invoke API).

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use std::future::Future;
use std::sync::Arc;

/// A running server; dropping it stops accepting connections.
pub struct Loopback {
    /// `127.0.0.1:PORT`.
    pub address: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves every request with `handle(&state, request)` on 127.0.0.1, on a
/// free port.
pub async fn serve<S, F, Fut>(what: &str, state: Arc<S>, handle: F) -> Result<Loopback>
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, Request<Incoming>) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .with_context(|| format!("binding the {what}"))?;
    let address = listener
        .local_addr()
        .with_context(|| format!("the {what}'s address"))?
        .to_string();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(state, req).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Ok(Loopback { address, task })
}
