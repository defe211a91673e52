//! The DynamoDB store as the [`Queue`] seam: each required method is the
//! store's own call of the same name (or one page of a query of the
//! claimable index); the rest is the trait's, over them.

use super::error::classify;
use super::queue::{IndexPage, IndexRead, Queue};
use super::{DownstreamLimit, Item, Keyed, Op, QueueControl, Store, StoreError};
use crate::expr::{CLAIMABLE_INDEX, Move, Step};
use crate::model::{Task, TaskStatus};
use crate::order::Candidate;

impl Queue for Store {
    async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        Store::put_new(self, tasks).await
    }

    async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        Store::put_if_absent(self, task).await
    }

    async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        Store::put_keyed_at(self, task, now_ms).await
    }

    async fn apply(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<Task, StoreError> {
        Store::apply(self, task_id, mv, current, step).await
    }

    async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        Store::record(self, task_id, mv, current, step).await
    }

    async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        Store::get_item(self, task_id).await
    }

    async fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<IndexPage, StoreError> {
        let out = self
            .index_query(CLAIMABLE_INDEX, &read.expr())
            .scan_index_forward(forward)
            .set_limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| classify("Query", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        let entries = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| match serde_dynamo::from_item::<_, Candidate>(item) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(?read, error = %e, "skipping malformed index entry");
                    None
                }
            })
            .collect();
        Ok(IndexPage {
            entries,
            next: out.last_evaluated_key,
        })
    }

    async fn index_count(&self, read: IndexRead) -> Result<usize, StoreError> {
        self.count(CLAIMABLE_INDEX, &read.expr()).await
    }

    async fn control(&self, consistent: bool) -> Result<QueueControl, StoreError> {
        Store::control(self, consistent).await
    }

    async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        Store::set_paused(self, paused, reason, now_ms).await
    }

    async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        Store::nudge(self, now_ms).await
    }

    async fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> Result<Option<u64>, StoreError> {
        Store::take_group(self, group, lease_until, now_ms, claimed_by).await
    }

    async fn release_group(&self, group: u32, token: u64) -> Result<bool, StoreError> {
        Store::release_group(self, group, token).await
    }

    fn add_shed_by_reads(&self, n: u64) {
        self.shed_by_reads
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    fn shed_by_reads(&self) -> u64 {
        Store::shed_by_reads(self)
    }

    async fn load_payload(&self, task: &mut Task) -> Result<(), StoreError> {
        Store::load_payload(self, task).await
    }

    async fn record_limit(&self, limit: &DownstreamLimit) -> Result<(), StoreError> {
        Store::record_limit(self, limit).await
    }

    /// Its payload item, if any, lives as long as the task's new life.
    async fn after_redrive(&self, task: &Task) -> Result<(), StoreError> {
        if task.payload_bytes.is_some() {
            self.extend_payload(&task.task_id, task.delete_at).await?;
        }
        Ok(())
    }
}
