//! Every DynamoDB expression the queue sends, built in one place: the
//! conditional update of each state transition (`transition.rs`), the
//! single-item writes outside the state machine: put, delete, the control
//! item (`items.rs`), the shard-group leases (`groups.rs`), and the index
//! queries (`queries.rs`).
//!
//! The unit tests beside each part show the exact strings, names and values
//! of each one, so a reviewer can read the whole protocol here.

use crate::model::{HistoryEntry, TaskStatus};
use crate::state::Transition;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::{BTreeMap, HashMap};

mod groups;
mod items;
mod queries;
mod transition;

pub use groups::*;
pub use items::*;
pub use queries::*;
pub use transition::*;

/// Attribute names of a task item.
pub mod attr {
    pub const TASK_ID: &str = "taskId";
    pub const STATUS: &str = "taskStatus";
    pub const UPDATED: &str = "taskUpdated";
    pub const READY_AT: &str = "readyAt";
    pub const CLAIMABLE_AT: &str = "claimableAt";
    pub const STARTED_AT: &str = "startedAt";
    pub const ATTEMPTS: &str = "attempts";
    /// The deletion time (DynamoDB's TTL attribute); a task's TTL is
    /// [`TTL_SECONDS`].
    pub const DELETE_AT: &str = "ttl";
    pub const EXPIRES_AT: &str = "expiresAt";
    pub const TTL_SECONDS: &str = "ttlSeconds";
    pub const DUE_KEY: &str = "dueKey";
    pub const USER_ID: &str = "userId";
    pub const CREATED: &str = "taskCreated";
    pub const SHARD: &str = "lifoShard";
    pub const LAST_ERROR: &str = "lastError";
    pub const LEASE_UNTIL: &str = "leaseUntil";
    pub const TOKEN: &str = "token";
    pub const HISTORY: &str = "history";
    pub const FAILED_AT: &str = "failedAt";
    pub const RETRY_AT: &str = "retryAt";
    pub const CLAIMED_BY: &str = "claimedBy";
    pub const SHED_AT: &str = "shedAt";
    pub const PAYLOAD: &str = "payload";
    pub const PAYLOAD_BYTES: &str = "payloadBytes";
    pub const SUPERSEDE_KEY: &str = "supersedeKey";
    pub const SUPERSEDED_BY: &str = "supersededBy";
    pub const SUPERSEDED_AT: &str = "supersededAt";
    /// The key item's newest task id.
    pub const LATEST: &str = "latest";
    /// The key item's newest task's creation, epoch ms: with the id, the
    /// order latest wins by ([`crate::store::supersede`]).
    pub const LATEST_CREATED: &str = "latestCreated";
    pub const PRIORITY_SHIFT: &str = "laneShift";
    pub const TENANT: &str = "tenant";
}

/// The sparse claimable index: hash `lifoShard`, range `claimableAt`, projecting
/// what a claim needs of an entry ([`crate::order::Candidate`]): `expiresAt`,
/// `leaseUntil`, `token`, `attempts`, `retryAt` and `tenant` (template.yaml's
/// projection, which lifo-local's template tests check against these
/// names). A task is in it from creation
/// until it finishes (SUCCESS / FAILURE remove `claimableAt`); a TAKEN task
/// stays in it, so when its lease expires it is claimable again at once,
/// without any recovery write.
pub const CLAIMABLE_INDEX: &str = "claimable-index";

/// The sparse, write-sharded due-date index: hash `dueKey` =
/// `<dueDate>#<shard>`, keys only. A task is in it only while SCHEDULED.
pub const DUE_INDEX: &str = "due-index";

/// The sparse, keys-only user index: hash `userId`, range `taskCreated`.
/// Neither key changes after creation, so status changes cost it nothing.
pub const USER_INDEX: &str = "user-index";

/// The sparse failed-task index: hash `lifoShard`, range `failedAt`
/// (epoch ms), projecting `lastError` and `token`. Only FAILURE tasks carry
/// `failedAt` (the fail and abandon moves write it, a redrive removes it),
/// so only failures pay for this index. Newest first, by time window and
/// `lastError` prefix, without a scan.
pub const FAILED_INDEX: &str = "failed-index";

/// The sparse shed index: hash `lifoShard`, range `shedAt` (epoch ms),
/// projecting `lastError` (the last bounce, if any: why it never ran) and
/// `token`. Only EXPIRED tasks carry `shedAt` (the shed move writes it, a
/// redrive removes it): sheds newest first, by time window, counted in the
/// minute they happen, without a scan.
pub const SHED_INDEX: &str = "shed-index";

/// The sparse superseded index: hash `lifoShard`, range `supersededAt`
/// (epoch ms), projecting `supersededBy`. Only SUPERSEDED tasks carry
/// `supersededAt`: counted and listed in the minute they happen, without a
/// scan.
pub const SUPERSEDED_INDEX: &str = "superseded-index";

/// Longest reason stored on an item, so items stay small.
pub const MAX_REASON_LEN: usize = 512;

/// Expression strings plus their placeholders, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// UpdateExpression or KeyConditionExpression.
    pub main: String,
    /// ConditionExpression or FilterExpression.
    pub condition: String,
    pub names: BTreeMap<&'static str, &'static str>,
    pub values: BTreeMap<&'static str, AttributeValue>,
}

impl Expr {
    pub fn names_map(&self) -> HashMap<String, String> {
        self.names
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// `None` when the expression uses no values (DynamoDB rejects an empty map).
    pub fn values_map(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| {
            self.values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        })
    }
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn status(v: TaskStatus) -> AttributeValue {
    s(v.as_str())
}

pub(crate) fn truncate(reason: &str) -> String {
    if reason.len() <= MAX_REASON_LEN {
        return reason.to_owned();
    }
    let mut end = MAX_REASON_LEN;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

/// What every move shares: when it happens, the fencing token the task
/// holds now (every condition but a supersede checks it) and the attempt
/// count after the move (its history entry records it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Step {
    pub now_ms: u64,
    pub token: u64,
    pub attempts: u32,
}

/// A task's lifetime from a moment on: how long it may wait to start, and
/// how long it stays readable after that (a start, a redrive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// The time to live when the item carries no `ttlSeconds`.
    pub ttl_seconds: u64,
    /// How long the task stays readable after it expires.
    pub retention_seconds: u64,
}

/// A move of the state machine with exactly the data its update writes, so
/// that the compiler checks each move's inputs (a claim cannot forget its
/// lease). [`Move::transition`] names it; [`transition`] builds its
/// conditional update.
///
/// `history` is the task's history so far, for the moves of a worker that
/// holds the item (finishes, retries): they rewrite it trimmed with the new
/// entry. The others append instead, so an item holds at most
/// `MAX_HISTORY + 2` entries.
#[derive(Debug, Clone, Copy)]
pub enum Move<'a> {
    Claim {
        lease_until: u64,
        /// The process invocation, written as `claimedBy`.
        claimed_by: &'a str,
    },
    Reclaim {
        lease_until: u64,
        claimed_by: &'a str,
        /// The attempt count must be below this.
        max_attempts: u32,
    },
    Succeed {
        history: &'a [HistoryEntry],
    },
    Fail {
        reason: &'a str,
        history: &'a [HistoryEntry],
    },
    Abandon {
        reason: &'a str,
    },
    RetryLater {
        reason: &'a str,
        history: &'a [HistoryEntry],
        /// Not claimable before this (epoch ms; 0: at once).
        retry_at: u64,
    },
    RetryAfterError {
        reason: &'a str,
        history: &'a [HistoryEntry],
        retry_at: u64,
    },
    Start {
        life: Lifetime,
    },
    Cancel,
    Redrive {
        reason: &'a str,
        life: Lifetime,
    },
    Shed {
        reason: &'a str,
    },
    Supersede {
        /// The newer task's id.
        by: &'a str,
        /// The key both share (the condition checks it).
        key: &'a str,
    },
    EndSuperseded,
}

impl Move<'_> {
    /// The transition this move makes.
    pub fn transition(&self) -> Transition {
        match self {
            Move::Claim { .. } => Transition::Claim,
            Move::Reclaim { .. } => Transition::Reclaim,
            Move::Succeed { .. } => Transition::Succeed,
            Move::Fail { .. } => Transition::Fail,
            Move::Abandon { .. } => Transition::Abandon,
            Move::RetryLater { .. } => Transition::RetryLater,
            Move::RetryAfterError { .. } => Transition::RetryAfterError,
            Move::Start { .. } => Transition::Start,
            Move::Cancel => Transition::Cancel,
            Move::Redrive { .. } => Transition::Redrive,
            Move::Shed { .. } => Transition::Shed,
            Move::Supersede { .. } => Transition::Supersede,
            Move::EndSuperseded => Transition::EndSuperseded,
        }
    }

    /// The attempt count this move records for a task its claim left at
    /// `claimed` attempts: a "retry later" (the runner was busy, or the
    /// program running it stopped first) gives the attempt back, as if it
    /// had not been made; every other move keeps it.
    pub fn attempts_after(&self, claimed: u32) -> u32 {
        match self {
            Move::RetryLater { .. } => claimed.saturating_sub(1),
            _ => claimed,
        }
    }

    /// Why, for the history entry (empty: none).
    pub fn reason(&self) -> &str {
        match self {
            Move::Fail { reason, .. }
            | Move::Abandon { reason }
            | Move::RetryLater { reason, .. }
            | Move::RetryAfterError { reason, .. }
            | Move::Redrive { reason, .. }
            | Move::Shed { reason } => reason,
            Move::Cancel => "cancelled",
            _ => "",
        }
    }

    /// The history entry this move records.
    pub fn entry(&self, step: &Step) -> HistoryEntry {
        let t = self.transition();
        let reason = self.reason();
        HistoryEntry {
            status: t.to(),
            at: step.now_ms,
            attempt: step.attempts,
            token: if t.is_claim() {
                step.token + 1
            } else {
                step.token
            },
            reason: (!reason.is_empty()).then(|| truncate(reason)),
        }
    }
}

fn to_av<T: serde::Serialize>(v: &T) -> AttributeValue {
    serde_dynamo::to_attribute_value(v).unwrap_or(AttributeValue::Null(true))
}

#[cfg(test)]
pub(crate) mod testing {
    //! What the tests of every part share: printing an expression.
    use super::*;
    use crate::model::HistoryEntry;

    pub(crate) fn show(v: &AttributeValue) -> String {
        match v {
            AttributeValue::S(s) => format!("S:{s}"),
            AttributeValue::N(n) => format!("N:{n}"),
            AttributeValue::L(l) => {
                format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", "))
            }
            AttributeValue::M(m) => {
                let mut kv: Vec<String> =
                    m.iter().map(|(k, v)| format!("{k}={}", show(v))).collect();
                kv.sort();
                format!("{{{}}}", kv.join(" "))
            }
            other => format!("{other:?}"),
        }
    }

    pub(crate) fn names(e: &Expr) -> String {
        e.names
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(crate) fn values(e: &Expr) -> String {
        e.values
            .iter()
            .map(|(k, v)| format!("{k}={}", show(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(crate) const NOW: u64 = 1_764_547_200_123;

    pub(crate) fn earlier() -> Vec<HistoryEntry> {
        vec![HistoryEntry {
            status: TaskStatus::Taken,
            at: NOW - 5,
            attempt: 1,
            token: 7,
            reason: None,
        }]
    }

    pub(crate) fn step() -> Step {
        Step {
            now_ms: NOW,
            token: 7,
            attempts: 1,
        }
    }

    pub(crate) const LIFE: Lifetime = Lifetime {
        ttl_seconds: 3600,
        retention_seconds: 86_400,
    };

    /// Move `t` with the tests' values (`reason` and `history` where the
    /// move has them).
    pub(crate) fn mv<'a>(t: Transition, reason: &'a str, history: &'a [HistoryEntry]) -> Move<'a> {
        match t {
            Transition::Claim => Move::Claim {
                lease_until: NOW + 62_000,
                claimed_by: "process-1",
            },
            Transition::Reclaim => Move::Reclaim {
                lease_until: NOW + 62_000,
                claimed_by: "process-1",
                max_attempts: 3,
            },
            Transition::Succeed => Move::Succeed { history },
            Transition::Fail => Move::Fail { reason, history },
            Transition::Abandon => Move::Abandon { reason },
            Transition::RetryLater => Move::RetryLater {
                reason,
                history,
                retry_at: 0,
            },
            Transition::RetryAfterError => Move::RetryAfterError {
                reason,
                history,
                retry_at: 0,
            },
            Transition::Start => Move::Start { life: LIFE },
            Transition::Cancel => Move::Cancel,
            Transition::Redrive => Move::Redrive { reason, life: LIFE },
            Transition::Shed => Move::Shed { reason },
            Transition::Supersede => Move::Supersede {
                by: "task-2",
                key: "device-1",
            },
            Transition::EndSuperseded => Move::EndSuperseded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn every_placeholder_is_defined_and_used() {
        let mut all: Vec<(String, Expr)> = Transition::ALL
            .iter()
            .map(|t| (t.to_string(), transition(&mv(*t, "r", &earlier()), &step())))
            .collect();
        all.extend([
            ("delete".into(), delete(1, NOW)),
            ("failed".into(), failed(0, 0, NOW, "")),
            ("failed prefix".into(), failed(0, 0, NOW, "x")),
            ("claimable now".into(), claimable_now(0, NOW, 0)),
            ("leased".into(), leased(0, NOW, 0)),
            ("shed".into(), shed_since(0, 0, NOW)),
            ("superseded".into(), superseded_since(0, 0, NOW)),
            ("claim read".into(), claim_read(0, NOW, 0)),
            (
                "old end".into(),
                old_end(0, crate::priority::Priority::High, 0),
            ),
            ("backing off".into(), backing_off(0, NOW, 0)),
            ("due".into(), due_partition("d#1")),
            ("user".into(), user_history("u")),
            ("put".into(), put_if_absent()),
            ("extend payload".into(), extend_payload(1)),
            ("pause".into(), set_paused(true, "r", NOW)),
            ("nudge".into(), nudge(NOW)),
            ("downstream limit".into(), downstream_limit(0, 1, 2, 3, NOW)),
            ("take group".into(), take_group(NOW, NOW, "o")),
            ("mark superseded".into(), mark_superseded("b", "k")),
            ("point key".into(), point_key("b", 2, None, 1)),
            ("point key again".into(), point_key("b", 2, Some("a"), 1)),
            ("release group".into(), release_group(1)),
        ]);
        for (what, e) in all {
            let text = format!("{} {}", e.main, e.condition);
            let used = |sigil: char| -> std::collections::BTreeSet<String> {
                text.split(|c: char| !(c.is_alphanumeric() || c == sigil || c == '_'))
                    .filter(|w| w.starts_with(sigil) && w.len() > 1)
                    .map(str::to_owned)
                    .collect()
            };
            let names: std::collections::BTreeSet<String> =
                e.names.keys().map(|k| (*k).to_owned()).collect();
            let values: std::collections::BTreeSet<String> =
                e.values.keys().map(|k| (*k).to_owned()).collect();
            assert_eq!(used('#'), names, "{what}: names");
            assert_eq!(used(':'), values, "{what}: values");
        }
    }
}
