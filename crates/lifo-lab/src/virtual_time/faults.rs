//! Store faults for a chaos run in virtual time ([`super::chaos`]), drawn
//! from the run's seed.
//!
//! [`FaultyStore`] is the queue's in-memory model behind a wrapper that
//! fails calls at a rate, as DynamoDB does when it throttles or answers a
//! 5xx past the SDK's retries (or a transaction held the item): before
//! the call reached the table (nothing written), after it was applied (the
//! answer lost: the caller cannot tell which), or applied and sent again by
//! the SDK's retry, whose answer is the resend's (a conditional write then
//! fails on the first one's effect). It records every committed change of
//! a task, as the table's stream would: what the run is judged by
//! ([`crate::chaos`]).
//! The functions' faults are [`super::invocation_faults`]'s.

use crate::chaos::{Change, Image};
use lifo_core::expr::{Move, Step};
use lifo_core::memory::Memory;
use lifo_core::store::{DownstreamLimit, IndexPage, IndexRead, Item, Keyed, Queue, QueueControl};
use lifo_core::{StoreError, Task, TaskStatus};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A draw's fault on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Refused before it reached the table: nothing written.
    Before(Kind),
    /// Applied, then answered with an error.
    After(Kind),
    /// Applied, its answer lost, sent again: the resend's answer.
    Resent,
}

/// The error a fault answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Throttled,
    /// A 5xx (`InternalServerError`).
    Internal,
    /// `TransactionConflictException` (nothing written, by definition).
    Conflict,
}

impl Kind {
    fn error(self, operation: &'static str) -> StoreError {
        match self {
            Kind::Throttled => StoreError::Throttled {
                operation,
                source: "ThrottlingException (injected)".into(),
            },
            Kind::Internal => StoreError::Other {
                operation,
                source: "InternalServerError (injected)".into(),
            },
            Kind::Conflict => StoreError::Conflict {
                operation,
                source: "TransactionConflictException (injected)".into(),
            },
        }
    }
}

/// How many faults a store injected, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreFaultCounts {
    /// Calls refused before they reached the table.
    pub before: u64,
    /// Calls applied, then answered with an error.
    pub after: u64,
    /// Calls applied whose answer was lost, sent again.
    pub resent: u64,
}

/// What calls of a kind a draw may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// A read: only refused (a read applied is a read answered).
    Read,
    /// A write of the queue's own items.
    Write,
    /// A write of a task item that transactions write (a conflict too).
    ItemWrite,
}

/// The committed changes, as a stream shows them.
#[derive(Debug, Default)]
struct Feed {
    /// Each task's last image.
    images: HashMap<String, Image>,
    changes: Vec<Change>,
    /// Tasks not ended (PENDING, TAKEN, …) now.
    open: usize,
}

struct Shared {
    rate: f64,
    rng: Mutex<fastrand::Rng>,
    enabled: AtomicBool,
    before: AtomicU64,
    after: AtomicU64,
    resent: AtomicU64,
    feed: Mutex<Feed>,
}

/// The in-memory queue, failing calls at a rate (see the module's
/// documentation). A clone is the same store.
#[derive(Clone)]
pub struct FaultyStore {
    memory: Memory,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("rate", &self.shared.rate)
            .field("injected", &self.injected())
            .finish()
    }
}

impl FaultyStore {
    /// `memory`, each call failing with probability `rate`, the draws from
    /// `seed`. Changes written to `memory` before are not recorded.
    pub fn new(memory: Memory, rate: f64, seed: u64) -> Self {
        memory.record_writes();
        Self {
            memory,
            shared: Arc::new(Shared {
                rate,
                rng: Mutex::new(fastrand::Rng::with_seed(seed)),
                enabled: AtomicBool::new(true),
                before: AtomicU64::new(0),
                after: AtomicU64::new(0),
                resent: AtomicU64::new(0),
                feed: Mutex::new(Feed::default()),
            }),
        }
    }

    /// The model behind it (its reads inject nothing and move no clock).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Faults on (the default) or off.
    pub fn set_enabled(&self, enabled: bool) {
        self.shared.enabled.store(enabled, Ordering::Relaxed);
    }

    pub fn injected(&self) -> StoreFaultCounts {
        let s = &self.shared;
        StoreFaultCounts {
            before: s.before.load(Ordering::Relaxed),
            after: s.after.load(Ordering::Relaxed),
            resent: s.resent.load(Ordering::Relaxed),
        }
    }

    /// Every committed change so far, in commit order.
    pub fn changes(&self) -> Vec<Change> {
        self.feed().changes.clone()
    }

    /// Tasks not ended now.
    pub fn open(&self) -> usize {
        self.feed().open
    }

    fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.shared
            .feed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records what the model wrote since the last call.
    fn observe(&self) {
        let written = self.memory.take_written();
        if written.is_empty() {
            return;
        }
        let mut feed = self.feed();
        for id in written {
            let new = self.memory.task(&id).map(|t| Image {
                status: t.task_status,
                token: t.token,
            });
            let old = match new {
                Some(image) => feed.images.insert(id.clone(), image),
                None => feed.images.remove(&id),
            };
            let open = |i: Option<Image>| usize::from(i.is_some_and(|i| !i.status.is_terminal()));
            feed.open = feed.open + open(new) - open(old);
            feed.changes.push(Change { id, old, new });
        }
    }

    /// This call's fault, if any.
    fn draw(&self, call: Call) -> Option<Fault> {
        let s = &self.shared;
        if !s.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let mut rng = s.rng.lock().unwrap_or_else(|p| p.into_inner());
        if rng.f64() >= s.rate {
            return None;
        }
        let kind = match (call, rng.u32(0..3)) {
            (Call::ItemWrite, 2) => Kind::Conflict,
            (_, 0) => Kind::Throttled,
            _ => Kind::Internal,
        };
        let fault = match (call, kind, rng.u32(0..3)) {
            (Call::Read, ..) | (_, Kind::Conflict, _) | (_, _, 0) => Fault::Before(kind),
            (_, _, 1) => Fault::After(kind),
            _ => Fault::Resent,
        };
        let counter = match fault {
            Fault::Before(_) => &s.before,
            Fault::After(_) => &s.after,
            Fault::Resent => &s.resent,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }

    /// How long the SDK spent on its retries before it gave up (or
    /// resent): 10 to 200 ms.
    async fn retries(&self) {
        let ms = {
            let mut rng = self.shared.rng.lock().unwrap_or_else(|p| p.into_inner());
            rng.u64(10..=200)
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// `call` (`operation`, a `kind` of call) through this call's fault.
    async fn call<T, F, Fut>(
        &self,
        operation: &'static str,
        kind: Call,
        call: F,
    ) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let fault = self.draw(kind);
        if let Some(Fault::Before(kind)) = fault {
            self.retries().await;
            return Err(kind.error(operation));
        }
        let answer = call().await;
        self.observe();
        match fault {
            Some(Fault::After(kind)) => {
                self.retries().await;
                Err(kind.error(operation))
            }
            Some(Fault::Resent) => {
                self.retries().await;
                let again = call().await;
                self.observe();
                again
            }
            _ => answer,
        }
    }
}

impl Queue for FaultyStore {
    async fn put_new(&self, tasks: &[Task]) -> Result<usize, StoreError> {
        self.call("BatchWriteItem", Call::Write, || self.memory.put_new(tasks))
            .await
    }

    async fn put_if_absent(&self, task: &Task) -> Result<bool, StoreError> {
        self.call("PutItem", Call::Write, || self.memory.put_if_absent(task))
            .await
    }

    async fn put_keyed_at(&self, task: &Task, now_ms: u64) -> Result<Keyed, StoreError> {
        self.call("TransactWriteItems", Call::ItemWrite, || {
            self.memory.put_keyed_at(task, now_ms)
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
        self.call("UpdateItem", Call::ItemWrite, || {
            self.memory.apply(task_id, mv, current, step)
        })
        .await
    }

    async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        self.call("UpdateItem", Call::ItemWrite, || {
            self.memory.record(task_id, mv, current, step)
        })
        .await
    }

    async fn get_item(&self, task_id: &str) -> Result<Option<Task>, StoreError> {
        self.call("GetItem", Call::Read, || self.memory.get_item(task_id))
            .await
    }

    async fn index_page(
        &self,
        read: IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<IndexPage, StoreError> {
        self.call("Query", Call::Read, || {
            self.memory.index_page(read, forward, limit, start.clone())
        })
        .await
    }

    async fn index_count(&self, read: IndexRead) -> Result<usize, StoreError> {
        self.call("Query", Call::Read, || self.memory.index_count(read))
            .await
    }

    async fn control(&self, consistent: bool) -> Result<QueueControl, StoreError> {
        self.call("GetItem", Call::Read, || self.memory.control(consistent))
            .await
    }

    async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        self.call("UpdateItem", Call::Write, || {
            self.memory.set_paused(paused, reason, now_ms)
        })
        .await
    }

    async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        self.call("UpdateItem", Call::Write, || self.memory.nudge(now_ms))
            .await
    }

    async fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> Result<Option<u64>, StoreError> {
        self.call("UpdateItem", Call::Write, || {
            self.memory
                .take_group(group, lease_until, now_ms, claimed_by)
        })
        .await
    }

    async fn release_group(&self, group: u32, token: u64) -> Result<bool, StoreError> {
        self.call("UpdateItem", Call::Write, || {
            self.memory.release_group(group, token)
        })
        .await
    }

    fn add_shed_by_reads(&self, n: u64) {
        self.memory.add_shed_by_reads(n);
    }

    fn shed_by_reads(&self) -> u64 {
        self.memory.shed_by_reads()
    }

    async fn load_payload(&self, task: &mut Task) -> Result<(), StoreError> {
        if let Some(Fault::Before(kind)) = self.draw(Call::Read) {
            self.retries().await;
            return Err(kind.error("GetItem"));
        }
        self.memory.load_payload(task).await
    }

    async fn record_limit(&self, limit: &DownstreamLimit) -> Result<(), StoreError> {
        self.call("PutItem", Call::Write, || self.memory.record_limit(limit))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifo_core::memory::Lag;

    fn pending(id: &str) -> Task {
        Task::new_pending(id.into(), lifo_core::Payload::new(), 1_000, 60, 1)
    }

    /// Every call faulted: a write refused before it reached the table
    /// leaves nothing, one applied leaves its change in the feed whatever
    /// it answered; a resend of a conditional put answers "exists".
    #[tokio::test(start_paused = true)]
    async fn faults_answer_errors_and_the_feed_shows_what_was_applied() {
        let store = FaultyStore::new(Memory::new(Lag::Off), 1.0, 3);
        let mut answers = Vec::new();
        for i in 0..60 {
            answers.push(store.put_if_absent(&pending(&format!("t{i}"))).await);
        }
        let counts = store.injected();
        assert_eq!(counts.before + counts.after + counts.resent, 60);
        assert!(counts.before > 0 && counts.after > 0 && counts.resent > 0);
        let written = store.memory().snapshot().tasks.len() as u64;
        assert_eq!(
            written,
            counts.after + counts.resent,
            "refused ones left nothing"
        );
        assert_eq!(store.changes().len() as u64, written);
        assert_eq!(store.open() as u64, written);
        let errors = answers.iter().filter(|a| a.is_err()).count() as u64;
        assert_eq!(errors, counts.before + counts.after);
        assert!(
            answers.iter().all(|a| !matches!(a, Ok(true))),
            "a resend finds its own write"
        );
        assert!(
            answers
                .iter()
                .all(|a| !matches!(a, Err(StoreError::Conflict { .. })))
        );

        store.set_enabled(false);
        assert_eq!(store.put_if_absent(&pending("u")).await.ok(), Some(true));
        assert_eq!(store.injected(), counts, "off: nothing injected");
    }

    /// The feed shows each change with its before and after, and counts
    /// the tasks not ended.
    #[tokio::test(start_paused = true)]
    async fn the_feed_shows_before_and_after() {
        let store = FaultyStore::new(Memory::new(Lag::Off), 0.0, 1);
        store.put_if_absent(&pending("a")).await.unwrap();
        let claim = Move::Claim {
            lease_until: 9_000,
            claimed_by: "p",
        };
        let step = Step {
            now_ms: 2_000,
            token: 0,
            attempts: 1,
        };
        store
            .record("a", &claim, TaskStatus::Pending, &step)
            .await
            .unwrap();
        let done = Move::Succeed { history: &[] };
        let step = Step { token: 1, ..step };
        store
            .record("a", &done, TaskStatus::Taken, &step)
            .await
            .unwrap();
        let image = |status, token| Some(Image { status, token });
        assert_eq!(
            store.changes(),
            vec![
                Change {
                    id: "a".into(),
                    old: None,
                    new: image(TaskStatus::Pending, 0)
                },
                Change {
                    id: "a".into(),
                    old: image(TaskStatus::Pending, 0),
                    new: image(TaskStatus::Taken, 1)
                },
                Change {
                    id: "a".into(),
                    old: image(TaskStatus::Taken, 1),
                    new: image(TaskStatus::Success, 1)
                },
            ]
        );
        assert_eq!(store.open(), 0);
    }
}
