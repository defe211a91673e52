//! The exact expression of every transition.
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
         REMOVE #failedAt, #shedAt, #leaseUntil, #startedAt, #retryAt"
    );
    assert_eq!(
        e.condition,
        "#token = :token AND (#status = :from OR #status = :expired OR (#expiresAt <= :nowSec \
         AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))"
    );
    assert_eq!(
        names(&e),
        "#attempts=attempts #claimableAt=claimableAt #expiresAt=expiresAt #failedAt=failedAt \
         #history=history #leaseUntil=leaseUntil #readyAt=readyAt #retryAt=retryAt #shedAt=shedAt \
         #startedAt=startedAt #status=taskStatus #token=token #ttl=ttl #ttlSeconds=ttlSeconds \
         #updated=taskUpdated"
    );
    assert_eq!(
        values(&e),
        ":defaultTtl=N:3600 :deleteBase=N:1764633600 :empty=[] \
         :entry=[{a=N:0 k=N:7 r=S:redriven by lifo tasks retry s=S:PENDING t=N:1764547200123}] \
         :expired=S:EXPIRED :from=S:FAILURE :now=N:1764547200123 :nowSec=N:1764547200 \
         :pending=S:PENDING :taken=S:TAKEN :to=S:PENDING :token=N:7 :zero=N:0"
    );
}

#[test]
fn shed_leaves_the_lifo_index_for_the_shed_index_once_expired_and_unheld() {
    let e = transition(Transition::Shed, &step("expired unstarted", &[]));
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #shedAt = :now, \
         #history = list_append(if_not_exists(#history, :empty), :entry) \
         REMOVE #claimableAt, #leaseUntil, #retryAt"
    );
    assert_eq!(
        e.condition,
        "(#status = :from OR (#status = :taken AND #leaseUntil < :now)) \
         AND #token = :token AND #expiresAt <= :nowSec"
    );
    assert_eq!(
        names(&e),
        "#claimableAt=claimableAt #expiresAt=expiresAt #history=history #leaseUntil=leaseUntil \
         #retryAt=retryAt #shedAt=shedAt #status=taskStatus #token=token #updated=taskUpdated"
    );
    assert_eq!(
        values(&e),
        ":empty=[] :entry=[{a=N:1 k=N:7 r=S:expired unstarted s=S:EXPIRED t=N:1764547200123}] \
         :from=S:PENDING :now=N:1764547200123 :nowSec=N:1764547200 :taken=S:TAKEN \
         :to=S:EXPIRED :token=N:7"
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
        } else if t == Transition::Shed {
            assert!(
                e.condition.starts_with("(#status = :from OR")
                    && e.condition.contains("AND #token = :token AND")
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
            t.to().is_terminal() && (t.from() == TaskStatus::Taken || t == Transition::Shed),
            "{t}"
        );
        // The shed index key exists exactly while EXPIRED.
        assert_eq!(
            e.main.contains("#shedAt = :now"),
            t.to() == TaskStatus::Expired,
            "{t}"
        );
        assert_eq!(
            e.main.contains("#shedAt"),
            matches!(t, Transition::Shed | Transition::Redrive),
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
