//! More than one processor (`ProcessorCount`): each invocation takes a
//! shard group's lease and claims from its shards only, with its share of
//! the runner; a held group is left alone; a dead processor's group is
//! taken over once its lease ends.

use lifo_core::{Task, TaskStatus, groups};
use lifo_tests::{Harness, deadline};
use process::runner::{RunOutcome, TaskRunner};
use process::{ProcessConfig, Processor, StopReason, Wakeups};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

const SHARDS: u32 = 6;
const PROCESSORS: u32 = 3;

/// A downstream of 6 slots shared by every processor: counts the most runs
/// at once.
#[derive(Default)]
struct Shared {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl TaskRunner for Shared {
    fn capacity(&self) -> usize {
        6
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(200)
    }
    async fn run(&self, _task: &Task) -> RunOutcome {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        RunOutcome::Success
    }
}

fn processor(h: &Harness, runner: Arc<Shared>) -> Processor<Shared> {
    h.stack.processor(
        h.store.clone(),
        runner,
        ProcessConfig {
            shard_count: SHARDS,
            processors: PROCESSORS,
            max_ttl_seconds: lifo_tests::MAX_TTL,
            time_budget: Duration::from_secs(20),
            deadline_margin: Duration::from_millis(200),
            idle_poll: Duration::from_millis(20),
            linger: Duration::ZERO,
            lease_margin: Duration::from_millis(200),
            ..ProcessConfig::new(h.stack.table.clone(), h.stack.trigger_topic_arn.clone())
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processors_split_the_shards_and_the_runner_between_them() {
    let h = Harness::start(SHARDS).await;
    h.creator()
        .handle(serde_json::json!({"count": 300}))
        .await
        .unwrap();
    let runner = Arc::new(Shared::default());
    let procs: Vec<Arc<Processor<Shared>>> = (0..PROCESSORS)
        .map(|_| Arc::new(processor(&h, runner.clone())))
        .collect();
    // Three invocations at once, each woken for "its" group.
    let runs = procs.iter().enumerate().map(|(g, p)| {
        let p = p.clone();
        tokio::spawn(async move {
            let wake = Wakeups {
                groups: vec![g as u32],
                ..Wakeups::one()
            };
            p.handle(&wake, deadline()).await.unwrap()
        })
    });
    let reports: Vec<_> = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let tasks = h.tasks().await;
    assert!(tasks.iter().all(|t| t.task_status == TaskStatus::Success));
    let shard_of = |id: &str| tasks.iter().find(|t| t.task_id == id).unwrap().lifo_shard;
    let mut seen = Vec::new();
    for r in &reports {
        let g = r.group.expect("a group");
        seen.push(g);
        assert!(!r.claimed.is_empty(), "group {g} claimed nothing");
        for id in &r.claimed {
            assert_eq!(
                groups::group_of(shard_of(id), PROCESSORS),
                g,
                "{id} is not in group {g}'s shards"
            );
        }
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2], "each group once");
    assert_eq!(reports.iter().map(|r| r.claimed.len()).sum::<usize>(), 300);
    // 6 slots split 2 + 2 + 2: never more than 6 runs at once in all.
    let most = runner.most.load(Ordering::SeqCst);
    assert!(most <= 6, "{most} runs at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_group_is_left_alone_and_a_dead_ones_taken_over_after_its_lease() {
    let h = Harness::start(SHARDS).await;
    h.creator()
        .handle(serde_json::json!({"count": 30}))
        .await
        .unwrap();
    // Processors 0 and 2 are running (live leases); processor 1 died with
    // a lease that ends in 1.5 s (taken after the tasks were written, so a
    // slow machine can't let it lapse before the first wake-up).
    let now = lifo_core::now_ms();
    for (g, until) in [(0, now + 60_000), (1, now + 1_500), (2, now + 60_000)] {
        assert!(
            h.store
                .take_group(g, until, now, "other")
                .await
                .unwrap()
                .is_some()
        );
    }
    let p = processor(&h, Arc::new(Shared::default()));
    let wake = Wakeups {
        groups: vec![1],
        ..Wakeups::one()
    };
    let held = p.handle(&wake, deadline()).await.unwrap();
    assert_eq!((held.stop, held.claimed.len()), (StopReason::Held, 0));
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let taken = p
        .handle(&wake, SystemTime::now() + Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(taken.group, Some(1), "the dead processor's group");
    assert!(!taken.claimed.is_empty());
    // It gave the lease back: the group is free at once.
    assert!(
        h.store
            .take_group(1, now + 1, lifo_core::now_ms(), "next")
            .await
            .unwrap()
            .is_some()
    );
}
