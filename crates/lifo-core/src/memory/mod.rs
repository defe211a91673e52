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
pub mod limits;
pub mod moves;

pub use bill::Billing;

pub use index::{AWS_LAG_MEDIAN_MS, Entry, Lag, aws_lag};
pub use limits::PartitionLimits;

use crate::expr::{Move, Step, truncate};
use crate::model::{Task, TaskStatus};
use crate::state;
use crate::store::billing::Partition;
use crate::store::{
    CONTROL_ID, DOWNSTREAM_ID, DownstreamLimit, IndexPage, IndexRead, Item, Keyed, Op, Queue,
    QueueControl, StoreError, UNPROCESSED_RESENDS, item,
};
use index::Index;
use limits::Kind;
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
    /// Tasks written or deleted since [`Memory::take_written`] last asked,
    /// once [`Memory::record_writes`] asked for the record (a simulation
    /// of a million tasks does not keep one).
    written: Option<BTreeSet<String>>,
    /// Where its operations' units are counted, if anywhere.
    billing: Option<Billing>,
    /// DynamoDB's per-partition limits, when enforced.
    limits: Option<PartitionLimits>,
}

/// The table's partition of the model's own queue item `key` (`#control`,
/// `#group-<g>`, …) or of a task.
fn table(key: &str) -> Partition {
    Partition::table(key)
}

/// The claimable index's partition of `shard`.
fn shard_partition(shard: u32) -> Partition {
    Partition::index(crate::expr::CLAIMABLE_INDEX, &shard.to_string())
}

impl State {
    fn tick(&mut self, now_ms: u64) -> u64 {
        self.clock = self.clock.max(now_ms);
        self.clock
    }

    /// Writes `task` as the store's items hold it (through the item's
    /// encoding, so both hold the same values).
    /// A transaction's write (`transaction`) is not held to the limits
    /// (its units are counted against them): a refusal part-way through
    /// one is not modelled.
    fn put(&mut self, task: &Task, op: Op, transaction: bool) -> Result<(), StoreError> {
        let after = item::to_item(task)?;
        let charges = self.write_charges(self.items.tasks.get(&task.task_id), &after)?;
        let stored = item::from_item(after)?;
        let factor = if transaction { 2.0 } else { 1.0 };
        let operation = match op {
            Op::Put => "PutItem",
            Op::Supersede => "TransactWriteItems",
            _ => "UpdateItem",
        };
        if transaction {
            self.take(Kind::Write, &charges, factor);
        } else {
            self.admit(Kind::Write, &charges, operation)?;
        }
        if let Some(b) = &self.billing {
            b.spend(op, factor * charges.iter().map(|(_, u)| u).sum::<f64>());
        }
        self.index.write(&task.task_id, Some(&stored), self.clock);
        if let Some(w) = &mut self.written {
            w.insert(task.task_id.clone());
        }
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

    /// What a write of a task from `before` to the image `after` costs,
    /// by partition (nothing when neither billing nor limits ask).
    fn write_charges(
        &self,
        before: Option<&Task>,
        after: &Item,
    ) -> Result<Vec<(Partition, f64)>, StoreError> {
        let indexes = match (&self.limits, &self.billing) {
            (Some(l), _) => &l.indexes,
            (None, Some(b)) => &b.indexes,
            (None, None) => return Ok(Vec::new()),
        };
        let before = before.map(item::to_item).transpose()?;
        Ok(bill::write_charges(before.as_ref(), Some(after), indexes))
    }

    /// Admits a request of `kind` over `charges`' partitions and takes
    /// their units, or refuses it (nothing taken) as DynamoDB throttles.
    fn admit(
        &mut self,
        kind: Kind,
        charges: &[(Partition, f64)],
        operation: &'static str,
    ) -> Result<(), StoreError> {
        if let Some(l) = &mut self.limits {
            l.admit(kind, charges.iter().map(|(p, _)| p))
                .map_err(|t| t.error(operation))?;
        }
        self.take(kind, charges, 1.0);
        Ok(())
    }

    /// Takes `factor` × `charges`' units from their partitions, admitted
    /// or not.
    fn take(&mut self, kind: Kind, charges: &[(Partition, f64)], factor: f64) {
        if let Some(l) = &mut self.limits {
            for (p, units) in charges {
                l.take(kind, p, factor * units);
            }
        }
    }

    /// Admits a read of `partition` (its units, known once it is served,
    /// are taken by [`State::spend_read`]).
    fn read(&mut self, partition: &Partition, operation: &'static str) -> Result<(), StoreError> {
        self.admit(Kind::Read, &[(partition.clone(), 0.0)], operation)
    }

    /// A read's `units`, from `partition` and billed.
    fn spend_read(&mut self, partition: &Partition, units: f64) {
        self.take(Kind::Read, &[(partition.clone(), units)], 1.0);
        if let Some(b) = &self.billing {
            b.spend(Op::Read, units);
        }
    }

    /// A conditional write of a queue item `key` (control, group lease) or
    /// of a task whose condition failed: 1 unit of its partition, if
    /// admitted; billed as `op` when it passed, else as a rejection.
    fn write_queue_item(&mut self, key: &str, op: Op, passed: bool) -> Result<(), StoreError> {
        self.admit(Kind::Write, &[(table(key), 1.0)], "UpdateItem")?;
        match &self.billing {
            Some(b) if passed => b.spend(op, 1.0),
            Some(b) => b.rejected(),
            None => {}
        }
        Ok(())
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
            self.write_queue_item(task_id, Op::Rejected, false)?;
            return Err(failed(None));
        };
        if !moves::allows(mv, step, t) {
            let err = failed(Some(t));
            self.write_queue_item(task_id, Op::Rejected, false)?;
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
                written: None,
                billing: None,
                limits: None,
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

    /// Holding each partition to DynamoDB's limits ([`limits`]): a request
    /// past them is retried as the SDK does, then answers
    /// [`StoreError::Throttled`].
    pub fn with_partition_limits(self, limits: PartitionLimits) -> Self {
        self.state().limits = Some(limits);
        self
    }

    /// What the limits saw: `f` of them, when enforced.
    pub fn partition_limits<T>(&self, f: impl FnOnce(&PartitionLimits) -> T) -> Option<T> {
        self.state().limits.as_ref().map(f)
    }

    /// One request: its round trip, then `f` on the state; a throttled
    /// one is sent again after the SDK's backoff, up to its
    /// [`limits::SDK_ATTEMPTS`] tries.
    async fn send<T>(
        &self,
        mut f: impl FnMut(&mut State) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut tries = 1;
        loop {
            self.trip().await;
            let answer = f(&mut self.state());
            match answer {
                Err(StoreError::Throttled { .. }) if tries < limits::SDK_ATTEMPTS => {
                    tokio::time::sleep(limits::sdk_backoff(tries)).await;
                    tries += 1;
                }
                answer => return answer,
            }
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

    /// Records the tasks written or deleted from now on, for
    /// [`Memory::take_written`] (a record begun before starts afresh).
    pub fn record_writes(&self) {
        self.state().written = Some(BTreeSet::new());
    }

    /// The tasks written or deleted since the last call (each write, even
    /// one that left the item as it was): what a step changed, for a
    /// caller that compares them. Empty unless [`Memory::record_writes`]
    /// began the record.
    pub fn take_written(&self) -> BTreeSet<String> {
        self.state()
            .written
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
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
            if let Some(w) = &mut st.written {
                w.insert(id.clone());
            }
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
    /// As the store's BatchWriteItem: each task admitted on its own; the
    /// refused ones are left unprocessed and sent again after
    /// [`crate::store::resend_wait`], up to the store's resends; a send
    /// whose every task was refused is throttled as a whole (the SDK
    /// retries it).
    async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        let mut left: Vec<&Task> = tasks.iter().collect();
        let (mut resends, mut tries) = (0, 1);
        loop {
            self.trip().await;
            let before = left.len();
            {
                let mut st = self.state();
                let mut failure = None;
                left.retain(|t| {
                    if failure.is_some() {
                        return true;
                    }
                    st.tick(t.task_updated);
                    match st.put(t, Op::Put, false) {
                        Ok(()) => false,
                        Err(StoreError::Throttled { .. }) => true,
                        Err(e) => {
                            failure = Some(e);
                            true
                        }
                    }
                });
                if let Some(e) = failure {
                    return Err(e);
                }
            }
            if left.is_empty() {
                return Ok(tasks.len());
            }
            let written = tasks.len() - left.len();
            let error = if left.len() == before {
                tries += 1;
                (tries > limits::SDK_ATTEMPTS).then(|| StoreError::Throttled {
                    operation: "BatchWriteItem",
                    source: "ProvisionedThroughputExceededException: every item throttled".into(),
                })
            } else {
                resends += 1;
                (resends > UNPROCESSED_RESENDS).then_some(StoreError::Unprocessed {
                    operation: "BatchWriteItem",
                    remaining: left.len(),
                    retries: UNPROCESSED_RESENDS,
                })
            };
            if let Some(e) = error {
                return Err(e.after_writing(written, tasks.len()));
            }
            tokio::time::sleep(if left.len() == before {
                limits::sdk_backoff(tries - 1)
            } else {
                crate::store::resend_wait(resends)
            })
            .await;
        }
    }

    async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        self.send(|st| {
            st.tick(task.task_updated);
            st.put_if_absent(task)
        })
        .await
    }

    async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        self.send(|st| {
            st.tick(task.task_updated.max(now_ms));
            st.put_keyed(task, now_ms)
        })
        .await
    }

    async fn apply(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<Task, StoreError> {
        self.send(|st| st.update(task_id, mv, current, step)).await
    }

    async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        self.send(|st| st.update(task_id, mv, current, step).map(drop))
            .await
    }

    async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        self.send(|st| {
            let partition = table(task_id);
            st.read(&partition, "GetItem")?;
            let task = st.items.tasks.get(task_id).cloned();
            st.spend_read(&partition, bill::get_units(task.as_ref(), true));
            Ok(task)
        })
        .await
    }

    async fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<IndexPage, StoreError> {
        self.send(|st| {
            let partition = shard_partition(index::shard_of(&read));
            st.read(&partition, "Query")?;
            let at = st.tick(read_time(&read));
            st.index.settle(at);
            let (page, evaluated) = st.index.page(&read, forward, limit, start.as_ref());
            let units = bill::query_units(evaluated.into_iter());
            st.spend_read(&partition, units);
            Ok(page)
        })
        .await
    }

    async fn index_count(&self, read: IndexRead) -> Result<usize, StoreError> {
        self.send(|st| {
            let partition = shard_partition(index::shard_of(&read));
            st.read(&partition, "Query")?;
            let at = st.tick(read_time(&read));
            st.index.settle(at);
            let (count, evaluated) = st.index.count(&read);
            let units = bill::query_units(evaluated.into_iter());
            st.spend_read(&partition, units);
            Ok(count)
        })
        .await
    }

    async fn control(&self, consistent: bool) -> Result<QueueControl, StoreError> {
        self.send(|st| {
            let partition = table(CONTROL_ID);
            st.read(&partition, "GetItem")?;
            st.spend_read(&partition, bill::get_units(None, consistent));
            Ok(st.items.control.clone().unwrap_or_default())
        })
        .await
    }

    async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        self.send(|st| {
            st.tick(now_ms);
            st.write_queue_item(CONTROL_ID, Op::Operate, true)?;
            let c = st.items.control.get_or_insert_with(QueueControl::default);
            c.paused = paused;
            c.changed_at = Some(now_ms);
            c.reason = Some(truncate(reason));
            Ok(c.clone())
        })
        .await
    }

    async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        self.send(|st| {
            st.tick(now_ms);
            st.write_queue_item(CONTROL_ID, Op::Operate, true)?;
            let c = st.items.control.get_or_insert_with(QueueControl::default);
            c.nudged_at = Some(now_ms);
            Ok(c.clone())
        })
        .await
    }

    async fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> Result<Option<u64>, StoreError> {
        let key = crate::groups::group_key(group);
        self.send(|st| {
            st.tick(now_ms);
            let held = st.items.groups.get(&group);
            // Free when it never was taken or its lease ended.
            if held.is_some_and(|g| g.lease_until >= now_ms) {
                st.write_queue_item(&key, Op::Group, false)?;
                return Ok(None);
            }
            let token = held.map_or(0, |g| g.token) + 1;
            st.write_queue_item(&key, Op::Group, true)?;
            st.items.groups.insert(
                group,
                GroupItem {
                    lease_until,
                    token,
                    claimed_by: truncate(claimed_by),
                },
            );
            Ok(Some(token))
        })
        .await
    }

    async fn release_group(&self, group: u32, token: u64) -> Result<bool, StoreError> {
        let key = crate::groups::group_key(group);
        self.send(|st| {
            let releases = st
                .items
                .groups
                .get(&group)
                .is_some_and(|g| g.token == token);
            st.write_queue_item(&key, Op::Group, releases)?;
            if let Some(g) = st.items.groups.get_mut(&group).filter(|_| releases) {
                g.lease_until = 0;
            }
            Ok(releases)
        })
        .await
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
        self.send(|st| {
            st.write_queue_item(DOWNSTREAM_ID, Op::Operate, true)?;
            st.items.downstream = Some(*limit);
            Ok(())
        })
        .await
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
#[cfg(test)]
mod throttle_tests;
