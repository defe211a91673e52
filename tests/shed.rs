//! What the queue sheds stops costing it reads: on DynamoDB Local, with
//! the real handlers, a shed backlog leaves the claimable index (the sweep's
//! reaper, the claim reads on their way), so that draining live work
//! costs what it costs with no backlog and the sweep's reads do not grow
//! with it. (Reads over a backlog no sweep has reached yet, and the sweep's
//! count of what it shed, are timed in virtual time: lifo-lab's
//! `virtual_time::tests`.)

use lifo_core::store::Op;
use lifo_core::{Task, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use std::time::Duration;

/// `n` tasks that expired a minute ago (older than any live one), never
/// started: a shed backlog as an overload leaves it.
async fn backlog(h: &Harness, n: usize) {
    let created = now_ms() - 120_000;
    let tasks: Vec<Task> = (0..n)
        .map(|i| {
            let payload = serde_json::json!({"n": i}).as_object().cloned().unwrap();
            Task::new_pending(format!("old-{i:06}"), payload, created + i as u64, 60, 1)
        })
        .collect();
    for chunk in tasks.chunks(1000) {
        h.store.put_new(chunk).await.unwrap();
    }
}

/// What a drain of live tasks read, and shed on the way.
struct Drain {
    /// Read units per success: how often the processor reads depends on the
    /// pace of its refills, which a busy machine changes.
    per_success: f64,
    /// Read units per read request: what each read met, whatever the pace.
    per_read: f64,
    shed: usize,
}

impl Drain {
    /// Whether this drain read as little as `floor`: each read met no more
    /// (within 20%), and the reads per success are within the pace's
    /// spread (50%).
    fn reads_as_little_as(&self, floor: &Drain) -> bool {
        self.per_read <= floor.per_read * 1.2 + 1e-9
            && self.per_success <= floor.per_success * 1.5 + 1e-9
    }
}

/// Runs `live` new tasks (one invocation after another until all succeed)
/// and says what the processor's reads cost.
async fn drain(h: &Harness, live: usize, tag: &str) -> Drain {
    let ids: Vec<String> = (0..live).map(|i| format!("{tag}-{i}")).collect();
    let tasks: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({"taskId": id, "payload": {"n": 1}}))
        .collect();
    h.creator()
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .unwrap();
    // A store of its own: its meter counts this drain's reads alone.
    let p = h.processor_on(h.stack.store(), 3, Duration::ZERO, Duration::from_secs(5));
    let (mut succeeded, mut shed) = (0, 0);
    for _ in 0..20 {
        let report = p
            .handle(&process::Wakeups::one(), deadline())
            .await
            .unwrap();
        succeeded += report.succeeded;
        shed += report.shed;
        if succeeded >= live {
            break;
        }
    }
    assert_eq!(succeeded, live, "{tag}");
    let reads = p.store().meter().spent(Op::Read);
    Drain {
        per_success: reads.units / live as f64,
        per_read: reads.units / reads.requests.max(1) as f64,
        shed,
    }
}

/// Read units of one sweep run (reaper, then the COUNT per shard).
async fn sweep(h: &Harness) -> (f64, trigger::TriggerOutcome) {
    let store = h.stack.store();
    let t = h
        .stack
        .trigger(store.clone(), h.shards, lifo_tests::MAX_TTL);
    let outcome = t
        .measured(lifo_local::pipeline::scheduled_event_json())
        .await
        .unwrap();
    (store.meter().spent(Op::Read).units, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_stay_flat_in_a_shed_backlog_and_a_shed_costs_three_write_units() {
    const BACKLOG: usize = 2_000;
    // No backlog: the floor. The drains compared run on servers of their
    // own: reads per success depend on the pace of the refills, which a
    // server busy with other suites changes.
    let h = Harness::own_dynamodb(1).await;
    let (sweep_floor, _) = sweep(&h).await;
    let floor = drain(&h, 100, "floor").await;

    // A backlog of expired tasks: the sweep's reaper sheds it all, each
    // task counted once, in the run that shed it. How much one run sheds
    // is the trigger's time budget over the machine's speed (here, a debug
    // build on DynamoDB Local: all 2,000 in one run most days, 1,900 on a
    // slow one); what is left, the next run sheds (`lifo bench` measures
    // the rate, this test does not).
    let h = Harness::own_dynamodb(1).await;
    backlog(&h, BACKLOG).await;
    let (mut reap_reads, mut shed, mut runs) = (0.0, Vec::new(), 0);
    while shed.iter().sum::<usize>() < BACKLOG && runs < 5 {
        let (reads, outcome) = sweep(&h).await;
        reap_reads += reads;
        shed.push(outcome.shed);
        runs += 1;
    }
    assert_eq!(
        shed.iter().sum::<usize>(),
        BACKLOG,
        "shed per run: {shed:?}"
    );
    assert!(shed[0] > 0, "the first run shed nothing: {shed:?}");
    let tasks = h.tasks().await;
    assert_eq!(tasks.len(), BACKLOG);
    assert!(tasks.iter().all(|t| t.task_status == TaskStatus::Expired
        && t.claimable_at.is_none()
        && t.shed_at.is_some()));

    // Draining live work now costs what it costs with no backlog.
    let live = drain(&h, 100, "live").await;
    assert_eq!(live.shed, 0, "the reaper left nothing to shed");
    println!(
        "read units per success: no backlog {:.2}, {BACKLOG} shed {:.2}; per read: {:.2}, {:.2}; \
         reaper: {:.3} read units per shed task (shed per run: {shed:?}); sweep: \
         {sweep_floor:.1} read units empty",
        floor.per_success,
        live.per_success,
        floor.per_read,
        live.per_read,
        reap_reads / BACKLOG as f64
    );
    assert!(live.reads_as_little_as(&floor));
    // The next sweep reads what an empty queue's does.
    let (sweep_after, outcome) = sweep(&h).await;
    assert_eq!(outcome.shed, 0);
    assert!(
        sweep_after <= sweep_floor + 1e-9,
        "{sweep_after} vs {sweep_floor}"
    );

    // Write units per shed task: the item, its claimable index entry removed,
    // its shed index entry put.
    let h = Harness::start(1).await;
    backlog(&h, 40).await;
    let store = h.stack.store();
    let t = h.stack.trigger(store.clone(), 1, lifo_tests::MAX_TTL);
    let outcome = t
        .measured(lifo_local::pipeline::scheduled_event_json())
        .await
        .unwrap();
    assert_eq!(outcome.shed, 40);
    let spent = store.meter().spent(Op::Shed);
    assert_eq!(spent.requests, 40);
    assert_eq!(spent.units / 40.0, 3.0, "write units per shed task");
}

/// Expired entries the reaper has not reached yet (say, shed since its
/// last run) are shed by the claim read that meets them, so the next drain
/// reads none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_read_sheds_the_expired_entries_it_meets() {
    // Servers of their own: the two drains' reads are compared.
    let h = Harness::own_dynamodb(1).await;
    let floor = drain(&h, 100, "floor").await;
    let h = Harness::own_dynamodb(1).await;
    backlog(&h, 600).await;
    let first = drain(&h, 100, "first").await;
    let shed = first.shed;
    assert!(shed > 0, "the drain met the backlog");
    // What the first drain left (a read runs a page into it at most), the
    // sweep reaps; nothing is read twice after that.
    let (_, outcome) = sweep(&h).await;
    assert_eq!(shed + outcome.shed, 600);
    let second = drain(&h, 100, "second").await;
    assert_eq!(second.shed, 0);
    println!(
        "read units per success: floor {:.2}, meeting the backlog {:.2}, after it {:.2}; per read: {:.2}, {:.2}, {:.2}",
        floor.per_success,
        first.per_success,
        second.per_success,
        floor.per_read,
        first.per_read,
        second.per_read
    );
    assert!(second.reads_as_little_as(&floor));
    let tasks = h.tasks().await;
    let expired = tasks
        .iter()
        .filter(|t| t.task_status == TaskStatus::Expired)
        .count();
    assert_eq!(expired, 600);
}
