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
    let tasks = make(NOW);
    let shards: std::collections::HashSet<u32> = tasks.iter().map(|t| t.lifo_shard).collect();
    assert_eq!(shards.len(), 4, "the tasks span every shard");
    let config = ProcessConfig {
        order,
        shard_count: 4,
        ..ProcessConfig::new("t", "t")
    };
    let report = claim(&tasks, config, latency).await;
    (tasks, report.claimed)
}

/// `tasks` claimed by one invocation of one processor with `config` that
/// runs them one at a time, each for `latency`, from [`NOW`]: its report.
async fn claim(tasks: &[Task], config: ProcessConfig, latency: Duration) -> crate::ProcessReport {
    let clock = Arc::new(TokioClock::starting_at(NOW));
    let memory = Memory::new(Lag::Off);
    memory.put_new(tasks).await.unwrap();
    let config = ProcessConfig {
        max_ttl_seconds: 3600,
        time_budget: Duration::from_secs(30),
        ..config
    };
    let runner = Arc::new(SimulatedRunner::new(1, latency, 0.0, 0.0));
    let p = Processor::over(memory, Arc::new(NoTail), runner, config).with_clock(clock.clone());
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
    p.handle(&Wakeups::one(), deadline).await.unwrap()
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

/// Runs tasks in 10 ms; when it starts its `at`-th run, it writes one
/// task newer than every other to `memory` (and remembers its id).
struct InsertsMidRun {
    memory: Memory,
    clock: Arc<TokioClock>,
    shards: u32,
    at: usize,
    runs: std::sync::atomic::AtomicUsize,
    inserted: std::sync::Mutex<Option<String>>,
}

impl crate::runner::TaskRunner for InsertsMidRun {
    fn capacity(&self) -> usize {
        4
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(100)
    }
    async fn run(&self, _task: &Task) -> crate::runner::RunOutcome {
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n == self.at {
            let newest = Task::new_pending(
                lifo_core::new_task_id(),
                lifo_core::Payload::new(),
                self.clock.now_ms(),
                3600,
                self.shards,
            );
            self.memory
                .put_new(std::slice::from_ref(&newest))
                .await
                .unwrap();
            *self.inserted.lock().unwrap() = Some(newest.task_id);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        crate::runner::RunOutcome::Success
    }
}

/// The LIFO guarantee with the shard heads kept in memory
/// (`select::heads`): a task that becomes claimable while process runs is
/// passed over by at most one refill (`refresh_claims` candidates) plus
/// the claims already in flight; before it, the order is exact LIFO. Each
/// store request takes 5 ms, a round trip in a region.
#[tokio::test(start_paused = true)]
async fn a_task_created_mid_run_is_claimed_within_one_refill() {
    const SHARDS: u32 = 8;
    let clock = Arc::new(TokioClock::starting_at(NOW));
    let memory = Memory::new(Lag::Off).with_latency(Duration::from_millis(5));
    let old: Vec<Task> = (0..200)
        .map(|i| {
            Task::new_pending(
                lifo_core::new_task_id(),
                lifo_core::Payload::new(),
                NOW - 60_000 + i,
                3600,
                SHARDS,
            )
        })
        .collect();
    memory.put_new(&old).await.unwrap();
    let runner = Arc::new(InsertsMidRun {
        memory: memory.clone(),
        clock: clock.clone(),
        shards: SHARDS,
        at: 30,
        runs: Default::default(),
        inserted: Default::default(),
    });
    let config = ProcessConfig {
        shard_count: SHARDS,
        max_ttl_seconds: 3600,
        time_budget: Duration::from_secs(60),
        ..ProcessConfig::new("t", "t")
    };
    let p =
        Processor::over(memory, Arc::new(NoTail), runner.clone(), config).with_clock(clock.clone());
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
    let report = p.handle(&Wakeups::one(), deadline).await.unwrap();
    assert_eq!(report.succeeded, 201);
    let newest = runner.inserted.lock().unwrap().clone().expect("inserted");
    let position = report.claimed.iter().position(|id| *id == newest).unwrap();
    // When run 30 started, at least 30 claims had been sent; the policy of
    // 8 shards and 4 in flight re-reads after 16 candidates.
    let policy = crate::select::heads::HeadsPolicy::new(SHARDS as usize, 4);
    let passed_over = position.saturating_sub(runner.at);
    assert!(
        passed_over <= policy.refresh_claims + 4,
        "the newest task was claimed {passed_over} claims after it was created \
         (at most {} + 4 in flight)",
        policy.refresh_claims
    );
    let newest_first: Vec<&String> = old.iter().rev().map(|t| &t.task_id).collect();
    let before: Vec<&String> = report.claimed[..runner.at].iter().collect();
    assert_eq!(before, newest_first[..runner.at]);
}

/// The adaptive order with the share on or off: one slot, runs of 200 ms
/// (about 4 starts a second). A flooding tenant's thirty tasks 4–6 s from
/// their deadline (more than the slot can start by then, so the lane
/// keeps giving), a quiet tenant's three 6–7 s from theirs, and newer
/// ones: the flood's ten, a third tenant's two. The claims in order, and
/// how many the lane gave.
async fn adaptive_under_a_flood(fair_share: bool) -> (Vec<String>, usize) {
    let task = |id: String, tenant: &str, age_ms: u64, ttl: u64| Task {
        tenant: Some(tenant.to_owned()),
        ..Task::new_pending(id, lifo_core::Payload::new(), NOW - age_ms, ttl, 1)
    };
    let mut tasks: Vec<Task> = (0..30u64)
        .map(|i| task(format!("flood-near-{i:02}"), "flood", 33_000 + i * 10, 39))
        .collect();
    tasks.extend((0..3).map(|i| task(format!("quiet-near-{i}"), "quiet", 33_000, 40)));
    tasks.extend((0..10u64).map(|i| task(format!("flood-{i:02}"), "flood", 5_000 - i, 3600)));
    tasks.extend((0..2).map(|i| task(format!("third-{i}"), "third", 4_000, 3600)));
    let config = ProcessConfig {
        fair_share,
        order: lifo_core::Order::Adaptive,
        shard_count: 1,
        ..ProcessConfig::new("t", "t")
    };
    let report = claim(&tasks, config, Duration::from_millis(200)).await;
    (report.claimed, report.deadline_starts)
}

/// The adaptive order's lane never puts a flooding tenant's tasks first:
/// with the share, the flood's tasks near their deadline (the nearest of
/// all) get what the others leave, and the lane gives its slots to the
/// quiet tenant's, least time left first. Without the share, the lane
/// starts the flood's nearest first.
#[tokio::test(start_paused = true)]
async fn the_adaptive_lane_passes_over_a_flooding_tenant() {
    let (claimed, lane) = adaptive_under_a_flood(true).await;
    assert!(claimed.len() >= 3, "{claimed:?}");
    let mut first: Vec<&str> = claimed[..3].iter().map(String::as_str).collect();
    first.sort();
    assert_eq!(
        first,
        ["quiet-near-0", "quiet-near-1", "quiet-near-2"],
        "the quiet tenant's near tasks first: {claimed:?}"
    );
    assert!(lane >= 3, "the lane gave them: {lane} lane starts");
    let (claimed, lane) = adaptive_under_a_flood(false).await;
    assert!(
        claimed[0].starts_with("flood-near-"),
        "without the share, the nearest deadline of any tenant: {claimed:?}"
    );
    assert!(lane >= 1, "{lane} lane starts");
}

/// The invocation a create wakes reads before the index shows the task
/// (each write shows 400 ms late): its linger (the template's 1 s) keeps it
/// looking until the task shows up. With no linger, the same invocation
/// ends with nothing claimed.
#[tokio::test(start_paused = true)]
async fn the_invocation_a_create_wakes_lingers_for_a_task_the_index_shows_late() {
    let clock = Arc::new(TokioClock::starting_at(NOW));
    let memory = Memory::new(Lag::Fixed { ms: 400 }).with_latency(Duration::from_millis(5));
    let woken = |linger| {
        let config = ProcessConfig {
            linger,
            shard_count: 1,
            max_ttl_seconds: 3600,
            time_budget: Duration::from_secs(5),
            ..ProcessConfig::new("t", "t")
        };
        let runner = Arc::new(SimulatedRunner::new(3, Duration::ZERO, 0.0, 0.0));
        Processor::over(memory.clone(), Arc::new(NoTail), runner, config).with_clock(clock.clone())
    };
    let write = |id: &str| {
        let task = Task::new_pending(
            id.into(),
            lifo_core::Payload::new(),
            clock.now_ms(),
            3600,
            1,
        );
        let memory = memory.clone();
        async move { memory.put_new(&[task]).await.unwrap() }
    };
    let deadline = || SystemTime::UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
    write("a").await;
    let report = woken(Duration::ZERO)
        .handle(&Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(report.claimed.is_empty(), "{report:?}");
    write("b").await;
    let report = woken(Duration::from_secs(1))
        .handle(&Wakeups::one(), deadline())
        .await
        .unwrap();
    let mut claimed = report.claimed.clone();
    claimed.sort();
    assert_eq!(claimed, ["a", "b"]);
}
