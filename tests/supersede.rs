//! Latest wins per key (`supersedeKey`) on DynamoDB Local: once a newer task
//! with the same key is written, the older one never starts; the one race
//! that remains (a claim that lands before the newer task is written); the
//! write's cost.

use lifo_core::{Move, Op, Step, Task, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use process::runner::SimulatedRunner;
use serde_json::json;
use std::time::Duration;

async fn create(h: &Harness, tasks: serde_json::Value) -> lifo_ops::create::CreateResponse {
    h.creator().handle(json!({ "tasks": tasks })).await.unwrap()
}

fn task<'a>(tasks: &'a [Task], id: &str) -> &'a Task {
    tasks
        .iter()
        .find(|t| t.task_id == id)
        .unwrap_or_else(|| panic!("no task {id}: {tasks:#?}"))
}

/// What one process invocation (4 slots, runs of no time) claims, sorted.
async fn claimed_in_one_run(h: &Harness) -> Vec<String> {
    let report = h
        .processor(4, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let mut claimed = report.claimed.clone();
    claimed.sort();
    claimed
}

fn starts(t: &Task) -> usize {
    t.history
        .iter()
        .filter(|e| e.status == TaskStatus::Taken)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_task_supersedes_the_pending_one_and_only_the_newest_runs() {
    let h = Harness::start(2).await;
    let first = create(
        &h,
        json!([{"taskId": "ip-1", "supersedeKey": "device-7", "payload": {"ip": "10.0.0.1"}}]),
    )
    .await;
    assert_eq!(first.created, ["ip-1"]);
    assert!(first.superseded.is_empty());
    // One request: the later task of a key wins over the earlier one.
    let second = create(
        &h,
        json!([
            {"taskId": "ip-2", "supersedeKey": "device-7", "payload": {"ip": "10.0.0.2"}},
            {"taskId": "ip-3", "supersedeKey": "device-7", "payload": {"ip": "10.0.0.3"}},
            {"taskId": "other", "supersedeKey": "device-8", "payload": {"ip": "10.0.0.9"}},
            {"taskId": "plain", "payload": {"n": 1}}
        ]),
    )
    .await;
    assert_eq!(second.superseded, ["ip-1", "ip-2"]);
    let tasks = h.tasks().await;
    for (id, by) in [("ip-1", "ip-2"), ("ip-2", "ip-3")] {
        let t = task(&tasks, id);
        assert_eq!(t.task_status, TaskStatus::Superseded, "{id}");
        assert_eq!(t.superseded_by.as_deref(), Some(by));
        assert_eq!(t.claimable_at, None, "{id} left the claimable index");
        assert!(t.superseded_at.is_some());
        assert_eq!(
            t.history.last().map(|e| e.status),
            Some(TaskStatus::Superseded)
        );
    }
    assert_eq!(task(&tasks, "ip-3").task_status, TaskStatus::Pending);

    let claimed = claimed_in_one_run(&h).await;
    assert_eq!(
        claimed,
        ["ip-3", "other", "plain"],
        "superseded tasks never start"
    );
    let tasks = h.tasks().await;
    assert_eq!(
        starts(task(&tasks, "ip-1")) + starts(task(&tasks, "ip-2")),
        0
    );

    // Counted where the shed are: the superseded index, per shard.
    let now = now_ms();
    let mut counted = 0;
    for shard in 0..2 {
        counted += h
            .store
            .superseded_in(shard, now - 60_000, now, 100)
            .await
            .unwrap()
            .0;
    }
    assert_eq!(counted, 2);

    // The same id again writes nothing and supersedes nothing.
    let again = create(
        &h,
        json!([{"taskId": "ip-3", "supersedeKey": "device-7", "payload": {}}]),
    )
    .await;
    assert_eq!(
        (
            again.created.len(),
            again.existing.as_slice(),
            again.superseded.len()
        ),
        (0, &["ip-3".to_owned()][..], 0)
    );
}

/// The race that remains: a claim that lands before the newer task is
/// written. That run goes on and its outcome stands; the task never starts
/// again, and the newer task runs too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_before_the_newer_write_runs_once_and_is_never_started_again() {
    let h = Harness::start(1).await;
    create(
        &h,
        json!([{"taskId": "old", "supersedeKey": "k", "payload": {}}]),
    )
    .await;
    let claim = h.stalled_claim("old", 60_000).await;
    let newer = create(
        &h,
        json!([{"taskId": "new", "supersedeKey": "k", "payload": {}}]),
    )
    .await;
    assert!(
        newer.superseded.is_empty(),
        "a running task is marked, not moved"
    );
    let tasks = h.tasks().await;
    let old = task(&tasks, "old");
    assert_eq!(
        (old.task_status, old.superseded_by.as_deref()),
        (TaskStatus::Taken, Some("new"))
    );

    // Its worker finishes: the outcome of a run that started first stands.
    let succeed = Move::Succeed {
        history: &claim.history,
    };
    let step = Step {
        now_ms: now_ms(),
        token: claim.token,
        attempts: 1,
    };
    h.store
        .record("old", &succeed, TaskStatus::Taken, &step)
        .await
        .unwrap();
    // But it can never go back to PENDING: a retry is refused.
    create(
        &h,
        json!([{"taskId": "old2", "supersedeKey": "k2", "payload": {}}]),
    )
    .await;
    let claim2 = h.stalled_claim("old2", 60_000).await;
    create(
        &h,
        json!([{"taskId": "new2", "supersedeKey": "k2", "payload": {}}]),
    )
    .await;
    let retry = Move::RetryLater {
        reason: "busy",
        history: &claim2.history,
        retry_at: 0,
    };
    let step = Step {
        now_ms: now_ms(),
        token: claim2.token,
        attempts: 0,
    };
    let err = h
        .store
        .record("old2", &retry, TaskStatus::Taken, &step)
        .await
        .unwrap_err();
    assert!(err.is_condition_failed(), "{err}");

    let report = h
        .processor(2, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    let mut claimed = report.claimed.clone();
    claimed.sort();
    assert_eq!(claimed, ["new", "new2"]);
    let tasks = h.tasks().await;
    assert_eq!(task(&tasks, "old").task_status, TaskStatus::Success);
    assert_eq!(starts(task(&tasks, "old")), 1);
}

/// A run that would be put back (busy, or failed with attempts left) after
/// a newer task was written ends SUPERSEDED instead; so does a lapsed claim
/// that a reader meets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_claim_ends_superseded_instead_of_starting_again() {
    let h = Harness::start(1).await;
    // A run in progress when the newer task is written, then failing.
    create(
        &h,
        json!([{"taskId": "busy", "supersedeKey": "a", "payload": {}}]),
    )
    .await;
    let failing = h.processor_custom(
        SimulatedRunner::new(1, Duration::from_millis(1_500), 1.0, 0.0),
        3,
    );
    let run =
        tokio::spawn(async move { failing.handle(&process::Wakeups::one(), deadline()).await });
    h.wait_for("busy is claimed", Duration::from_secs(10), |t| {
        t.iter()
            .any(|t| t.task_id == "busy" && t.task_status == TaskStatus::Taken)
    })
    .await;
    create(
        &h,
        json!([{"taskId": "busy-new", "supersedeKey": "a", "payload": {}}]),
    )
    .await;
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.superseded, 1, "{report:?}");
    let tasks = h.tasks().await;
    let busy = task(&tasks, "busy");
    assert_eq!(busy.task_status, TaskStatus::Superseded);
    assert_eq!(starts(busy), 1);

    // A claim whose worker died, its lease lapsed after the newer write.
    create(
        &h,
        json!([{"taskId": "dead", "supersedeKey": "b", "payload": {}}]),
    )
    .await;
    h.stalled_claim("dead", 1_000).await;
    create(
        &h,
        json!([{"taskId": "dead-new", "supersedeKey": "b", "payload": {}}]),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let report = h
        .processor(4, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.superseded, 1, "{report:?}");
    let tasks = h.tasks().await;
    assert_eq!(task(&tasks, "dead").task_status, TaskStatus::Superseded);
    assert_eq!(starts(task(&tasks, "dead")), 1, "never reclaimed");
    assert_eq!(task(&tasks, "dead-new").task_status, TaskStatus::Success);
}

/// Writes of one key at once are ordered by the key item: exactly one task
/// of the key is left to run, the one the key item names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_of_one_key_leave_exactly_one_to_run() {
    let h = Harness::start(1).await;
    let writes = (0..8).map(|i| {
        let c = h.creator();
        async move {
            c.handle(json!({"tasks": [{"taskId": format!("w{i}"), "supersedeKey": "hot", "payload": {"i": i}}]}))
                .await
                .unwrap()
        }
    });
    futures::future::join_all(writes).await;
    let tasks = h.tasks().await;
    let pending: Vec<&Task> = tasks
        .iter()
        .filter(|t| t.task_status == TaskStatus::Pending)
        .collect();
    assert_eq!(pending.len(), 1, "{tasks:#?}");
    assert_eq!(
        h.store.latest_of_key("hot").await.unwrap().as_deref(),
        Some(pending[0].task_id.as_str())
    );
    let superseded = tasks
        .iter()
        .filter(|t| t.task_status == TaskStatus::Superseded)
        .count();
    assert_eq!(superseded, 7);
}

/// What latest wins costs, in write units per task, and that a task
/// without a key still costs 6.00 per success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_write_costs_a_transaction_and_a_plain_task_still_six_units() {
    let h = Harness::start(1).await;
    let n = 20;
    let plain: Vec<serde_json::Value> = (0..n).map(|i| json!({"payload": {"n": i}})).collect();
    let units = h.write_units_per_task(plain, 4).await;
    assert_eq!(units, 6.0, "a task with no key: 6.00 write units");

    // A new key (no earlier task), then the same keys again (each write
    // supersedes the previous task).
    let keyed = h.store.with_fresh_meter();
    let c = lifo_ops::create::Creator::new(
        keyed.clone(),
        lifo_ops::create::CreateConfig {
            shard_count: 1,
            ..lifo_ops::create::CreateConfig::new(h.stack.table.clone())
        },
    );
    let batch = |round: usize| -> Vec<serde_json::Value> {
        (0..n)
            .map(|i| json!({"supersedeKey": format!("key-{i}"), "payload": {"round": round}}))
            .collect()
    };
    c.handle(json!({ "tasks": batch(0) })).await.unwrap();
    let first = keyed.meter().spent(Op::Supersede);
    let key_reads = keyed.meter().spent(Op::Read);
    c.handle(json!({ "tasks": batch(1) })).await.unwrap();
    let both = keyed.meter().spent(Op::Supersede);
    let new_key = first.units / n as f64;
    let superseding = (both.units - first.units) / n as f64;
    let read = key_reads.units / n as f64;
    println!(
        "keyed write: {new_key:.2} write units with a new key, {superseding:.2} superseding a \
         pending task (a plain put: 2.00), plus {read:.2} read units (the key item)"
    );
    // A transaction doubles its writes: the task and its claimable index entry
    // (4) and the key item (2); superseding adds the older task's item, its
    // claimable index entry out and its superseded index entry in (6).
    assert_eq!((new_key, superseding, read), (6.0, 12.0, 1.0));
}

/// A keyed task whose write is held back past a newer task of its key (a
/// slow client, a transaction conflict's resends) does not supersede it: it
/// is written SUPERSEDED at once, by the newer one, which stays the key's
/// newest and runs. Newer is decided by creation, then id, whatever order
/// the writes land in; a key item from before `latestCreated` is judged by
/// its task's own creation (issue 50, item 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_back_past_a_newer_one_of_its_key_ends_superseded_at_once() {
    let h = Harness::start(1).await;
    let now = now_ms();
    let keyed = |id: &str, key: &str, created: u64| {
        let mut t = Task::new_pending(id.into(), lifo_core::Payload::new(), created, 3600, 1);
        t.supersede_key = Some(key.into());
        t
    };
    // The newer (created 50 ms later) lands first.
    let newer = h
        .store
        .put_keyed(&keyed("c5-5-49", "c5-5", now + 50))
        .await
        .unwrap();
    assert!(newer.created && newer.superseded.is_none());
    let older = h
        .store
        .put_keyed(&keyed("c5-5-47", "c5-5", now))
        .await
        .unwrap();
    assert!(older.created);
    assert_eq!(older.arrived_superseded_by.as_deref(), Some("c5-5-49"));
    assert_eq!(older.superseded, None, "the newer task is left alone");
    // A resend of the held-back write changes nothing.
    let again = h
        .store
        .put_keyed(&keyed("c5-5-47", "c5-5", now))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(
        h.store.latest_of_key("c5-5").await.unwrap().as_deref(),
        Some("c5-5-49")
    );
    // The same creation: the greater id is the newer.
    h.store
        .put_keyed(&keyed("tie-b", "tie", now))
        .await
        .unwrap();
    let tie = h
        .store
        .put_keyed(&keyed("tie-a", "tie", now))
        .await
        .unwrap();
    assert_eq!(tie.arrived_superseded_by.as_deref(), Some("tie-b"));

    // A key item written before `latestCreated`: its task says when.
    h.store
        .put_if_absent(&keyed("old-new", "legacy", now + 50))
        .await
        .unwrap();
    h.stack
        .ddb
        .put_item()
        .table_name(&h.stack.table)
        .item(
            "taskId",
            aws_sdk_dynamodb::types::AttributeValue::S("#key-legacy".into()),
        )
        .item(
            "latest",
            aws_sdk_dynamodb::types::AttributeValue::S("old-new".into()),
        )
        .send()
        .await
        .unwrap();
    let legacy = h
        .store
        .put_keyed(&keyed("old-old", "legacy", now))
        .await
        .unwrap();
    assert_eq!(legacy.arrived_superseded_by.as_deref(), Some("old-new"));

    let tasks = h.tasks().await;
    for (id, by) in [
        ("c5-5-47", "c5-5-49"),
        ("tie-a", "tie-b"),
        ("old-old", "old-new"),
    ] {
        let t = task(&tasks, id);
        assert_eq!(t.task_status, TaskStatus::Superseded, "{t:#?}");
        assert_eq!(t.superseded_by.as_deref(), Some(by));
        assert_eq!(t.claimable_at, None, "{id} never entered the index");
    }
    let claimed = claimed_in_one_run(&h).await;
    assert_eq!(
        claimed,
        ["c5-5-49", "old-new", "tie-b"],
        "only the newest of each key runs"
    );
}
