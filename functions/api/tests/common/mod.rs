//! What the API's integration suites share: the API over a local stack's
//! table, served behind the local API Gateway (IAM, as deployed), and a
//! client that signs its requests as an SDK does.

#![allow(dead_code)]

use api::{Api, router};
use lifo_local::api_gateway::sigv4;
use lifo_ops::{Queue, Settings};
use lifo_tests::Harness;
use reqwest::StatusCode;
use serde_json::Value;
use std::sync::Arc;

/// The API served on a free loopback port, over `h`'s table.
pub struct Served {
    pub base: String,
    pub client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn api(h: &Harness) -> Arc<Api> {
    let settings = Settings {
        shards: h.shards,
        due_shards: 4,
        ..Settings::default()
    };
    // As deployed: every call under the API function's policy.
    let store = h.stack.store_as("ApiFunction", &h.store);
    Arc::new(Api {
        queue: Queue::new(store, settings).with_producer(Arc::new(h.creator_as("ApiFunction"))),
    })
}

pub async fn serve(h: &Harness) -> Served {
    serve_api(api(h), lifo_local::api_gateway::ApiGateway::default()).await
}

/// `api` behind `gateway`, on a free loopback port.
pub async fn serve_api(api: Arc<Api>, gateway: lifo_local::api_gateway::ApiGateway) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // As deployed: API Gateway decodes the path before the function sees it.
    let app = gateway
        .with_function_max_body(api::MAX_BODY_BYTES)
        .wrap(router(api));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Served {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        task,
    }
}

impl Served {
    /// A request signed with SigV4 by the local stack's credentials, as an
    /// SDK signs one for a deployed stack (the local API Gateway refuses an
    /// unsigned one).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> reqwest::RequestBuilder {
        // Signed as sent: the URL as reqwest will write it.
        let url = reqwest::Url::parse(&format!("{}{path}", self.base)).unwrap();
        let headers: Vec<(&str, &str)> = content_type
            .map(|ct| ("content-type", ct))
            .into_iter()
            .collect();
        let signing = sigv4::sign(
            method,
            url.as_str(),
            &headers,
            &body,
            &lifo_local::stack::credentials(),
            lifo_local::stack::REGION,
            std::time::SystemTime::now(),
        )
        .unwrap();
        let mut req = self
            .client
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        for (k, v) in headers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .chain(signing)
        {
            req = req.header(k, v);
        }
        req.body(body)
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let res = match body {
            Some(b) => self.request(
                method,
                path,
                Some("application/json"),
                b.to_string().into_bytes(),
            ),
            None => self.request(method, path, None, Vec::new()),
        }
        .send()
        .await
        .unwrap();
        answer(res).await
    }

    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let res = self
            .request(method, path, Some(content_type), body)
            .send()
            .await
            .unwrap();
        answer(res).await
    }
}

/// Status and JSON body; an error must be a problem document.
pub async fn answer(res: reqwest::Response) -> (StatusCode, Value) {
    let status = res.status();
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = res.text().await.unwrap();
    let body: Value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    if status.is_client_error() || status.is_server_error() {
        assert_eq!(content_type, "application/problem+json", "{status}: {text}");
        assert_eq!(body["status"], status.as_u16(), "{body}");
        assert!(
            body["type"].is_string() && body["detail"].is_string(),
            "{body}"
        );
    } else {
        assert_eq!(content_type, "application/json", "{status}: {text}");
    }
    (status, body)
}

/// The strings of a JSON array (the ids a create or a bulk move answered).
pub fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
