//! A task as a DynamoDB item and back. serde_dynamo writes every field but
//! the payload; the payload's numbers go into `N` attributes as their text
//! and come back the same way ([`crate::exact`]), where serde_dynamo would
//! pass each through an `f64`.

use super::{Item, StoreError};
use crate::exact::{Json, Payload};
use crate::expr::attr;
use crate::model::Task;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::BTreeMap;

/// `task`'s item: its attributes, the payload a map of exact numbers.
pub fn to_item(task: &Task) -> Result<Item, StoreError> {
    let mut item: Item = serde_dynamo::to_item(task).map_err(|source| StoreError::Malformed {
        task_id: task.task_id.clone(),
        source,
    })?;
    item.insert(attr::PAYLOAD.to_owned(), to_attribute(&task.payload.tree()));
    Ok(item)
}

/// The task an item holds.
pub fn from_item(mut item: Item) -> Result<Task, StoreError> {
    let task_id = match item.get(attr::TASK_ID) {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => "<no taskId>".to_owned(),
    };
    let payload = item.remove(attr::PAYLOAD);
    let mut task: Task = serde_dynamo::from_item(item).map_err(|source| StoreError::Malformed {
        task_id: task_id.clone(),
        source,
    })?;
    if let Some(payload) = payload {
        let tree = from_attribute(&payload);
        if !matches!(tree, Json::Object(_)) {
            return Err(StoreError::Payload {
                task_id,
                reason: "its payload attribute is not a map".to_owned(),
            });
        }
        task.payload = Payload::from_tree(&tree);
    }
    Ok(task)
}

/// A JSON value as DynamoDB stores it: a number as `N`, its text as it is.
pub fn to_attribute(value: &Json) -> AttributeValue {
    match value {
        Json::Null => AttributeValue::Null(true),
        Json::Bool(b) => AttributeValue::Bool(*b),
        Json::Number(n) => AttributeValue::N(n.clone()),
        Json::String(s) => AttributeValue::S(s.clone()),
        Json::Array(items) => AttributeValue::L(items.iter().map(to_attribute).collect()),
        Json::Object(map) => AttributeValue::M(
            map.iter()
                .map(|(k, v)| (k.clone(), to_attribute(v)))
                .collect(),
        ),
    }
}

/// A DynamoDB attribute as JSON: `N` as its text; sets as arrays; binary
/// as the base64 of its bytes (a payload written by create holds none).
pub fn from_attribute(value: &AttributeValue) -> Json {
    match value {
        AttributeValue::Bool(b) => Json::Bool(*b),
        AttributeValue::N(n) => Json::Number(n.clone()),
        AttributeValue::S(s) => Json::String(s.clone()),
        AttributeValue::L(items) => Json::Array(items.iter().map(from_attribute).collect()),
        AttributeValue::M(map) => Json::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), from_attribute(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
        AttributeValue::Ss(items) => Json::Array(items.iter().cloned().map(Json::String).collect()),
        AttributeValue::Ns(items) => Json::Array(items.iter().cloned().map(Json::Number).collect()),
        AttributeValue::B(b) => Json::String(aws_smithy_types::base64::encode(b.as_ref())),
        AttributeValue::Bs(items) => Json::Array(
            items
                .iter()
                .map(|b| Json::String(aws_smithy_types::base64::encode(b.as_ref())))
                .collect(),
        ),
        _ => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_keeps_its_digits_through_an_item() {
        let payload = Payload::from_json(
            r#"{"n": 18446744073709551616, "tiny": 1e-130, "list": [12345678901234567890123456789012345678, {"x": -9.9e125}]}"#,
        )
        .unwrap();
        let t = Task::new_pending("a".into(), payload.clone(), 1_000_000, 60, 1);
        let item = to_item(&t).unwrap();
        let AttributeValue::M(m) = &item[attr::PAYLOAD] else {
            panic!("{item:?}")
        };
        assert_eq!(m["n"], AttributeValue::N("18446744073709551616".into()));
        assert_eq!(m["tiny"], AttributeValue::N("1e-130".into()));
        let back = from_item(item).unwrap();
        assert_eq!(back.payload, payload);
        assert_eq!(back, t);
    }
}
