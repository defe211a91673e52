//! The task as it is stored in the queue table.
//!
//! One item per task. `claimableAt` is the range key of the sparse claimable index
//! and exists **only while the task can be claimed**; everything else is a
//! plain attribute, so changing it never touches the index.

use crate::exact::Payload;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest payload accepted, measured as compact JSON.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Longest producer-supplied task id.
pub const MAX_TASK_ID_LEN: usize = 128;
/// Longest key DynamoDB holds (a partition key of up to 2,048 bytes): any
/// id a task stored by any producer may have.
pub const MAX_KEY_BYTES: usize = 2048;
/// History entries kept on an item (oldest dropped first), so items stay small.
pub const MAX_HISTORY: usize = 12;

/// Where a task is in its life. See [`crate::state`] for the legal moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStatus {
    /// Waiting to be claimed (it is in the claimable index).
    Pending,
    /// Claimed by a processor that is running it.
    Taken,
    /// Ran and succeeded. Terminal.
    Success,
    /// Ran and failed. Terminal.
    Failure,
    /// Waiting for its due date; not claimable until scheduler-start starts it.
    Scheduled,
    /// Cancelled while scheduled. Terminal.
    Cancelled,
    /// Shed: not started before its expiry. Out of the claimable index, in the
    /// shed index; an operator may redrive it. Terminal for the processor.
    Expired,
    /// Never started: a newer task with the same `supersedeKey` was written
    /// first (`supersededBy` names it). Terminal.
    Superseded,
}

impl TaskStatus {
    /// Every status, for exhaustive tests.
    pub const ALL: [TaskStatus; 8] = [
        Self::Pending,
        Self::Taken,
        Self::Success,
        Self::Failure,
        Self::Scheduled,
        Self::Cancelled,
        Self::Expired,
        Self::Superseded,
    ];

    /// The string stored in DynamoDB.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Taken => "TAKEN",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Scheduled => "SCHEDULED",
            Self::Cancelled => "CANCELLED",
            Self::Expired => "EXPIRED",
            Self::Superseded => "SUPERSEDED",
        }
    }

    /// No processor move leaves a terminal status (an operator may redrive
    /// a FAILURE or an EXPIRED task).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Success | Self::Failure | Self::Cancelled | Self::Expired | Self::Superseded
        )
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task item. Field names are the DynamoDB attribute names (camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub task_id: String,
    pub task_status: TaskStatus,
    /// Epoch milliseconds.
    pub task_created: u64,
    /// Epoch milliseconds of the last transition.
    pub task_updated: u64,
    /// Epoch milliseconds at which the task first became claimable. A task
    /// put back by "retry later" re-enters the index at this position, so a
    /// bounce never lets an old task overtake newer ones.
    pub ready_at: u64,
    /// claimable index range key; present only while the task is claimable: the
    /// epoch ms it became claimable, shifted by its priority
    /// ([`crate::priority`]; a normal task's key is its time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimable_at: Option<i64>,
    /// Epoch milliseconds of the last claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// Claim deadline, epoch seconds: a task not started by then is shed
    /// (never claimed).
    pub expires_at: u64,
    /// Deletion time, epoch **seconds**, stored as `ttl` (the attribute
    /// DynamoDB's TTL reads): `expiresAt` plus the retention, so outcomes,
    /// expired and cancelled tasks stay readable (per-user history) for the
    /// retention period. (A task's TTL, `ttlSeconds`, is how long it may
    /// wait to start; its deadline is `expiresAt`.)
    #[serde(rename = "ttl")]
    pub delete_at: u64,
    /// The claimable index's hash key, fixed at creation.
    pub lifo_shard: u32,
    /// Attempts this life so far: a claim counts one, a "retry later"
    /// gives it back, a redrive starts again from 0; at `MaxAttempts` a
    /// failed run (or a lapsed lease) ends the task FAILURE.
    #[serde(default)]
    pub attempts: u32,
    /// The producer's JSON object, numbers as written ([`Payload`]).
    #[serde(default)]
    pub payload: Payload,
    /// Why the task failed, or why it was last put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// End of the current claim's lease, epoch ms; present only while TAKEN.
    /// Past it, the task is claimable again (by anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<u64>,
    /// Who holds (or last held) the task: the process invocation that
    /// claimed it. Lets a claim whose answer was lost recognise its own
    /// write, where another processor claiming in the same millisecond
    /// with the same lease would look identical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    /// Fencing token: increases on every claim. An outcome is recorded only
    /// with the token of the claim that ran it.
    #[serde(default)]
    pub token: u64,
    /// One compact entry per transition, newest last (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    /// The producer's user, if any (sparse keys-only user index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Due date (`YYYY-MM-DD`) of a scheduled task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_date: Option<String>,
    /// Due index hash key `<dueDate>#<shard>`; present only while SCHEDULED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_key: Option<String>,
    /// The task's time to live, seconds: counted from creation, from the
    /// start of a scheduled task, and from a redrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
    /// When the task failed, epoch ms; present only while FAILURE (the
    /// range key of the sparse failed-task index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    /// A task put back after a failed (or refused) run is not claimable
    /// before this, epoch ms (process's `rest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<u64>,
    /// When the task was shed, epoch ms; present only while EXPIRED (the
    /// range key of the sparse shed index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shed_at: Option<u64>,
    /// The producer-facing create function woke the processor for this
    /// task itself: the stream's filter lets its insert pass by (trigger
    /// wakes the processor only for tasks written to the table directly).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announced: bool,
    /// Present when the payload lives in an item of its own (its size as
    /// JSON, bytes): the task item then carries no `payload`, so its moves
    /// stay small writes ([`crate::store::payload`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u32>,
    /// The X-Ray trace (root) of the invocation that created the task, when
    /// it was sampled: its run's subsegment is annotated with it, so the
    /// creation and the run can be joined. In no index projection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_trace: Option<String>,
    /// Latest wins per key: once a newer task with this key is written, this
    /// one never starts ([`crate::store::supersede`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersede_key: Option<String>,
    /// The newer task with the same key that superseded this one: set by
    /// its write (with the move to SUPERSEDED if this one was PENDING; a
    /// TAKEN one keeps its run, but no claim, retry or reclaim follows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// When the task was superseded, epoch ms; present only while
    /// SUPERSEDED (the range key of the sparse superseded index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<u64>,
    /// The priority's shift of the index key ([`crate::priority`]);
    /// absent for the normal priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "laneShift")]
    pub priority_shift: Option<i64>,
    /// Whose work this is, for the fair share (process's `select::fair`): the
    /// producer's `tenant`, else its `userId`; projected into the claimable index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// How long finished, expired and cancelled tasks stay readable by default.
pub const DEFAULT_RETENTION_SECONDS: u64 = 7 * 24 * 3600;

/// One transition in a task's history. Short attribute names keep items small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Status entered.
    #[serde(rename = "s")]
    pub status: TaskStatus,
    /// When, epoch ms.
    #[serde(rename = "t")]
    pub at: u64,
    /// Attempt count after the transition.
    #[serde(rename = "a")]
    pub attempt: u32,
    /// Fencing token of the claim it belongs to.
    #[serde(rename = "k")]
    pub token: u64,
    /// Why (failures, retries, lease expiry).
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Task {
    /// A new claimable task created at `now_ms`, expiring `ttl_seconds` later.
    pub fn new_pending(
        task_id: String,
        payload: impl Into<Payload>,
        now_ms: u64,
        ttl_seconds: u64,
        shard_count: u32,
    ) -> Self {
        let lifo_shard = shard_for(&task_id, shard_count);
        Self {
            task_id,
            task_status: TaskStatus::Pending,
            task_created: now_ms,
            task_updated: now_ms,
            ready_at: now_ms,
            claimable_at: Some(crate::priority::Priority::Normal.key(now_ms)),
            started_at: None,
            // Saturating: a TTL is bounded where it is read (create's
            // checks, the settings' parsers), and a time past the year
            // 584,942,417,355 is "never" either way.
            expires_at: (now_ms / 1000).saturating_add(ttl_seconds),
            delete_at: (now_ms / 1000)
                .saturating_add(ttl_seconds)
                .saturating_add(DEFAULT_RETENTION_SECONDS),
            lifo_shard,
            attempts: 0,
            payload: payload.into(),
            last_error: None,
            lease_until: None,
            claimed_by: None,
            token: 0,
            history: Vec::new(),
            user_id: None,
            due_date: None,
            due_key: None,
            ttl_seconds: Some(ttl_seconds),
            failed_at: None,
            retry_at: None,
            shed_at: None,
            announced: false,
            payload_bytes: None,
            created_trace: None,
            supersede_key: None,
            superseded_by: None,
            superseded_at: None,
            priority_shift: None,
            tenant: None,
        }
    }

    /// Puts the task in `priority`: its index key (if claimable) and the shift
    /// that a start or a redrive adds again.
    pub fn with_priority(mut self, priority: crate::priority::Priority) -> Self {
        self.priority_shift = priority.stored_shift();
        if self.claimable_at.is_some() {
            self.claimable_at = Some(priority.key(self.ready_at));
        }
        self
    }

    /// The task's priority.
    pub fn priority(&self) -> crate::priority::Priority {
        crate::priority::Priority::of_shift(self.priority_shift)
    }

    /// Keeps the task readable for `retention_seconds` after it expires.
    pub fn with_retention(mut self, retention_seconds: u64) -> Self {
        self.delete_at = self.expires_at.saturating_add(retention_seconds);
        self
    }

    /// Turns a new task into a scheduled one: not claimable (no
    /// `claimableAt`), in the due index under `<due_date>#<shard>` until
    /// scheduler-start starts it. `due_epoch_seconds` is the due date's
    /// midnight (UTC); `catch_up_seconds` how long after it a run may still
    /// start it; `ttl_seconds` the time to live counted from the start.
    pub fn scheduled(
        mut self,
        due_date: String,
        due_epoch_seconds: u64,
        due_shard_count: u32,
        catch_up_seconds: u64,
        ttl_seconds: u64,
        retention_seconds: u64,
    ) -> Self {
        let due_shard = shard_for(&self.task_id, due_shard_count);
        self.task_status = TaskStatus::Scheduled;
        self.claimable_at = None;
        self.due_key = Some(due_key(&due_date, due_shard));
        self.due_date = Some(due_date);
        self.ttl_seconds = Some(ttl_seconds);
        self.expires_at = due_epoch_seconds
            .saturating_add(catch_up_seconds)
            .saturating_add(ttl_seconds);
        self.delete_at = self.expires_at.saturating_add(retention_seconds);
        self
    }
    /// True while a claim's lease is running at `now_ms`: up to and with
    /// its last millisecond, as the moves' conditions read it (a lease has
    /// lapsed once `leaseUntil < now`).
    pub fn lease_is_live(&self, now_ms: u64) -> bool {
        self.lease_until.is_some_and(|l| l >= now_ms)
    }

    /// True once `expiresAt` has passed: such a task is never claimed.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at <= now_ms / 1000
    }

    /// True once its deletion time (`ttl`) has passed: DynamoDB's TTL
    /// deletes the task and its payload item, each on its own, within days.
    /// Until then either may still be read; a reader answers it as gone.
    pub fn is_past_retention(&self, now_ms: u64) -> bool {
        self.delete_at <= now_ms / 1000
    }
}

/// The due index hash key of a date and shard: `2026-12-06#07`.
pub fn due_key(due_date: &str, shard: u32) -> String {
    format!("{due_date}#{shard:02}")
}

/// A new time-ordered task id (UUID v7): ids sort by creation time. On a
/// thread that [`seed_task_ids`] seeded, the id's time is its clock's and
/// its random part the seed's next draw.
pub fn new_task_id() -> String {
    SEEDED_IDS.with_borrow_mut(|seeded| match seeded {
        Some((rng, clock)) => {
            let mut random = [0u8; 10];
            rng.fill(&mut random);
            uuid::Builder::from_unix_timestamp_millis(clock.now_ms(), &random)
                .into_uuid()
                .to_string()
        }
        None => uuid::Uuid::now_v7().to_string(),
    })
}

thread_local! {
    /// This thread's seeded ids ([`seed_task_ids`]), if any.
    static SEEDED_IDS: std::cell::RefCell<Option<(fastrand::Rng, crate::clock::SharedClock)>> =
        const { std::cell::RefCell::new(None) };
}

/// Makes the ids [`new_task_id`] gives on this thread a sequence drawn from
/// `seed`, stamped with `clock`'s time: a simulation that runs on one
/// thread gets the same ids from the same seed. `None`: back to UUID v7.
pub fn seed_task_ids(seeded: Option<(u64, crate::clock::SharedClock)>) {
    SEEDED_IDS.set(seeded.map(|(seed, clock)| (fastrand::Rng::with_seed(seed), clock)));
}

pub use crate::clock::now_ms;

/// The write shard of a task: a stable hash (FNV-1a) of its id, so the same
/// id always lands on the same shard and ids spread evenly.
pub fn shard_for(task_id: &str, shard_count: u32) -> u32 {
    if shard_count <= 1 {
        return 0;
    }
    (fnv1a(task_id.as_bytes()) % u64::from(shard_count)) as u32
}

/// FNV-1a, 64 bits: a stable hash (the same bytes, the same hash, on every
/// machine and run).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    #[test]
    fn ttl_is_in_seconds() {
        let t = Task::new_pending("a".into(), Map::new(), 1_764_547_200_123, 3600, 1);
        assert_eq!(t.expires_at, 1_764_547_200 + 3600);
        assert_eq!(
            t.delete_at,
            1_764_547_200 + 3600 + DEFAULT_RETENTION_SECONDS
        );
        assert_eq!(
            t.clone().with_retention(60).delete_at,
            1_764_547_200 + 3600 + 60
        );
        assert!(!t.is_expired(1_764_547_200_123));
        assert!(t.is_expired((1_764_547_200 + 3600) * 1000));
    }

    /// A TTL or retention near u64::MAX (once from `lifo --max-ttl-seconds
    /// 18446744073709551615` and a file's `ttlSeconds`) panicked here in a
    /// debug build and wrapped into the past in a release one: the times
    /// saturate at "never" instead.
    #[test]
    fn times_saturate_instead_of_wrapping() {
        let t = Task::new_pending("a".into(), Map::new(), 1_764_547_200_123, u64::MAX, 1);
        assert_eq!((t.expires_at, t.delete_at), (u64::MAX, u64::MAX));
        let t = Task::new_pending("b".into(), Map::new(), 1_764_547_200_123, 60, 1)
            .with_retention(u64::MAX - 1);
        assert_eq!(t.delete_at, u64::MAX);
        let t = t.scheduled("2026-12-01".into(), u64::MAX - 5, 1, 86_400, 60, 1);
        assert_eq!((t.expires_at, t.delete_at), (u64::MAX, u64::MAX));
        assert!(!t.is_expired(u64::MAX));
    }

    #[test]
    fn shards_are_stable_and_spread() {
        assert_eq!(shard_for("order-1", 1), 0);
        assert_eq!(shard_for("order-1", 8), shard_for("order-1", 8));
        let mut counts = [0u32; 8];
        for _ in 0..8000 {
            counts[shard_for(&new_task_id(), 8) as usize] += 1;
        }
        for c in counts {
            assert!((700..1300).contains(&c), "uneven shards: {counts:?}");
        }
    }

    #[test]
    fn item_round_trips_through_dynamodb_attributes() {
        let mut payload = Map::new();
        payload.insert("n".into(), Value::from(7));
        let t = Task::new_pending(new_task_id(), payload, 1_000_000, 60, 4);
        let item = crate::store::item::to_item(&t).unwrap();
        let back = crate::store::item::from_item(item).unwrap();
        assert_eq!(back, t);
    }
}
