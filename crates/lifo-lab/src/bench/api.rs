//! `lifo bench --only api`: what the HTTP API adds to a request on the
//! local stack. The same operation, timed directly (`lifo-ops` against
//! DynamoDB Local: the floor) and through the `api` function's router over
//! HTTP/1.1 on loopback (one kept-alive connection), interleaved so both
//! see the same DynamoDB Local. In AWS, API Gateway and Lambda add their
//! own hops on top; this is our share.

use super::part::{Line, Report};
use crate::report::percentile;
use axum::body::Body;
use http_body_util::BodyExt as _;
use lifo_local::LocalStack;
use lifo_ops::{Queue, Settings};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests per operation and way.
const REQUESTS: usize = 300;

/// A 1 KB payload of the demo's kind.
fn payload(n: usize) -> Value {
    json!({"orderId": n, "deviceId": format!("device-{}", n % 97), "note": "x".repeat(900)})
}

fn ms(d: &[Duration], p: f64) -> f64 {
    let mut v: Vec<u64> = d.iter().map(|d| d.as_micros() as u64).collect();
    v.sort_unstable();
    percentile(&v, p) as f64 / 1000.0
}

pub(super) async fn api_latency() -> anyhow::Result<Report> {
    let mut out = Report::default();
    let stack = LocalStack::start().await?;
    let queue = Queue::new(stack.store(), Settings::default());
    queue
        .create(json!({"tasks": [{"taskId": "probe", "payload": payload(0)}]}))
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = api::router(Arc::new(api::Api {
        queue: queue.clone(),
    }));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    let connection = tokio::spawn(conn);
    let mut send =
        async |method: &str, path: &str, body: Option<Value>| -> anyhow::Result<Duration> {
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", addr.to_string());
            if body.is_some() {
                req = req.header("content-type", "application/json");
            }
            let req = req.body(Body::from(body.map(|b| b.to_string()).unwrap_or_default()))?;
            sender.ready().await?;
            let started = Instant::now();
            let res = sender.send_request(req).await?;
            let status = res.status();
            res.into_body().collect().await?;
            let took = started.elapsed();
            anyhow::ensure!(
                status.is_success() || path.ends_with("%2E%2E"),
                "{method} {path}: {status}"
            );
            Ok(took)
        };
    let (mut get_direct, mut get_http, mut post_direct, mut post_http, mut refused) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..REQUESTS {
        // Refused before DynamoDB (an id of dots): HTTP, routing and the
        // problem document alone.
        refused.push(send("GET", "/tasks/%2E%2E", None).await?);
        let started = Instant::now();
        lifo_ops::tasks::get(&queue, "probe").await?;
        get_direct.push(started.elapsed());
        get_http.push(send("GET", "/tasks/probe", None).await?);
        let direct = json!({"tasks": [{"taskId": format!("d-{i}"), "payload": payload(i)}]});
        let started = Instant::now();
        queue.create(direct).await?;
        post_direct.push(started.elapsed());
        let over = json!({"tasks": [{"taskId": format!("h-{i}"), "payload": payload(i)}]});
        post_http.push(send("POST", "/tasks", Some(over)).await?);
    }
    drop(sender);
    connection.abort();
    server.abort();
    let mut figures = serde_json::Map::new();
    for (what, direct, http) in [
        ("GET /tasks/{taskId}", &get_direct, &get_http),
        ("POST /tasks (one 1 KB task)", &post_direct, &post_http),
    ] {
        let (d50, h50, h95) = (ms(direct, 50.0), ms(http, 50.0), ms(http, 95.0));
        figures.insert(
            what.into(),
            json!({"directMedianMs": d50, "httpMedianMs": h50, "httpP95Ms": h95, "addedMedianMs": h50 - d50}),
        );
        out.lines.push(Line {
            measure: format!("HTTP API: {what}, added per request on the local stack"),
            result: format!(
                "{:+.2} ms median ({h50:.2} ms over HTTP, p95 {h95:.2}; {d50:.2} ms direct), {REQUESTS} requests",
                h50 - d50
            ),
            target: "< 1 ms added".into(),
            met: Some(h50 - d50 < 1.0),
            flags: String::new(),
        });
    }
    let (r50, r95) = (ms(&refused, 50.0), ms(&refused, 95.0));
    figures.insert(
        "httpAndRouterOnly".into(),
        json!({"medianMs": r50, "p95Ms": r95}),
    );
    out.lines.push(Line {
        measure: "HTTP API: a request refused before DynamoDB (HTTP, routing, problem document)"
            .into(),
        result: format!("{r50:.2} ms median, p95 {r95:.2}, {REQUESTS} requests"),
        target: "< 1 ms".into(),
        met: Some(r50 < 1.0),
        flags: String::new(),
    });
    out.figures
        .insert("apiLatency".into(), Value::Object(figures));
    Ok(out)
}
