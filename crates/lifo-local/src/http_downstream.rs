//! A downstream behind HTTP, for the http runner's tests: process's
//! simulated [`Downstream`] (a capacity that follows a schedule, a queue
//! inside it, 429 past the queue's bound) served by axum on 127.0.0.1.
//! `POST /run` answers 200 once the run is done, 429 when refused, 504
//! when the downstream gave it up; the http runner's own timeout may end
//! it first.

use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::StatusCode;
use process::runner::RunOutcome;
use process::runner::downstream::Downstream;
use std::sync::Arc;
use std::time::Duration;

struct Served {
    downstream: Arc<Downstream>,
    latency: Duration,
}

/// A running HTTP downstream. Stops when dropped.
pub struct HttpDownstream {
    /// `http://127.0.0.1:PORT/run`: the http runner's `RUNNER_URL`.
    pub url: String,
    downstream: Arc<Downstream>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpDownstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpDownstream {
    /// Serves `downstream`, each run taking `latency` once it has a slot;
    /// its schedule starts now.
    pub async fn start(downstream: Downstream, latency: Duration) -> Result<Self> {
        let downstream = Arc::new(downstream);
        let state = Arc::new(Served {
            downstream: Arc::clone(&downstream),
            latency,
        });
        let app = axum::Router::new()
            .route("/run", axum::routing::post(run))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the HTTP downstream")?;
        let address = listener
            .local_addr()
            .context("the HTTP downstream's address")?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        downstream.start_now();
        Ok(Self {
            url: format!("http://{address}/run"),
            downstream,
            task,
        })
    }

    /// The runs it served or refused so far.
    pub fn downstream(&self) -> &Downstream {
        &self.downstream
    }
}

async fn run(State(s): State<Arc<Served>>) -> (StatusCode, String) {
    match s.downstream.run(s.latency).await {
        RunOutcome::Success => (StatusCode::OK, "{}".to_owned()),
        RunOutcome::TimedOut(why) => (StatusCode::GATEWAY_TIMEOUT, why),
        other => (StatusCode::TOO_MANY_REQUESTS, other.reason().to_owned()),
    }
}
