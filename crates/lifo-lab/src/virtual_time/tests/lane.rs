//! The adaptive order's lane against latest-wins keys, in virtual time: the
//! same handlers over the queue's model, so that no stall of a shared
//! machine moves which task the lane gives when.

use super::*;
use lifo_core::{Task, TaskStatus};
use serde_json::json;

fn starts(t: &Task) -> usize {
    t.history
        .iter()
        .filter(|e| e.status == TaskStatus::Taken)
        .count()
}

/// The adaptive order keeps the tasks its reads showed across refills (its
/// lane, `select::deadline`): one kept there that a newer task of its key
/// supersedes meanwhile fails its conditional claim and never starts, and
/// the newer one runs. One slot, runs of 200 ms; eight keyed tasks with 6 s
/// to live under twenty newer ones with an hour: the lane gives the eight
/// (near-0 first) once the backlog would miss their deadline, about 2.5 to
/// 3.5 s in, while newer tasks still wait. The three it would give last
/// are superseded first.
#[test]
fn a_task_the_adaptive_lane_kept_that_a_newer_one_superseded_never_starts() {
    paused().block_on(async {
        let clock = seeded_clock(1);
        let memory = Memory::new(lifo_core::memory::Lag::Aws { seed: 1 })
            .with_latency(crate::simulate::STORE_LATENCY);
        let creator = Creator::new(
            memory.clone(),
            CreateConfig {
                shard_count: 1,
                max_ttl_seconds: 3600,
                ..CreateConfig::new("virtual")
            },
        )
        .with_clock(Arc::clone(&clock));
        let create = |tasks: Vec<serde_json::Value>| {
            let creator = &creator;
            async move {
                creator
                    .handle(json!({ "tasks": tasks }))
                    .await
                    .expect("created")
            }
        };
        create(
            (0..8)
                .map(|i| json!({"taskId": format!("near-{i}"), "supersedeKey": format!("k{i}"), "ttlSeconds": 6, "payload": {}}))
                .collect(),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        create(
            (0..20)
                .map(|i| json!({"taskId": format!("fresh-{i:02}"), "payload": {}}))
                .collect(),
        )
        .await;
        let config = ProcessConfig {
            order: Order::Adaptive,
            shard_count: 1,
            max_ttl_seconds: 3600,
            time_budget: Duration::from_secs(30),
            ..ProcessConfig::new("virtual", "virtual")
        };
        let adaptive = processor(&memory, &clock, (1, Duration::from_millis(200)), config);
        let deadline = UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
        let run = tokio::spawn(async move {
            adaptive
                .handle(&process::Wakeups::one(), deadline)
                .await
        });
        // Two starts in, the first read has shown the eight to the lane.
        let tasks = loop {
            let tasks: Vec<Task> = memory.snapshot().tasks.into_values().collect();
            if tasks.iter().filter(|t| starts(t) > 0).count() >= 2 {
                break tasks;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let mut waiting: Vec<String> = tasks
            .iter()
            .filter(|t| t.task_id.starts_with("near-") && t.task_status == TaskStatus::Pending)
            .map(|t| t.task_id.clone())
            .collect();
        waiting.sort_unstable_by(|a, b| b.cmp(a));
        waiting.truncate(3);
        waiting.sort();
        assert_eq!(waiting.len(), 3, "{tasks:#?}");
        let newer = waiting
            .iter()
            .map(|id| json!({"taskId": format!("{id}-new"), "supersedeKey": memory.task(id).and_then(|t| t.supersede_key), "payload": {}}))
            .collect();
        let mut superseded = create(newer).await.superseded;
        superseded.sort();
        assert_eq!(superseded, waiting, "still pending, so moved at once");
        let report = run.await.expect("the invocation's task").expect("the invocation");
        for id in &waiting {
            let task = memory.task(id).expect("the task");
            assert_eq!(starts(&task), 0, "{id} never starts: {report:?}");
            assert_eq!(task.task_status, TaskStatus::Superseded);
            let newer = memory.task(&format!("{id}-new")).expect("the newer task");
            assert_eq!(newer.task_status, TaskStatus::Success, "{id}-new ran");
        }
        // The lane gave the near tasks, and a superseded one among them was
        // refused: its claim read the task SUPERSEDED (no claimable task).
        assert!(
            report.deadline_starts >= 3,
            "the lane gave the near tasks: {report:?}"
        );
        assert!(
            report.skipped >= 1,
            "the lane gave a superseded task, and its claim was refused: {report:?}"
        );
    });
}
