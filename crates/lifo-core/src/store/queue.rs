//! The store seam: the queue's storage operations that create, trigger and
//! process use, as a trait with two implementations, the DynamoDB
//! [`Store`](super::Store) and the in-memory reference model
//! ([`crate::memory::Memory`]), which a differential test holds to the same
//! results and item states (tests/differential.rs).
//!
//! The required methods are storage: a write, a read of one item, one page
//! of a claimable index query. What the queue does over several of them is
//! provided once over those, so both implementations run the same reads in
//! the same order: here (ending a superseded claim, a shard's newest and
//! oldest, its depth), and in [`super::ops::QueueOps`] (the claim read of
//! each shard's head, the reaper, shedding, a redrive: each written beside
//! the store's own method of that name, in `claim.rs`, `shed.rs` and
//! `operate.rs`).

use super::{DownstreamLimit, Item, Keyed, QueueControl, StoreError};
use crate::expr::{self, Move, Step};
use crate::model::{Task, TaskStatus};
use crate::order::Candidate;
use crate::priority::{self, Priority};
use std::future::Future;

/// A read of one shard of the claimable index: its key condition and
/// filter, as the [`expr`] builder of the same name writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexRead {
    /// [`expr::claim_read`]: claimable now, and expired entries no lease holds.
    ClaimRead {
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    },
    /// [`expr::claimable_now`]: claimable now.
    ClaimableNow {
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    },
    /// [`expr::leased`]: running under a live lease.
    Leased {
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    },
    /// [`expr::backing_off`]: resting before a retry.
    BackingOff {
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    },
    /// [`expr::old_end`]: one priority's band, no filter (the reaper).
    OldEnd {
        shard: u32,
        priority: Priority,
        horizon_ms: u64,
    },
}

impl IndexRead {
    /// The query's key condition and filter.
    pub fn expr(&self) -> expr::Expr {
        match *self {
            Self::ClaimRead {
                shard,
                now_ms,
                horizon_ms,
            } => expr::claim_read(shard, now_ms, horizon_ms),
            Self::ClaimableNow {
                shard,
                now_ms,
                horizon_ms,
            } => expr::claimable_now(shard, now_ms, horizon_ms),
            Self::Leased {
                shard,
                now_ms,
                horizon_ms,
            } => expr::leased(shard, now_ms, horizon_ms),
            Self::BackingOff {
                shard,
                now_ms,
                horizon_ms,
            } => expr::backing_off(shard, now_ms, horizon_ms),
            Self::OldEnd {
                shard,
                priority,
                horizon_ms,
            } => expr::old_end(shard, priority, horizon_ms),
        }
    }
}

/// One page of an index query: the entries the filter kept, in the read's
/// order, and where the next page starts (DynamoDB's `LastEvaluatedKey`:
/// present whenever the page stopped at its `Limit`, even with nothing
/// after it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexPage {
    pub entries: Vec<Candidate>,
    pub next: Option<Item>,
}

/// The queue's storage (see the module's documentation).
pub trait Queue: Send + Sync {
    /// New tasks with fresh ids; how many were written.
    fn put_new(&self, tasks: &[Task]) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// A task with a producer's id, only if no task has it (`false`: none written).
    fn put_if_absent(&self, task: &Task) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// A task with a `supersedeKey`, ending the key's previous task
    /// ([`super::supersede`]); `now_ms` stamps a task that arrives superseded.
    fn put_keyed_at(
        &self,
        task: &Task,
        now_ms: u64,
    ) -> impl Future<Output = Result<Keyed, StoreError>> + Send;

    /// A move of the state machine, conditional on its state; the task as
    /// it is afterwards, or [`StoreError::ConditionFailed`] with the task as
    /// it was.
    fn apply(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> impl Future<Output = Result<Task, StoreError>> + Send;

    /// [`Queue::apply`] with nothing read back.
    fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// One task item by id (strongly consistent), without a payload item.
    fn get_item(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<Task>, StoreError>> + Send;

    /// One page of `read`, oldest first when `forward`, at most `limit`
    /// entries read (before the filter), from `start`.
    fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> impl Future<Output = Result<IndexPage, StoreError>> + Send;

    /// How many entries `read` matches (a COUNT query).
    fn index_count(
        &self,
        read: IndexRead,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// The control state (not paused when there is no control item).
    fn control(
        &self,
        consistent: bool,
    ) -> impl Future<Output = Result<QueueControl, StoreError>> + Send;

    /// Pauses or resumes the queue; the new state.
    fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<QueueControl, StoreError>> + Send;

    /// Touches the control item (a wake-up through the stream); the new state.
    fn nudge(&self, now_ms: u64) -> impl Future<Output = Result<QueueControl, StoreError>> + Send;

    /// Takes a shard group's lease if it is free or ended by `now_ms`: the
    /// new token, or `None` while another holds it.
    fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Gives a group's lease back if `token` still holds it.
    fn release_group(
        &self,
        group: u32,
        token: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Counts tasks that claim reads shed (for the invocation's report).
    fn add_shed_by_reads(&self, n: u64);

    /// Tasks the claim reads have shed so far.
    fn shed_by_reads(&self) -> u64;

    /// Fills `task.payload` from where it is kept apart from the task
    /// (the store's payload item), before the task runs.
    fn load_payload(&self, task: &mut Task) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records the adaptive limit an invocation ended with (what
    /// `lifo stats` shows).
    fn record_limit(
        &self,
        limit: &DownstreamLimit,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What a redrive does after its write, besides the task item (the
    /// store moves a payload item's deletion time); nothing by default.
    fn after_redrive(&self, task: &Task) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = task;
        async { Ok(()) }
    }

    /// Ends a claim that a newer task of its key marked: TAKEN → SUPERSEDED
    /// on `token`; `false` when the task moved meanwhile.
    fn end_superseded(
        &self,
        task_id: &str,
        token: u64,
        attempts: u32,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        async move {
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

    /// The index key's time (epoch ms) of the newest (or, with `oldest`,
    /// the oldest) task claimable now in one shard.
    fn edge_claimable(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
        oldest: bool,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send {
        async move {
            let read = IndexRead::ClaimableNow {
                shard,
                now_ms,
                horizon_ms,
            };
            let mut start: Option<Item> = None;
            loop {
                // Newest first, the first few entries are claimable. Oldest
                // first, what expired since the reaper's last run comes first
                // and is filtered out: read it in whole (1 MB) pages.
                let limit = (!oldest).then_some(25);
                let page = self.index_page(read, oldest, limit, start.take()).await?;
                if let Some(c) = page.entries.first() {
                    return Ok(Some(priority::at_ms(c.claimable_at)));
                }
                start = page.next;
                if start.is_none() {
                    return Ok(None);
                }
            }
        }
    }

    /// Claimable tasks in one shard.
    fn claimable_depth_in(
        &self,
        shard: u32,
        now_ms: u64,
        horizon_ms: u64,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        self.index_count(IndexRead::ClaimableNow {
            shard,
            now_ms,
            horizon_ms,
        })
    }
}
