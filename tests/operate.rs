//! An operator's levers on DynamoDB Local: redrive (failed and shed tasks),
//! delete, the failed-task index, pause and resume; each racing the
//! processor's late writes.

use lifo_core::store::{FailedQuery, OperateError, RedriveSettings};
use lifo_core::{Move, Op, Step, StoreError, Task, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use process::runner::SimulatedRunner;
use std::time::Duration;

async fn create(h: &Harness, tasks: serde_json::Value) -> Vec<String> {
    h.creator()
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .unwrap()
        .created
}

fn settings(now_ms: u64) -> RedriveSettings<'static> {
    RedriveSettings {
        now_ms,
        default_ttl_seconds: 3600,
        retention_seconds: 3600,
        reason: "retried by the test",
    }
}

/// The stalled worker's late success, with its token.
async fn late_success(h: &Harness, claim: &Task) -> Result<(), StoreError> {
    let step = Step {
        now_ms: now_ms(),
        token: claim.token,
        attempts: claim.attempts,
    };
    let succeed = Move::Succeed {
        history: &claim.history,
    };
    h.store
        .record(&claim.task_id, &succeed, TaskStatus::Taken, &step)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_is_found_without_a_scan_and_redriven_as_new_work() {
    let h = Harness::start(2).await;
    let ids = create(
        &h,
        serde_json::json!([
            {"taskId": "old", "payload": {"n": 1}},
            {"taskId": "doomed", "payload": {"n": 2}, "ttlSeconds": 600}
        ]),
    )
    .await;
    assert_eq!(ids.len(), 2);
    let before = now_ms();
    // A downstream that fails every run, one attempt: both end FAILURE.
    let failing = h.processor_custom(SimulatedRunner::new(2, Duration::ZERO, 1.0, 0.0), 1);
    let report = failing
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.failed, 2);
    let doomed = h.store.get("doomed").await.unwrap().unwrap();
    assert_eq!(doomed.task_status, TaskStatus::Failure);
    assert!(doomed.failed_at.is_some_and(|t| t >= before));

    // The failed-task index: newest first, by window and error prefix.
    let q = |prefix: &'static str, since: u64| FailedQuery {
        shard_count: 2,
        since_ms: since,
        until_ms: now_ms(),
        error_prefix: prefix,
        limit: 100,
    };
    let failed = h.store.failed(q("", before)).await.unwrap();
    assert_eq!(failed.len(), 2);
    assert!(failed[0].failed_at >= failed[1].failed_at, "newest first");
    assert_eq!(failed[0].last_error.as_deref(), Some("simulated failure"));
    assert_eq!(
        h.store.failed(q("simulated", before)).await.unwrap().len(),
        2
    );
    assert!(h.store.failed(q("HTTP", before)).await.unwrap().is_empty());
    assert!(
        h.store
            .failed(q("", now_ms() + 1))
            .await
            .unwrap()
            .is_empty()
    );

    // A success path task created after them is still older than a redrive.
    create(
        &h,
        serde_json::json!([{"taskId": "newer", "payload": {"n": 3}}]),
    )
    .await;
    let spent = h.store.meter().spent(Op::Operate);
    let redriven = h.store.redrive("doomed", settings(now_ms())).await.unwrap();
    assert_eq!(
        (redriven.task_status, redriven.attempts, redriven.failed_at),
        (TaskStatus::Pending, 0, None)
    );
    // Its own TTL (600 s), from now; the newest position in the LIFO order.
    assert_eq!(redriven.expires_at, redriven.ready_at / 1000 + 600);
    let newer = h.store.get("newer").await.unwrap().unwrap();
    assert!(redriven.claimable_at > newer.claimable_at);
    let last = redriven.history.last().unwrap();
    assert_eq!(
        (last.status, last.reason.as_deref()),
        (TaskStatus::Pending, Some("retried by the test"))
    );
    // Table + claimable index entry + failed index entry removed.
    let redrive_units = h.store.meter().spent(Op::Operate).units - spent.units;
    assert_eq!(redrive_units, 3.0);
    assert!(
        h.store
            .failed(q("", before))
            .await
            .unwrap()
            .iter()
            .all(|f| f.task_id != "doomed"),
        "a redriven task leaves the failed index"
    );

    // It runs first, as new work.
    let ok = h.processor(1, Duration::ZERO, Duration::from_secs(5));
    let report = ok
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.claimed, vec!["doomed", "newer"]);
    assert_eq!(
        h.store.get("doomed").await.unwrap().unwrap().task_status,
        TaskStatus::Success
    );

    // What may not be redriven says why.
    let err = h
        .store
        .redrive("doomed", settings(now_ms()))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "task doomed is SUCCESS: only FAILURE tasks and tasks shed by expiry can be retried"
    );
    assert!(matches!(
        h.store.redrive("nope", settings(now_ms())).await,
        Err(OperateError::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_racing_a_late_finish_of_a_stale_claim_commits_once() {
    let h = Harness::start(1).await;
    create(
        &h,
        serde_json::json!([{"taskId": "race", "payload": {"n": 1}}]),
    )
    .await;
    // A worker claims it and stalls past its lease; with one attempt, the
    // processor abandons it: FAILURE.
    let stale = h.stalled_claim("race", 300).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let p = h.processor_custom(SimulatedRunner::new(1, Duration::ZERO, 0.0, 0.0), 1);
    assert_eq!(
        p.handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .abandoned,
        1
    );
    // The operator redrives it; the stalled worker then reports success.
    h.store.redrive("race", settings(now_ms())).await.unwrap();
    let late = late_success(&h, &stale).await.unwrap_err();
    assert!(late.is_condition_failed(), "{late}");
    assert_eq!(
        h.store.get("race").await.unwrap().unwrap().task_status,
        TaskStatus::Pending,
        "the late finish did not resurrect an outcome"
    );
    // The redriven life runs and commits once; the stale worker still can't.
    let p = h.processor(1, Duration::ZERO, Duration::from_secs(5));
    assert_eq!(
        p.handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .succeeded,
        1
    );
    assert!(late_success(&h, &stale).await.is_err());
    let done = h.store.get("race").await.unwrap().unwrap();
    let outcomes: Vec<(TaskStatus, u64)> = done
        .history
        .iter()
        .filter(|e| e.status.is_terminal())
        .map(|e| (e.status, e.token))
        .collect();
    // One outcome per life: the abandon (token 1), then the success of the
    // redriven life's claim (token 2).
    assert_eq!(
        outcomes,
        vec![(TaskStatus::Failure, 1), (TaskStatus::Success, 2)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_spares_a_running_task_and_a_late_finish_never_recreates_one() {
    let h = Harness::start(1).await;
    create(
        &h,
        serde_json::json!([{"taskId": "gone", "payload": {"n": 1}}]),
    )
    .await;
    let running = h.stalled_claim("gone", 600).await;
    let err = h.store.delete("gone", now_ms()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            OperateError::NotAllowed {
                status: TaskStatus::Taken,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("task gone is TAKEN: it is running (lease until ")
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let deleted = h.store.delete("gone", now_ms()).await.unwrap();
    assert_eq!(deleted.task_status, TaskStatus::Taken);
    // The worker whose lease lapsed reports success: nothing comes back.
    assert!(
        late_success(&h, &running)
            .await
            .unwrap_err()
            .is_condition_failed()
    );
    assert!(h.store.get("gone").await.unwrap().is_none());
    assert!(matches!(
        h.store.delete("gone", now_ms()).await,
        Err(OperateError::NotFound { .. })
    ));
    assert!(matches!(
        h.store.redrive("gone", settings(now_ms())).await,
        Err(OperateError::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_task_is_redriven_and_a_claimable_one_is_not() {
    let h = Harness::start(1).await;
    create(
        &h,
        serde_json::json!([{"taskId": "shed", "payload": {"n": 1}, "ttlSeconds": 2},
                           {"taskId": "reaped", "payload": {"n": 3}, "ttlSeconds": 2},
                           {"taskId": "fresh", "payload": {"n": 2}}]),
    )
    .await;
    let err = h
        .store
        .redrive("fresh", settings(now_ms()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("task fresh is PENDING: it is claimable for another "),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    // "shed" is past its expiry but no reader has shed it yet (PENDING);
    // "reaped" is shed by the reaper first (EXPIRED, in the shed index).
    let revived = h.store.redrive("shed", settings(now_ms())).await.unwrap();
    assert_eq!(revived.task_status, TaskStatus::Pending);
    assert!(!revived.is_expired(now_ms()));
    let now = now_ms();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let reaped = h
        .store
        .reap(&[0], now, now - 3_600_000, until)
        .await
        .unwrap();
    assert_eq!(reaped.shed, 1, "only 'reaped' is past its expiry now");
    let t = h.store.get("reaped").await.unwrap().unwrap();
    assert_eq!((t.task_status, t.claimable_at), (TaskStatus::Expired, None));
    assert!(t.shed_at.is_some());
    let revived = h.store.redrive("reaped", settings(now_ms())).await.unwrap();
    assert_eq!(revived.task_status, TaskStatus::Pending);
    assert_eq!(revived.shed_at, None, "out of the shed index");
    assert!(
        revived.claimable_at.is_some(),
        "back in the claimable index"
    );
    let p = h.processor(3, Duration::ZERO, Duration::from_secs(5));
    let report = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.claimed, vec!["reaped", "shed", "fresh"]);
}

/// Write units of the failure path, measured: the fail move writes the
/// table, deletes the claimable index entry and puts the failed index entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failure_path_costs_one_write_unit_more_and_success_none() {
    let h = Harness::start(1).await;
    create(
        &h,
        serde_json::json!([{"taskId": "f", "payload": {"n": 1}}]),
    )
    .await;
    let p = h.processor_custom(SimulatedRunner::new(1, Duration::ZERO, 1.0, 0.0), 1);
    let meter = p.store().meter();
    let (put, claim, finish) = (
        h.store.meter().spent(Op::Put).units,
        meter.spent(Op::Claim).units,
        meter.spent(Op::Finish).units,
    );
    assert_eq!(
        p.handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .failed,
        1
    );
    assert_eq!(
        (
            put,
            meter.spent(Op::Claim).units - claim,
            meter.spent(Op::Finish).units - finish
        ),
        (2.0, 2.0, 3.0),
        "put 2 + claim 2 + fail 3 = 7 (was 6 before the failed-task index)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_are_read_back() {
    let h = Harness::start(1).await;
    assert!(
        !h.store.control(true).await.unwrap().paused,
        "not paused by default"
    );
    let now = now_ms();
    let c = h
        .store
        .set_paused(true, "downstream is down", now)
        .await
        .unwrap();
    assert_eq!(
        (c.paused, c.changed_at, c.reason.as_deref()),
        (true, Some(now), Some("downstream is down"))
    );
    assert!(h.store.control(true).await.unwrap().paused);
    // The control item is no task: it is in no index and no scan of tasks.
    assert!(h.tasks().await.is_empty());
    let p = h.processor(1, Duration::ZERO, Duration::from_secs(5));
    create(
        &h,
        serde_json::json!([{"taskId": "waits", "payload": {"n": 1}}]),
    )
    .await;
    let report = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.stop, process::StopReason::Paused);
    assert!(report.claimed.is_empty());
    assert!(
        !h.store
            .set_paused(false, "fixed", now_ms())
            .await
            .unwrap()
            .paused
    );
    assert_eq!(
        p.handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap()
            .succeeded,
        1
    );
}
