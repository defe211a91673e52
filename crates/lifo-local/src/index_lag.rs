//! The claimable index's lag, as deployed. Reads of a global secondary
//! index are eventually consistent: AWS writes an item to its indexes
//! after the table, "within a second" normally and later when the index is
//! busy or throttled (DynamoDB developer guide, "Reading data from a GSI";
//! re:Post, "missing items in a GSI"). DynamoDB Local updates its indexes
//! in the same request, so nothing tested on it meets the lag.
//!
//! [`IndexLag`] is the HTTP client of the local stack's DynamoDB client, in
//! front of [`crate::contention`]: a write that places a task in the
//! claimable index (a put with `claimableAt`, an update that sets it: a
//! create, a put-back, a redrive) makes that entry invisible to queries of
//! the index until its lag has passed ([`IndexLagMode`]). A claim read,
//! the heads' refills and the fair share's reads then see a task some time
//! after its write, as in AWS. Entries that leave the index (a finish, a
//! shed) leave at once, and COUNT queries see every entry: a stale entry
//! would only cost a claim that its condition refuses, which the claim
//! already handles. Entries hidden are counted ([`IndexLag::hidden`]).

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use http_body_util::BodyExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The index the lag applies to.
const INDEX: &str = lifo_core::expr::CLAIMABLE_INDEX;
/// The attribute whose write places a task in it.
const KEY: &str = lifo_core::expr::attr::CLAIMABLE_AT;

/// How late a new entry of the claimable index becomes visible.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum IndexLagMode {
    /// DynamoDB Local as it is: an entry is visible with its write.
    Off,
    /// As AWS documents it: each entry's lag drawn from a log-normal law
    /// with a median of 100 ms and p99 about 1 s ("within a second"), a
    /// tail of a few writes later than that, capped at 5 s.
    #[default]
    Aws,
    /// Every entry exactly this late (a busy index: `lifo simulate
    /// --index-lag-ms 1000`).
    Fixed(Duration),
}

impl IndexLagMode {
    /// The median of [`IndexLagMode::Aws`].
    pub const AWS_MEDIAN: Duration =
        Duration::from_millis(lifo_core::memory::AWS_LAG_MEDIAN_MS as u64);

    /// One entry's lag.
    pub fn sample(self) -> Duration {
        match self {
            Self::Off => Duration::ZERO,
            Self::Fixed(d) => d,
            Self::Aws => lifo_core::memory::aws_lag(fastrand::f64(), fastrand::f64()),
        }
    }

    /// The model's lag for the same mode, its draws seeded with `seed`.
    pub fn model(self, seed: u64) -> lifo_core::memory::Lag {
        use lifo_core::memory::Lag;
        match self {
            Self::Off => Lag::Off,
            Self::Fixed(d) => Lag::Fixed {
                ms: d.as_millis() as u64,
            },
            Self::Aws => Lag::Aws { seed },
        }
    }

    /// `off`, `aws`, or a number of milliseconds.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "off" | "0" => Ok(Self::Off),
            "aws" => Ok(Self::Aws),
            ms => ms
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms <= 60_000)
                .map(|ms| Self::Fixed(Duration::from_millis(ms)))
                .ok_or_else(|| {
                    format!("{ms:?} is not off, aws or a number of milliseconds up to 60000")
                }),
        }
    }
}

/// The shared state: when each placed entry becomes visible (epoch ms).
#[derive(Debug, Default)]
struct State {
    mode: IndexLagMode,
    visible_at: Mutex<HashMap<String, u64>>,
    hidden: AtomicUsize,
}

/// The HTTP client (see the module's documentation).
#[derive(Debug, Clone)]
pub struct IndexLag {
    inner: SharedHttpClient,
    state: Arc<State>,
}

impl IndexLag {
    /// In front of `inner` (plain HTTP when `None`), or `None` when `mode`
    /// is [`IndexLagMode::Off`].
    pub fn new(mode: IndexLagMode, inner: Option<SharedHttpClient>) -> Option<Self> {
        if mode == IndexLagMode::Off {
            return None;
        }
        Some(Self {
            inner: inner.unwrap_or_else(|| aws_smithy_http_client::Builder::new().build_http()),
            state: Arc::new(State {
                mode,
                ..State::default()
            }),
        })
    }

    /// Index entries that queries did not see yet, so far.
    pub fn hidden(&self) -> usize {
        self.state.hidden.load(Ordering::Relaxed)
    }
}

/// The ids whose claimable index entry `request` places (a put with
/// `claimableAt`, an update that sets it), or the Query of that index it
/// is; `None` for any other request.
#[derive(Debug, PartialEq)]
enum Request {
    Places(Vec<String>),
    QueriesIndex,
    Other,
}

fn task_id(item: &Value) -> Option<String> {
    item.get("taskId")?.get("S")?.as_str().map(str::to_owned)
}

/// A put's item that carries the index key.
fn placed_by_put(item: &Value) -> Option<String> {
    item.get(KEY).and(task_id(item))
}

/// An update whose expression sets the index key.
fn placed_by_update(update: &Value) -> Option<String> {
    let names = update.get("ExpressionAttributeNames")?.as_object()?;
    let expression = update.get("UpdateExpression")?.as_str()?;
    let set = expression.split("REMOVE").next().unwrap_or(expression);
    names
        .iter()
        .any(|(placeholder, name)| name == KEY && set.contains(&format!("{placeholder} =")))
        .then(|| task_id(update.get("Key")?))
        .flatten()
}

fn classify(request: &HttpRequest) -> Request {
    let Some(target) = request.headers().get("x-amz-target") else {
        return Request::Other;
    };
    let op = target.rsplit('.').next().unwrap_or("");
    let Some(body) = request
        .body()
        .bytes()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
    else {
        return Request::Other;
    };
    let ids: Vec<String> = match op {
        "Query" => {
            let counts = body.get("Select").and_then(Value::as_str) == Some("COUNT");
            return if body.get("IndexName").and_then(Value::as_str) == Some(INDEX) && !counts {
                Request::QueriesIndex
            } else {
                Request::Other
            };
        }
        "PutItem" => placed_by_put(&body["Item"]).into_iter().collect(),
        "UpdateItem" => placed_by_update(&body).into_iter().collect(),
        "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.values())
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|r| placed_by_put(&r["PutRequest"]["Item"]))
            .collect(),
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| {
                placed_by_put(&i["Put"]["Item"]).or_else(|| placed_by_update(&i["Update"]))
            })
            .collect(),
        _ => Vec::new(),
    };
    if ids.is_empty() {
        Request::Other
    } else {
        Request::Places(ids)
    }
}

impl State {
    fn place(&self, ids: &[String], now: u64) {
        let mut map = self.visible_at.lock().unwrap_or_else(|p| p.into_inner());
        // Entries long visible are forgotten, so the map stays small.
        if map.len() > 100_000 {
            map.retain(|_, at| *at > now);
        }
        for id in ids {
            let lag = u64::try_from(self.mode.sample().as_millis()).unwrap_or(u64::MAX);
            map.insert(id.clone(), now.saturating_add(lag));
        }
    }

    /// `body` (a Query's answer) without the entries not visible at `now`;
    /// `None` when it hides none.
    fn filter(&self, body: &[u8], now: u64) -> Option<Vec<u8>> {
        let mut answer: Value = serde_json::from_slice(body).ok()?;
        let map = self.visible_at.lock().unwrap_or_else(|p| p.into_inner());
        let items = answer.get_mut("Items")?.as_array_mut()?;
        let before = items.len();
        items.retain(|item| {
            task_id(item)
                .and_then(|id| map.get(&id).copied())
                .is_none_or(|at| at <= now)
        });
        let hidden = before - items.len();
        if hidden == 0 {
            return None;
        }
        let count = items.len();
        answer["Count"] = Value::from(count);
        self.hidden.fetch_add(hidden, Ordering::Relaxed);
        serde_json::to_vec(&answer).ok()
    }
}

impl HttpClient for IndexLag {
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
        let kind = classify(&request);
        let call = self.inner.call(request);
        match kind {
            Request::Other => call,
            Request::Places(ids) => HttpConnectorFuture::new(async move {
                let response = call.await?;
                // Placed only by a write that was applied.
                if response.status().is_success() {
                    state.place(&ids, lifo_core::now_ms());
                }
                Ok(response)
            }),
            Request::QueriesIndex => HttpConnectorFuture::new(async move {
                let mut response = call.await?;
                if !response.status().is_success() {
                    return Ok(response);
                }
                let body = std::mem::replace(response.body_mut(), SdkBody::taken());
                let bytes = body
                    .collect()
                    .await
                    .map_err(aws_smithy_runtime_api::client::result::ConnectorError::io)?
                    .to_bytes();
                let body = match state.filter(&bytes, lifo_core::now_ms()) {
                    Some(filtered) => {
                        response.headers_mut().remove("content-length");
                        response
                            .headers_mut()
                            .insert("content-length", filtered.len().to_string());
                        response.headers_mut().remove("x-amz-crc32");
                        filtered
                    }
                    None => bytes.to_vec(),
                };
                *response.body_mut() = SdkBody::from(body);
                Ok(response)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(target: &str, body: Value) -> HttpRequest {
        let mut r = HttpRequest::new(SdkBody::from(body.to_string()));
        r.headers_mut()
            .insert("x-amz-target", format!("DynamoDB_20120810.{target}"));
        r
    }

    #[test]
    fn writes_that_place_an_index_entry_are_told_from_the_others() {
        let put = json!({"Item": {"taskId": {"S": "t1"}, "claimableAt": {"N": "5"}}});
        assert_eq!(
            classify(&request("PutItem", put)),
            Request::Places(vec!["t1".into()])
        );
        let scheduled = json!({"Item": {"taskId": {"S": "t2"}, "dueKey": {"S": "d#1"}}});
        assert_eq!(classify(&request("PutItem", scheduled)), Request::Other);
        // A put-back sets the key; a finish removes it.
        let put_back = json!({"Key": {"taskId": {"S": "t3"}},
            "UpdateExpression": "SET #status = :to, #claimableAt = if_not_exists(#laneShift, :zero) + :now",
            "ExpressionAttributeNames": {"#status": "taskStatus", "#claimableAt": "claimableAt", "#laneShift": "laneShift"}});
        assert_eq!(
            classify(&request("UpdateItem", put_back)),
            Request::Places(vec!["t3".into()])
        );
        let finish = json!({"Key": {"taskId": {"S": "t4"}},
            "UpdateExpression": "SET #status = :to REMOVE #claimableAt, #leaseUntil",
            "ExpressionAttributeNames": {"#status": "taskStatus", "#claimableAt": "claimableAt", "#leaseUntil": "leaseUntil"}});
        assert_eq!(classify(&request("UpdateItem", finish)), Request::Other);
        let batch = json!({"RequestItems": {"Q": [
            {"PutRequest": {"Item": {"taskId": {"S": "a"}, "claimableAt": {"N": "1"}}}},
            {"PutRequest": {"Item": {"taskId": {"S": "#payload-a"}}}}
        ]}});
        assert_eq!(
            classify(&request("BatchWriteItem", batch)),
            Request::Places(vec!["a".into()])
        );
        let query = json!({"IndexName": "claimable-index"});
        assert_eq!(classify(&request("Query", query)), Request::QueriesIndex);
        let count = json!({"IndexName": "claimable-index", "Select": "COUNT"});
        assert_eq!(classify(&request("Query", count)), Request::Other);
    }

    #[test]
    fn a_query_does_not_see_an_entry_before_its_lag_has_passed() {
        let state = State {
            mode: IndexLagMode::Fixed(Duration::from_millis(1000)),
            ..State::default()
        };
        state.place(&["new".into()], 10_000);
        let answer = json!({"Items": [
            {"taskId": {"S": "old"}, "claimableAt": {"N": "1"}},
            {"taskId": {"S": "new"}, "claimableAt": {"N": "2"}}
        ], "Count": 2, "ScannedCount": 2});
        let body = answer.to_string().into_bytes();
        let early: Value = serde_json::from_slice(&state.filter(&body, 10_999).unwrap()).unwrap();
        assert_eq!(early["Count"], 1);
        assert_eq!(early["Items"][0]["taskId"]["S"], "old");
        assert_eq!(
            state.filter(&body, 11_000),
            None,
            "visible once its lag passed"
        );
        assert_eq!(state.hidden.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_aws_lag_is_mostly_well_under_a_second_with_a_tail() {
        fastrand::seed(7);
        let mut lags: Vec<Duration> = (0..10_000).map(|_| IndexLagMode::Aws.sample()).collect();
        lags.sort();
        let (p50, p99) = (lags[5_000], lags[9_900]);
        assert!(
            p50 > Duration::from_millis(80) && p50 < Duration::from_millis(125),
            "{p50:?}"
        );
        assert!(
            p99 > Duration::from_millis(700) && p99 < Duration::from_millis(1_500),
            "{p99:?}"
        );
        assert!(lags[9_999] <= Duration::from_secs(5), "capped at 5 s");
        assert_eq!(
            IndexLagMode::parse("1000"),
            Ok(IndexLagMode::Fixed(Duration::from_secs(1)))
        );
        assert_eq!(IndexLagMode::parse("aws"), Ok(IndexLagMode::Aws));
        assert_eq!(IndexLagMode::parse("off"), Ok(IndexLagMode::Off));
        assert!(IndexLagMode::parse("soon").is_err());
    }
}
