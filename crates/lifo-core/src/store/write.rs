//! Writing new tasks: fresh ids in batches, producer ids only if absent.

use super::error::classify;
use super::{Item, Op, Store, StoreError, backoff};
use crate::expr;
use crate::model::Task;
use aws_sdk_dynamodb::types::{PutRequest, ReturnConsumedCapacity, WriteRequest};

/// Largest batch BatchWriteItem accepts.
pub const BATCH_WRITE_MAX: usize = 25;
/// How often unprocessed batch items are retried before giving up.
pub(super) const UNPROCESSED_RETRIES: u32 = 8;

fn to_item(task: &Task) -> Result<Item, StoreError> {
    serde_dynamo::to_item(task).map_err(|source| StoreError::Malformed {
        task_id: task.task_id.clone(),
        source,
    })
}

impl Store {
    /// Writes new tasks whose ids are fresh (generated here), 25 per
    /// BatchWriteItem; unprocessed items are retried with exponential backoff.
    /// Returns how many were written. If a batch fails after others were
    /// written, the error is [`StoreError::PartialWrite`], saying how many.
    pub async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        let mut written = 0;
        for chunk in tasks.chunks(BATCH_WRITE_MAX) {
            let mut requests = Vec::with_capacity(chunk.len());
            for task in chunk {
                let put = PutRequest::builder()
                    .set_item(Some(to_item(task)?))
                    .build()
                    .map_err(|e| StoreError::Other {
                        operation: "BatchWriteItem",
                        source: e.into(),
                    })?;
                requests.push(WriteRequest::builder().put_request(put).build());
            }
            self.batch_write(requests)
                .await
                .map_err(|e| match (written, e) {
                    (0, e) => e,
                    (written, e) => StoreError::PartialWrite {
                        written,
                        total: tasks.len(),
                        source: Box::new(e),
                    },
                })?;
            written += chunk.len();
        }
        Ok(written)
    }

    async fn batch_write(&self, mut requests: Vec<WriteRequest>) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            let out = self
                .client
                .batch_write_item()
                .request_items(self.table.clone(), requests)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await
                .map_err(|e| classify("BatchWriteItem", e))?;
            self.meter.record(Op::Put, out.consumed_capacity());
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(&self.table))
                .unwrap_or_default();
            if requests.is_empty() {
                return Ok(());
            }
            attempt += 1;
            if attempt > UNPROCESSED_RETRIES {
                return Err(StoreError::Unprocessed {
                    operation: "BatchWriteItem",
                    remaining: requests.len(),
                    retries: UNPROCESSED_RETRIES,
                });
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    /// Writes a task whose id the producer chose, only if no task has that id
    /// yet. Returns `false` when it already existed (nothing written).
    pub async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        let item = to_item(task)?;
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
        let mut t = Task::new_pending(id.into(), Default::default(), 1_000_000, 60, 1);
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
            let item: Item = serde_dynamo::to_item(&tasks[0]).unwrap();
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
