//! Every DynamoDB expression the queue sends, built in one place.
//!
//! The unit tests at the bottom show the exact strings, names and values of
//! each one, so a reviewer can read the whole protocol here.

use crate::model::{HistoryEntry, MAX_HISTORY, TaskStatus};
use crate::state::Transition;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::{BTreeMap, HashMap};

/// Attribute names of a task item.
pub mod attr {
    pub const TASK_ID: &str = "taskId";
    pub const STATUS: &str = "taskStatus";
    pub const UPDATED: &str = "taskUpdated";
    pub const READY_AT: &str = "readyAt";
    pub const CLAIMABLE_AT: &str = "claimableAt";
    pub const STARTED_AT: &str = "startedAt";
    pub const ATTEMPTS: &str = "attempts";
    pub const TTL: &str = "ttl";
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
}

/// The sparse LIFO index: hash `lifoShard`, range `claimableAt`, projecting
/// `ttl`, `leaseUntil`, `token` and `attempts`. A task is in it from creation
/// until it finishes (SUCCESS / FAILURE remove `claimableAt`); a TAKEN task
/// stays in it, so when its lease expires it is claimable again at once,
/// without any recovery write.
pub const LIFO_INDEX: &str = "claimable-index";

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

fn truncate(reason: &str) -> String {
    if reason.len() <= MAX_REASON_LEN {
        return reason.to_owned();
    }
    let mut end = MAX_REASON_LEN;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

/// The values a transition writes and checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Step<'a> {
    pub now_ms: u64,
    /// The fencing token the task holds now; every condition checks it.
    pub token: u64,
    /// The attempt count after this step.
    pub attempts: u32,
    /// Claims: when the new lease ends (epoch ms).
    pub lease_until: u64,
    /// Reclaim: the attempt count must be below this.
    pub max_attempts: u32,
    /// Why (failures, retries, abandon); empty for none.
    pub reason: &'a str,
    /// Finishes and retries: the task's history so far, rewritten trimmed
    /// with the new entry. Claims and abandon append instead (they do not
    /// hold the item), so an item holds at most MAX_HISTORY + 2 entries.
    pub history: &'a [HistoryEntry],
    /// Start: the time to live when the item carries no `ttlSeconds`.
    pub ttl_seconds: u64,
    /// Start: how long the task stays readable after it expires.
    pub retention_seconds: u64,
    /// Retries: the task is not claimable before this (epoch ms; 0: at once).
    pub retry_at: u64,
}

impl Step<'_> {
    /// The history entry this step records for `t`.
    pub fn entry(&self, t: Transition) -> HistoryEntry {
        HistoryEntry {
            status: t.to(),
            at: self.now_ms,
            attempt: self.attempts,
            token: if t.is_claim() {
                self.token + 1
            } else {
                self.token
            },
            reason: (!self.reason.is_empty()).then(|| truncate(self.reason)),
        }
    }
}

fn to_av<T: serde::Serialize>(v: &T) -> AttributeValue {
    serde_dynamo::to_attribute_value(v).unwrap_or(AttributeValue::Null(true))
}

/// The conditional update that applies `t` with the values of `step`.
pub fn transition(t: Transition, step: &Step<'_>) -> Expr {
    use attr::*;
    let entry = step.entry(t);
    let mut names = BTreeMap::from([
        ("#status", STATUS),
        ("#updated", UPDATED),
        ("#token", TOKEN),
        ("#history", HISTORY),
    ]);
    let mut values = BTreeMap::from([
        (":from", status(t.from())),
        (":to", status(t.to())),
        (":now", n(step.now_ms)),
        (":token", n(step.token)),
    ]);
    let append = |values: &mut BTreeMap<&'static str, AttributeValue>| {
        values.insert(":empty", AttributeValue::L(Vec::new()));
        values.insert(":entry", AttributeValue::L(vec![to_av(&entry)]));
    };
    let rewrite = |values: &mut BTreeMap<&'static str, AttributeValue>| {
        let keep = step.history.len().saturating_sub(MAX_HISTORY - 1);
        let mut history: Vec<HistoryEntry> = step.history[keep..].to_vec();
        history.push(entry.clone());
        values.insert(":history", to_av(&history));
    };
    let (main, condition) = match t {
        Transition::Claim | Transition::Reclaim => {
            names.extend([
                ("#startedAt", STARTED_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#attempts", ATTEMPTS),
                ("#expiresAt", EXPIRES_AT),
            ]);
            values.extend([
                (":lease", n(step.lease_until)),
                (":newToken", n(step.token + 1)),
                (":attempts", n(step.attempts)),
                (":nowSec", n(step.now_ms / 1000)),
            ]);
            append(&mut values);
            names.insert("#retryAt", RETRY_AT);
            let update = "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
                 #token = :newToken, #attempts = :attempts, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #retryAt";
            if t == Transition::Claim {
                names.insert("#claimableAt", CLAIMABLE_AT);
                (
                    update,
                    "#status = :from AND #token = :token AND attribute_exists(#claimableAt) AND #expiresAt > :nowSec \
                     AND (attribute_not_exists(#retryAt) OR #retryAt <= :now)",
                )
            } else {
                values.insert(":maxAttempts", n(step.max_attempts));
                (
                    update,
                    "#status = :from AND #token = :token AND #leaseUntil < :now \
                     AND #attempts < :maxAttempts AND #expiresAt > :nowSec",
                )
            }
        }
        Transition::Succeed => {
            names.extend([("#claimableAt", CLAIMABLE_AT), ("#leaseUntil", LEASE_UNTIL)]);
            rewrite(&mut values);
            (
                "SET #status = :to, #updated = :now, #history = :history REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
        Transition::Fail => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#failedAt", FAILED_AT),
            ]);
            values.insert(":reason", s(truncate(step.reason)));
            rewrite(&mut values);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
                 #history = :history REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
        Transition::Abandon => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#failedAt", FAILED_AT),
            ]);
            values.insert(":reason", s(truncate(step.reason)));
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token AND #leaseUntil < :now",
            )
        }
        Transition::RetryLater => {
            names.extend([
                ("#attempts", ATTEMPTS),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
            ]);
            names.insert("#retryAt", RETRY_AT);
            values.insert(":attempts", n(step.attempts));
            values.insert(":reason", s(truncate(step.reason)));
            values.insert(":retryAt", n(step.retry_at));
            rewrite(&mut values);
            (
                "SET #status = :to, #updated = :now, #attempts = :attempts, #lastError = :reason, \
                 #retryAt = :retryAt, #history = :history REMOVE #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
        Transition::Start => {
            names.extend([
                ("#readyAt", READY_AT),
                ("#claimableAt", CLAIMABLE_AT),
                ("#expiresAt", EXPIRES_AT),
                ("#ttl", TTL),
                ("#ttlSeconds", TTL_SECONDS),
                ("#dueKey", DUE_KEY),
            ]);
            values.extend([
                (":nowSec", n(step.now_ms / 1000)),
                (":defaultTtl", n(step.ttl_seconds)),
                (
                    ":deleteBase",
                    n(step.now_ms / 1000 + step.retention_seconds),
                ),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #readyAt = :now, #claimableAt = :now, \
                 #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
                 #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey",
                "#status = :from AND #token = :token",
            )
        }
        Transition::Cancel => {
            names.insert("#dueKey", DUE_KEY);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey",
                "#status = :from AND #token = :token",
            )
        }
        Transition::Redrive => {
            names.extend([
                ("#readyAt", READY_AT),
                ("#claimableAt", CLAIMABLE_AT),
                ("#attempts", ATTEMPTS),
                ("#expiresAt", EXPIRES_AT),
                ("#ttl", TTL),
                ("#ttlSeconds", TTL_SECONDS),
                ("#leaseUntil", LEASE_UNTIL),
                ("#startedAt", STARTED_AT),
                ("#failedAt", FAILED_AT),
                ("#retryAt", RETRY_AT),
            ]);
            values.extend([
                (":zero", n(0)),
                (":nowSec", n(step.now_ms / 1000)),
                (":defaultTtl", n(step.ttl_seconds)),
                (
                    ":deleteBase",
                    n(step.now_ms / 1000 + step.retention_seconds),
                ),
                (":pending", status(TaskStatus::Pending)),
                (":taken", status(TaskStatus::Taken)),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #readyAt = :now, #claimableAt = :now, \
                 #attempts = :zero, \
                 #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
                 #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #failedAt, #leaseUntil, #startedAt, #retryAt",
                "#token = :token AND (#status = :from OR (#expiresAt <= :nowSec \
                 AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))",
            )
        }
        Transition::RetryAfterError => {
            names.extend([
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#retryAt", RETRY_AT),
            ]);
            values.insert(":reason", s(truncate(step.reason)));
            values.insert(":retryAt", n(step.retry_at));
            rewrite(&mut values);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #retryAt = :retryAt, \
                 #history = :history REMOVE #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
    };
    Expr {
        main: main.to_owned(),
        condition: condition.to_owned(),
        names,
        values,
    }
}

/// Query of one partition of the due index (`<dueDate>#<shard>`).
pub fn due_partition(due_key: &str) -> Expr {
    Expr {
        main: "#dueKey = :dueKey".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([("#dueKey", attr::DUE_KEY)]),
        values: BTreeMap::from([(":dueKey", s(due_key))]),
    }
}

/// Query of a user's tasks in the user index (newest first with
/// `ScanIndexForward = false`).
pub fn user_history(user_id: &str) -> Expr {
    Expr {
        main: "#userId = :userId".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([("#userId", attr::USER_ID)]),
        values: BTreeMap::from([(":userId", s(user_id))]),
    }
}

/// Condition of the put of a producer-supplied id: the first write wins, a
/// second create with the same id writes nothing.
pub fn put_if_absent() -> Expr {
    Expr {
        main: String::new(),
        condition: "attribute_not_exists(#taskId)".to_owned(),
        names: BTreeMap::from([("#taskId", attr::TASK_ID)]),
        values: BTreeMap::new(),
    }
}

/// Condition of an operator's delete (`DeleteItem`): the task the operator
/// saw (same token), unless it is running under a live lease. On a task
/// that is gone the condition fails, so nothing is ever recreated.
pub fn delete(token: u64, now_ms: u64) -> Expr {
    use attr::*;
    Expr {
        main: String::new(),
        condition: "#token = :token AND (#status <> :taken OR #leaseUntil < :now)".to_owned(),
        names: BTreeMap::from([
            ("#token", TOKEN),
            ("#status", STATUS),
            ("#leaseUntil", LEASE_UNTIL),
        ]),
        values: BTreeMap::from([
            (":token", n(token)),
            (":taken", status(TaskStatus::Taken)),
            (":now", n(now_ms)),
        ]),
    }
}

/// Query of one shard of the failed-task index: failures in
/// `[since_ms, until_ms]`, read newest first (`ScanIndexForward = false`),
/// and, with a non-empty `error_prefix`, only those whose `lastError`
/// starts with it (a filter: DynamoDB still reads the others).
pub fn failed(shard: u32, since_ms: u64, until_ms: u64, error_prefix: &str) -> Expr {
    use attr::*;
    let mut e = Expr {
        main: "#shard = :shard AND #failedAt BETWEEN :since AND :until".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([("#shard", SHARD), ("#failedAt", FAILED_AT)]),
        values: BTreeMap::from([
            (":shard", n(shard)),
            (":since", n(since_ms)),
            (":until", n(until_ms)),
        ]),
    };
    if !error_prefix.is_empty() {
        e.condition = "begins_with(#lastError, :prefix)".to_owned();
        e.names.insert("#lastError", LAST_ERROR);
        e.values.insert(":prefix", s(error_prefix));
    }
    e
}

/// Scan filter of the tasks started (claimed) since `since_ms`, for the
/// console's freshness chart on a local table; `main` is the projection
/// (`startedAt`, `readyAt`: age at start is their difference).
pub fn started_since(since_ms: u64) -> Expr {
    use attr::*;
    Expr {
        main: "#startedAt, #readyAt".to_owned(),
        condition: "#startedAt >= :since".to_owned(),
        names: BTreeMap::from([("#startedAt", STARTED_AT), ("#readyAt", READY_AT)]),
        values: BTreeMap::from([(":since", n(since_ms))]),
    }
}

/// Pause or resume: the control item's update (it is created on first
/// use; no condition, the last operator wins).
pub fn set_paused(paused: bool, reason: &str, now_ms: u64) -> Expr {
    Expr {
        main: "SET #paused = :paused, #changedAt = :now, #reason = :reason".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([
            ("#paused", "paused"),
            ("#changedAt", "changedAt"),
            ("#reason", "reason"),
        ]),
        values: BTreeMap::from([
            (":paused", AttributeValue::Bool(paused)),
            (":now", n(now_ms)),
            (":reason", s(truncate(reason))),
        ]),
    }
}

/// An operator's nudge: touches the control item, whose stream record wakes
/// the processor (unless the queue is paused).
pub fn nudge(now_ms: u64) -> Expr {
    Expr {
        main: "SET #nudgedAt = :now".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([("#nudgedAt", "nudgedAt")]),
        values: BTreeMap::from([(":now", n(now_ms))]),
    }
}

/// A processor takes its shard group's lease (the `#group-<g>` item): when
/// it is free or its lease ended. A new token each time; the owner is the
/// invocation, for logs.
pub fn take_group(lease_until: u64, now_ms: u64, owner: &str) -> Expr {
    Expr {
        main: "SET #leaseUntil = :lease, #token = if_not_exists(#token, :zero) + :one, \
               #owner = :owner"
            .to_owned(),
        condition: "attribute_not_exists(#leaseUntil) OR #leaseUntil < :now".to_owned(),
        names: BTreeMap::from([
            ("#leaseUntil", attr::LEASE_UNTIL),
            ("#token", attr::TOKEN),
            ("#owner", "owner"),
        ]),
        values: BTreeMap::from([
            (":lease", n(lease_until)),
            (":now", n(now_ms)),
            (":zero", n(0)),
            (":one", n(1)),
            (":owner", s(truncate(owner))),
        ]),
    }
}

/// A processor gives its group's lease back at the end of an invocation,
/// if it still holds it (same token).
pub fn release_group(token: u64) -> Expr {
    Expr {
        main: "SET #leaseUntil = :zero".to_owned(),
        condition: "#token = :token".to_owned(),
        names: BTreeMap::from([("#leaseUntil", attr::LEASE_UNTIL), ("#token", attr::TOKEN)]),
        values: BTreeMap::from([(":zero", n(0)), (":token", n(token))]),
    }
}

/// A query of one shard of the LIFO index: the key condition every such
/// query shares (`horizon_ms` bounds the range key from below) and the
/// filter `condition` over `names` and `values`.
fn shard_query(
    shard: u32,
    horizon_ms: u64,
    condition: &str,
    names: &[(&'static str, &'static str)],
    values: Vec<(&'static str, AttributeValue)>,
) -> Expr {
    use attr::*;
    let mut e = Expr {
        main: "#shard = :shard AND #claimableAt > :horizon".to_owned(),
        condition: condition.to_owned(),
        names: BTreeMap::from([("#shard", SHARD), ("#claimableAt", CLAIMABLE_AT)]),
        values: BTreeMap::from([(":shard", n(shard)), (":horizon", n(horizon_ms))]),
    };
    e.names.extend(names.iter().copied());
    e.values.extend(values);
    e
}

/// Query of one shard of the LIFO index: claimable tasks, read newest first
/// (`ScanIndexForward = false`; oldest first for a FIFO comparison run).
/// `horizon_ms` bounds the range key from below: a task that became
/// claimable before it has certainly expired (ttl ≤ readyAt + the largest TTL
/// allowed), so expired leftovers are never even read. The filter drops
/// tasks whose own ttl has passed before DynamoDB deleted them, TAKEN tasks
/// whose lease is still running, and tasks backing off after a failed run
/// (`retryAt` in the future): everything else keeps its order.
pub fn claimable(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "#expiresAt > :nowSec AND (attribute_not_exists(#leaseUntil) OR #leaseUntil < :now) \
         AND (attribute_not_exists(#retryAt) OR #retryAt <= :now)",
        &[
            ("#expiresAt", attr::EXPIRES_AT),
            ("#leaseUntil", attr::LEASE_UNTIL),
            ("#retryAt", attr::RETRY_AT),
        ],
        vec![(":nowSec", n(now_ms / 1000)), (":now", n(now_ms))],
    )
}

/// Tasks of one shard backing off after a failed run (PENDING, not
/// claimable before their `retryAt`; a COUNT query for `lifo stats`).
pub fn backing_off(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "#retryAt > :now AND #expiresAt > :nowSec",
        &[
            ("#retryAt", attr::RETRY_AT),
            ("#expiresAt", attr::EXPIRES_AT),
        ],
        vec![(":now", n(now_ms)), (":nowSec", n(now_ms / 1000))],
    )
}

/// Tasks of one shard running under a live lease (TAKEN; a COUNT query of
/// the LIFO index for `lifo stats`). `leaseUntil` exists only while TAKEN.
pub fn leased(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "#leaseUntil >= :now",
        &[("#leaseUntil", attr::LEASE_UNTIL)],
        vec![(":now", n(now_ms))],
    )
}

/// Tasks of one shard shed by expiry since `since_ms`: their claim deadline
/// passed in `[since, now]` with no outcome and no running lease (never
/// claimed; put back by "retry later" or an error and not claimed again in
/// time; or TAKEN with a lapsed lease). Abandoned tasks have left the index
/// as FAILURE and are not counted. A shed task keeps its index entry until
/// DynamoDB deletes it, so the index answers this without a scan;
/// `horizon_ms` (`since` − the largest TTL) bounds what is read.
pub fn expired_since(shard: u32, since_ms: u64, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "#expiresAt BETWEEN :sinceSec AND :nowSec \
         AND (attribute_not_exists(#leaseUntil) OR #leaseUntil < :now)",
        &[
            ("#expiresAt", attr::EXPIRES_AT),
            ("#leaseUntil", attr::LEASE_UNTIL),
        ],
        vec![
            (":sinceSec", n(since_ms / 1000)),
            (":nowSec", n(now_ms / 1000)),
            (":now", n(now_ms)),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HistoryEntry;

    fn show(v: &AttributeValue) -> String {
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

    fn names(e: &Expr) -> String {
        e.names
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn values(e: &Expr) -> String {
        e.values
            .iter()
            .map(|(k, v)| format!("{k}={}", show(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    const NOW: u64 = 1_764_547_200_123;

    fn earlier() -> Vec<HistoryEntry> {
        vec![HistoryEntry {
            status: TaskStatus::Taken,
            at: NOW - 5,
            attempt: 1,
            token: 7,
            reason: None,
        }]
    }

    fn step<'a>(reason: &'a str, history: &'a [HistoryEntry]) -> Step<'a> {
        Step {
            now_ms: NOW,
            token: 7,
            attempts: 1,
            lease_until: NOW + 62_000,
            max_attempts: 3,
            reason,
            history,
            ..Step::default()
        }
    }

    #[test]
    fn claim() {
        let e = transition(Transition::Claim, &step("", &[]));
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
             #token = :newToken, #attempts = :attempts, \
             #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #retryAt"
        );
        assert_eq!(
            e.condition,
            "#status = :from AND #token = :token AND attribute_exists(#claimableAt) AND #expiresAt > :nowSec \
             AND (attribute_not_exists(#retryAt) OR #retryAt <= :now)"
        );
        assert_eq!(
            names(&e),
            "#attempts=attempts #claimableAt=claimableAt #expiresAt=expiresAt #history=history #leaseUntil=leaseUntil \
             #retryAt=retryAt #startedAt=startedAt #status=taskStatus #token=token #updated=taskUpdated"
        );
        assert_eq!(
            values(&e),
            ":attempts=N:1 :empty=[] :entry=[{a=N:1 k=N:8 s=S:TAKEN t=N:1764547200123}] \
             :from=S:PENDING :lease=N:1764547262123 :newToken=N:8 :now=N:1764547200123 \
             :nowSec=N:1764547200 :to=S:TAKEN :token=N:7"
        );
    }

    #[test]
    fn reclaim_requires_an_expired_lease_and_attempts_left() {
        let e = transition(Transition::Reclaim, &step("", &[]));
        assert_eq!(
            e.condition,
            "#status = :from AND #token = :token AND #leaseUntil < :now \
             AND #attempts < :maxAttempts AND #expiresAt > :nowSec"
        );
        assert_eq!(e.main, transition(Transition::Claim, &step("", &[])).main);
        assert_eq!(e.values[":from"], AttributeValue::S("TAKEN".into()));
        assert_eq!(e.values[":maxAttempts"], AttributeValue::N("3".into()));
    }

    #[test]
    fn succeed_rewrites_the_history_and_leaves_the_index() {
        let h = earlier();
        let e = transition(Transition::Succeed, &step("", &h));
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #history = :history REMOVE #claimableAt, #leaseUntil"
        );
        assert_eq!(e.condition, "#status = :from AND #token = :token");
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #history=history #leaseUntil=leaseUntil #status=taskStatus \
             #token=token #updated=taskUpdated"
        );
        assert_eq!(
            values(&e),
            ":from=S:TAKEN :history=[{a=N:1 k=N:7 s=S:TAKEN t=N:1764547200118}, \
             {a=N:1 k=N:7 s=S:SUCCESS t=N:1764547200123}] :now=N:1764547200123 :to=S:SUCCESS :token=N:7"
        );
    }

    #[test]
    fn fail_records_the_reason() {
        let h = earlier();
        let e = transition(Transition::Fail, &step("HTTP 500", &h));
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
             #history = :history REMOVE #claimableAt, #leaseUntil"
        );
        assert_eq!(e.condition, "#status = :from AND #token = :token");
        assert_eq!(e.names["#failedAt"], "failedAt");
        assert_eq!(e.values[":reason"], AttributeValue::S("HTTP 500".into()));
        assert!(
            show(&e.values[":history"])
                .ends_with("{a=N:1 k=N:7 r=S:HTTP 500 s=S:FAILURE t=N:1764547200123}]")
        );
    }

    #[test]
    fn abandon_requires_the_lease_to_have_expired() {
        let e = transition(
            Transition::Abandon,
            &step("lease expired after 3 attempts", &[]),
        );
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
             #history = list_append(if_not_exists(#history, :empty), :entry) \
             REMOVE #claimableAt, #leaseUntil"
        );
        assert_eq!(
            e.condition,
            "#status = :from AND #token = :token AND #leaseUntil < :now"
        );
        assert_eq!(e.values[":to"], AttributeValue::S("FAILURE".into()));
    }

    #[test]
    fn retry_later_gives_the_attempt_back_and_stays_in_the_index() {
        let h = earlier();
        let mut s = step("busy", &h);
        s.attempts = 0;
        let e = transition(Transition::RetryLater, &s);
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #attempts = :attempts, #lastError = :reason, \
             #retryAt = :retryAt, #history = :history REMOVE #leaseUntil"
        );
        assert_eq!(e.condition, "#status = :from AND #token = :token");
        assert_eq!(
            names(&e),
            "#attempts=attempts #history=history #lastError=lastError #leaseUntil=leaseUntil \
             #retryAt=retryAt #status=taskStatus #token=token #updated=taskUpdated"
        );
        assert_eq!(e.values[":attempts"], AttributeValue::N("0".into()));
        assert_eq!(
            e.values[":retryAt"],
            AttributeValue::N("0".into()),
            "no rest asked"
        );
        assert_eq!(e.values[":to"], AttributeValue::S("PENDING".into()));
    }

    #[test]
    fn start_makes_a_scheduled_task_claimable_with_its_own_ttl() {
        let mut s = step("", &[]);
        s.token = 0;
        s.ttl_seconds = 3600;
        s.retention_seconds = 86_400;
        let e = transition(Transition::Start, &s);
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #readyAt = :now, #claimableAt = :now, \
             #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
             #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
             #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey"
        );
        assert_eq!(e.condition, "#status = :from AND #token = :token");
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #dueKey=dueKey #expiresAt=expiresAt #history=history #readyAt=readyAt \
             #status=taskStatus #token=token #ttl=ttl #ttlSeconds=ttlSeconds #updated=taskUpdated"
        );
        assert_eq!(
            values(&e),
            ":defaultTtl=N:3600 :deleteBase=N:1764633600 :empty=[] \
             :entry=[{a=N:1 k=N:0 s=S:PENDING t=N:1764547200123}] :from=S:SCHEDULED :now=N:1764547200123 \
             :nowSec=N:1764547200 :to=S:PENDING :token=N:0"
        );
    }

    #[test]
    fn cancel_only_leaves_the_due_index() {
        let mut s = step("", &[]);
        s.token = 0;
        s.attempts = 0;
        let e = transition(Transition::Cancel, &s);
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, \
             #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey"
        );
        assert_eq!(e.condition, "#status = :from AND #token = :token");
        assert_eq!(e.values[":from"], AttributeValue::S("SCHEDULED".into()));
        assert_eq!(e.values[":to"], AttributeValue::S("CANCELLED".into()));
    }

    #[test]
    fn redrive_makes_a_failed_or_shed_task_new_work() {
        let mut s = step("redriven by lifo tasks retry", &[]);
        s.attempts = 0;
        s.ttl_seconds = 3600;
        s.retention_seconds = 86_400;
        let e = transition(Transition::Redrive, &s);
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #readyAt = :now, #claimableAt = :now, \
             #attempts = :zero, \
             #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
             #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
             #history = list_append(if_not_exists(#history, :empty), :entry) \
             REMOVE #failedAt, #leaseUntil, #startedAt, #retryAt"
        );
        assert_eq!(
            e.condition,
            "#token = :token AND (#status = :from OR (#expiresAt <= :nowSec \
             AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))"
        );
        assert_eq!(
            names(&e),
            "#attempts=attempts #claimableAt=claimableAt #expiresAt=expiresAt #failedAt=failedAt \
             #history=history #leaseUntil=leaseUntil #readyAt=readyAt #retryAt=retryAt #startedAt=startedAt \
             #status=taskStatus #token=token #ttl=ttl #ttlSeconds=ttlSeconds #updated=taskUpdated"
        );
        assert_eq!(
            values(&e),
            ":defaultTtl=N:3600 :deleteBase=N:1764633600 :empty=[] \
             :entry=[{a=N:0 k=N:7 r=S:redriven by lifo tasks retry s=S:PENDING t=N:1764547200123}] \
             :from=S:FAILURE :now=N:1764547200123 :nowSec=N:1764547200 :pending=S:PENDING \
             :taken=S:TAKEN :to=S:PENDING :token=N:7 :zero=N:0"
        );
    }

    #[test]
    fn delete_spares_a_running_task_and_never_recreates_one() {
        let e = delete(7, NOW);
        assert_eq!(e.main, "");
        assert_eq!(
            e.condition,
            "#token = :token AND (#status <> :taken OR #leaseUntil < :now)"
        );
        assert_eq!(
            names(&e),
            "#leaseUntil=leaseUntil #status=taskStatus #token=token"
        );
        assert_eq!(values(&e), ":now=N:1764547200123 :taken=S:TAKEN :token=N:7");
    }

    #[test]
    fn started_since_projects_the_two_times_of_age_at_start() {
        let e = started_since(NOW - 3_600_000);
        assert_eq!(e.main, "#startedAt, #readyAt");
        assert_eq!(e.condition, "#startedAt >= :since");
        assert_eq!(names(&e), "#readyAt=readyAt #startedAt=startedAt");
        assert_eq!(values(&e), ":since=N:1764543600123");
    }

    #[test]
    fn failed_query_by_window_and_error_prefix() {
        let e = failed(2, NOW - 3_600_000, NOW, "");
        assert_eq!(
            e.main,
            "#shard = :shard AND #failedAt BETWEEN :since AND :until"
        );
        assert_eq!(e.condition, "");
        assert_eq!(names(&e), "#failedAt=failedAt #shard=lifoShard");
        assert_eq!(
            values(&e),
            ":shard=N:2 :since=N:1764543600123 :until=N:1764547200123"
        );
        let e = failed(0, 0, NOW, "HTTP 5");
        assert_eq!(e.condition, "begins_with(#lastError, :prefix)");
        assert_eq!(
            names(&e),
            "#failedAt=failedAt #lastError=lastError #shard=lifoShard"
        );
        assert_eq!(e.values[":prefix"], AttributeValue::S("HTTP 5".into()));
    }

    #[test]
    fn pause_resume_and_nudge_touch_only_the_control_item() {
        let e = set_paused(true, "downstream is down", NOW);
        assert_eq!(
            e.main,
            "SET #paused = :paused, #changedAt = :now, #reason = :reason"
        );
        assert_eq!(e.condition, "");
        assert_eq!(
            names(&e),
            "#changedAt=changedAt #paused=paused #reason=reason"
        );
        assert_eq!(
            values(&e),
            ":now=N:1764547200123 :paused=Bool(true) :reason=S:downstream is down"
        );
        let e = nudge(NOW);
        assert_eq!(e.main, "SET #nudgedAt = :now");
        assert_eq!(values(&e), ":now=N:1764547200123");
    }

    #[test]
    fn a_group_lease_is_taken_when_free_and_given_back_only_by_its_holder() {
        let e = take_group(NOW + 62_000, NOW, "req-1");
        assert_eq!(
            e.main,
            "SET #leaseUntil = :lease, #token = if_not_exists(#token, :zero) + :one, #owner = :owner"
        );
        assert_eq!(
            e.condition,
            "attribute_not_exists(#leaseUntil) OR #leaseUntil < :now"
        );
        assert_eq!(
            names(&e),
            "#leaseUntil=leaseUntil #owner=owner #token=token"
        );
        assert_eq!(
            values(&e),
            ":lease=N:1764547262123 :now=N:1764547200123 :one=N:1 :owner=S:req-1 :zero=N:0"
        );
        let e = release_group(4);
        assert_eq!(e.main, "SET #leaseUntil = :zero");
        assert_eq!(e.condition, "#token = :token");
        assert_eq!(values(&e), ":token=N:4 :zero=N:0");
    }

    #[test]
    fn retry_after_error_keeps_the_attempt_and_rests_until_its_backoff_ends() {
        let h = earlier();
        let mut st = step("HTTP 500", &h);
        st.retry_at = NOW + 10_000;
        let e = transition(Transition::RetryAfterError, &st);
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #lastError = :reason, #retryAt = :retryAt, \
             #history = :history REMOVE #leaseUntil"
        );
        assert!(!e.names.contains_key("#attempts"));
        assert_eq!(
            e.values[":retryAt"],
            AttributeValue::N("1764547210123".into())
        );
    }

    #[test]
    fn every_transition_is_fenced_by_the_token_and_the_from_status() {
        for t in Transition::ALL {
            let e = transition(t, &step("r", &[]));
            if t == Transition::Redrive {
                assert!(
                    e.condition
                        .starts_with("#token = :token AND (#status = :from OR")
                );
            } else {
                assert!(
                    e.condition
                        .starts_with("#status = :from AND #token = :token"),
                    "{t}"
                );
            }
            assert_eq!(
                e.values[":from"],
                AttributeValue::S(t.from().as_str().into())
            );
            assert_eq!(e.values[":to"], AttributeValue::S(t.to().as_str().into()));
            // The LIFO index key goes exactly when a claimed task finishes,
            // and is set anew exactly when a task becomes new work (a
            // scheduled task starts, a failed or shed task is redriven).
            assert_eq!(
                e.main.contains("REMOVE #claimableAt"),
                t.to().is_terminal() && t.from() == TaskStatus::Taken,
                "{t}"
            );
            assert_eq!(
                e.main.contains("#claimableAt = :now"),
                matches!(t, Transition::Start | Transition::Redrive),
                "{t}"
            );
            // The failed index key exists exactly while FAILURE.
            assert_eq!(
                e.main.contains("#failedAt = :now"),
                t.to() == TaskStatus::Failure,
                "{t}"
            );
            assert_eq!(
                e.main.contains("REMOVE #failedAt"),
                t.from() == TaskStatus::Failure,
                "{t}"
            );
            // The due index key goes exactly when a task leaves SCHEDULED.
            assert_eq!(
                e.main.contains("REMOVE #dueKey"),
                t.from() == TaskStatus::Scheduled,
                "{t}"
            );
            // The lease exists exactly while TAKEN.
            assert_eq!(
                e.main.contains("#leaseUntil = :lease"),
                t.to() == TaskStatus::Taken,
                "{t}"
            );
        }
    }

    /// DynamoDB refuses a request whose names or values include one the
    /// expressions do not use, and one that uses a placeholder it lacks.
    #[test]
    fn every_placeholder_is_defined_and_used() {
        let mut all: Vec<(String, Expr)> = Transition::ALL
            .iter()
            .map(|t| (t.to_string(), transition(*t, &step("r", &earlier()))))
            .collect();
        all.extend([
            ("delete".into(), delete(1, NOW)),
            ("failed".into(), failed(0, 0, NOW, "")),
            ("failed prefix".into(), failed(0, 0, NOW, "x")),
            ("claimable".into(), claimable(0, NOW, 0)),
            ("leased".into(), leased(0, NOW, 0)),
            ("expired".into(), expired_since(0, 0, NOW, 0)),
            ("backing off".into(), backing_off(0, NOW, 0)),
            ("due".into(), due_partition("d#1")),
            ("user".into(), user_history("u")),
            ("put".into(), put_if_absent()),
            ("pause".into(), set_paused(true, "r", NOW)),
            ("nudge".into(), nudge(NOW)),
            ("take group".into(), take_group(NOW, NOW, "o")),
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

    #[test]
    fn history_is_bounded() {
        let long: Vec<HistoryEntry> = (0..40)
            .map(|i| HistoryEntry {
                status: TaskStatus::Taken,
                at: i,
                attempt: 1,
                token: i,
                reason: None,
            })
            .collect();
        let e = transition(Transition::Succeed, &step("", &long));
        let AttributeValue::L(h) = &e.values[":history"] else {
            panic!("history is a list")
        };
        assert_eq!(h.len(), MAX_HISTORY);
        assert!(show(h.last().unwrap()).contains("s=S:SUCCESS"));
    }

    #[test]
    fn reasons_are_truncated_on_a_char_boundary() {
        let long = "é".repeat(MAX_REASON_LEN);
        let e = transition(Transition::Fail, &step(&long, &[]));
        let AttributeValue::S(stored) = &e.values[":reason"] else {
            panic!("reason is a string")
        };
        assert!(stored.len() <= MAX_REASON_LEN && stored.len() >= MAX_REASON_LEN - 1);
    }

    #[test]
    fn put_if_absent_condition() {
        let e = put_if_absent();
        assert_eq!(e.condition, "attribute_not_exists(#taskId)");
        assert_eq!(names(&e), "#taskId=taskId");
        assert_eq!(e.values_map(), None);
    }

    #[test]
    fn due_and_user_queries() {
        let d = due_partition("2026-12-06#07");
        assert_eq!(d.main, "#dueKey = :dueKey");
        assert_eq!(names(&d), "#dueKey=dueKey");
        assert_eq!(values(&d), ":dueKey=S:2026-12-06#07");
        let u = user_history("1234");
        assert_eq!(u.main, "#userId = :userId");
        assert_eq!(names(&u), "#userId=userId");
        assert_eq!(values(&u), ":userId=S:1234");
    }

    #[test]
    fn claimable_query_in_either_order() {
        let e = claimable(3, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(
            e.condition,
            "#expiresAt > :nowSec AND (attribute_not_exists(#leaseUntil) OR #leaseUntil < :now) \
             AND (attribute_not_exists(#retryAt) OR #retryAt <= :now)"
        );
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #expiresAt=expiresAt #leaseUntil=leaseUntil #retryAt=retryAt \
             #shard=lifoShard"
        );
        assert_eq!(
            values(&e),
            ":horizon=N:1763942400123 :now=N:1764547200123 :nowSec=N:1764547200 :shard=N:3"
        );
        let e = backing_off(3, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(e.condition, "#retryAt > :now AND #expiresAt > :nowSec");
    }

    #[test]
    fn stats_counts_of_running_and_expired_tasks() {
        let e = leased(2, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(e.condition, "#leaseUntil >= :now");
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #leaseUntil=leaseUntil #shard=lifoShard"
        );
        assert_eq!(
            values(&e),
            ":horizon=N:1763942400123 :now=N:1764547200123 :shard=N:2"
        );

        let e = expired_since(2, NOW - 3_600_000, NOW, NOW - 3_600_000 - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(
            e.condition,
            "#expiresAt BETWEEN :sinceSec AND :nowSec \
             AND (attribute_not_exists(#leaseUntil) OR #leaseUntil < :now)"
        );
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #expiresAt=expiresAt #leaseUntil=leaseUntil #shard=lifoShard"
        );
        assert_eq!(
            values(&e),
            ":horizon=N:1763938800123 :now=N:1764547200123 :nowSec=N:1764547200 \
             :shard=N:2 :sinceSec=N:1764543600"
        );
    }
}
