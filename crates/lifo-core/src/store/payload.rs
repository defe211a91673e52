//! A task's payload, paid for once.
//!
//! DynamoDB bills an UpdateItem by the size of the whole item, so a payload
//! that lives on the task item is paid again by every move (claim, finish,
//! retry, redrive): a 10 KB payload made a task cost 35 write units instead
//! of 6. A payload larger than [`PayloadPolicy::inline_max`] therefore
//! lives in an item of its own, `#payload/<taskId>` (in no index), written
//! once at create, compressed (deflate) when that makes it smaller, read
//! once when the task is claimed, and deleted by the same TTL as its task.
//! The task item keeps `payloadBytes` (its size as JSON) instead of the
//! payload, so every move stays a small write.
//!
//! **The ordering this relies on:**
//! - create writes the payload item *before* the task item, so a task is
//!   never claimable (nor readable) without its payload. A failed task
//!   write leaves the payload item behind; create deletes it (best effort),
//!   else its TTL does.
//! - The payload item never changes after create, but for its TTL: a
//!   redrive extends it with the task's.
//! - A delete removes the task item first (the conditional move), then the
//!   payload item; a claim whose payload read finds nothing (the task was
//!   deleted meanwhile) fails that run instead of running without it.

use super::error::classify;
use super::{Op, Store, StoreError};
use crate::exact::Payload;
use crate::expr;
use crate::model::Task;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use std::collections::HashMap;
use std::io::{Read, Write};

/// Where a task's payload lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadPolicy {
    /// A payload of at most this many bytes (compact JSON) stays on the
    /// task item: small enough that the item stays under 1 KB through the
    /// task's life, so every move costs 1 write unit plus its index.
    pub inline_max: usize,
    /// Deflate the payload item when that makes it smaller.
    pub compress: bool,
}

impl Default for PayloadPolicy {
    fn default() -> Self {
        Self {
            inline_max: 256,
            compress: true,
        }
    }
}

impl PayloadPolicy {
    /// Every payload on its task item (how the queue stored them before).
    pub const INLINE: Self = Self {
        inline_max: usize::MAX,
        compress: false,
    };
}

/// The key of `task_id`'s payload item (`#` starts the queue's own keys:
/// no task id holds one, and scans of tasks skip them).
pub fn payload_key(task_id: &str) -> String {
    format!("#payload/{task_id}")
}

/// The payload item's attributes: the JSON deflated (`z`, binary) when
/// that is smaller, else as text (`j`).
const DEFLATED: &str = "z";
const JSON: &str = "j";

/// `json` as it is stored: deflated if `compress` and smaller.
pub fn encode(json: &[u8], compress: bool) -> (&'static str, AttributeValue) {
    if compress {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        if z.write_all(json).is_ok()
            && let Ok(deflated) = z.finish()
            && deflated.len() < json.len()
        {
            return (DEFLATED, AttributeValue::B(Blob::new(deflated)));
        }
    }
    (
        JSON,
        AttributeValue::S(String::from_utf8_lossy(json).into_owned()),
    )
}

/// The payload of a payload item (its JSON text, numbers as written).
pub fn decode(item: &HashMap<String, AttributeValue>) -> Result<Payload, String> {
    let json: Vec<u8> = match (item.get(DEFLATED), item.get(JSON)) {
        (Some(AttributeValue::B(b)), _) => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(b.as_ref())
                .take(crate::model::MAX_PAYLOAD_BYTES as u64 * 2)
                .read_to_end(&mut out)
                .map_err(|e| format!("the payload does not inflate: {e}"))?;
            out
        }
        (_, Some(AttributeValue::S(s))) => s.clone().into_bytes(),
        _ => return Err("the payload item holds no payload".into()),
    };
    let text = std::str::from_utf8(&json).map_err(|e| format!("the payload is not UTF-8: {e}"))?;
    Payload::from_json(text).map_err(|e| format!("the payload {e}"))
}

impl Store {
    /// The payload item of `task` (its payload, encoded), with the task's
    /// TTL, or `None` when the payload stays on the task item.
    pub(super) fn payload_item(
        &self,
        task: &Task,
    ) -> Result<Option<HashMap<String, AttributeValue>>, StoreError> {
        let json = task.payload.json().as_bytes();
        if json.len() <= self.payload_policy.inline_max {
            return Ok(None);
        }
        let (name, value) = encode(json, self.payload_policy.compress);
        Ok(Some(HashMap::from([
            (
                expr::attr::TASK_ID.to_owned(),
                AttributeValue::S(payload_key(&task.task_id)),
            ),
            (
                expr::attr::DELETE_AT.to_owned(),
                AttributeValue::N(task.delete_at.to_string()),
            ),
            (name.to_owned(), value),
        ])))
    }

    /// Fills `task.payload` from its payload item when it has one (a
    /// strongly consistent GetItem: the payload item was written before the
    /// task). `Err(StoreError::Payload)` when it is missing or unreadable.
    pub async fn load_payload(&self, task: &mut Task) -> Result<(), StoreError> {
        if task.payload_bytes.is_none() {
            return Ok(());
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(
                expr::attr::TASK_ID,
                AttributeValue::S(payload_key(&task.task_id)),
            )
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Payload, out.consumed_capacity());
        let malformed = |reason: String| StoreError::Payload {
            task_id: task.task_id.clone(),
            reason,
        };
        let item = out
            .item
            .ok_or_else(|| malformed("its payload item is gone".into()))?;
        task.payload = decode(&item).map_err(malformed)?;
        Ok(())
    }

    /// Deletes `task_id`'s payload item (nothing if it has none).
    pub async fn delete_payload(&self, task_id: &str) -> Result<(), StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(payload_key(task_id)))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("DeleteItem", e))?;
        self.meter.record(Op::Operate, out.consumed_capacity());
        Ok(())
    }

    /// Moves `task_id`'s payload item's deletion to `ttl` (a redrive gave
    /// the task a new life), if it has one.
    pub async fn extend_payload(&self, task_id: &str, delete_at: u64) -> Result<(), StoreError> {
        let e = expr::extend_payload(delete_at);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(payload_key(task_id)))
            .update_expression(&e.main)
            .condition_expression(&e.condition)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.meter.record(Op::Operate, out.consumed_capacity());
                Ok(())
            }
            // No payload item: the payload is on the task.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(classify("UpdateItem", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_deflated_when_smaller_else_as_text() {
        let big = serde_json::json!({"readings": (0..200).map(|i| serde_json::json!({"sensor": "t", "v": i})).collect::<Vec<_>>()});
        let json = serde_json::to_vec(&big).unwrap();
        let (name, value) = encode(&json, true);
        assert_eq!(name, "z");
        let AttributeValue::B(b) = &value else {
            panic!()
        };
        assert!(b.as_ref().len() < json.len() / 3);
        let item = HashMap::from([(name.to_owned(), value)]);
        assert_eq!(decode(&item).unwrap().json(), big.to_string());
        // Short or incompressible: stored as text.
        let small = br#"{"a":1}"#;
        let (name, value) = encode(small, true);
        assert_eq!(name, "j");
        let item = HashMap::from([(name.to_owned(), value)]);
        assert_eq!(decode(&item).unwrap().json(), r#"{"a":1}"#);
        assert_eq!(encode(&json, false).0, "j");
        assert!(decode(&HashMap::new()).is_err());
        let garbage =
            HashMap::from([("z".to_owned(), AttributeValue::B(Blob::new(vec![1, 2, 3])))]);
        assert!(
            decode(&garbage)
                .unwrap_err()
                .starts_with("the payload does not inflate")
        );
    }

    #[test]
    fn payload_keys_are_the_queues_own() {
        assert_eq!(payload_key("order-1"), "#payload/order-1");
        assert!(super::super::is_queue_item(&payload_key("order-1")));
    }
}
