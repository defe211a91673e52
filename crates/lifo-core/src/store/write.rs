//! Writing new tasks: fresh ids in batches, producer ids only if absent.

use super::error::classify;
use super::{Item, Op, Store, StoreError, resend_wait};
use crate::expr;
use crate::model::Task;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, ReturnConsumedCapacity, WriteRequest};

/// Largest batch BatchWriteItem accepts.
pub const BATCH_WRITE_MAX: usize = 25;
/// How often unprocessed batch items are resent before giving up.
pub const UNPROCESSED_RESENDS: u32 = 8;

use super::item::to_item;

/// A task's item and, when its payload goes to an item of its own, that
/// item (the task item then carries `payloadBytes` instead of `payload`).
type Items = (Item, Option<Item>);

fn put(item: Item) -> Result<WriteRequest, StoreError> {
    let put = PutRequest::builder()
        .set_item(Some(item))
        .build()
        .map_err(|e| StoreError::Other {
            operation: "BatchWriteItem",
            source: e.into(),
        })?;
    Ok(WriteRequest::builder().put_request(put).build())
}

impl Store {
    /// The items that store `task` under this store's payload policy.
    pub(super) fn items(&self, task: &Task) -> Result<Items, StoreError> {
        let payload = self.payload_item(task)?;
        let mut item = to_item(task)?;
        if payload.is_some() {
            item.remove(expr::attr::PAYLOAD);
            let bytes = task.payload.len();
            item.insert(
                expr::attr::PAYLOAD_BYTES.to_owned(),
                AttributeValue::N(bytes.to_string()),
            );
        }
        Ok((item, payload))
    }

    /// Writes new tasks whose ids are fresh (generated here), 25 per
    /// BatchWriteItem; unprocessed items are retried with exponential
    /// backoff. Payload items go first, every one of them before any task
    /// (a task is never there without its payload). Returns how many tasks
    /// were written. If a batch fails after others were written, the error
    /// is [`StoreError::PartialWrite`], saying how many; the payload items
    /// of the tasks not written are deleted (best effort; else their TTL
    /// does it).
    pub async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        let items: Vec<Items> = tasks
            .iter()
            .map(|t| self.items(t))
            .collect::<Result<_, _>>()?;
        let payloads: Vec<Item> = items.iter().filter_map(|(_, p)| p.clone()).collect();
        for chunk in payloads.chunks(BATCH_WRITE_MAX) {
            let requests = chunk
                .iter()
                .cloned()
                .map(put)
                .collect::<Result<Vec<_>, _>>()?;
            if let Err((e, _)) = self.batch_write(requests).await {
                self.forget_payloads(tasks.iter()).await;
                return Err(e);
            }
        }
        let mut written = 0;
        for (i, chunk) in items.chunks(BATCH_WRITE_MAX).enumerate() {
            let requests = chunk
                .iter()
                .map(|(item, _)| put(item.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            if let Err((e, unprocessed)) = self.batch_write(requests).await {
                // Not written: what this batch left over, and every later batch.
                let left: std::collections::HashSet<String> = unprocessed
                    .iter()
                    .filter_map(|r| r.put_request())
                    .filter_map(|p| p.item().get(expr::attr::TASK_ID))
                    .filter_map(|v| v.as_s().ok().cloned())
                    .collect();
                let from = (i + 1) * BATCH_WRITE_MAX;
                let unwritten = tasks[i * BATCH_WRITE_MAX..from.min(tasks.len())]
                    .iter()
                    .filter(|t| left.contains(&t.task_id))
                    .chain(tasks.iter().skip(from));
                self.forget_payloads(unwritten).await;
                return Err(e.after_writing(written, tasks.len()));
            }
            written += chunk.len();
        }
        Ok(written)
    }

    /// Deletes the payload items of `tasks` that have one (tasks that were
    /// not written), logging what could not be deleted.
    pub(super) async fn forget_payloads(&self, tasks: impl Iterator<Item = &Task>) {
        for t in tasks {
            if matches!(self.payload_item(t), Ok(Some(_)))
                && let Err(e) = self.delete_payload(&t.task_id).await
            {
                tracing::warn!(event = "payload.orphaned", taskId = %t.task_id, error = %crate::error::Chain(&e),
                    "its TTL deletes it");
            }
        }
    }

    /// One BatchWriteItem of `requests`, resending unprocessed items; on
    /// failure, the error and the requests still unprocessed.
    async fn batch_write(
        &self,
        mut requests: Vec<WriteRequest>,
    ) -> Result<(), (StoreError, Vec<WriteRequest>)> {
        let mut attempt = 0;
        loop {
            let out = match self
                .client
                .batch_write_item()
                .request_items(self.table.clone(), requests.clone())
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) => return Err((classify("BatchWriteItem", e), requests)),
            };
            self.meter.record(Op::Put, out.consumed_capacity());
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(&self.table))
                .unwrap_or_default();
            if requests.is_empty() {
                return Ok(());
            }
            attempt += 1;
            if attempt > UNPROCESSED_RESENDS {
                let remaining = requests.len();
                return Err((
                    StoreError::Unprocessed {
                        operation: "BatchWriteItem",
                        remaining,
                        retries: UNPROCESSED_RESENDS,
                    },
                    requests,
                ));
            }
            tokio::time::sleep(resend_wait(attempt)).await;
        }
    }

    /// Writes a task whose id the producer chose, only if no task has that id
    /// yet. Returns `false` when it already existed (nothing written). Its
    /// payload item, if any, goes first, also only if absent: an existing
    /// one belongs to the existing task (the first create of an id wins).
    pub async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        let (item, payload) = self.items(task)?;
        let wrote_payload = match payload {
            Some(p) => self.put_absent(p).await?,
            None => false,
        };
        match self.put_absent(item).await {
            Ok(created) => Ok(created),
            Err(e) => {
                if wrote_payload {
                    self.forget_payloads(std::iter::once(task)).await;
                }
                Err(e)
            }
        }
    }

    /// A conditional PutItem of `item`: `false` when its key existed.
    pub(super) async fn put_absent(&self, item: Item) -> Result<bool, StoreError> {
        let cond = expr::put_if_absent();
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(&cond.condition)
            .set_expression_attribute_names(Some(cond.names_map()))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.meter.record(Op::Put, out.consumed_capacity());
                Ok(true)
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                self.meter.record_rejected();
                Ok(false)
            }
            Err(e) => Err(classify("PutItem", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TaskStatus;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemOutput;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    fn task(id: &str, status: TaskStatus) -> Task {
        let mut t = Task::new_pending(id.into(), crate::Payload::new(), 1_000_000, 60, 1);
        t.task_status = status;
        t
    }

    #[tokio::test]
    async fn unprocessed_batch_items_are_retried_until_written() {
        let tasks: Vec<Task> = (0..30)
            .map(|i| task(&format!("t{i}"), TaskStatus::Pending))
            .collect();
        // First call leaves 2 items unprocessed, every later call writes all.
        let leftover = {
            let item: Item = super::super::item::to_item(&tasks[0]).unwrap();
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            vec![WriteRequest::builder().put_request(put).build(); 2]
        };
        let partial = mock!(Client::batch_write_item)
            .match_requests(|r| r.request_items().map(|m| m["t"].len()) == Some(25))
            .then_output(move || {
                BatchWriteItemOutput::builder()
                    .unprocessed_items("t", leftover.clone())
                    .build()
            });
        let rest = mock!(Client::batch_write_item)
            .sequence()
            .output(|| BatchWriteItemOutput::builder().build())
            .repeatedly()
            .build();
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::Sequential, [&partial, &rest]);
        let store = Store::new(client, "t");
        assert_eq!(store.put_new(&tasks).await.unwrap(), 30);
        assert_eq!(partial.num_calls(), 1);
        // one retry of the 2 leftovers, then the last chunk of 5
        assert_eq!(rest.num_calls(), 2);
    }
}
