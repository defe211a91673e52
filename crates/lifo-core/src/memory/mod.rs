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

mod index;
mod keyed;
pub mod moves;

pub use index::{AWS_LAG_MEDIAN_MS, Entry, Lag, aws_lag};

use crate::expr::{Move, Step, truncate};
use crate::model::{Task, TaskStatus};
use crate::state;
use crate::store::{
    DownstreamLimit, IndexPage, IndexRead, Item, Keyed, Queue, QueueControl, StoreError, item,
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
}

impl State {
    fn tick(&mut self, now_ms: u64) -> u64 {
        self.clock = self.clock.max(now_ms);
        self.clock
    }

    /// Writes `task` as the store's items hold it (through the item's
    /// encoding, so both hold the same values).
    fn put(&mut self, task: &Task) -> Result<(), StoreError> {
        let stored = item::from_item(item::to_item(task)?)?;
        self.index.write(&task.task_id, Some(&stored), self.clock);
        self.written.insert(task.task_id.clone());
        self.items.tasks.insert(task.task_id.clone(), stored);
        Ok(())
    }

    fn put_if_absent(&mut self, task: &Task) -> Result<bool, StoreError> {
        if self.items.tasks.contains_key(&task.task_id) {
            return Ok(false);
        }
        self.put(task)?;
        Ok(true)
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
            return Err(failed(None));
        };
        if !moves::allows(mv, step, t) {
            return Err(failed(Some(t)));
        }
        let after = moves::apply(mv, step, t);
        self.put(&after)?;
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
            })),
            shed_by_reads: Arc::new(AtomicU64::new(0)),
        }
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
        let mut st = self.state();
        for t in tasks {
            st.tick(t.task_updated);
            st.put(t)?;
        }
        Ok(tasks.len())
    }

    async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        let mut st = self.state();
        st.tick(task.task_updated);
        st.put_if_absent(task)
    }

    async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
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
        self.state().update(task_id, mv, current, step)
    }

    async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        self.state().update(task_id, mv, current, step).map(drop)
    }

    async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        Ok(self.state().items.tasks.get(task_id).cloned())
    }

    async fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<IndexPage, StoreError> {
        let mut st = self.state();
        let at = st.tick(read_time(&read));
        Ok(st.index.page((&read, at), forward, limit, start.as_ref()))
    }

    async fn index_count(&self, read: IndexRead) -> Result<usize, StoreError> {
        let mut st = self.state();
        let at = st.tick(read_time(&read));
        Ok(st.index.count(&read, at))
    }

    async fn control(&self, _consistent: bool) -> Result<QueueControl, StoreError> {
        Ok(self.state().items.control.clone().unwrap_or_default())
    }

    async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        let mut st = self.state();
        st.tick(now_ms);
        let c = st.items.control.get_or_insert_with(QueueControl::default);
        c.paused = paused;
        c.changed_at = Some(now_ms);
        c.reason = Some(truncate(reason));
        Ok(c.clone())
    }

    async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        let mut st = self.state();
        st.tick(now_ms);
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
        let mut st = self.state();
        st.tick(now_ms);
        let held = st.items.groups.get(&group);
        // Free when it never was taken or its lease ended.
        if held.is_some_and(|g| g.lease_until >= now_ms) {
            return Ok(None);
        }
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
        let mut st = self.state();
        match st.items.groups.get_mut(&group) {
            Some(g) if g.token == token => {
                g.lease_until = 0;
                Ok(true)
            }
            _ => Ok(false),
        }
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
        self.state().items.downstream = Some(*limit);
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
