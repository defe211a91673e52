//! Contention as deployed. In AWS, a single-item write (`PutItem`,
//! `UpdateItem`, `DeleteItem`) on an item that a `TransactWriteItems` is
//! writing at that moment fails with `TransactionConflictException`, and a
//! transaction that meets another write is cancelled with the reason
//! `TransactionConflict`. DynamoDB Local does neither.
//!
//! [`Contention`] is the HTTP client of the local stack's DynamoDB client:
//! it passes every request to DynamoDB Local, except that
//! - a single-item write on an item that a transaction sent through it is
//!   writing right now is answered `TransactionConflictException`, as AWS
//!   would (on by default);
//! - with a `rate`, a single-item write on an item that transactions write
//!   (a keyed task, a key item) is answered so at that rate, and so is a
//!   transaction (cancelled, `TransactionConflict` on one item): the
//!   moments at which AWS's transactions overlap, which one process on
//!   loopback rarely meets. The chaos test runs at 5 %.
//!
//! Answers it makes are counted ([`Contention::injected`]).

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How the local DynamoDB answers contention.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ContentionMode {
    /// DynamoDB Local as it is: no conflicts ever.
    Off,
    /// As AWS: a write meets a conflict while a transaction holds its item;
    /// and at `rate` (0 to 1), writes of items that transactions write, and
    /// transactions themselves, meet one too.
    Aws { rate: f64 },
}

impl Default for ContentionMode {
    fn default() -> Self {
        Self::Aws { rate: 0.0 }
    }
}

/// The shared state: which items transactions hold now, which items
/// transactions write at all, and what was answered.
#[derive(Debug, Default)]
struct State {
    held: Mutex<HashMap<String, usize>>,
    transacted: Mutex<HashSet<String>>,
    rate: f64,
    injected: AtomicUsize,
}

/// The HTTP client (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Contention {
    inner: SharedHttpClient,
    state: Arc<State>,
}

impl Contention {
    /// Over plain HTTP (the local servers listen on loopback), or `None`
    /// when `mode` is [`ContentionMode::Off`].
    pub fn new(mode: ContentionMode) -> Option<Self> {
        let ContentionMode::Aws { rate } = mode else {
            return None;
        };
        Some(Self {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            state: Arc::new(State {
                rate: rate.clamp(0.0, 1.0),
                ..State::default()
            }),
        })
    }

    /// Conflicts answered so far.
    pub fn injected(&self) -> usize {
        self.state.injected.load(Ordering::Relaxed)
    }

    /// Holds `task_id` as a transaction in flight would, until the guard is
    /// dropped (for tests of what a conflict does).
    pub fn hold(&self, task_id: &str) -> Held {
        self.state.hold(std::slice::from_ref(&task_id.to_owned()));
        Held {
            state: self.state.clone(),
            ids: vec![task_id.to_owned()],
        }
    }
}

/// An item held until dropped ([`Contention::hold`]).
#[derive(Debug)]
pub struct Held {
    state: Arc<State>,
    ids: Vec<String>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.state.release(&self.ids);
    }
}

impl State {
    fn hold(&self, ids: &[String]) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            *held.entry(id.clone()).or_default() += 1;
        }
    }

    fn release(&self, ids: &[String]) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            if let Some(n) = held.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    held.remove(id);
                }
            }
        }
    }

    fn is_held(&self, id: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
    }

    fn is_transacted(&self, id: &str) -> bool {
        self.transacted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    fn roll(&self) -> bool {
        self.rate > 0.0 && fastrand::f64() < self.rate
    }
}

/// What a request is, as far as contention goes.
#[derive(Debug, PartialEq)]
enum Write {
    /// `PutItem`, `UpdateItem` or `DeleteItem` of the item with this id.
    Single(String),
    /// `TransactWriteItems` over these ids.
    Transaction(Vec<String>),
    Other,
}

fn task_id_of(item: &Value) -> Option<String> {
    item.get("taskId")?.get("S")?.as_str().map(str::to_owned)
}

fn classify(request: &HttpRequest) -> Write {
    let Some(target) = request.headers().get("x-amz-target") else {
        return Write::Other;
    };
    let op = target.rsplit('.').next().unwrap_or("");
    let Some(body) = request
        .body()
        .bytes()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
    else {
        return Write::Other;
    };
    match op {
        "PutItem" => task_id_of(&body["Item"]).map_or(Write::Other, Write::Single),
        "UpdateItem" | "DeleteItem" => task_id_of(&body["Key"]).map_or(Write::Other, Write::Single),
        "TransactWriteItems" => Write::Transaction(
            body["TransactItems"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| {
                            task_id_of(&i["Put"]["Item"])
                                .or_else(|| task_id_of(&i["Update"]["Key"]))
                                .or_else(|| task_id_of(&i["Delete"]["Key"]))
                                .or_else(|| task_id_of(&i["ConditionCheck"]["Key"]))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => Write::Other,
    }
}

/// DynamoDB's error answer (JSON 1.0 protocol).
fn error_response(body: Value) -> HttpResponse {
    let mut res = HttpResponse::new(
        400u16.try_into().unwrap_or_else(|_| unreachable!()),
        SdkBody::from(body.to_string()),
    );
    res.headers_mut()
        .insert("content-type", "application/x-amz-json-1.0");
    res
}

fn conflict_response() -> HttpResponse {
    error_response(serde_json::json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
        "message": "Transaction is ongoing for the item",
    }))
}

/// A transaction cancelled for a conflict on its `which`-th of `n` items.
fn cancelled_response(n: usize, which: usize) -> HttpResponse {
    let reasons: Vec<Value> = (0..n)
        .map(|i| {
            if i == which {
                serde_json::json!({"Code": "TransactionConflict",
                    "Message": "Transaction is ongoing for the item"})
            } else {
                serde_json::json!({"Code": "None"})
            }
        })
        .collect();
    let codes: Vec<&str> = (0..n)
        .map(|i| {
            if i == which {
                "TransactionConflict"
            } else {
                "None"
            }
        })
        .collect();
    error_response(serde_json::json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    }))
}

impl HttpClient for Contention {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Connector {
            inner: self.inner.http_connector(settings, components),
            state: self.state.clone(),
        })
    }
}

#[derive(Debug)]
struct Connector {
    inner: SharedHttpConnector,
    state: Arc<State>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let state = self.state.clone();
        match classify(&request) {
            Write::Single(id)
                if state.is_held(&id) || (state.is_transacted(&id) && state.roll()) =>
            {
                state.injected.fetch_add(1, Ordering::Relaxed);
                HttpConnectorFuture::ready(Ok(conflict_response()))
            }
            Write::Transaction(ids) if !ids.is_empty() && state.roll() => {
                state.injected.fetch_add(1, Ordering::Relaxed);
                let which = fastrand::usize(..ids.len());
                HttpConnectorFuture::ready(Ok(cancelled_response(ids.len(), which)))
            }
            Write::Transaction(ids) => {
                state
                    .transacted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(ids.iter().cloned());
                state.hold(&ids);
                let call = self.inner.call(request);
                HttpConnectorFuture::new(async move {
                    let result = call.await;
                    state.release(&ids);
                    result
                })
            }
            _ => self.inner.call(request),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, body: Value) -> HttpRequest {
        let mut r = HttpRequest::new(SdkBody::from(body.to_string()));
        r.headers_mut()
            .insert("x-amz-target", format!("DynamoDB_20120810.{target}"));
        r
    }

    #[test]
    fn single_writes_and_transactions_are_told_apart_by_their_items() {
        let key = serde_json::json!({"taskId": {"S": "t-1"}});
        assert_eq!(
            classify(&request("UpdateItem", serde_json::json!({ "Key": key }))),
            Write::Single("t-1".into())
        );
        assert_eq!(
            classify(&request("PutItem", serde_json::json!({ "Item": key }))),
            Write::Single("t-1".into())
        );
        assert_eq!(
            classify(&request(
                "TransactWriteItems",
                serde_json::json!({"TransactItems": [
                    {"Put": {"Item": {"taskId": {"S": "new"}}}},
                    {"Update": {"Key": {"taskId": {"S": "#key-k"}}}},
                    {"Update": {"Key": {"taskId": {"S": "old"}}}},
                ]})
            )),
            Write::Transaction(vec!["new".into(), "#key-k".into(), "old".into()])
        );
        assert_eq!(
            classify(&request("Query", serde_json::json!({}))),
            Write::Other
        );
    }

    #[test]
    fn the_answers_are_dynamodbs_own_error_shapes() {
        let body = |r: HttpResponse| -> Value {
            serde_json::from_slice(r.body().bytes().unwrap_or_default()).unwrap_or_default()
        };
        let c = body(conflict_response());
        assert!(
            c["__type"]
                .as_str()
                .unwrap()
                .ends_with("#TransactionConflictException")
        );
        let t = body(cancelled_response(3, 1));
        assert_eq!(t["CancellationReasons"][1]["Code"], "TransactionConflict");
        assert_eq!(t["CancellationReasons"][0]["Code"], "None");
    }
}
