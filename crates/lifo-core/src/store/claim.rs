//! The claim read: the head of each shard of the claimable index, newest
//! first (or, for comparison runs, oldest first), shedding on its way what
//! expired. One order across the shards is the claim policy's to make
//! (process's `select::heads`).

use super::error::classify;
use super::shed::sheddable;
use super::{Item, Op, Store, StoreError};
use crate::expr::{self, CLAIMABLE_INDEX};
use crate::order::{Candidate, Order};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;

/// Most pages one shard's claim read takes: past them the head is cut
/// short (read again at the next refill, which finds the expired entries
/// of this read shed).
pub const CLAIM_READ_PAGES: usize = 8;

impl Store {
    /// The head of each of `shards` (in that order): its first `page`
    /// claimable tasks in `order` at most, and whether that is all it
    /// holds. One query per shard, in parallel (more only when the page
    /// held fewer than half of `page` claimable now: tasks running, resting
    /// or expired). Expired entries met on the way are shed
    /// before the next page is read ([`Store::shed`]), so no read meets
    /// them again; at most [`CLAIM_READ_PAGES`] pages per shard, after
    /// which the head counts as cut short.
    pub async fn claimable_heads(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<(Vec<Candidate>, bool)>, StoreError> {
        futures::future::try_join_all(
            shards
                .iter()
                .map(|shard| self.shard_head(order, *shard, page, now_ms, horizon_ms)),
        )
        .await
    }

    /// A query of one shard of the claimable index with its key condition and
    /// filter ([`expr::claimable_now`]), asking for ConsumedCapacity.
    pub(super) fn claimable_query(&self, q: &expr::Expr) -> QueryFluentBuilder {
        self.index_query(CLAIMABLE_INDEX, q)
    }

    async fn shard_head(
        &self,
        order: Order,
        shard: u32,
        want: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<(Vec<Candidate>, bool), StoreError> {
        let q = expr::claim_read(shard, now_ms, horizon_ms);
        let mut found = Vec::with_capacity(want);
        let mut start: Option<Item> = None;
        let mut pages = 0;
        // Index items are tiny (keys and a few numbers, ~100 bytes): a page
        // of up to 40 is one read unit. At least 16, so that the tasks
        // running now (TAKEN, at the head, filtered out) and expired
        // leftovers rarely cost a second page.
        let page = i32::try_from(want.max(16)).unwrap_or(i32::MAX);
        loop {
            let out = self
                .claimable_query(&q)
                .scan_index_forward(order.scan_index_forward())
                .limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify("Query", e))?;
            self.meter.record(Op::Read, out.consumed_capacity());
            pages += 1;
            let mut expired = Vec::new();
            for item in out.items.unwrap_or_default() {
                match serde_dynamo::from_item::<_, Candidate>(item) {
                    Ok(c) if sheddable(&c, now_ms) => expired.push(c),
                    Ok(c) => found.push(c),
                    Err(e) => tracing::warn!(shard, error = %e, "skipping malformed index entry"),
                }
            }
            if !expired.is_empty() {
                let (shed, _) = self.shed_all(expired, now_ms).await?;
                self.shed_by_reads
                    .fetch_add(shed as u64, std::sync::atomic::Ordering::Relaxed);
            }
            start = out.last_evaluated_key;
            // Half a page is enough to go on with: the rest of the shard
            // is the next refill's (the head counts as cut short). A
            // second page for the running tasks a page met would double
            // every read.
            if found.len() >= want.div_ceil(2) || start.is_none() || pages >= CLAIM_READ_PAGES {
                let complete = start.is_none() && found.len() <= want;
                found.truncate(want);
                return Ok((found, complete));
            }
        }
    }
}
