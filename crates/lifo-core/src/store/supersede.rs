//! Latest wins per key: writing a task with a `supersedeKey` ends the key's
//! previous task, in one transaction, so that once the newer task is
//! written the older one never starts.
//!
//! "Newer" is decided by the tasks' own creation: the creation stamp, then
//! the task id ([`is_newer`]), so that every writer and every resend agree,
//! whichever write reaches the key first. The key item `#key-<key>` (in no
//! index) names the key's newest task (`latest`, created `latestCreated`).
//! A keyed write reads it (strongly consistent), then:
//! - if the key's newest is newer than the task (the task's write was held
//!   back, by a slow client or a conflict's resends, past a newer one's),
//!   the task is written SUPERSEDED at once, by that newer task: it never
//!   enters the index, and the key item is left as it is;
//! - else it sends one `TransactWriteItems`:
//!   1. the new task, if its id is new;
//!   2. the key item, now naming the new task, only if it still names the
//!      task read ([`expr::point_key`]): of two writes of one key at once,
//!      one loses here and starts over, so they are ordered;
//!   3. the previous task: PENDING → SUPERSEDED ([`Move::Supersede`]); or,
//!      if it is TAKEN, only a mark ([`expr::mark_superseded`]): its run goes
//!      on and its outcome stands, but it is never put back or claimed again
//!      (a worker that would retry it, or a reader of its lapsed lease, ends
//!      it with [`Move::EndSuperseded`]); nothing if it already ended.
//!
//! Which of the three the previous task gets is guessed (PENDING) and
//! corrected from the cancellation reason DynamoDB returns with the item,
//! so the common case is one read and one transaction. A key item written
//! before `latestCreated` existed costs one more read: its task's creation.
//!
//! **The race that remains:** a task claimed before its successor is
//! written runs (its claim came first); its outcome stands, and it does not
//! start again. Nothing else lets an older task start once a newer one
//! with its key is written.

use super::error::classify;
use super::queue::Queue;
use super::{Item, Op, Store, StoreError, resend_wait};
use crate::expr::{self, Move, Step};
use crate::model::{Task, TaskStatus};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

/// The key item's id: `#key-<key>` (no task id contains `#`).
pub fn key_item_id(key: &str) -> String {
    format!("#key-{key}")
}

/// Tries of a keyed write before it gives up (each after a concurrent
/// write of the same key, or a transaction conflict).
const KEYED_TRIES: u32 = 8;

/// What a keyed write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyed {
    /// The task was written (`false`: its id existed; nothing written).
    pub created: bool,
    /// The previous task it moved to SUPERSEDED.
    pub superseded: Option<String>,
    /// The previous task it found TAKEN and marked.
    pub marked: Option<String>,
    /// The key's newer task that was there first: this task was written
    /// SUPERSEDED by it, and never starts.
    pub arrived_superseded_by: Option<String>,
}

/// Whether a task created at `a.0` with id `a.1` is newer than one created
/// at `b.0` with id `b.1`: the later creation, then the greater id.
pub fn is_newer(a: (u64, &str), b: (u64, &str)) -> bool {
    a > b
}

/// What a keyed write of a task does, given the key's newest task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyedWrite {
    /// The task is the key's newest already: it was written before.
    Written,
    /// The key's newest (this id) is newer: the task is written SUPERSEDED.
    ArrivesSuperseded(String),
    /// The task becomes the key's newest, ending this one if any.
    Supersedes(Option<String>),
}

/// Decides a keyed write of the task `(created, id)` when the key's newest
/// is `head` (its id and creation; `None`: no task yet, or one whose
/// creation is unknown because it is gone).
pub fn decide(head: Option<(&str, Option<u64>)>, task: (u64, &str)) -> KeyedWrite {
    match head {
        None => KeyedWrite::Supersedes(None),
        Some((latest, _)) if latest == task.1 => KeyedWrite::Written,
        Some((latest, Some(created))) if is_newer((created, latest), task) => {
            KeyedWrite::ArrivesSuperseded(latest.to_owned())
        }
        Some((latest, _)) => KeyedWrite::Supersedes(Some(latest.to_owned())),
    }
}

/// `task` as it is written when its key's newest task, `by`, is newer: ended
/// SUPERSEDED at `now_ms` before it was ever claimable (no index entry, the
/// superseded index's entry, one history entry).
pub fn arrived_superseded(task: &Task, by: &str, now_ms: u64) -> Task {
    let mut t = task.clone();
    t.task_status = TaskStatus::Superseded;
    t.task_updated = now_ms;
    t.claimable_at = None;
    t.retry_at = None;
    t.superseded_by = Some(by.to_owned());
    t.superseded_at = Some(now_ms);
    t.history.push(crate::model::HistoryEntry {
        status: TaskStatus::Superseded,
        at: now_ms,
        attempt: 0,
        token: 0,
        reason: Some(format!(
            "a newer task of its key ({by}) was written before it"
        )),
    });
    t
}

/// The key item as a writer reads it: the newest task and its creation
/// (absent on a key item older than `latestCreated`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyHead {
    latest: String,
    created: Option<u64>,
}

/// What the transaction does to the previous task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Supersede,
    Mark,
    Leave,
}

impl Store {
    /// The key's newest task, from its key item (a strongly consistent read).
    pub async fn latest_of_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.key_head(key).await?.map(|h| h.latest))
    }

    /// The key item's newest task and its creation (a strongly consistent
    /// read).
    async fn key_head(&self, key: &str) -> Result<Option<KeyHead>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(key_item_id(key)))
            .consistent_read(true)
            .projection_expression("#latest, #created")
            .expression_attribute_names("#latest", expr::attr::LATEST)
            .expression_attribute_names("#created", expr::attr::LATEST_CREATED)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        let Some(mut item) = out.item else {
            return Ok(None);
        };
        let created = item
            .remove(expr::attr::LATEST_CREATED)
            .and_then(|v| v.as_n().ok().and_then(|n| n.parse().ok()));
        Ok(item
            .remove(expr::attr::LATEST)
            .and_then(|v| v.as_s().ok().cloned())
            .map(|latest| KeyHead { latest, created }))
    }

    /// When task `id` was created (a strongly consistent read), for a key
    /// item that does not say; `None` for a task no longer there.
    async fn created_of(&self, id: &str) -> Result<Option<u64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(id.to_owned()))
            .consistent_read(true)
            .projection_expression("#created")
            .expression_attribute_names("#created", expr::attr::CREATED)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        Ok(out
            .item
            .and_then(|mut i| i.remove(expr::attr::CREATED))
            .and_then(|v| v.as_n().ok().and_then(|n| n.parse().ok())))
    }

    /// Writes `task` SUPERSEDED by `by` (see [`arrived_superseded`]), if
    /// its id is new.
    async fn put_arrived_superseded(
        &self,
        task: &Task,
        by: &str,
        now_ms: u64,
    ) -> Result<Keyed, StoreError> {
        let ended = arrived_superseded(task, by, now_ms);
        let (item, _) = self.items(&ended)?;
        let created = self.put_absent(item).await?;
        Ok(Keyed {
            created,
            arrived_superseded_by: created.then(|| by.to_owned()),
            ..Keyed::default()
        })
    }

    /// Writes `task` (which has a `supersedeKey`) and ends the key's
    /// previous task (see the module's documentation). A producer-chosen id
    /// that exists writes nothing (`created: false`), like
    /// [`Store::put_if_absent`].
    pub async fn put_keyed(&self, task: &Task) -> Result<Keyed, StoreError> {
        self.put_keyed_at(task, crate::now_ms()).await
    }

    /// [`Store::put_keyed`] at `now_ms`: the time a task that arrives
    /// superseded is stamped with (its `supersededAt`).
    pub async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        let Some(key) = task.supersede_key.as_deref() else {
            return Ok(Keyed {
                created: self.put_if_absent(task).await?,
                ..Keyed::default()
            });
        };
        let (item, payload) = self.items(task)?;
        let wrote_payload = match payload {
            Some(p) => self.put_absent(p).await?,
            None => false,
        };
        let result = self.keyed_transaction(task, key, item, now_ms).await;
        if wrote_payload && !matches!(result, Ok(Keyed { created: true, .. })) {
            self.forget_payloads(std::iter::once(task)).await;
        }
        result
    }

    async fn keyed_transaction(
        &self,
        task: &Task,
        key: &str,
        item: Item,
        now_ms: u64,
    ) -> Result<Keyed, StoreError> {
        let id = task.task_id.as_str();
        let mut tries = 0;
        'read: loop {
            let head = match self.key_head(key).await? {
                Some(KeyHead {
                    latest,
                    created: None,
                }) if latest != id => {
                    let created = self.created_of(&latest).await?;
                    Some((latest, created))
                }
                h => h.map(|h| (h.latest, h.created)),
            };
            let prev = match decide(
                head.as_ref().map(|(l, c)| (l.as_str(), *c)),
                (task.task_created, id),
            ) {
                KeyedWrite::Written => return Ok(Keyed::default()),
                KeyedWrite::ArrivesSuperseded(by) => {
                    return self.put_arrived_superseded(task, &by, now_ms).await;
                }
                KeyedWrite::Supersedes(prev) => prev,
            };
            let mut mode = if prev.is_some() {
                Prev::Supersede
            } else {
                Prev::Leave
            };
            loop {
                tries += 1;
                let mut items = vec![put_new(&self.table, item.clone())?, {
                    let e = expr::point_key(id, task.task_created, prev.as_deref(), task.delete_at);
                    update(&self.table, &key_item_id(key), &e)?
                }];
                let step = Step {
                    now_ms: task.task_created,
                    ..Step::default()
                };
                match (prev.as_deref(), mode) {
                    (Some(p), Prev::Supersede) => {
                        let e = expr::transition(&Move::Supersede { by: id, key }, &step);
                        items.push(update(&self.table, p, &e)?);
                    }
                    (Some(p), Prev::Mark) => {
                        items.push(update(&self.table, p, &expr::mark_superseded(id, key))?);
                    }
                    _ => {}
                }
                let result = self
                    .client
                    .transact_write_items()
                    .set_transact_items(Some(items))
                    .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                    .send()
                    .await;
                let reasons = match result {
                    Ok(out) => {
                        self.meter.record(Op::Supersede, out.consumed_capacity());
                        let prev_id = prev.clone();
                        return Ok(Keyed {
                            created: true,
                            superseded: prev_id.clone().filter(|_| mode == Prev::Supersede),
                            marked: prev_id.filter(|_| mode == Prev::Mark),
                            arrived_superseded_by: None,
                        });
                    }
                    Err(e) => match e.as_service_error() {
                        Some(TransactWriteItemsError::TransactionCanceledException(c)) => {
                            self.meter.record_rejected();
                            c.cancellation_reasons().to_vec()
                        }
                        _ => return Err(classify("TransactWriteItems", e)),
                    },
                };
                let failed = |i: usize| {
                    reasons
                        .get(i)
                        .and_then(|r| r.code())
                        .is_some_and(|c| c == "ConditionalCheckFailed")
                };
                if tries >= KEYED_TRIES {
                    // Contention on the key (other writes of it, or
                    // transactions on its items): the caller may retry.
                    return Err(StoreError::Conflict {
                        operation: "TransactWriteItems",
                        source: format!(
                            "the write of task {id} with supersedeKey {key:?} was cancelled \
                             {tries} times (concurrent writes of that key)"
                        )
                        .into(),
                    });
                }
                if failed(0) {
                    return Ok(Keyed::default());
                }
                if failed(1) {
                    // Another write of this key came first: read it again.
                    continue 'read;
                }
                if failed(2) {
                    // The previous task was not PENDING (or not TAKEN):
                    // choose by what DynamoDB saw.
                    let current = reasons
                        .get(2)
                        .and_then(|r| r.item())
                        .and_then(|i| super::error::parse_task(i.clone()).ok());
                    mode = match current {
                        Some(t)
                            if t.task_status == TaskStatus::Pending
                                && t.supersede_key.as_deref() == Some(key) =>
                        {
                            Prev::Supersede
                        }
                        Some(t)
                            if t.task_status == TaskStatus::Taken
                                && t.supersede_key.as_deref() == Some(key) =>
                        {
                            Prev::Mark
                        }
                        _ => Prev::Leave,
                    };
                    continue;
                }
                // A conflict with another transaction or request on one
                // of the items: wait, then read again.
                tokio::time::sleep(resend_wait(tries)).await;
                continue 'read;
            }
        }
    }
}

fn put_new(table: &str, item: Item) -> Result<TransactWriteItem, StoreError> {
    let cond = expr::put_if_absent();
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(&cond.condition)
        .set_expression_attribute_names(Some(cond.names_map()))
        .build()
        .map_err(|e| StoreError::Other {
            operation: "TransactWriteItems",
            source: e.into(),
        })?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn update(table: &str, task_id: &str, e: &expr::Expr) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(table)
        .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
        .update_expression(&e.main)
        .condition_expression(&e.condition)
        .set_expression_attribute_names(Some(e.names_map()))
        .set_expression_attribute_values(e.values_map())
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|e| StoreError::Other {
            operation: "TransactWriteItems",
            source: e.into(),
        })?;
    Ok(TransactWriteItem::builder().update(update).build())
}

impl Store {
    /// Tasks of one shard superseded in `[since_ms, now_ms]`, from the
    /// superseded index, reading at most `cap` entries: `(count, capped)`.
    pub async fn superseded_in(
        &self,
        shard: u32,
        since_ms: u64,
        now_ms: u64,
        cap: usize,
    ) -> Result<(usize, bool), StoreError> {
        let q = expr::superseded_since(shard, since_ms, now_ms);
        self.count_capped(expr::SUPERSEDED_INDEX, &q, cap).await
    }

    /// Ends a claim whose task a newer one marked (`supersededBy`): TAKEN →
    /// SUPERSEDED on `token`, instead of a retry or a reclaim. `Ok(false)`
    /// when the task moved meanwhile.
    pub async fn end_superseded(
        &self,
        task_id: &str,
        token: u64,
        attempts: u32,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        Queue::end_superseded(self, task_id, token, attempts, now_ms).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_task_is_the_later_created_then_the_greater_id() {
        assert!(is_newer((2, "a"), (1, "z")));
        assert!(!is_newer((1, "z"), (2, "a")));
        assert!(is_newer((1, "b"), (1, "a")));
        assert!(!is_newer((1, "a"), (1, "a")));
    }

    proptest::proptest! {
        /// Whatever order the writes of one key's tasks land in (a write
        /// held back past newer ones), the newest by creation, then id, is
        /// the one left: every other ends SUPERSEDED, on arrival or by a
        /// later write, and a resend of a write changes nothing.
        #[test]
        fn the_newest_by_creation_wins_in_any_order_of_writes(
            created in proptest::collection::vec(0u64..5, 1..8),
            order in proptest::collection::vec(0usize..100, 1..20),
        ) {
            let tasks: Vec<(u64, String)> = created
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("t{}", (i * 7) % 10), *c))
                .collect::<std::collections::BTreeMap<String, u64>>()
                .into_iter()
                .map(|(id, c)| (c, id))
                .collect();
            // Each task written at least once, then resends in any order.
            let mut writes: Vec<usize> = (0..tasks.len()).collect();
            writes.extend(order.iter().map(|o| o % tasks.len()));
            let mut head: Option<(String, u64)> = None;
            let mut superseded = std::collections::BTreeSet::new();
            let mut written = std::collections::BTreeSet::new();
            for w in writes {
                let (c, id) = (&tasks[w].0, tasks[w].1.as_str());
                if written.contains(id) && head.as_ref().is_none_or(|(l, _)| l != id) {
                    // A resend of a written task: its id exists.
                    continue;
                }
                match decide(head.as_ref().map(|(l, hc)| (l.as_str(), Some(*hc))), (*c, id)) {
                    KeyedWrite::Written => {}
                    KeyedWrite::ArrivesSuperseded(by) => {
                        proptest::prop_assert!(is_newer((head.as_ref().map_or(0, |h| h.1), &by), (*c, id)));
                        superseded.insert(id.to_owned());
                    }
                    KeyedWrite::Supersedes(prev) => {
                        if let Some(p) = prev {
                            superseded.insert(p);
                        }
                        head = Some((id.to_owned(), *c));
                    }
                }
                written.insert(id.to_owned());
            }
            let newest = tasks.iter().max_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1))).map(|t| t.1.clone());
            proptest::prop_assert_eq!(head.map(|h| h.0), newest.clone());
            for (_, id) in &tasks {
                proptest::prop_assert_eq!(superseded.contains(id), Some(id) != newest.as_ref());
            }
        }
    }

    #[test]
    fn a_task_that_arrives_after_a_newer_one_is_written_superseded_and_unclaimable() {
        let mut t = Task::new_pending("old".into(), crate::Payload::new(), 1_000, 60, 4);
        t.supersede_key = Some("k".into());
        let ended = arrived_superseded(&t, "new", 1_500);
        assert_eq!(ended.task_status, TaskStatus::Superseded);
        assert_eq!(ended.claimable_at, None, "no claimable index entry");
        assert_eq!(ended.superseded_by.as_deref(), Some("new"));
        assert_eq!(ended.superseded_at, Some(1_500));
        assert_eq!((ended.task_created, ended.task_updated), (1_000, 1_500));
        assert_eq!(ended.history.len(), 1);
        assert_eq!(ended.history[0].status, TaskStatus::Superseded);
    }

    #[test]
    fn key_items_are_queue_items() {
        assert_eq!(key_item_id("device-1"), "#key-device-1");
        assert!(super::super::is_queue_item(&key_item_id("x")));
    }
}
