//! The index queries: claimable tasks per shard, the stats counts, due
//! dates, a user's history, failed tasks, and the freshness scan.

use super::*;
use std::collections::BTreeMap;

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

/// A query of one shard of the claimable index: the key condition every such
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
        values: BTreeMap::from([
            (":shard", n(shard)),
            (":horizon", n(crate::priority::floor(horizon_ms))),
        ]),
    };
    e.names.extend(names.iter().copied());
    e.values.extend(values);
    e
}

/// Query of one shard of the claimable index: the entries claimable now,
/// for a COUNT (the sweep's queue depth, `lifo stats`) and for the newest
/// and oldest of them (`lifo stats`' ages); the claim read is
/// [`claim_read`]. `horizon_ms`
/// bounds the range key from below: a task that became claimable before it
/// has certainly expired (readyAt + the largest TTL allowed). That bound is
/// loose (7 days by default); what keeps expired entries from being read
/// over and over is that they do not stay: whoever reads one sheds it
/// ([`crate::state::Transition::Shed`] takes it out of this index), the
/// sweep's reaper from the oldest end every minute ([`old_end`]), the claim
/// read on its way ([`claim_read`]). The filter drops tasks past their
/// expiry, TAKEN tasks whose lease is still running, and tasks resting
/// after a failed run (`retryAt` in the future): everything else keeps its
/// order. (A filter runs after the read: DynamoDB charges for every entry
/// the key condition reads.)
pub fn claimable_now(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
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

/// The claim read of one shard: what [`claimable_now`] matches, and also the
/// entries no lease holds that are past their expiry, so that the reader
/// sheds them on its way and nobody reads them again. (Returning them costs
/// no more: DynamoDB charges for every entry the key condition reads,
/// filtered or not.)
pub fn claim_read(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "(attribute_not_exists(#leaseUntil) OR #leaseUntil < :now) \
         AND (#expiresAt <= :nowSec OR attribute_not_exists(#retryAt) OR #retryAt <= :now)",
        &[
            ("#expiresAt", attr::EXPIRES_AT),
            ("#leaseUntil", attr::LEASE_UNTIL),
            ("#retryAt", attr::RETRY_AT),
        ],
        vec![(":nowSec", n(now_ms / 1000)), (":now", n(now_ms))],
    )
}

/// The reaper's read of one priority of one shard, oldest first
/// (`ScanIndexForward = true`) from `horizon_ms`, with no filter: it sheds
/// the expired entries it meets and stops at the first page that holds
/// none (see [`crate::store::Store::reap`]). Each priority is a band of the key
/// ([`crate::priority`]), read from its own oldest end.
pub fn old_end(shard: u32, priority: crate::priority::Priority, horizon_ms: u64) -> Expr {
    Expr {
        main: "#shard = :shard AND #claimableAt BETWEEN :from AND :to".to_owned(),
        condition: String::new(),
        names: BTreeMap::from([
            ("#shard", attr::SHARD),
            ("#claimableAt", attr::CLAIMABLE_AT),
        ]),
        values: BTreeMap::from([
            (":shard", n(shard)),
            (":from", n(priority.key(horizon_ms))),
            (":to", n(priority.shift() + crate::priority::SHIFT / 2 - 1)),
        ]),
    }
}

/// Query of one shard of the shed index: tasks shed in
/// `[since_ms, until_ms]`, newest first with `ScanIndexForward = false`.
pub fn shed_since(shard: u32, since_ms: u64, until_ms: u64) -> Expr {
    window(shard, ("#shedAt", attr::SHED_AT), since_ms, until_ms)
}

/// Query of one shard of the superseded index: tasks superseded in
/// `[since_ms, until_ms]`.
pub fn superseded_since(shard: u32, since_ms: u64, until_ms: u64) -> Expr {
    window(
        shard,
        ("#supersededAt", attr::SUPERSEDED_AT),
        since_ms,
        until_ms,
    )
}

/// One shard of a sparse index ranged by a time (`at`: placeholder and
/// attribute), between two times.
fn window(shard: u32, at: (&'static str, &'static str), since_ms: u64, until_ms: u64) -> Expr {
    Expr {
        main: format!("#shard = :shard AND {} BETWEEN :since AND :until", at.0),
        condition: String::new(),
        names: BTreeMap::from([("#shard", attr::SHARD), at]),
        values: BTreeMap::from([
            (":shard", n(shard)),
            (":since", n(since_ms)),
            (":until", n(until_ms)),
        ]),
    }
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
/// the claimable index for `lifo stats`). `leaseUntil` exists only while TAKEN.
pub fn leased(shard: u32, now_ms: u64, horizon_ms: u64) -> Expr {
    shard_query(
        shard,
        horizon_ms,
        "#leaseUntil >= :now",
        &[("#leaseUntil", attr::LEASE_UNTIL)],
        vec![(":now", n(now_ms))],
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

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
        let e = claimable_now(3, NOW, NOW - 604_800_000);
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
            ":horizon=N:-8236057599877 :now=N:1764547200123 :nowSec=N:1764547200 :shard=N:3"
        );
        let e = claim_read(3, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(
            e.condition,
            "(attribute_not_exists(#leaseUntil) OR #leaseUntil < :now) \
             AND (#expiresAt <= :nowSec OR attribute_not_exists(#retryAt) OR #retryAt <= :now)"
        );
        assert_eq!(
            values(&e),
            ":horizon=N:-8236057599877 :now=N:1764547200123 :nowSec=N:1764547200 :shard=N:3"
        );
        // The reaper reads each priority's band of the key from its oldest end.
        let e = old_end(3, crate::priority::Priority::Normal, NOW - 604_800_000);
        assert_eq!(
            e.main,
            "#shard = :shard AND #claimableAt BETWEEN :from AND :to"
        );
        assert_eq!(e.condition, "");
        assert_eq!(names(&e), "#claimableAt=claimableAt #shard=lifoShard");
        assert_eq!(
            values(&e),
            ":from=N:1763942400123 :shard=N:3 :to=N:4999999999999"
        );
        let e = old_end(3, crate::priority::Priority::Low, NOW - 604_800_000);
        assert_eq!(
            values(&e),
            ":from=N:-8236057599877 :shard=N:3 :to=N:-5000000000001"
        );
        let e = backing_off(3, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(e.condition, "#retryAt > :now AND #expiresAt > :nowSec");
    }

    #[test]
    fn stats_counts_of_running_and_shed_tasks() {
        let e = leased(2, NOW, NOW - 604_800_000);
        assert_eq!(e.main, "#shard = :shard AND #claimableAt > :horizon");
        assert_eq!(e.condition, "#leaseUntil >= :now");
        assert_eq!(
            names(&e),
            "#claimableAt=claimableAt #leaseUntil=leaseUntil #shard=lifoShard"
        );
        assert_eq!(
            values(&e),
            ":horizon=N:-8236057599877 :now=N:1764547200123 :shard=N:2"
        );

        let e = shed_since(2, NOW - 3_600_000, NOW);
        assert_eq!(
            e.main,
            "#shard = :shard AND #shedAt BETWEEN :since AND :until"
        );
        assert_eq!(e.condition, "");
        assert_eq!(names(&e), "#shard=lifoShard #shedAt=shedAt");
        assert_eq!(
            values(&e),
            ":shard=N:2 :since=N:1764543600123 :until=N:1764547200123"
        );

        let e = superseded_since(2, NOW - 3_600_000, NOW);
        assert_eq!(
            e.main,
            "#shard = :shard AND #supersededAt BETWEEN :since AND :until"
        );
        assert_eq!(names(&e), "#shard=lifoShard #supersededAt=supersededAt");
    }
}
