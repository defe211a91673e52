//! The claim read: the head of each shard of the claimable index, newest
//! first (or, for comparison runs, oldest first), shedding on its way what
//! expired. One order across the shards is the claim policy's to make
//! (process's `select::heads`).

use super::queue::{IndexRead, Queue};
use super::shed::{shed_all, sheddable};
use super::{Item, Store, StoreError};
use crate::expr;
use crate::order::{Candidate, Order};
use crate::priority;

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
        heads(self, order, shards, page, (now_ms, horizon_ms), None).await
    }

    /// As [`Store::claimable_heads`], and with `since_ms`, newest first:
    /// each shard's read goes on past `page` until it reaches the tasks
    /// claimable since `since_ms` (epoch ms, whatever their priority),
    /// within [`CLAIM_READ_PAGES`] pages. A reader that read last at
    /// `since_ms` then sees every task that became claimable since, however
    /// many arrived in between: what a page of the newest would leave
    /// unseen under a flood of newer tasks (the fair share keeps what it
    /// saw once; a task never seen would wait for its expiry).
    pub async fn claimable_heads_since(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
        since_ms: Option<u64>,
    ) -> Result<Vec<(Vec<Candidate>, bool)>, StoreError> {
        heads(self, order, shards, page, (now_ms, horizon_ms), since_ms).await
    }
}

/// [`Store::claimable_heads_since`] over any [`Queue`]: each shard's head,
/// in parallel.
pub(super) async fn heads<Q: Queue + ?Sized>(
    q: &Q,
    order: Order,
    shards: &[u32],
    page: usize,
    times: (u64, u64),
    since_ms: Option<u64>,
) -> Result<Vec<(Vec<Candidate>, bool)>, StoreError> {
    let since_ms = since_ms.filter(|_| order.newest_first());
    futures::future::try_join_all(
        shards
            .iter()
            .map(|shard| shard_head(q, order, *shard, page, times, since_ms)),
    )
    .await
}

/// One shard's head (see [`Store::claimable_heads_since`]) over any
/// [`Queue`]: pages of the claim read ([`IndexRead::ClaimRead`]), shedding
/// the expired entries met.
pub(super) async fn shard_head<Q: Queue + ?Sized>(
    q: &Q,
    order: Order,
    shard: u32,
    want: usize,
    (now_ms, horizon_ms): (u64, u64),
    since_ms: Option<u64>,
) -> Result<(Vec<Candidate>, bool), StoreError> {
    let read = IndexRead::ClaimRead {
        shard,
        now_ms,
        horizon_ms,
    };
    let mut found = Vec::with_capacity(want);
    let mut start: Option<Item> = None;
    let mut pages = 0;
    // Index items are tiny (keys and a few numbers, ~100 bytes): a page
    // of up to 40 is one read unit. At least 16, so that the tasks
    // running now (TAKEN, at the head, filtered out) and expired
    // leftovers rarely cost a second page.
    let page = i32::try_from(want.max(16)).unwrap_or(i32::MAX);
    loop {
        let out = q
            .index_page(read, order.scan_index_forward(), Some(page), start.take())
            .await?;
        pages += 1;
        let read = out.entries.len();
        let (expired, live): (Vec<Candidate>, Vec<Candidate>) =
            out.entries.into_iter().partition(|c| sheddable(c, now_ms));
        found.extend(live);
        // Most of the page expired: below it lies a shed backlog, the
        // sweep's to shed. Reading on to fill the page would read (and
        // shed) that backlog on every refill, so that reads grow with
        // what expired; a page at most is read into it.
        let into_backlog = expired.len() * 2 > read;
        if !expired.is_empty() {
            let (shed, _) = shed_all(q, expired, now_ms).await?;
            q.add_shed_by_reads(shed as u64);
        }
        start = out.next;
        // Where the page stopped (newest first: the oldest entry read,
        // those the filter left out included); none when the shard
        // ended, and then the read ends anyway.
        let reached_ms = start
            .as_ref()
            .and_then(|k| k.get(expr::attr::CLAIMABLE_AT))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<i64>().ok())
            .map(priority::at_ms);
        // Half a page is enough to go on with, and so is a page that
        // ran into a shed backlog: the rest of the shard is the next
        // refill's (the head counts as cut short). A second page for
        // the running tasks a page met would double every read. With
        // `since_ms`, not before the read reached it.
        let reached = since_ms.is_none_or(|since| reached_ms.is_some_and(|at| at <= since));
        if (reached && (found.len() >= want.div_ceil(2) || into_backlog))
            || start.is_none()
            || pages >= CLAIM_READ_PAGES
        {
            // What a read since a time went past `want` for is kept:
            // it is what a page alone would have left unseen.
            if since_ms.is_some() {
                return Ok((found, start.is_none()));
            }
            let complete = start.is_none() && found.len() <= want;
            found.truncate(want);
            return Ok((found, complete));
        }
    }
}
