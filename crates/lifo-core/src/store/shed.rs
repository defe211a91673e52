//! Shedding: an expired task leaves the claimable index (and enters the shed
//! index) in the minute it expires, so that no reader pays for it again.
//!
//! Two readers shed, with the same conditional update
//! ([`crate::state::Transition::Shed`]):
//! - **the reaper** ([`Store::reap`]), run by the sweep every minute, reads
//!   each shard from its oldest end, where expired entries gather (LIFO
//!   sheds the oldest), sheds what expired, and stops at the first page
//!   that holds no expired entry. Per run it reads what expired since the
//!   last run plus one page of live entries: nothing that was shed before.
//! - **the claim read** ([`Store::claimable_heads`]) sheds the expired
//!   entries it meets on its way (tasks with a shorter TTL than the live
//!   ones below them, or expired since the last sweep).
//!
//! A shed costs 3 write units (the item, the claimable index entry removed, the
//! shed index entry put) once per shed task, and nothing per success.

use super::queue::{IndexRead, Queue};
use super::{Item, Store, StoreError};
use crate::expr::{self, Move, SHED_INDEX, Step};
use crate::model::TaskStatus;
use crate::order::Candidate;
use crate::state::may_shed;
use futures::StreamExt;

/// Entries per page of the reaper's read (index entries are ≈ 100 bytes:
/// a page is under 3 read units).
pub const REAP_PAGE: i32 = 100;
/// Most sheds per shard in one reaper run: more than one shard can shed in
/// a minute (its index key takes 1,000 writes a second, and a task shed
/// unstarted costs it two: its put and its shed), so the reaper keeps up
/// with any overload; a backlog older than the reaper (after an upgrade)
/// is worked off over several runs.
pub const REAP_MAX_PER_SHARD: usize = 30_000;
/// Sheds in flight at once.
const SHED_PARALLEL: usize = 32;

/// What a reaper run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Tasks shed.
    pub shed: usize,
    /// Entries read (expired and live).
    pub read: usize,
    /// Sheds whose condition failed: claimed, redriven or shed by someone
    /// else meanwhile.
    pub lost: usize,
    /// Shards where the run stopped at [`REAP_MAX_PER_SHARD`] or its time
    /// budget with more to do.
    pub cut_short: usize,
}

impl std::ops::AddAssign for Reaped {
    fn add_assign(&mut self, o: Self) {
        self.shed += o.shed;
        self.read += o.read;
        self.lost += o.lost;
        self.cut_short += o.cut_short;
    }
}

/// True when the index entry `c` may be shed at `now_ms`: the state
/// machine's [`may_shed`] (the one the proptests and model/lifo.pml check)
/// for the entry's status (TAKEN when it carries a lease), expiry and lease.
pub fn sheddable(c: &Candidate, now_ms: u64) -> bool {
    let status = if c.lease_until.is_some() {
        TaskStatus::Taken
    } else {
        TaskStatus::Pending
    };
    may_shed(
        status,
        c.expires_at <= now_ms / 1000,
        c.lease_until.is_some_and(|l| l >= now_ms),
    )
}

impl Store {
    /// Sheds the task of index entry `c` at `now_ms`: `Ok(true)` when this
    /// call shed it, `Ok(false)` when it was no longer sheddable (claimed,
    /// redriven, already shed, deleted).
    pub async fn shed(&self, c: &Candidate, now_ms: u64) -> Result<bool, StoreError> {
        shed(self, c, now_ms).await
    }

    /// The reaper: sheds the expired entries at the oldest end of each of
    /// `shards` (see the module's documentation), starting no new page
    /// after `until`.
    pub async fn reap(
        &self,
        shards: &[u32],
        now_ms: u64,
        horizon_ms: u64,
        until: std::time::Instant,
    ) -> Result<Reaped, StoreError> {
        reap(self, shards, now_ms, horizon_ms, until).await
    }
}

/// [`Store::shed`] over any [`Queue`]: the shed move on the entry's token.
pub(super) async fn shed<Q: Queue + ?Sized>(
    q: &Q,
    c: &Candidate,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let reason = format!("shed: expired at {} s with no outcome", c.expires_at);
    let step = Step {
        now_ms,
        token: c.token,
        attempts: c.attempts,
    };
    let current = if c.lease_until.is_some() {
        TaskStatus::Taken
    } else {
        TaskStatus::Pending
    };
    match q
        .record(&c.task_id, &Move::Shed { reason: &reason }, current, &step)
        .await
    {
        Ok(()) => {
            tracing::info!(event = "task.shed", taskId = %c.task_id, shard = c.lifo_shard,
                expiresAt = c.expires_at, token = c.token);
            Ok(true)
        }
        Err(StoreError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sheds every entry of `entries` (all sheddable), a few at a time:
/// how many this call shed, and how many it could no longer shed.
pub(super) async fn shed_all<Q: Queue + ?Sized>(
    q: &Q,
    entries: Vec<Candidate>,
    now_ms: u64,
) -> Result<(usize, usize), StoreError> {
    let results: Vec<Result<bool, StoreError>> = futures::stream::iter(entries)
        .map(|c| async move { shed(q, &c, now_ms).await })
        .buffer_unordered(SHED_PARALLEL)
        .collect()
        .await;
    let (mut shed, mut lost) = (0, 0);
    for r in results {
        if r? {
            shed += 1;
        } else {
            lost += 1;
        }
    }
    Ok((shed, lost))
}

/// [`Store::reap`] over any [`Queue`].
pub(super) async fn reap<Q: Queue + ?Sized>(
    q: &Q,
    shards: &[u32],
    now_ms: u64,
    horizon_ms: u64,
    until: std::time::Instant,
) -> Result<Reaped, StoreError> {
    let per_shard = futures::future::try_join_all(
        shards
            .iter()
            .map(|s| reap_shard(q, *s, now_ms, horizon_ms, until)),
    )
    .await?;
    let mut total = Reaped::default();
    for r in per_shard {
        total += r;
    }
    Ok(total)
}

async fn reap_shard<Q: Queue + ?Sized>(
    q: &Q,
    shard: u32,
    now_ms: u64,
    horizon_ms: u64,
    until: std::time::Instant,
) -> Result<Reaped, StoreError> {
    let mut done = Reaped::default();
    for priority in crate::priority::Priority::ALL {
        let read = IndexRead::OldEnd {
            shard,
            priority,
            horizon_ms,
        };
        if reap_band(q, read, now_ms, until, &mut done).await? {
            break;
        }
    }
    Ok(done)
}

/// Reaps one priority's band of a shard into `done`: `true` when the run
/// was cut short (no more bands this run).
async fn reap_band<Q: Queue + ?Sized>(
    q: &Q,
    read: IndexRead,
    now_ms: u64,
    until: std::time::Instant,
    done: &mut Reaped,
) -> Result<bool, StoreError> {
    let mut start: Option<Item> = None;
    loop {
        let page = q
            .index_page(read, true, Some(REAP_PAGE), start.take())
            .await?;
        done.read += page.entries.len();
        let expired: Vec<Candidate> = page
            .entries
            .into_iter()
            .filter(|c| sheddable(c, now_ms))
            .collect();
        if expired.is_empty() {
            return Ok(false);
        }
        let (shed, lost) = shed_all(q, expired, now_ms).await?;
        done.shed += shed;
        done.lost += lost;
        start = page.next;
        if start.is_none() {
            return Ok(false);
        }
        if done.shed >= REAP_MAX_PER_SHARD || std::time::Instant::now() >= until {
            done.cut_short += 1;
            return Ok(true);
        }
    }
}

impl Store {
    /// Tasks of one shard shed in `[since_ms, now_ms]`, from the shed index
    /// (a COUNT query), reading at most `cap` entries: `(count, capped)`,
    /// where `capped` says there are at least `count`.
    pub async fn shed_in(
        &self,
        shard: u32,
        since_ms: u64,
        now_ms: u64,
        cap: usize,
    ) -> Result<(usize, bool), StoreError> {
        let q = expr::shed_since(shard, since_ms, now_ms);
        self.count_capped(SHED_INDEX, &q, cap).await
    }
}
