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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn claim() {
        let e = transition(Transition::Claim, &step("", &[]));
        assert_eq!(
            e.main,
            "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
             #claimedBy = :owner, #token = :newToken, #attempts = :attempts, \
             #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #retryAt"
        );
        assert_eq!(
            e.condition,
            "#status = :from AND #token = :token AND attribute_exists(#claimableAt) AND #expiresAt > :nowSec \
             AND (attribute_not_exists(#retryAt) OR #retryAt <= :now)"
        );
        assert_eq!(
            names(&e),
            "#attempts=attempts #claimableAt=claimableAt #claimedBy=claimedBy #expiresAt=expiresAt #history=history \
             #leaseUntil=leaseUntil #retryAt=retryAt #startedAt=startedAt #status=taskStatus #token=token #updated=taskUpdated"
        );
        assert_eq!(
            values(&e),
            ":attempts=N:1 :empty=[] :entry=[{a=N:1 k=N:8 s=S:TAKEN t=N:1764547200123}] \
             :from=S:PENDING :lease=N:1764547262123 :newToken=N:8 :now=N:1764547200123 \
             :nowSec=N:1764547200 :owner=S:process-1 :to=S:TAKEN :token=N:7"
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
}
