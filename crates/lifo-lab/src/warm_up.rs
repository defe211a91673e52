//! Warms a fresh DynamoDB Local before a run is measured.
//!
//! Each `lifo simulate` run starts a DynamoDB Local of its own, and a fresh
//! JVM serves its first few thousand requests slowly while it compiles
//! them: in the tenants mix (two flooders at 20:1, seeds 1–5), the first
//! 3 s of a run held each slot 60–110 ms longer than later on, and the
//! nine quiet tenants' create requests took 94–237 ms at p95 against
//! 50–74 ms once warm; the slow start lasted about 9 s of a run. The
//! backlog built in those seconds was most of the quiet tenants' p95 age
//! at start (`--warm-up-seconds 0` runs cold). AWS's DynamoDB has no such
//! warm-up, so a run first sends the requests the pipeline will send for
//! [`Workload::warm_up`](crate::simulate::Workload::warm_up): batch puts,
//! claim queries, a conditional claim and finish per task (the table's stream
//! records them too), on the run's own table, through a store whose units
//! are not billed to the run. Each task is deleted once finished, so
//! nothing is left to claim, and the pipeline reads the stream from after
//! the warm-up's records.

use anyhow::{Context, Result};
use lifo_core::expr::{Move, Step};
use lifo_core::{Order, Store, Task, TaskStatus, now_ms};
use std::time::{Duration, Instant};

/// Tasks per round: one create request's worth.
const BATCH: usize = 25;

/// Sends the pipeline's kinds of requests to `store`'s table for `time`;
/// returns how many tasks it wrote (and deleted).
pub async fn warm_up(store: &Store, shards: u32, time: Duration) -> Result<usize> {
    let started = Instant::now();
    let shards = shards.max(1);
    let all_shards: Vec<u32> = (0..shards).collect();
    let mut written = 0;
    while started.elapsed() < time {
        let now = now_ms();
        let tasks: Vec<Task> = (0..BATCH)
            .map(|i| {
                let n = written + i;
                let payload = serde_json::Map::from_iter([("warmUp".to_owned(), n.into())]);
                Task::new_pending(format!("warm-up-{n}"), payload, now, 60, shards)
            })
            .collect();
        written += store
            .put_new(&tasks)
            .await
            .context("warming DynamoDB Local: writing tasks")?;
        for _ in 0..5 {
            store
                .claimable_heads(
                    Order::Lifo,
                    &all_shards,
                    8,
                    now_ms(),
                    now.saturating_sub(60_000),
                )
                .await
                .context("warming DynamoDB Local: reading the heads")?;
        }
        for t in &tasks {
            let now = now_ms();
            let claimed = store
                .apply(
                    &t.task_id,
                    &Move::Claim {
                        lease_until: now + 60_000,
                        claimed_by: "warm-up",
                    },
                    TaskStatus::Pending,
                    &Step {
                        now_ms: now,
                        token: t.token,
                        attempts: 1,
                    },
                )
                .await
                .with_context(|| format!("warming DynamoDB Local: claiming {}", t.task_id))?;
            let step = Step {
                now_ms: now_ms(),
                token: claimed.token,
                attempts: claimed.attempts,
            };
            let history = claimed.history.as_slice();
            store
                .record(
                    &t.task_id,
                    &Move::Succeed { history },
                    TaskStatus::Taken,
                    &step,
                )
                .await
                .with_context(|| format!("warming DynamoDB Local: finishing {}", t.task_id))?;
            store
                .delete(&t.task_id, now_ms())
                .await
                .with_context(|| format!("warming DynamoDB Local: deleting {}", t.task_id))?;
        }
    }
    Ok(written)
}
