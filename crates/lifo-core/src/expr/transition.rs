//! The conditional update of each state transition: what it writes,
//! and the condition (status and fencing token) that guards it.

use super::*;
use crate::model::{HistoryEntry, MAX_HISTORY, TaskStatus};
use crate::state::Transition;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::BTreeMap;

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
                ("#claimedBy", CLAIMED_BY),
            ]);
            values.extend([
                (":lease", n(step.lease_until)),
                (":owner", AttributeValue::S(step.owner.to_owned())),
                (":newToken", n(step.token + 1)),
                (":attempts", n(step.attempts)),
                (":nowSec", n(step.now_ms / 1000)),
            ]);
            append(&mut values);
            names.insert("#retryAt", RETRY_AT);
            let update = "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
                 #claimedBy = :owner, #token = :newToken, #attempts = :attempts, \
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
                ("#shedAt", SHED_AT),
            ]);
            values.extend([
                (":zero", n(0)),
                (":expired", status(TaskStatus::Expired)),
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
                 REMOVE #failedAt, #shedAt, #leaseUntil, #startedAt, #retryAt",
                "#token = :token AND (#status = :from OR #status = :expired OR (#expiresAt <= :nowSec \
                 AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))",
            )
        }
        Transition::Shed => {
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

#[cfg(test)]
mod tests;
