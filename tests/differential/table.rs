//! The table as a whole on DynamoDB's side: every item read into the
//! model's snapshot shape, emptied between sequences, and TTL's deletions.

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, KeysAndAttributes, WriteRequest};
use lifo_core::memory::{GroupItem, KeyItem, Snapshot};
use lifo_core::store::{Item, QueueControl};
use lifo_core::{Store, Task};
use std::collections::BTreeMap;

/// Every item of the table: tasks, key items, the control item and group
/// leases, as the model's snapshot holds them.
pub async fn table(store: &Store) -> Snapshot {
    let mut snap = Snapshot::default();
    let mut start = None;
    loop {
        let out = store
            .client()
            .scan()
            .table_name(store.table())
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in out.items.unwrap_or_default() {
            add(&mut snap, item);
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return snap;
        }
    }
}

fn add(snap: &mut Snapshot, item: Item) {
    let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned();
    let n = |k: &str| {
        item.get(k)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<u64>().ok())
    };
    let id = s("taskId").expect("every item has a taskId");
    if let Some(key) = id.strip_prefix("#key-") {
        let k = KeyItem {
            latest: s("latest").expect("latest"),
            latest_created: n("latestCreated"),
            delete_at: n("ttl").expect("ttl"),
        };
        snap.keys.insert(key.to_owned(), k);
    } else if let Some(g) = id.strip_prefix("#group-") {
        let g = g.parse().expect("a group number");
        let lease = GroupItem {
            lease_until: n("leaseUntil").expect("leaseUntil"),
            token: n("token").expect("token"),
            claimed_by: s("claimedBy").expect("claimedBy"),
        };
        snap.groups.insert(g, lease);
    } else if id == lifo_core::store::CONTROL_ID {
        let c: QueueControl = serde_dynamo::from_item(item).expect("the control item");
        snap.control = Some(c);
    } else {
        let t = lifo_core::store::item::from_item(item).expect("a task");
        snap.tasks.insert(id, t);
    }
}

/// Deletes every item of the table (the next sequence starts empty).
pub async fn empty(store: &Store) {
    let snap = table(store).await;
    let ids: Vec<String> = snap
        .tasks
        .into_keys()
        .chain(snap.keys.into_keys().map(|k| format!("#key-{k}")))
        .chain(snap.groups.into_keys().map(|g| format!("#group-{g}")))
        .chain(
            snap.control
                .map(|_| lifo_core::store::CONTROL_ID.to_owned()),
        )
        .collect();
    for chunk in ids.chunks(25) {
        let requests = chunk
            .iter()
            .map(|id| {
                let key = DeleteRequest::builder()
                    .key("taskId", AttributeValue::S(id.clone()))
                    .build()
                    .expect("a delete");
                WriteRequest::builder().delete_request(key).build()
            })
            .collect();
        let out = store
            .client()
            .batch_write_item()
            .request_items(store.table(), requests)
            .send()
            .await
            .expect("batch delete");
        assert!(out.unprocessed_items.is_none_or(|u| u.is_empty()));
    }
}

/// DynamoDB's TTL at `now`: deletes what a scan finds past its `ttl`; the
/// ids deleted.
pub async fn ttl_on_dynamodb(store: &Store, now: u64) -> Vec<String> {
    let snap = table(store).await;
    let due = snap
        .tasks
        .values()
        .filter(|t| t.delete_at <= now / 1000)
        .map(|t| t.task_id.clone())
        .chain(
            snap.keys
                .iter()
                .filter(|(_, k)| k.delete_at <= now / 1000)
                .map(|(key, _)| format!("#key-{key}")),
        )
        .collect::<Vec<_>>();
    for id in &due {
        store
            .client()
            .delete_item()
            .table_name(store.table())
            .key("taskId", AttributeValue::S(id.clone()))
            .send()
            .await
            .expect("delete");
    }
    due
}

/// The tasks of `ids` that exist, read strongly consistent in one
/// BatchGetItem per hundred.
pub async fn tasks(store: &Store, ids: &[&String]) -> BTreeMap<String, Task> {
    let mut found = BTreeMap::new();
    for chunk in ids.chunks(100) {
        let keys = chunk
            .iter()
            .map(|id| Item::from([("taskId".to_owned(), AttributeValue::S((*id).clone()))]))
            .collect();
        let mut request = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .expect("keys"),
        );
        while let Some(keys) = request.take() {
            let out = store
                .client()
                .batch_get_item()
                .request_items(store.table(), keys)
                .send()
                .await
                .expect("batch get");
            for item in out
                .responses
                .and_then(|mut r| r.remove(store.table()))
                .unwrap_or_default()
            {
                let t = lifo_core::store::item::from_item(item).expect("a task");
                found.insert(t.task_id.clone(), t);
            }
            request = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(store.table()))
                .filter(|k| !k.keys().is_empty());
        }
    }
    found
}
