//! DynamoDB Local writes an empty map attribute into a stream record as a
//! bare `{}` instead of `{"M": {}}` (a payload of `{}`, or an empty object
//! inside one). AWS writes `{"M": {}}`, and the SDK cannot parse the bare
//! form, so without this a local stream poller would fail on every poll
//! from that record on.
//!
//! [`EmptyMaps`] is an interceptor on the local DynamoDB Streams client: it
//! reads a `GetRecords` answer whole and rewrites every bare `{}` attribute
//! value in the records' images to `{"M": {}}`, before the SDK parses it.
//! Any other answer passes unchanged.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use hyper::body::{Body, Bytes, Frame};
use serde_json::{Map, Value};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// The interceptor (see the module's documentation).
#[derive(Debug, Clone, Copy)]
pub struct EmptyMaps;

impl Intercept for EmptyMaps {
    fn name(&self) -> &'static str {
        "EmptyMaps"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        lifo_lambda::bounded::map_body(context, |inner| {
            SdkBody::from_body_1_x(Rewritten {
                inner,
                read: Vec::new(),
                done: false,
            })
        });
        Ok(())
    }
}

/// A body read whole, then given out once, rewritten.
struct Rewritten {
    inner: SdkBody,
    read: Vec<u8>,
    done: bool,
}

impl Body for Rewritten {
    type Data = Bytes;
    type Error = aws_smithy_types::body::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        loop {
            match ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.read.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    self.done = true;
                    let read = std::mem::take(&mut self.read);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rewrite(read))))));
                }
            }
        }
    }
}

/// `body` with every bare `{}` attribute value of its records' images
/// written as `{"M": {}}`; unchanged when it is not such an answer.
pub fn rewrite(body: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    let mut changed = false;
    if let Some(records) = v.get_mut("Records").and_then(Value::as_array_mut) {
        for record in records {
            let Some(change) = record.get_mut("dynamodb").and_then(Value::as_object_mut) else {
                continue;
            };
            for image in ["Keys", "NewImage", "OldImage"] {
                if let Some(Value::Object(item)) = change.get_mut(image) {
                    for av in item.values_mut() {
                        changed |= fix(av);
                    }
                }
            }
        }
    }
    if !changed {
        return body;
    }
    serde_json::to_vec(&v).unwrap_or(body)
}

/// Rewrites a bare `{}` in one attribute value, within maps and lists too.
fn fix(av: &mut Value) -> bool {
    let Value::Object(o) = av else {
        return false;
    };
    if o.is_empty() {
        *av = Value::Object(Map::from_iter([(
            "M".to_owned(),
            Value::Object(Map::new()),
        )]));
        return true;
    }
    let mut changed = false;
    if let Some(Value::Object(m)) = o.get_mut("M") {
        for inner in m.values_mut() {
            changed |= fix(inner);
        }
    }
    if let Some(Value::Array(l)) = o.get_mut("L") {
        for inner in l {
            changed |= fix(inner);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bare_empty_maps_in_images_become_typed_maps() {
        let body = json!({"Records": [{"dynamodb": {
            "Keys": {"taskId": {"S": "a"}},
            "NewImage": {"taskId": {"S": "a"}, "payload": {},
                         "nested": {"M": {"x": {}, "l": {"L": [{}, {"N": "1"}]}}}},
        }}], "NextShardIterator": "it"});
        let fixed: Value =
            serde_json::from_slice(&rewrite(serde_json::to_vec(&body).unwrap())).unwrap();
        let image = &fixed["Records"][0]["dynamodb"]["NewImage"];
        assert_eq!(image["payload"], json!({"M": {}}));
        assert_eq!(image["nested"]["M"]["x"], json!({"M": {}}));
        assert_eq!(
            image["nested"]["M"]["l"]["L"],
            json!([{"M": {}}, {"N": "1"}])
        );
        assert_eq!(fixed["NextShardIterator"], "it");
    }

    #[test]
    fn other_answers_pass_unchanged() {
        for body in [
            &b"not json"[..],
            b"{}",
            br#"{"Records": []}"#,
            br#"{"Records":[{"dynamodb":{"NewImage":{"a":{"S":"b"}}}}]}"#,
        ] {
            assert_eq!(rewrite(body.to_vec()), body.to_vec());
        }
    }
}
