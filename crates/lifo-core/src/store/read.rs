//! Reading tasks: one by id, many by id, a user's tasks newest first.

use super::error::{classify, parse_task};
use super::write::UNPROCESSED_RESENDS;
use super::{Item, Op, Store, StoreError, resend_wait};
use crate::expr;
use crate::model::Task;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use std::collections::HashMap;

impl Store {
    /// One task by id (strongly consistent), with its payload (read from
    /// its payload item when it has one).
    pub async fn get(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        let Some(mut task) = self.get_item(task_id).await? else {
            return Ok(None);
        };
        // Past its deletion time, its payload item may already be gone
        // (TTL deletes the two apart): not read; the caller answers it as
        // gone ([`Task::is_past_retention`]).
        if !task.is_past_retention(crate::now_ms()) {
            self.load_payload(&mut task).await?;
        }
        Ok(Some(task))
    }

    /// One task item by id (strongly consistent), without a payload item.
    pub async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        out.item.map(parse_task).transpose()
    }

    /// `(startedAt, readyAt)` of every task started since `since_ms`: a
    /// Scan of the whole table (each page reads up to 1 MB, 0.5 read units
    /// per 4 KB with eventual consistency). For a local table's freshness
    /// chart; against AWS the AgeAtStartMs metric says the same for nothing.
    pub async fn started_since(&self, since_ms: u64) -> Result<Vec<(u64, u64)>, StoreError> {
        let e = expr::started_since(since_ms);
        let number = |item: &Item, name: &str| match item.get(name) {
            Some(AttributeValue::N(v)) => v.parse::<u64>().ok(),
            _ => None,
        };
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .projection_expression(&e.main)
                .filter_expression(&e.condition)
                .set_expression_attribute_names(Some(e.names_map()))
                .set_expression_attribute_values(e.values_map())
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| classify("Scan", e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            for item in out.items() {
                if let (Some(started), Some(ready)) = (
                    number(item, expr::attr::STARTED_AT),
                    number(item, expr::attr::READY_AT),
                ) {
                    found.push((started, ready));
                }
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(found);
            }
        }
    }

    /// Up to 100 tasks by id (BatchGetItem, unprocessed keys retried).
    pub(super) async fn get_many(
        &self,
        ids: &[String],
    ) -> Result<HashMap<String, Task>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut found = HashMap::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let keys: Vec<Item> = ids
            .iter()
            .map(|id| {
                HashMap::from([(
                    expr::attr::TASK_ID.to_owned(),
                    AttributeValue::S(id.clone()),
                )])
            })
            .collect();
        let mut pending = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::Other {
                    operation: "BatchGetItem",
                    source: e.into(),
                })?,
        );
        let mut attempt = 0;
        while let Some(request) = pending.take() {
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| classify("BatchGetItem", e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            for item in out
                .responses
                .and_then(|mut r| r.remove(&self.table))
                .unwrap_or_default()
            {
                match parse_task(item) {
                    Ok(t) => {
                        found.insert(t.task_id.clone(), t);
                    }
                    Err(e) => {
                        tracing::warn!(error = %crate::error::chain(&e), "skipping a malformed item in a user's history")
                    }
                }
            }
            pending = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .filter(|k| !k.keys().is_empty());
            if pending.is_some() {
                attempt += 1;
                if attempt > UNPROCESSED_RESENDS {
                    return Err(StoreError::Unprocessed {
                        operation: "BatchGetItem",
                        remaining: pending.as_ref().map_or(0, |k| k.keys().len()),
                        retries: UNPROCESSED_RESENDS,
                    });
                }
                tokio::time::sleep(resend_wait(attempt)).await;
            }
        }
        Ok(found)
    }

    /// A user's tasks, newest first, `limit` at a time (all statuses:
    /// scheduled, running, finished, expired, cancelled). `start` continues
    /// from the previous page.
    pub async fn user_tasks(
        &self,
        user_id: &str,
        limit: i32,
        start: Option<Item>,
    ) -> Result<(Vec<Task>, Option<Item>), StoreError> {
        let q = expr::user_history(user_id);
        let query = self
            .index_query(expr::USER_INDEX, &q)
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100));
        let (ids, next) = self.index_ids(query, start).await?;
        let mut found = self.get_many(&ids).await?;
        // BatchGetItem answers in any order: restore the index's order.
        let tasks = ids.iter().filter_map(|id| found.remove(id)).collect();
        Ok((tasks, next))
    }
}
