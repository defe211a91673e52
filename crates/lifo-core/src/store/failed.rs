//! The failed-task index: failures newest first, by time window and
//! `lastError` prefix, one query per shard (no scan).

use super::error::classify;
use super::{Item, Op, Store, StoreError};
use crate::expr::{self, FAILED_INDEX};
use serde::{Deserialize, Serialize};

/// A failed task as the failed-task index shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    pub task_id: String,
    pub lifo_shard: u32,
    /// When it failed, epoch ms.
    pub failed_at: u64,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub token: u64,
}

/// Which failures to list.
#[derive(Debug, Clone, Copy)]
pub struct FailedQuery<'a> {
    pub shard_count: u32,
    /// Failed at or after (epoch ms).
    pub since_ms: u64,
    /// Failed at or before (epoch ms).
    pub until_ms: u64,
    /// Only those whose `lastError` starts with this ("" for all).
    pub error_prefix: &'a str,
    /// At most this many, newest first.
    pub limit: usize,
}

impl Store {
    /// Failed tasks in the window, newest first across shards.
    pub async fn failed(&self, q: FailedQuery<'_>) -> Result<Vec<Failed>, StoreError> {
        if q.since_ms > q.until_ms || q.limit == 0 {
            return Ok(Vec::new());
        }
        let per_shard = futures::future::try_join_all(
            (0..q.shard_count.max(1)).map(|shard| self.failed_in_shard(shard, q)),
        )
        .await?;
        let mut all: Vec<Failed> = per_shard.into_iter().flatten().collect();
        all.sort_by(|a, b| (b.failed_at, &b.task_id).cmp(&(a.failed_at, &a.task_id)));
        all.truncate(q.limit);
        Ok(all)
    }

    async fn failed_in_shard(
        &self,
        shard: u32,
        q: FailedQuery<'_>,
    ) -> Result<Vec<Failed>, StoreError> {
        let e = expr::failed(shard, q.since_ms, q.until_ms, q.error_prefix);
        let mut found = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .index_query(FAILED_INDEX, &e)
                .scan_index_forward(false)
                .limit(i32::try_from(q.limit.clamp(1, 1000)).unwrap_or(1000))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| classify("Query", err))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            for item in out.items.unwrap_or_default() {
                match serde_dynamo::from_item::<_, Failed>(item) {
                    Ok(f) => found.push(f),
                    Err(err) => {
                        tracing::warn!(shard, error = %err, "skipping a malformed failed-index entry")
                    }
                }
            }
            start = out.last_evaluated_key;
            if found.len() >= q.limit || start.is_none() {
                found.truncate(q.limit);
                return Ok(found);
            }
        }
    }
}
