//! The queue's reference model: the [`Queue`] seam in memory, written from
//! [`crate::state`]'s moves (`moves.rs`: each condition a predicate, each
//! effect a function), with the claimable index and its lag (`index.rs`)
//! and latest wins per key (`keyed.rs`). No DynamoDB expression is
//! interpreted: tests/differential.rs holds the model and the DynamoDB
//! store to the same results and item states, so the model is what the
//! store does, small enough to read and fast enough to simulate with.
//!
//! Time is what the operations say it is: each one's `now` (a put's
//! `taskUpdated`) moves the model's clock forward, and the index's lag and
//! TTL deletion ([`Memory::expire_ttl`]) run on that clock. Payloads stay
//! on their task (the store's payload items are a representation: small
//! payloads, as the differential test writes, are inline in both).

mod bill;
mod index;
mod keyed;
pub mod moves;

pub use bill::Billing;

pub use index::{AWS_LAG_MEDIAN_MS, Entry, Lag, aws_lag};

use crate::expr::{Move, Step, truncate};
use crate::model::{Task, TaskStatus};
use crate::state;
use crate::store::{
    DownstreamLimit, IndexPage, IndexRead, Item, Keyed, Op, Queue, QueueControl, StoreError, item,
};
use index::Index;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A key item (`#key-<key>`): the key's newest task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyItem {
    pub latest: String,
    pub latest_created: Option<u64>,
    /// Deleted with the newest task (`ttl`, epoch seconds).
    pub delete_at: u64,
}

/// A shard group's lease item (`#group-<g>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupItem {
    /// Epoch ms; 0 once given back.
    pub lease_until: u64,
    pub token: u64,
    pub claimed_by: String,
}

/// Every item the model holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub tasks: BTreeMap<String, Task>,
    /// By key (not by item id).
    pub keys: BTreeMap<String, KeyItem>,
    pub control: Option<QueueControl>,
    pub groups: BTreeMap<u32, GroupItem>,
    /// The adaptive limit last recorded (`#downstream`).
    pub downstream: Option<DownstreamLimit>,
}

#[derive(Debug)]
struct State {
    /// The latest time an operation named, epoch ms.
    clock: u64,
    items: Snapshot,
    index: Index,
    /// Tasks written or deleted since [`Memory::take_written`] last asked.
    written: BTreeSet<String>,
    /// Where its operations' units are counted, if anywhere.
    billing: Option<Billing>,
}

impl State {
    fn tick(&mut self, now_ms: u64) -> u64 {
        self.clock = self.clock.max(now_ms);
        self.clock
    }

    /// Writes `task` as the store's items hold it (through the item's
    /// encoding, so both hold the same values).
    fn put(&mut self, task: &Task, op: Op, transaction: bool) -> Result<(), StoreError> {
        let stored = item::from_item(item::to_item(task)?)?;
        if let Some(b) = &self.billing {
            b.write(
                op,
                self.items.tasks.get(&task.task_id),
                Some(&stored),
                transaction,
            );
        }
        self.index.write(&task.task_id, Some(&stored), self.clock);
        self.written.insert(task.task_id.clone());
        self.items.tasks.insert(task.task_id.clone(), stored);
        Ok(())
    }

    fn put_if_absent(&mut self, task: &Task) -> Result<bool, StoreError> {
        if self.items.tasks.contains_key(&task.task_id) {
            return Ok(false);
        }
        self.put(task, Op::Put, false)?;
        Ok(true)
    }

    /// A conditional write of a queue item (control, group lease) that
    /// passed (`true`) or failed.
    fn bill_queue_item(&self, op: Op, passed: bool) {
        match &self.billing {
            Some(b) if passed => b.write(op, None, None, false),
            Some(b) => b.rejected(),
            None => {}
        }
    }

    fn update(
        &mut self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<Task, StoreError> {
        state::check(mv.transition(), current)?;
        self.tick(step.now_ms);
        let failed = |current: Option<&Task>| StoreError::ConditionFailed {
            task_id: task_id.to_owned(),
            current: current.cloned().map(Box::new),
        };
        let Some(t) = self.items.tasks.get(task_id) else {
            self.bill_queue_item(Op::Rejected, false);
            return Err(failed(None));
        };
        if !moves::allows(mv, step, t) {
            let err = failed(Some(t));
            self.bill_queue_item(Op::Rejected, false);
            return Err(err);
        }
        let after = moves::apply(mv, step, t);
        self.put(&after, Op::of(mv.transition()), false)?;
        Ok(after)
    }
}

/// The in-memory queue (see the module's documentation).
///
/// A clone is the same queue (its parts are shared), as a clone of the
/// DynamoDB store is the same table.
#[derive(Debug, Clone)]
pub struct Memory {
    state: Arc<Mutex<State>>,
    shed_by_reads: Arc<AtomicU64>,
    /// How long each request takes before it is applied (none by default).
    latency: std::time::Duration,
}

impl Memory {
    /// An empty queue whose claimable index lags as `lag` says.
    pub fn new(lag: Lag) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                clock: 0,
                items: Snapshot::default(),
                index: Index::new(lag),
                written: BTreeSet::new(),
                billing: None,
            })),
            shed_by_reads: Arc::new(AtomicU64::new(0)),
            latency: std::time::Duration::ZERO,
        }
    }

    /// Each request taking `latency` (on tokio's clock) before it is
    /// applied: a round trip to DynamoDB, in a simulation.
    pub fn with_latency(mut self, latency: std::time::Duration) -> Self {
        self.latency = latency;
        self
    }

    /// A request's round trip, before it is applied.
    async fn trip(&self) {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
    }

    /// Counting what its operations would cost on AWS into `billing`'s
    /// meter ([`Billing`]).
    pub fn with_billing(self, billing: Billing) -> Self {
        self.state().billing = Some(billing);
        self
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while the lock was held leaves whole items (each write
        // is one insert): the state is still the state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every item, as it is now.
    pub fn snapshot(&self) -> Snapshot {
        self.state().items.clone()
    }

    /// One task as it is now (the model's own read: no clock moves).
    pub fn task(&self, task_id: &str) -> Option<Task> {
        self.state().items.tasks.get(task_id).cloned()
    }

    /// One group's lease item as it is now.
    pub fn group(&self, group: u32) -> Option<GroupItem> {
        self.state().items.groups.get(&group).cloned()
    }

    /// The tasks written or deleted since the last call (each write, even
    /// one that left the item as it was): what a step changed, for a
    /// caller that compares them.
    pub fn take_written(&self) -> BTreeSet<String> {
        std::mem::take(&mut self.state().written)
    }

    /// The model's clock: the latest time an operation named.
    pub fn clock(&self) -> u64 {
        self.state().clock
    }

    /// DynamoDB's TTL at `now_ms`: deletes every task and key item whose
    /// `ttl` has passed. (AWS deletes them within days of it, so a reader
    /// may still meet one; this is the moment the test or simulation says
    /// TTL ran.) The ids of the tasks deleted, and the keys.
    pub fn expire_ttl(&self, now_ms: u64) -> (Vec<String>, Vec<String>) {
        let mut st = self.state();
        let at = st.tick(now_ms);
        let now_sec = now_ms / 1000;
        let tasks: Vec<String> = st
            .items
            .tasks
            .values()
            .filter(|t| t.delete_at <= now_sec)
            .map(|t| t.task_id.clone())
            .collect();
        for id in &tasks {
            st.items.tasks.remove(id);
            st.index.write(id, None, at);
            st.written.insert(id.clone());
        }
        let keys: Vec<String> = st
            .items
            .keys
            .iter()
            .filter(|(_, k)| k.delete_at <= now_sec)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &keys {
            st.items.keys.remove(key);
        }
        (tasks, keys)
    }
}

impl Queue for Memory {
    async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        self.trip().await;
        let mut st = self.state();
        for t in tasks {
            st.tick(t.task_updated);
            st.put(t, Op::Put, false)?;
        }
        Ok(tasks.len())
    }

    async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.tick(task.task_updated);
        st.put_if_absent(task)
    }

    async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.tick(task.task_updated.max(now_ms));
        st.put_keyed(task, now_ms)
    }

    async fn apply(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<Task, StoreError> {
        self.trip().await;
        self.state().update(task_id, mv, current, step)
    }

    async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        self.trip().await;
        self.state().update(task_id, mv, current, step).map(drop)
    }

    async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        self.trip().await;
        let st = self.state();
        let task = st.items.tasks.get(task_id).cloned();
        if let Some(b) = &st.billing {
            b.get(task.as_ref(), true);
        }
        Ok(task)
    }

    async fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<IndexPage, StoreError> {
        self.trip().await;
        let mut st = self.state();
        let at = st.tick(read_time(&read));
        st.index.settle(at);
        let (page, evaluated) = st.index.page(&read, forward, limit, start.as_ref());
        if let Some(b) = &st.billing {
            b.query(evaluated.iter().copied());
        }
        Ok(page)
    }

    async fn index_count(&self, read: IndexRead) -> Result<usize, StoreError> {
        self.trip().await;
        let mut st = self.state();
        let at = st.tick(read_time(&read));
        st.index.settle(at);
        let (count, evaluated) = st.index.count(&read);
        if let Some(b) = &st.billing {
            b.query(evaluated.iter().copied());
        }
        Ok(count)
    }

    async fn control(&self, consistent: bool) -> Result<QueueControl, StoreError> {
        self.trip().await;
        let st = self.state();
        if let Some(b) = &st.billing {
            b.get(None, consistent);
        }
        Ok(st.items.control.clone().unwrap_or_default())
    }

    async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.tick(now_ms);
        st.bill_queue_item(Op::Operate, true);
        let c = st.items.control.get_or_insert_with(QueueControl::default);
        c.paused = paused;
        c.changed_at = Some(now_ms);
        c.reason = Some(truncate(reason));
        Ok(c.clone())
    }

    async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.tick(now_ms);
        st.bill_queue_item(Op::Operate, true);
        let c = st.items.control.get_or_insert_with(QueueControl::default);
        c.nudged_at = Some(now_ms);
        Ok(c.clone())
    }

    async fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> Result<Option<u64>, StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.tick(now_ms);
        let held = st.items.groups.get(&group);
        // Free when it never was taken or its lease ended.
        if held.is_some_and(|g| g.lease_until >= now_ms) {
            st.bill_queue_item(Op::Group, false);
            return Ok(None);
        }
        st.bill_queue_item(Op::Group, true);
        let token = held.map_or(0, |g| g.token) + 1;
        st.items.groups.insert(
            group,
            GroupItem {
                lease_until,
                token,
                claimed_by: truncate(claimed_by),
            },
        );
        Ok(Some(token))
    }

    async fn release_group(&self, group: u32, token: u64) -> Result<bool, StoreError> {
        self.trip().await;
        let mut st = self.state();
        let released = match st.items.groups.get_mut(&group) {
            Some(g) if g.token == token => {
                g.lease_until = 0;
                true
            }
            _ => false,
        };
        st.bill_queue_item(Op::Group, released);
        Ok(released)
    }

    fn add_shed_by_reads(&self, n: u64) {
        self.shed_by_reads.fetch_add(n, Ordering::Relaxed);
    }

    fn shed_by_reads(&self) -> u64 {
        self.shed_by_reads.load(Ordering::Relaxed)
    }

    /// Payloads stay on their task here: there is nothing to fetch.
    async fn load_payload(&self, _task: &mut Task) -> Result<(), StoreError> {
        Ok(())
    }

    async fn record_limit(&self, limit: &DownstreamLimit) -> Result<(), StoreError> {
        self.trip().await;
        let mut st = self.state();
        st.bill_queue_item(Op::Operate, true);
        st.items.downstream = Some(*limit);
        Ok(())
    }
}

/// The time a read names (the reaper's names none: it reads at the clock).
fn read_time(read: &IndexRead) -> u64 {
    match *read {
        IndexRead::ClaimRead { now_ms, .. }
        | IndexRead::ClaimableNow { now_ms, .. }
        | IndexRead::Leased { now_ms, .. }
        | IndexRead::BackingOff { now_ms, .. } => now_ms,
        IndexRead::OldEnd { .. } => 0,
    }
}

#[cfg(test)]
mod tests;
