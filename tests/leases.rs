//! Leases, fencing, attempts and wake-up guarantees on DynamoDB Local.

use lifo_core::{HistoryEntry, Move, Step, Task, TaskStatus, now_ms};
use lifo_local::{Pipeline, PipelineOptions, pipeline::PipelineStats};
use lifo_tests::{Harness, deadline};
use process::runner::{RunOutcome, TaskRunner};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn statuses(history: &[HistoryEntry]) -> Vec<(&'static str, u64)> {
    history
        .iter()
        .map(|h| (h.status.as_str(), h.token))
        .collect()
}

async fn one_task(h: &Harness) -> String {
    let out = h
        .creator()
        .handle(serde_json::json!({"tasks": [{"payload": {"n": 1}}]}))
        .await
        .unwrap();
    out.created[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_reclaimed_and_the_stale_finish_is_rejected() {
    let h = Harness::start(1).await;
    let id = one_task(&h).await;
    let stale = h.stalled_claim(&id, 2_000).await;
    assert_eq!((stale.token, stale.attempts), (1, 1));

    // While the lease runs, nobody can claim it.
    let early = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(early.claimed.is_empty());

    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let report = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        (report.claimed.len(), report.reclaimed, report.succeeded),
        (1, 1, 1)
    );

    // The first worker wakes up and tries to record its outcome: refused.
    let step = Step {
        now_ms: now_ms(),
        token: stale.token,
        attempts: 1,
    };
    let late = Move::Fail {
        reason: "late",
        history: &stale.history,
    };
    let err = h
        .store
        .apply(&id, &late, TaskStatus::Taken, &step)
        .await
        .unwrap_err();
    assert!(err.is_condition_failed(), "{err}");

    let task = h.store.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (task.task_status, task.token, task.attempts),
        (TaskStatus::Success, 2, 2)
    );
    assert_eq!(task.lease_until, None);
    assert_eq!(
        statuses(&task.history),
        vec![("TAKEN", 1), ("TAKEN", 2), ("SUCCESS", 2)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_task_ends_failure_after_max_attempts_with_the_last_error() {
    let h = Harness::start(1).await;
    let id = one_task(&h).await;
    let failing = h.stack.processor(
        h.store.clone(),
        Arc::new(process::runner::SimulatedRunner::new(
            1,
            Duration::ZERO,
            1.0,
            0.0,
        )),
        h.process_config(),
    );
    let report = failing
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!((report.retried_after_error, report.failed), (2, 1));
    let task = h.store.get(&id).await.unwrap().unwrap();
    assert_eq!((task.task_status, task.attempts), (TaskStatus::Failure, 3));
    assert_eq!(task.last_error.as_deref(), Some("simulated failure"));
    assert_eq!(
        statuses(&task.history),
        vec![
            ("TAKEN", 1),
            ("PENDING", 1),
            ("TAKEN", 2),
            ("PENDING", 2),
            ("TAKEN", 3),
            ("FAILURE", 3)
        ]
    );
    let size = serde_json::to_vec(&task).unwrap().len();
    assert!(
        size < 1024,
        "the item with its full history stays small: {size} bytes"
    );
}

/// Busy twice, then fine.
struct BusyTwice(AtomicUsize);

impl TaskRunner for BusyTwice {
    fn capacity(&self) -> usize {
        1
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(10)
    }
    async fn run(&self, _task: &Task) -> RunOutcome {
        if self.0.fetch_add(1, Ordering::SeqCst) < 2 {
            RunOutcome::RetryLater("busy".into())
        } else {
            RunOutcome::Success
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_later_does_not_burn_an_attempt() {
    let h = Harness::start(1).await;
    let id = one_task(&h).await;
    let p = h.stack.processor(
        h.store.clone(),
        Arc::new(BusyTwice(AtomicUsize::new(0))),
        h.process_config(),
    );
    // Each bounce rests at least a second (even with the queue's own rest
    // at 0), so the task is claimable again only in a later invocation,
    // as the sweep would wake it.
    let (mut retried, mut succeeded) = (0, 0);
    for _ in 0..20 {
        let report = p
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap();
        retried += report.retried_later;
        succeeded += report.succeeded;
        if succeeded > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!((retried, succeeded), (2, 1));
    let task = h.store.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (task.task_status, task.attempts, task.token),
        (TaskStatus::Success, 1, 3)
    );
    assert_eq!(task.last_error.as_deref(), Some("busy"));
    // Claim, bounce, claim, bounce, claim, succeed: each claim after a
    // bounce comes at least `MIN_BUSY_REST` later.
    let h = &task.history;
    for pair in h.windows(2) {
        if pair[0].status == TaskStatus::Pending && pair[1].status == TaskStatus::Taken {
            assert!(
                pair[1].at - pair[0].at >= process::rest::MIN_BUSY_REST.as_millis() as u64,
                "{h:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_leases_keep_expiring_is_abandoned_after_max_attempts() {
    let h = Harness::start(1).await;
    let id = one_task(&h).await;
    let mut t = h.stalled_claim(&id, 1).await;
    for attempt in 2..=3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        t = h
            .stalled_claim_at(&id, t.token, attempt, TaskStatus::Taken, 1)
            .await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let report = h
        .processor(1, Duration::ZERO, Duration::from_secs(5))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!((report.abandoned, report.claimed.len()), (1, 0));
    let task = h.store.get(&id).await.unwrap().unwrap();
    assert_eq!((task.task_status, task.attempts), (TaskStatus::Failure, 3));
    assert_eq!(
        task.last_error.as_deref(),
        Some("lease expired after 3 attempts")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_picks_up_tasks_that_were_pending_before_deploy() {
    let h = Harness::as_deployed(2).await;
    // Written before the pipeline exists, by a producer that wakes nobody
    // itself: no stream event or wake-up will announce them.
    let ids = h
        .plain_creator()
        .handle(serde_json::json!({"count": 12}))
        .await
        .unwrap()
        .created;
    assert_eq!(
        h.store.claimable_depth(2, now_ms(), 0).await.unwrap(),
        ids.len(),
        "the sweep's queue depth"
    );
    let processor = Arc::new(h.processor(4, Duration::from_millis(5), Duration::from_secs(5)));
    let options = PipelineOptions {
        stream_from_latest: true,
        sweep: lifo_local::SweepRate::Every(Duration::from_millis(700)),
        ..PipelineOptions::fast()
    };
    let pipeline = Pipeline::start(&h.stack, Arc::new(h.trigger()), processor, options)
        .await
        .unwrap();
    let started = Instant::now();
    while h.count(TaskStatus::Success).await < ids.len() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sweep did not wake the processor"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = Arc::clone(&pipeline.stats);
    pipeline.stop().await;
    assert!(PipelineStats::get(&stats.sweeps) >= 1);
    // The stream carried only the claims and finishes (MODIFY), all dropped
    // by the template's filter: nothing but the sweep announced the tasks.
    assert_eq!(
        PipelineStats::get(&stats.stream_records),
        PipelineStats::get(&stats.filtered_out),
        "no stream insert announced them"
    );
}
