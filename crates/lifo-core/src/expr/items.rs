//! Single-item writes outside the state machine: a conditional put, an
//! operator's delete, the control item (pause, resume, nudge), and latest
//! wins per key (the key item, the mark on a running task).

use super::*;
use std::collections::BTreeMap;

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

/// A redrive's new deletion time for the task's payload item, if it has
/// one (the condition fails, writing nothing, when the payload is on the
/// task item).
pub fn extend_payload(ttl: u64) -> Expr {
    Expr {
        main: "SET #ttl = :ttl".to_owned(),
        condition: "attribute_exists(#taskId)".to_owned(),
        names: BTreeMap::from([("#ttl", attr::DELETE_AT), ("#taskId", attr::TASK_ID)]),
        values: BTreeMap::from([(":ttl", n(ttl))]),
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

/// The downstream item (`#downstream`): the adaptive limit an invocation
/// of `group` ended with, under `ceiling`, its unloaded latency (ms, 0
/// unknown), at `now_ms`; what `lifo stats` shows. Its own item, not the
/// control item: a write to that one wakes the processor.
pub fn downstream_limit(
    group: u32,
    limit: u64,
    ceiling: u64,
    unloaded_ms: u64,
    now_ms: u64,
) -> Expr {
    Expr {
        main: "SET #limit = :limit, #ceiling = :ceiling, #unloadedMs = :unloaded, \
               #group = :group, #at = :now"
            .to_owned(),
        condition: String::new(),
        names: BTreeMap::from([
            ("#limit", "limit"),
            ("#ceiling", "ceiling"),
            ("#unloadedMs", "unloadedMs"),
            ("#group", "group"),
            ("#at", "at"),
        ]),
        values: BTreeMap::from([
            (":limit", n(limit)),
            (":ceiling", n(ceiling)),
            (":unloaded", n(unloaded_ms)),
            (":group", n(group)),
            (":now", n(now_ms)),
        ]),
    }
}

/// The key item (`#key-<supersedeKey>`) names `latest` as the key's newest
/// task, created at `created` (epoch ms): only if it still names `prev`
/// (or, with none, does not exist yet), so two creates of one key at once
/// cannot both win (the loser reads it again). Deleted with the newest task
/// (`ttl`).
pub fn point_key(latest: &str, created: u64, prev: Option<&str>, delete_at: u64) -> Expr {
    let mut e = Expr {
        main: "SET #latest = :latest, #latestCreated = :created, #ttl = :ttl".to_owned(),
        condition: "attribute_not_exists(#taskId)".to_owned(),
        names: BTreeMap::from([
            ("#latest", attr::LATEST),
            ("#latestCreated", attr::LATEST_CREATED),
            ("#ttl", attr::DELETE_AT),
            ("#taskId", attr::TASK_ID),
        ]),
        values: BTreeMap::from([
            (":latest", s(latest)),
            (":created", n(created)),
            (":ttl", n(delete_at)),
        ]),
    };
    if let Some(prev) = prev {
        e.condition = "#latest = :prev".to_owned();
        e.names.remove("#taskId");
        e.values.insert(":prev", s(prev));
    }
    e
}

/// The newer task's write marks the key's previous task, found TAKEN: its
/// run goes on, but it is never put back or claimed again (those moves
/// require no `supersededBy`; it ends SUPERSEDED instead).
pub fn mark_superseded(by: &str, key: &str) -> Expr {
    use attr::*;
    Expr {
        main: "SET #supersededBy = :by".to_owned(),
        condition: "#status = :taken AND #supersedeKey = :key".to_owned(),
        names: BTreeMap::from([
            ("#supersededBy", SUPERSEDED_BY),
            ("#status", STATUS),
            ("#supersedeKey", SUPERSEDE_KEY),
        ]),
        values: BTreeMap::from([
            (":by", s(by)),
            (":taken", status(TaskStatus::Taken)),
            (":key", s(key)),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn a_redrive_moves_the_payload_items_deletion_only_if_it_exists() {
        let e = extend_payload(1_797_000_000);
        assert_eq!(e.main, "SET #ttl = :ttl");
        assert_eq!(e.condition, "attribute_exists(#taskId)");
        assert_eq!(names(&e), "#taskId=taskId #ttl=ttl");
        assert_eq!(values(&e), ":ttl=N:1797000000");
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
    fn the_downstream_item_holds_the_last_limit_unconditionally() {
        let e = downstream_limit(1, 4, 20, 1000, NOW);
        assert_eq!(
            e.main,
            "SET #limit = :limit, #ceiling = :ceiling, #unloadedMs = :unloaded, \
             #group = :group, #at = :now"
        );
        assert_eq!(e.condition, "");
        assert_eq!(
            names(&e),
            "#at=at #ceiling=ceiling #group=group #limit=limit #unloadedMs=unloadedMs"
        );
        assert_eq!(
            values(&e),
            ":ceiling=N:20 :group=N:1 :limit=N:4 :now=N:1764547200123 :unloaded=N:1000"
        );
    }

    #[test]
    fn the_key_item_moves_to_the_newest_task_only_from_the_one_its_writer_read() {
        let e = point_key("task-2", 1_700_000_000_123, None, 1_797_000_000);
        assert_eq!(
            e.main,
            "SET #latest = :latest, #latestCreated = :created, #ttl = :ttl"
        );
        assert_eq!(e.condition, "attribute_not_exists(#taskId)");
        assert_eq!(
            names(&e),
            "#latest=latest #latestCreated=latestCreated #taskId=taskId #ttl=ttl"
        );
        let e = point_key("task-2", 1_700_000_000_123, Some("task-1"), 1_797_000_000);
        assert_eq!(e.condition, "#latest = :prev");
        assert_eq!(
            values(&e),
            ":created=N:1700000000123 :latest=S:task-2 :prev=S:task-1 :ttl=N:1797000000"
        );
    }

    #[test]
    fn a_running_task_is_marked_not_moved() {
        let e = mark_superseded("task-2", "device-1");
        assert_eq!(e.main, "SET #supersededBy = :by");
        assert_eq!(e.condition, "#status = :taken AND #supersedeKey = :key");
        assert_eq!(
            names(&e),
            "#status=taskStatus #supersedeKey=supersedeKey #supersededBy=supersededBy"
        );
        assert_eq!(values(&e), ":by=S:task-2 :key=S:device-1 :taken=S:TAKEN");
    }

    #[test]
    fn put_if_absent_condition() {
        let e = put_if_absent();
        assert_eq!(e.condition, "attribute_not_exists(#taskId)");
        assert_eq!(names(&e), "#taskId=taskId");
        assert_eq!(e.values_map(), None);
    }
}
