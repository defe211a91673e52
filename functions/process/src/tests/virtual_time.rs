//! The claim loop's timing in virtual time: the handler over the queue's
//! in-memory model (`lifo_core::memory`) on tokio's paused clock, so that
//! no stall of a shared machine moves what it starts (the same test on
//! DynamoDB Local had to allow two misses for `make test`'s load).

use super::*;
use lifo_core::clock::{Clock, TokioClock};
use lifo_core::memory::{Lag, Memory};
use lifo_core::store::Queue;
use lifo_lambda::notify::Wake;
use lifo_lambda::{NotifyError, Wakeup};
use std::future::Future;
use std::pin::Pin;

/// Where the tail calls of these runs go: nowhere (one invocation each).
#[derive(Debug)]
struct NoTail;

impl Wake for NoTail {
    fn wake<'a>(
        &'a self,
        _: &'a Wakeup,
    ) -> Pin<Box<dyn Future<Output = Result<String, NotifyError>> + Send + 'a>> {
        Box::pin(async { Ok(String::new()) })
    }
}

const NOW: u64 = 1_800_000_000_000;

/// The tasks `make` gives for now (over 4 shards), claimed by one
/// invocation of one processor that runs them one at a time, each for
/// `latency`, in `order`: the tasks and the claim order.
async fn claim_in(
    order: lifo_core::Order,
    latency: Duration,
    make: impl FnOnce(u64) -> Vec<Task>,
) -> (Vec<Task>, Vec<String>) {
    let clock = Arc::new(TokioClock::starting_at(NOW));
    let memory = Memory::new(Lag::Off);
    let tasks = make(NOW);
    let shards: std::collections::HashSet<u32> = tasks.iter().map(|t| t.lifo_shard).collect();
    assert_eq!(shards.len(), 4, "the tasks span every shard");
    memory.put_new(&tasks).await.unwrap();
    let config = ProcessConfig {
        order,
        shard_count: 4,
        max_ttl_seconds: 3600,
        time_budget: Duration::from_secs(30),
        ..ProcessConfig::new("t", "t")
    };
    let runner = Arc::new(SimulatedRunner::new(1, latency, 0.0, 0.0));
    let p = Processor::over(memory, Arc::new(NoTail), runner, config).with_clock(clock.clone());
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
    let report = p.handle(&Wakeups::one(), deadline).await.unwrap();
    (tasks, report.claimed)
}

fn newest_first_of(tasks: &[Task]) -> Vec<String> {
    tasks.iter().rev().map(|t| t.task_id.clone()).collect()
}

/// Adaptive, one slot, runs of 200 ms (5 starts a second): twelve tasks 6
/// to 7 s from their deadline (a 40 s TTL) under 30 newer ones that arrived
/// 5 s ago. Newest first would start the 30 first (6 s) and some of the
/// twelve would expire; adaptive starts the one with the least time left
/// first, all twelve in time, and the 30 newest first among themselves.
/// LIFO on the same tasks starts fewer of the twelve.
#[tokio::test(start_paused = true)]
async fn the_adaptive_order_starts_the_tasks_near_their_deadline_in_time() {
    let make = |now: u64| {
        let near =
            (0..12u64).map(|i| lifo_core::testing::pending_on_4_shards(now - 33_000 - i * 50, 40));
        let fresh = (0..30u64)
            .map(|i| lifo_core::testing::pending_on_4_shards(now - 5_000 - (30 - i), 3600));
        near.chain(fresh).collect::<Vec<Task>>()
    };
    let run = Duration::from_millis(200);
    let (tasks, claimed) = claim_in(lifo_core::Order::Adaptive, run, make).await;
    let (near, fresh): (Vec<String>, Vec<String>) = claimed
        .iter()
        .cloned()
        .partition(|id| tasks[..12].iter().any(|t| &t.task_id == id));
    assert_eq!(
        near.len(),
        12,
        "every task near its deadline started: {claimed:?}"
    );
    let least_left = tasks[..12]
        .iter()
        .min_by_key(|t| (t.expires_at, std::cmp::Reverse(t.claimable_at)))
        .unwrap();
    assert_eq!(claimed[0], least_left.task_id);
    assert_eq!(fresh, newest_first_of(&tasks[12..]));
    let (tasks, claimed) = claim_in(lifo_core::Order::Lifo, run, make).await;
    let lifo_near = claimed
        .iter()
        .filter(|id| tasks[..12].iter().any(|t| &t.task_id == *id))
        .count();
    assert!(
        lifo_near < near.len(),
        "LIFO lets more expire: {lifo_near} of 12 started, adaptive {}",
        near.len()
    );
    assert_eq!(claimed[..30], newest_first_of(&tasks[12..])[..]);
}
