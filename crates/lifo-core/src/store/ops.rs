//! What the queue does over its storage, for any [`Queue`]: the claim read
//! of each shard's head (`claim.rs`), shedding and the reaper (`shed.rs`),
//! an operator's redrive (`operate.rs`). Each is written once, beside the
//! DynamoDB store's method of the same name, and runs the same reads and
//! writes in the same order on the store and on the in-memory model.

use super::queue::Queue;
use super::{OperateError, Reaped, RedriveSettings, StoreError};
use crate::model::Task;
use crate::order::{Candidate, Order};
use std::future::Future;

/// The queue's operations over a [`Queue`] (every `Queue` has them).
pub trait QueueOps: Queue {
    /// Sheds the task of index entry `c` at `now_ms`: `true` when this call
    /// shed it, `false` when it no longer could be (claimed, redriven,
    /// already shed, deleted).
    fn shed(
        &self,
        c: &Candidate,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The head of each of `shards` in `order` ([`super::Store::claimable_heads`]).
    fn claimable_heads(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> impl Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send;

    /// The heads, read on to `since_ms` ([`super::Store::claimable_heads_since`]).
    fn claimable_heads_since(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
        since_ms: Option<u64>,
    ) -> impl Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send;

    /// The reaper ([`super::Store::reap`]): sheds the expired entries at the
    /// oldest end of each of `shards`, starting no new page after `until`.
    fn reap(
        &self,
        shards: &[u32],
        now_ms: u64,
        horizon_ms: u64,
        until: std::time::Instant,
    ) -> impl Future<Output = Result<Reaped, StoreError>> + Send;

    /// Runs a failed task, or one shed by expiry, again
    /// ([`super::Store::redrive`]).
    fn redrive(
        &self,
        task_id: &str,
        settings: RedriveSettings<'_>,
    ) -> impl Future<Output = Result<Task, OperateError>> + Send;
}

impl<Q: Queue> QueueOps for Q {
    fn shed(
        &self,
        c: &Candidate,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        super::shed::shed(self, c, now_ms)
    }

    fn claimable_heads(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
    ) -> impl Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send {
        super::claim::heads(self, order, shards, page, (now_ms, horizon_ms), None)
    }

    fn claimable_heads_since(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
        since_ms: Option<u64>,
    ) -> impl Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send {
        super::claim::heads(self, order, shards, page, (now_ms, horizon_ms), since_ms)
    }

    fn reap(
        &self,
        shards: &[u32],
        now_ms: u64,
        horizon_ms: u64,
        until: std::time::Instant,
    ) -> impl Future<Output = Result<Reaped, StoreError>> + Send {
        super::shed::reap(self, shards, now_ms, horizon_ms, until)
    }

    fn redrive(
        &self,
        task_id: &str,
        settings: RedriveSettings<'_>,
    ) -> impl Future<Output = Result<Task, OperateError>> + Send {
        super::operate::redrive(self, task_id, settings)
    }
}
