//! Latest wins per key: writing a task with a `supersedeKey` ends the key's
//! previous task, in one transaction, so that once the newer task is
//! written the older one never starts.
//!
//! The key item `#key-<key>` (in no index) names the key's newest task
//! (`latest`). A keyed write reads it (strongly consistent), then sends one
//! `TransactWriteItems`:
//! 1. the new task, if its id is new;
//! 2. the key item, now naming the new task, only if it still names the
//!    task read ([`expr::point_key`]): of two writes of one key at once, one
//!    loses here and starts over, so they are ordered;
//! 3. the previous task: PENDING → SUPERSEDED ([`Move::Supersede`]); or, if
//!    it is TAKEN, only a mark ([`expr::mark_superseded`]): its run goes on
//!    and its outcome stands, but it is never put back or claimed again (a
//!    worker that would retry it, or a reader of its lapsed lease, ends it
//!    with [`Move::EndSuperseded`]); nothing if it already ended.
//!
//! Which of the three the previous task gets is guessed (PENDING) and
//! corrected from the cancellation reason DynamoDB returns with the item,
//! so the common case is one read and one transaction.
//!
//! **The race that remains:** a task claimed before its successor is
//! written runs (its claim came first); its outcome stands, and it does not
//! start again. Nothing else lets an older task start once a newer one
//! with its key is written.

use super::error::classify;
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
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(key_item_id(key)))
            .consistent_read(true)
            .projection_expression(expr::attr::LATEST)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        Ok(out
            .item
            .and_then(|mut i| i.remove(expr::attr::LATEST))
            .and_then(|v| v.as_s().ok().cloned()))
    }

    /// Writes `task` (which has a `supersedeKey`) and ends the key's
    /// previous task (see the module's documentation). A producer-chosen id
    /// that exists writes nothing (`created: false`), like
    /// [`Store::put_if_absent`].
    pub async fn put_keyed(&self, task: &Task) -> Result<Keyed, StoreError> {
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
        let result = self.keyed_transaction(task, key, item).await;
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
    ) -> Result<Keyed, StoreError> {
        let id = task.task_id.as_str();
        let mut tries = 0;
        'read: loop {
            let prev = self.latest_of_key(key).await?;
            if prev.as_deref() == Some(id) {
                // This very task is the key's newest: it was written before.
                return Ok(Keyed::default());
            }
            let mut mode = if prev.is_some() {
                Prev::Supersede
            } else {
                Prev::Leave
            };
            loop {
                tries += 1;
                let mut items = vec![put_new(&self.table, item.clone())?, {
                    let e = expr::point_key(id, prev.as_deref(), task.delete_at);
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
        let step = Step {
            now_ms,
            token,
            attempts,
        };
        match self
            .record(task_id, &Move::EndSuperseded, TaskStatus::Taken, &step)
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_items_are_queue_items() {
        assert_eq!(key_item_id("device-1"), "#key-device-1");
        assert!(super::super::is_queue_item(&key_item_id("x")));
    }
}
