//! COUNT queries of the indexes (queue depth, running, shed, scheduled) and
//! the two ends of a shard: the sweep and `lifo stats`. No scans.

use super::error::classify;
use super::queue::Queue;
use super::{Item, Op, Store, StoreError};
use crate::expr::{self, CLAIMABLE_INDEX};

impl Store {
    /// How many tasks are claimable now, across shards (the queue depth).
    /// A COUNT query per shard over the same key condition and filter as
    /// [`Store::claimable`]: it reads every entry of the claimable index, live
    /// work and what expired since the last reaper run (the sweep reaps
    /// first), so it is meant for the once-a-minute sweep, not the claim
    /// loop.
    pub async fn claimable_depth(
        &self,
        shard_count: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        Ok(self
            .claimable_depth_per_shard(shard_count, now_ms, horizon_ms)
            .await?
            .into_iter()
            .sum())
    }

    /// [`Store::claimable_depth`], per shard (`0..shard_count`).
    pub async fn claimable_depth_per_shard(
        &self,
        shard_count: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<usize>, StoreError> {
        futures::future::try_join_all(
            (0..shard_count.max(1)).map(|shard| self.claimable_depth_in(shard, now_ms, horizon_ms)),
        )
        .await
    }

    /// Claimable tasks in one shard (a COUNT query, paged).
    pub async fn claimable_depth_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        Queue::claimable_depth_in(self, shard, now_ms, horizon_ms).await
    }

    /// Tasks of one shard running under a live lease ([`expr::leased`]).
    pub async fn leased_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        self.count(CLAIMABLE_INDEX, &expr::leased(shard, now_ms, horizon_ms))
            .await
    }

    /// Tasks of one shard resting before a retry ([`expr::backing_off`]).
    pub async fn backing_off_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<usize, StoreError> {
        self.count(
            CLAIMABLE_INDEX,
            &expr::backing_off(shard, now_ms, horizon_ms),
        )
        .await
    }

    /// SCHEDULED tasks waiting in one due-index partition (`<date>#<shard>`).
    pub async fn due_count(&self, due_key: &str) -> Result<usize, StoreError> {
        self.count(expr::DUE_INDEX, &expr::due_partition(due_key))
            .await
    }

    /// Items of `index` that `q` matches (a COUNT query, paged).
    pub(super) async fn count(&self, index: &str, q: &expr::Expr) -> Result<usize, StoreError> {
        Ok(self.count_up_to(index, q, None).await?.0)
    }
    /// `claimableAt` of the newest (or, with `oldest`, the oldest) claimable
    /// task in one shard, if any.
    pub async fn edge_claimable(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
        oldest: bool,
    ) -> Result<Option<u64>, StoreError> {
        Queue::edge_claimable(self, shard, now_ms, horizon_ms, oldest).await
    }

    /// A COUNT query of `q` over `index`, reading at most `cap` entries:
    /// `(count, capped)`, where `capped` says there are at least `count`.
    pub(super) async fn count_capped(
        &self,
        index: &str,
        q: &expr::Expr,
        cap: usize,
    ) -> Result<(usize, bool), StoreError> {
        self.count_up_to(index, q, Some(cap)).await
    }

    /// The COUNT query both share: pages of at most what is left of `cap`
    /// (DynamoDB's 1 MB pages without one).
    async fn count_up_to(
        &self,
        index: &str,
        q: &expr::Expr,
        cap: Option<usize>,
    ) -> Result<(usize, bool), StoreError> {
        let mut total = 0usize;
        let mut start: Option<Item> = None;
        loop {
            let limit = cap
                .map(|c| i32::try_from(c.saturating_sub(total).clamp(1, 10_000)).unwrap_or(10_000));
            let out = self
                .index_query(index, q)
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_limit(limit)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify("Query", e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            total += usize::try_from(out.count).unwrap_or(0);
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok((total, false));
            }
            if cap.is_some_and(|c| total >= c) {
                return Ok((total, true));
            }
        }
    }
}
