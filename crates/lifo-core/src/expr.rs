//! Every DynamoDB expression the queue sends, built in one place.
//!
//! The unit tests at the bottom show the exact strings, names and values of
//! each one, so a reviewer can read the whole protocol here.

use crate::model::TaskStatus;
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
    pub const SHARD: &str = "lifoShard";
    pub const LAST_ERROR: &str = "lastError";
}

/// The sparse LIFO index: hash `lifoShard`, range `claimableAt`, projecting
/// `ttl`. A task is in it only while `claimableAt` exists.
pub const LIFO_INDEX: &str = "claimable-index";

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

/// The conditional update for `t` at `now_ms`. `reason` is recorded by
/// `Fail` and `RetryLater` (and ignored by the others).
pub fn transition(t: Transition, now_ms: u64, reason: &str) -> Expr {
    use attr::*;
    let mut names = BTreeMap::from([("#status", STATUS), ("#updated", UPDATED)]);
    let mut values = BTreeMap::from([
        (":from", status(t.from())),
        (":to", status(t.to())),
        (":now", n(now_ms)),
    ]);
    let (main, condition) = match t {
        Transition::Claim => {
            names.extend([
                ("#startedAt", STARTED_AT),
                ("#attempts", ATTEMPTS),
                ("#claimableAt", CLAIMABLE_AT),
                ("#ttl", TTL),
            ]);
            values.extend([
                (":zero", n(0)),
                (":one", n(1)),
                (":nowSec", n(now_ms / 1000)),
            ]);
            (
                "SET #status = :to, #updated = :now, #startedAt = :now, \
                 #attempts = if_not_exists(#attempts, :zero) + :one REMOVE #claimableAt",
                "#status = :from AND attribute_exists(#claimableAt) AND #ttl > :nowSec",
            )
        }
        Transition::Succeed => ("SET #status = :to, #updated = :now", "#status = :from"),
        Transition::Fail => {
            names.insert("#lastError", LAST_ERROR);
            values.insert(":reason", s(truncate(reason)));
            (
                "SET #status = :to, #updated = :now, #lastError = :reason",
                "#status = :from",
            )
        }
        Transition::RetryLater => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#readyAt", READY_AT),
                ("#lastError", LAST_ERROR),
            ]);
            values.insert(":reason", s(truncate(reason)));
            (
                "SET #status = :to, #updated = :now, #claimableAt = #readyAt, #lastError = :reason",
                "#status = :from",
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

/// Query of one shard of the LIFO index, newest first (`ScanIndexForward =
/// false`). `horizon_ms` bounds the range key from below: a task that became
/// claimable before it has certainly expired (ttl ≤ readyAt + the largest TTL
/// allowed), so expired leftovers are never even read. The filter drops
/// tasks whose own ttl has passed before DynamoDB deleted them.
pub fn newest_claimable(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    use attr::*;
    Expr {
        main: "#shard = :shard AND #claimableAt > :horizon".to_owned(),
        condition: "#ttl > :nowSec".to_owned(),
        names: BTreeMap::from([
            ("#shard", SHARD),
            ("#claimableAt", CLAIMABLE_AT),
            ("#ttl", TTL),
        ]),
        values: BTreeMap::from([
            (":shard", n(shard)),
            (":horizon", n(horizon_ms)),
            (":nowSec", n(now_ms / 1000)),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(e: &Expr) -> Vec<(&str, &str)> {
        e.names.iter().map(|(k, v)| (*k, *v)).collect()
    }

    fn values(e: &Expr) -> Vec<(&str, String)> {
        e.values
            .iter()
            .map(|(k, v)| {
                let shown = match v {
                    AttributeValue::S(s) => format!("S:{s}"),
                    AttributeValue::N(n) => format!("N:{n}"),
                    other => format!("{other:?}"),
                };
                (*k, shown)
            })
            .collect()
    }

    const NOW: u64 = 1_764_547_200_123;

    #[test]
    fn claim() {
        let e = transition(Transition::Claim, NOW, "ignored");
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #startedAt = :now, \
             #attempts = if_not_exists(#attempts, :zero) + :one REMOVE #claimableAt"
        );
        assert_eq!(
            e.condition,
            "#status = :from AND attribute_exists(#claimableAt) AND #ttl > :nowSec"
        );
        assert_eq!(
            names(&e),
            vec![
                ("#attempts", "attempts"),
                ("#claimableAt", "claimableAt"),
                ("#startedAt", "startedAt"),
                ("#status", "taskStatus"),
                ("#ttl", "ttl"),
                ("#updated", "taskUpdated"),
            ]
        );
        assert_eq!(
            values(&e),
            vec![
                (":from", "S:PENDING".into()),
                (":now", "N:1764547200123".into()),
                (":nowSec", "N:1764547200".into()),
                (":one", "N:1".into()),
                (":to", "S:TAKEN".into()),
                (":zero", "N:0".into()),
            ]
        );
    }

    #[test]
    fn succeed() {
        let e = transition(Transition::Succeed, NOW, "");
        assert_eq!(e.main, "SET #status = :to, #updated = :now");
        assert_eq!(e.condition, "#status = :from");
        assert_eq!(
            names(&e),
            vec![("#status", "taskStatus"), ("#updated", "taskUpdated")]
        );
        assert_eq!(
            values(&e),
            vec![
                (":from", "S:TAKEN".into()),
                (":now", "N:1764547200123".into()),
                (":to", "S:SUCCESS".into()),
            ]
        );
    }

    #[test]
    fn fail_records_the_reason() {
        let e = transition(Transition::Fail, NOW, "HTTP 500");
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #lastError = :reason"
        );
        assert_eq!(e.condition, "#status = :from");
        assert_eq!(
            names(&e),
            vec![
                ("#lastError", "lastError"),
                ("#status", "taskStatus"),
                ("#updated", "taskUpdated"),
            ]
        );
        assert_eq!(
            values(&e),
            vec![
                (":from", "S:TAKEN".into()),
                (":now", "N:1764547200123".into()),
                (":reason", "S:HTTP 500".into()),
                (":to", "S:FAILURE".into()),
            ]
        );
    }

    #[test]
    fn retry_later_reenters_the_index_at_its_original_position() {
        let e = transition(Transition::RetryLater, NOW, "busy");
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #claimableAt = #readyAt, #lastError = :reason"
        );
        assert_eq!(e.condition, "#status = :from");
        assert_eq!(
            names(&e),
            vec![
                ("#claimableAt", "claimableAt"),
                ("#lastError", "lastError"),
                ("#readyAt", "readyAt"),
                ("#status", "taskStatus"),
                ("#updated", "taskUpdated"),
            ]
        );
        assert_eq!(
            values(&e),
            vec![
                (":from", "S:TAKEN".into()),
                (":now", "N:1764547200123".into()),
                (":reason", "S:busy".into()),
                (":to", "S:PENDING".into()),
            ]
        );
    }

    #[test]
    fn every_transition_requires_its_from_status() {
        for t in Transition::ALL {
            let e = transition(t, NOW, "r");
            assert!(e.condition.starts_with("#status = :from"), "{t}");
            assert_eq!(
                e.values[":from"],
                AttributeValue::S(t.from().as_str().into())
            );
            assert_eq!(e.values[":to"], AttributeValue::S(t.to().as_str().into()));
            // The index key is removed exactly when leaving PENDING and
            // restored exactly when returning to it.
            assert_eq!(
                e.main.contains("REMOVE #claimableAt"),
                t == Transition::Claim
            );
            assert_eq!(
                e.main.contains("#claimableAt = #readyAt"),
                t.to() == TaskStatus::Pending
            );
        }
    }

    #[test]
    fn reasons_are_truncated_on_a_char_boundary() {
        let long = "é".repeat(MAX_REASON_LEN);
        let e = transition(Transition::Fail, NOW, &long);
        let AttributeValue::S(stored) = &e.values[":reason"] else {
            panic!("reason is a string")
        };
        assert!(stored.len() <= MAX_REASON_LEN && stored.len() >= MAX_REASON_LEN - 1);
    }

    #[test]
    fn put_if_absent_condition() {
        let e = put_if_absent();
        assert_eq!(e.condition, "attribute_not_exists(#taskId)");
        assert_eq!(names(&e), vec![("#taskId", "taskId")]);
        assert_eq!(e.values_map(), None);
    }

    #[test]
    fn newest_claimable_query() {
        let e = newest_claimable(3, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(e.condition, "#ttl > :nowSec");
        assert_eq!(
            names(&e),
            vec![
                ("#claimableAt", "claimableAt"),
                ("#shard", "lifoShard"),
                ("#ttl", "ttl")
            ]
        );
        assert_eq!(
            values(&e),
            vec![
                (":horizon", "N:1763942400123".into()),
                (":nowSec", "N:1764547200".into()),
                (":shard", "N:3".into()),
            ]
        );
    }
}
