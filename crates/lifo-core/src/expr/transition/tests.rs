//! The exact expression of every transition.
use super::super::testing::*;
use super::*;

#[test]
fn claim() {
    let e = transition(&mv(Transition::Claim, "", &[]), &step());
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #startedAt = :now, #leaseUntil = :lease, \
         #claimedBy = :claimedBy, #token = :newToken, #attempts = :attempts, \
         #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #retryAt"
    );
    assert_eq!(
        e.condition,
        "#status = :from AND #token = :token AND attribute_exists(#claimableAt) AND #expiresAt > :nowSec \
         AND (attribute_not_exists(#retryAt) OR #retryAt <= :now) \
         AND attribute_not_exists(#supersededBy)"
    );
    assert_eq!(
        names(&e),
        "#attempts=attempts #claimableAt=claimableAt #claimedBy=claimedBy #expiresAt=expiresAt #history=history \
         #leaseUntil=leaseUntil #retryAt=retryAt #startedAt=startedAt #status=taskStatus \
         #supersededBy=supersededBy #token=token #updated=taskUpdated"
    );
    assert_eq!(
        values(&e),
        ":attempts=N:1 :claimedBy=S:process-1 :empty=[] :entry=[{a=N:1 k=N:8 s=S:TAKEN t=N:1764547200123}] \
         :from=S:PENDING :lease=N:1764547262123 :newToken=N:8 :now=N:1764547200123 \
         :nowSec=N:1764547200 :to=S:TAKEN :token=N:7"
    );
}

#[test]
fn reclaim_requires_an_expired_lease_and_attempts_left() {
    let e = transition(&mv(Transition::Reclaim, "", &[]), &step());
    assert_eq!(
        e.condition,
        "#status = :from AND #token = :token AND #leaseUntil < :now \
         AND #attempts < :maxAttempts AND #expiresAt > :nowSec \
         AND attribute_not_exists(#supersededBy)"
    );
    assert_eq!(
        e.main,
        transition(&mv(Transition::Claim, "", &[]), &step()).main
    );
    assert_eq!(e.values[":from"], AttributeValue::S("TAKEN".into()));
    assert_eq!(e.values[":maxAttempts"], AttributeValue::N("3".into()));
}

#[test]
fn succeed_rewrites_the_history_and_leaves_the_index() {
    let h = earlier();
    let e = transition(&mv(Transition::Succeed, "", &h), &step());
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
    let e = transition(&mv(Transition::Fail, "HTTP 500", &h), &step());
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
        &mv(Transition::Abandon, "lease expired after 3 attempts", &[]),
        &step(),
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
fn only_retry_later_gives_the_attempt_back() {
    let h = earlier();
    assert_eq!(mv(Transition::RetryLater, "busy", &h).attempts_after(2), 1);
    assert_eq!(mv(Transition::RetryLater, "busy", &h).attempts_after(0), 0);
    for t in [
        Transition::RetryAfterError,
        Transition::Succeed,
        Transition::Fail,
    ] {
        assert_eq!(mv(t, "x", &h).attempts_after(2), 2, "{t:?}");
    }
}

#[test]
fn retry_later_gives_the_attempt_back_and_stays_in_the_index() {
    let h = earlier();
    let s = Step {
        attempts: 0,
        ..step()
    };
    let e = transition(&mv(Transition::RetryLater, "busy", &h), &s);
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #attempts = :attempts, #lastError = :reason, \
         #retryAt = :retryAt, #history = :history REMOVE #leaseUntil"
    );
    assert_eq!(
        e.condition,
        "#status = :from AND #token = :token AND attribute_not_exists(#supersededBy)"
    );
    assert_eq!(
        names(&e),
        "#attempts=attempts #history=history #lastError=lastError #leaseUntil=leaseUntil \
         #retryAt=retryAt #status=taskStatus #supersededBy=supersededBy #token=token #updated=taskUpdated"
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
    let s = Step { token: 0, ..step() };
    let e = transition(&Move::Start { life: LIFE }, &s);
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #readyAt = :now, \
         #claimableAt = if_not_exists(#laneShift, :zero) + :now, \
         #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
         #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
         #history = list_append(if_not_exists(#history, :empty), :entry) REMOVE #dueKey"
    );
    assert_eq!(e.condition, "#status = :from AND #token = :token");
    assert_eq!(
        names(&e),
        "#claimableAt=claimableAt #dueKey=dueKey #expiresAt=expiresAt #history=history \
         #laneShift=laneShift #readyAt=readyAt #status=taskStatus #token=token #ttl=ttl \
         #ttlSeconds=ttlSeconds #updated=taskUpdated"
    );
    assert_eq!(
        values(&e),
        ":defaultTtl=N:3600 :deleteBase=N:1764633600 :empty=[] \
         :entry=[{a=N:1 k=N:0 s=S:PENDING t=N:1764547200123}] :from=S:SCHEDULED :now=N:1764547200123 \
         :nowSec=N:1764547200 :to=S:PENDING :token=N:0 :zero=N:0"
    );
}

#[test]
fn cancel_only_leaves_the_due_index() {
    let s = Step {
        token: 0,
        attempts: 0,
        ..step()
    };
    let e = transition(&Move::Cancel, &s);
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
    let s = Step {
        attempts: 0,
        ..step()
    };
    let e = transition(
        &mv(Transition::Redrive, "redriven by lifo tasks retry", &[]),
        &s,
    );
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #readyAt = :now, \
         #claimableAt = if_not_exists(#laneShift, :zero) + :now, #attempts = :zero, \
         #expiresAt = if_not_exists(#ttlSeconds, :defaultTtl) + :nowSec, \
         #ttl = if_not_exists(#ttlSeconds, :defaultTtl) + :deleteBase, \
         #history = list_append(if_not_exists(#history, :empty), :entry) \
         REMOVE #failedAt, #shedAt, #leaseUntil, #startedAt, #retryAt, #supersededBy"
    );
    assert_eq!(
        e.condition,
        "#token = :token AND (#status = :from OR #status = :expired OR (#expiresAt <= :nowSec \
         AND (#status = :pending OR (#status = :taken AND #leaseUntil < :now))))"
    );
    assert_eq!(
        names(&e),
        "#attempts=attempts #claimableAt=claimableAt #expiresAt=expiresAt #failedAt=failedAt \
         #history=history #laneShift=laneShift #leaseUntil=leaseUntil #readyAt=readyAt #retryAt=retryAt #shedAt=shedAt \
         #startedAt=startedAt #status=taskStatus #supersededBy=supersededBy #token=token #ttl=ttl \
         #ttlSeconds=ttlSeconds #updated=taskUpdated"
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
    let e = transition(&mv(Transition::Shed, "expired unstarted", &[]), &step());
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
    let e = transition(
        &Move::RetryAfterError {
            reason: "HTTP 500",
            history: &h,
            retry_at: NOW + 10_000,
        },
        &step(),
    );
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
        let e = transition(&mv(t, "r", &[]), &step());
        if t == Transition::Supersede {
            // Unfenced: see `a_newer_task_supersedes_a_pending_one`.
            assert_eq!(e.condition, "#status = :from AND #supersedeKey = :key");
        } else if t == Transition::Redrive {
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
        // The claimable index key goes exactly when a claimed task finishes,
        // and is set anew exactly when a task becomes new work (a
        // scheduled task starts, a failed or shed task is redriven).
        assert_eq!(
            e.main.contains("REMOVE #claimableAt"),
            t.to().is_terminal()
                && (t.from() == TaskStatus::Taken
                    || matches!(t, Transition::Shed | Transition::Supersede)),
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
            e.main
                .contains("#claimableAt = if_not_exists(#laneShift, :zero) + :now"),
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
        // The superseded index key exists exactly while SUPERSEDED; only
        // the supersede move names the successor, only a redrive forgets it.
        assert_eq!(
            e.main.contains("#supersededAt = :now"),
            t.to() == TaskStatus::Superseded,
            "{t}"
        );
        assert_eq!(
            e.main.contains("#supersededBy = :by"),
            t == Transition::Supersede,
            "{t}"
        );
        // Nothing starts or goes back to PENDING over a successor's mark.
        if t.is_claim() || matches!(t, Transition::RetryLater | Transition::RetryAfterError) {
            assert!(
                e.condition
                    .ends_with("AND attribute_not_exists(#supersededBy)"),
                "{t}"
            );
        }
        // The lease exists exactly while TAKEN.
        assert_eq!(
            e.main.contains("#leaseUntil = :lease"),
            t.to() == TaskStatus::Taken,
            "{t}"
        );
    }
}

#[test]
fn a_newer_task_supersedes_a_pending_one() {
    let e = transition(&mv(Transition::Supersede, "", &[]), &step());
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #supersededBy = :by, #supersededAt = :now, \
         #history = list_append(if_not_exists(#history, :empty), :entry) \
         REMOVE #claimableAt, #retryAt"
    );
    // No token: no claim holds a PENDING task, and the newer task's writer
    // does not know it. A claim in between fails this condition (TAKEN).
    assert_eq!(e.condition, "#status = :from AND #supersedeKey = :key");
    assert_eq!(
        names(&e),
        "#claimableAt=claimableAt #history=history #retryAt=retryAt #status=taskStatus \
         #supersedeKey=supersedeKey #supersededAt=supersededAt #supersededBy=supersededBy \
         #updated=taskUpdated"
    );
    assert_eq!(
        values(&e),
        ":by=S:task-2 :empty=[] :entry=[{a=N:1 k=N:7 s=S:SUPERSEDED t=N:1764547200123}] \
         :from=S:PENDING :key=S:device-1 :now=N:1764547200123 :to=S:SUPERSEDED"
    );
}

#[test]
fn a_marked_claim_ends_superseded_instead_of_going_back() {
    let e = transition(&Move::EndSuperseded, &step());
    assert_eq!(
        e.main,
        "SET #status = :to, #updated = :now, #supersededAt = :now, \
         #history = list_append(if_not_exists(#history, :empty), :entry) \
         REMOVE #claimableAt, #leaseUntil, #retryAt"
    );
    assert_eq!(
        e.condition,
        "#status = :from AND #token = :token AND attribute_exists(#supersededBy)"
    );
    assert_eq!(e.values[":from"], AttributeValue::S("TAKEN".into()));
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
    let e = transition(&mv(Transition::Succeed, "", &long), &step());
    let AttributeValue::L(h) = &e.values[":history"] else {
        panic!("history is a list")
    };
    assert_eq!(h.len(), MAX_HISTORY);
    assert!(show(h.last().unwrap()).contains("s=S:SUCCESS"));
}

#[test]
fn reasons_are_truncated_on_a_char_boundary() {
    let long = "é".repeat(MAX_REASON_LEN);
    let e = transition(&mv(Transition::Fail, &long, &[]), &step());
    let AttributeValue::S(stored) = &e.values[":reason"] else {
        panic!("reason is a string")
    };
    assert!(stored.len() <= MAX_REASON_LEN && stored.len() >= MAX_REASON_LEN - 1);
}
