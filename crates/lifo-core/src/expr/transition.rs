//! The conditional update of each state transition: what it writes,
//! and the condition (status and fencing token) that guards it.

use super::*;
use crate::model::{HistoryEntry, MAX_HISTORY, TaskStatus};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::BTreeMap;

/// The conditional update that applies `mv` at `step`.
pub fn transition(mv: &Move<'_>, step: &Step) -> Expr {
    use attr::*;
    let t = mv.transition();
    let entry = mv.entry(step);
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
    let rewrite = |values: &mut BTreeMap<&'static str, AttributeValue>,
                   earlier: &[HistoryEntry]| {
        let keep = earlier.len().saturating_sub(MAX_HISTORY - 1);
        let mut history: Vec<HistoryEntry> = earlier[keep..].to_vec();
        history.push(entry.clone());
        values.insert(":history", to_av(&history));
    };
    let (main, condition) = match *mv {
        Move::Claim {
            lease_until,
            claimed_by,
        }
        | Move::Reclaim {
            lease_until,
            claimed_by,
            ..
        } => {
            names.extend([
                ("#startedAt", STARTED_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#attempts", ATTEMPTS),
                ("#expiresAt", EXPIRES_AT),
                ("#claimedBy", CLAIMED_BY),
            ]);
            values.extend([
                (":lease", n(lease_until)),
                (":claimedBy", AttributeValue::S(claimed_by.to_owned())),
                (":newToken", n(step.token + 1)),
                (":attempts", n(step.attempts)),
                (":nowSec", n(step.now_ms / 1000)),
            ]);
            append(&mut values);
            names.insert("#retryAt", RETRY_AT);
            // A task whose successor was written never starts again.
            names.insert("#supersededBy", SUPERSEDED_BY);
            let update = "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
                 #claimedBy = :claimedBy, #token = :newToken, #attempts = :attempts, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #retryAt";
            if let Move::Reclaim { max_attempts, .. } = *mv {
                values.insert(":maxAttempts", n(max_attempts));
                (
                    update,
                    "#status = :from AND #token = :token AND #leaseUntil < :now \
                     AND #attempts < :maxAttempts AND #expiresAt > :nowSec \
                     AND attribute_not_exists(#supersededBy)",
                )
            } else {
                names.insert("#claimableAt", CLAIMABLE_AT);
                (
                    update,
                    "#status = :from AND #token = :token AND attribute_exists(#claimableAt) AND #expiresAt > :nowSec \
                     AND (attribute_not_exists(#retryAt) OR #retryAt <= :now) \
                     AND attribute_not_exists(#supersededBy)",
                )
            }
        }
        Move::Succeed { history } => {
            names.extend([("#claimableAt", CLAIMABLE_AT), ("#leaseUntil", LEASE_UNTIL)]);
            rewrite(&mut values, history);
            (
                "SET #status = :to, #updated = :now, #history = :history REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
        Move::Fail { reason, history } => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#failedAt", FAILED_AT),
            ]);
            values.insert(":reason", s(truncate(reason)));
            rewrite(&mut values, history);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
                 #history = :history REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token",
            )
        }
        Move::Abandon { reason } => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#failedAt", FAILED_AT),
            ]);
            values.insert(":reason", s(truncate(reason)));
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #failedAt = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #claimableAt, #leaseUntil",
                "#status = :from AND #token = :token AND #leaseUntil < :now",
            )
        }
        Move::RetryLater {
            reason,
            history,
            retry_at,
        } => {
            names.extend([
                ("#attempts", ATTEMPTS),
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#retryAt", RETRY_AT),
                ("#supersededBy", SUPERSEDED_BY),
            ]);
            values.insert(":attempts", n(step.attempts));
            values.insert(":reason", s(truncate(reason)));
            values.insert(":retryAt", n(retry_at));
            rewrite(&mut values, history);
            (
                "SET #status = :to, #updated = :now, #attempts = :attempts, #lastError = :reason, \
                 #retryAt = :retryAt, #history = :history REMOVE #leaseUntil",
                "#status = :from AND #token = :token AND attribute_not_exists(#supersededBy)",
            )
        }
        Move::Start { life } => {
            names.extend([
                ("#readyAt", READY_AT),
                ("#claimableAt", CLAIMABLE_AT),
                ("#laneShift", PRIORITY_SHIFT),
                ("#expiresAt", EXPIRES_AT),
                ("#ttl", DELETE_AT),
                ("#ttlSeconds", TTL_SECONDS),
                ("#dueKey", DUE_KEY),
            ]);
            values.insert(":zero", n(0));
            values.extend([
                (":nowSec", n(step.now_ms / 1000)),
                (":defaultTtl", n(life.ttl_seconds)),
                (
                    ":deleteBase",
                    n(step.now_ms / 1000 + life.retention_seconds),
                ),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #readyAt = :now, \
                 #claimableAt = if_not_exists(#laneShift, :zero) + :now, \
                 #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
                 #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey",
                "#status = :from AND #token = :token",
            )
        }
        Move::Cancel => {
            names.insert("#dueKey", DUE_KEY);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey",
                "#status = :from AND #token = :token",
            )
        }
        Move::Redrive { life, .. } => {
            names.extend([
                ("#readyAt", READY_AT),
                ("#claimableAt", CLAIMABLE_AT),
                ("#laneShift", PRIORITY_SHIFT),
                ("#attempts", ATTEMPTS),
                ("#expiresAt", EXPIRES_AT),
                ("#ttl", DELETE_AT),
                ("#ttlSeconds", TTL_SECONDS),
                ("#leaseUntil", LEASE_UNTIL),
                ("#startedAt", STARTED_AT),
                ("#failedAt", FAILED_AT),
                ("#retryAt", RETRY_AT),
                ("#shedAt", SHED_AT),
                ("#supersededBy", SUPERSEDED_BY),
            ]);
            values.extend([
                (":zero", n(0)),
                (":expired", status(TaskStatus::Expired)),
                (":nowSec", n(step.now_ms / 1000)),
                (":defaultTtl", n(life.ttl_seconds)),
                (
                    ":deleteBase",
                    n(step.now_ms / 1000 + life.retention_seconds),
                ),
                (":pending", status(TaskStatus::Pending)),
                (":taken", status(TaskStatus::Taken)),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #readyAt = :now, \
                 #claimableAt = if_not_exists(#laneShift, :zero) + :now, #attempts = :zero, \
                 #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
                 #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #failedAt, #shedAt, #leaseUntil, #startedAt, #retryAt, #supersededBy",
                "#token = :token AND (#status = :from OR #status = :expired OR (#expiresAt <= :nowSec \
                 AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))",
            )
        }
        Move::Shed { .. } => {
            names.extend([
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#retryAt", RETRY_AT),
                ("#expiresAt", EXPIRES_AT),
                ("#shedAt", SHED_AT),
            ]);
            values.extend([
                (":nowSec", n(step.now_ms / 1000)),
                (":taken", status(TaskStatus::Taken)),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #shedAt = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #claimableAt, #leaseUntil, #retryAt",
                "(#status = :from OR (#status = :taken AND #leaseUntil < :now)) \
                 AND #token = :token AND #expiresAt <= :nowSec",
            )
        }
        Move::RetryAfterError {
            reason,
            history,
            retry_at,
        } => {
            names.extend([
                ("#leaseUntil", LEASE_UNTIL),
                ("#lastError", LAST_ERROR),
                ("#retryAt", RETRY_AT),
                ("#supersededBy", SUPERSEDED_BY),
            ]);
            values.insert(":reason", s(truncate(reason)));
            values.insert(":retryAt", n(retry_at));
            rewrite(&mut values, history);
            (
                "SET #status = :to, #updated = :now, #lastError = :reason, #retryAt = :retryAt, \
                 #history = :history REMOVE #leaseUntil",
                "#status = :from AND #token = :token AND attribute_not_exists(#supersededBy)",
            )
        }
        Move::Supersede { by, key } => {
            // No claim holds a PENDING task, and the newer task's writer
            // does not know its token: the status and the key guard it (a
            // claim in between makes it TAKEN, and the write marks it).
            values.remove(":token");
            names.remove("#token");
            names.extend([
                ("#supersededBy", SUPERSEDED_BY),
                ("#supersededAt", SUPERSEDED_AT),
                ("#supersedeKey", SUPERSEDE_KEY),
                ("#claimableAt", CLAIMABLE_AT),
                ("#retryAt", RETRY_AT),
            ]);
            values.extend([(":by", s(by)), (":key", s(key))]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #supersededBy = :by, #supersededAt = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #claimableAt, #retryAt",
                "#status = :from AND #supersedeKey = :key",
            )
        }
        Move::EndSuperseded => {
            names.extend([
                ("#supersededBy", SUPERSEDED_BY),
                ("#supersededAt", SUPERSEDED_AT),
                ("#claimableAt", CLAIMABLE_AT),
                ("#leaseUntil", LEASE_UNTIL),
                ("#retryAt", RETRY_AT),
            ]);
            append(&mut values);
            (
                "SET #status = :to, #updated = :now, #supersededAt = :now, \
                 #history = list_append(if_not_exists(#history, :empty), :entry) \
                 REMOVE #claimableAt, #leaseUntil, #retryAt",
                "#status = :from AND #token = :token AND attribute_exists(#supersededBy)",
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

#[cfg(test)]
mod tests;
