//! Chaos: 500 tasks through DynamoDB Local while processors are killed at
//! random points, DynamoDB and SNS answers are replaced by throttling / 5xx
//! errors at a set rate (after the request was applied, so outcomes are
//! ambiguous), and two processors run at once; beside them, a shed backlog
//! of 300 expired tasks that a reaper (the sweep's) and the claim reads
//! race to shed. Tasks come in three priorities and four tenants (the
//! fair share on). One task in five carries a `supersedeKey` (20 keys), and
//! while the processors run eight producers write newer tasks of those keys
//! at once through the same faults: once a newer task of a key (by
//! creation) is written, no older one may start, whichever write landed
//! first. DynamoDB answers transaction conflicts as AWS does, and injects
//! them at 20 % on the items transactions write
//! ([`lifo_local::contention`]): none may stop a processor, and the writes
//! they hold back must not turn latest wins into oldest wins. Bounded in
//! time; prints its counts. The table's stream is the independent witness
//! of what committed.

#[path = "chaos/faults.rs"]
mod faults;
#[path = "chaos/stream.rs"]
mod stream;

use faults::Faults;
use lifo_core::{Store, Task};
use lifo_lab::chaos::{Evidence, Ledger, Verdict, judge};
use lifo_lambda::Notifier;
use lifo_tests::Harness;
use process::runner::{RunOutcome, TaskRunner};
use process::{ProcessConfig, Processor};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use stream::stream_changes;

const TASKS: usize = 500;
/// Keys of the keyed tasks (one task in five of the first 500 has one).
const KEYS: usize = 20;
/// Newer tasks of those keys written while the processors run.
const UPDATES: usize = 160;
/// Producers writing them at once: each round's eight writes are of one key.
const PRODUCERS: usize = 8;
/// The priorities, taken in turn.
const LANES: [&str; 3] = ["high", "normal", "low"];
/// Expired tasks present from the start: every one must end EXPIRED, shed
/// once, and never run.
const BACKLOG: usize = 300;
const FAULT_RATE: f64 = 0.05;
/// Transaction conflicts on the items transactions write (keyed tasks and
/// their key items), and on the transactions themselves.
const CONFLICT_RATE: f64 = 0.20;
/// Live tasks near their deadline, in the adaptive order's run.
const TIGHT: usize = 60;
const LIMIT: Duration = Duration::from_secs(240);

/// A downstream that records every run by (task, token). One run in 40
/// stalls past its claim's lease (a long GC pause, a slow downstream): the
/// task is reclaimed meanwhile, and the stalled worker's finish must be
/// refused by the fencing token.
#[derive(Default)]
struct Witness {
    started: Mutex<HashSet<(String, u64)>>,
    /// When each run started, epoch ms.
    start_times: Mutex<Vec<(String, u64)>>,
    completed: Mutex<HashSet<(String, u64)>>,
    runs: Mutex<HashMap<String, usize>>,
    stalls: AtomicUsize,
    /// Each task's payload as created (mixed sizes: some on the task item,
    /// some in an item of their own, deflated).
    payloads: Mutex<HashMap<String, lifo_core::Payload>>,
    /// Runs whose task did not carry its payload as created.
    wrong_payload: AtomicUsize,
}

impl TaskRunner for Witness {
    fn capacity(&self) -> usize {
        4
    }
    fn max_duration(&self) -> Duration {
        Duration::from_millis(40)
    }
    async fn run(&self, task: &Task) -> RunOutcome {
        if let Ok(mut s) = self.started.lock() {
            s.insert((task.task_id.clone(), task.token));
        }
        // The claim's own stamp (read before the claim was sent, so at or
        // before it committed), not the run's: a claim that committed before
        // a newer write may still run after that write was answered.
        if let Ok(mut s) = self.start_times.lock() {
            let claimed = task.started_at.unwrap_or_else(lifo_core::now_ms);
            s.push((task.task_id.clone(), claimed));
        }
        let expected = self
            .payloads
            .lock()
            .ok()
            .and_then(|p| p.get(&task.task_id).cloned());
        if expected.as_ref() != Some(&task.payload) {
            self.wrong_payload.fetch_add(1, Ordering::Relaxed);
        }
        if fastrand::u32(0..40) == 0 {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(2500)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..40))).await;
        }
        if let Ok(mut c) = self.completed.lock() {
            c.insert((task.task_id.clone(), task.token));
        }
        if let Ok(mut r) = self.runs.lock() {
            *r.entry(task.task_id.clone()).or_default() += 1;
        }
        RunOutcome::Success
    }
}

#[derive(Debug, Default)]
struct Counts {
    invocations: AtomicUsize,
    aborted: AtomicUsize,
    errors: AtomicUsize,
    /// Invocations that ended in an error caused by a transaction conflict.
    conflict_stops: AtomicUsize,
    stale_rejected: AtomicUsize,
    /// Claims the adaptive order's deadline lane gave.
    deadline_starts: AtomicUsize,
}

/// One "Lambda": invoked again and again, each invocation killed at a
/// random moment half of the time.
async fn worker(p: Arc<Processor<Witness>>, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        counts.invocations.fetch_add(1, Ordering::Relaxed);
        // Short invocations: leases (deadline + margin) expire within seconds.
        let deadline = SystemTime::now() + Duration::from_millis(1500);
        let wake = process::Wakeups::one();
        let run = p.handle(&wake, deadline);
        let result = if fastrand::bool() {
            tokio::time::timeout(Duration::from_millis(fastrand::u64(1..600)), run).await
        } else {
            Ok(run.await)
        };
        match result {
            Err(_) => {
                counts.aborted.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Ok(report)) => {
                counts
                    .stale_rejected
                    .fetch_add(report.stale_rejected, Ordering::Relaxed);
                counts
                    .deadline_starts
                    .fetch_add(report.deadline_starts, Ordering::Relaxed);
                if matches!(
                    report.stop,
                    process::StopReason::Empty | process::StopReason::Held
                ) {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            Ok(Err(e)) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                if format!("{e:?}").contains("TransactionConflict") {
                    counts.conflict_stops.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Three processors (ProcessorCount 3, shard group leases) and four
/// invocations racing for the groups: the one run on DynamoDB Local and
/// moto. One processor with two invocations racing it, and the adaptive
/// order, run in virtual time over 50 seeds (lifo-lab's
/// `tests/virtual_chaos.rs`), beside two and three processors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_with_three_processors_nothing_lost_nothing_stuck_nothing_committed_twice() {
    chaos(3, 4, lifo_core::Order::Lifo).await;
}

async fn chaos(processors: u32, workers: usize, order: lifo_core::Order) {
    let h = Harness::start_with(
        4,
        lifo_local::stack::StackOptions {
            contention: lifo_local::contention::ContentionMode::Aws {
                rate: CONFLICT_RATE,
            },
            // The chaos run reads the table's stream (every change).
            servers: lifo_local::stack::Servers::SharedMoto,
            ..Default::default()
        },
    )
    .await;
    let witness = Arc::new(Witness::default());
    // Mixed payloads: 60 B (on the task item), 2 KB and 20 KB (items of
    // their own), realistic JSON.
    let mut created = Vec::new();
    let mut keys: HashMap<String, String> = HashMap::new();
    for batch in 0..TASKS / 100 {
        let tasks: Vec<serde_json::Value> = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                let payload = match n % 3 {
                    0 => serde_json::json!({"n": n}).as_object().cloned().unwrap(),
                    1 => lifo_local::payloads::realistic(n as u64, 2048),
                    _ => lifo_local::payloads::realistic(n as u64, 20_480),
                };
                let id = format!("task-{n:04}");
                witness
                    .payloads
                    .lock()
                    .unwrap()
                    .insert(id.clone(), payload.clone().into());
                // Priorities and tenants mixed in: every invariant holds across them.
                let mut spec = serde_json::json!({
                    "taskId": id,
                    "payload": payload,
                    "priority": LANES[n % 3],
                    "tenant": format!("tenant-{}", n % 4),
                });
                if n % 5 == 0 {
                    let key = format!("key-{}", (n / 5) % KEYS);
                    keys.insert(id.clone(), key.clone());
                    spec["supersedeKey"] = serde_json::json!(key);
                }
                spec
            })
            .collect();
        created.extend(
            h.creator()
                .handle(serde_json::json!({ "tasks": tasks }))
                .await
                .unwrap()
                .created,
        );
    }
    assert_eq!(created.len(), TASKS);
    let expired_at = lifo_core::now_ms() - 120_000;
    let backlog: Vec<Task> = (0..BACKLOG)
        .map(|i| {
            let payload = serde_json::json!({"old": i}).as_object().cloned().unwrap();
            Task::new_pending(
                format!("expired-{i}"),
                payload,
                expired_at + i as u64,
                60,
                4,
            )
        })
        .collect();
    h.store.put_new(&backlog).await.unwrap();
    // In the adaptive order, live tasks near their deadline (written 40 s
    // ago with a 60 s TTL) for the deadline lane to claim through the
    // faults: each runs or is shed, like any task, exactly once. High
    // priority: the lane never passes over a higher priority waiting in the
    // heads, and behind the 167 high tasks above, normal ones with 10 s to
    // live reached it only after their deadline when the three chaos runs
    // shared two cores (0 lane claims, all 60 shed).
    let tight: Vec<Task> = match order {
        lifo_core::Order::Adaptive => (0..TIGHT)
            .map(|i| {
                let payload = serde_json::json!({"tight": i})
                    .as_object()
                    .cloned()
                    .unwrap();
                let at = lifo_core::now_ms() - 40_000 + i as u64;
                Task {
                    claimable_at: Some(lifo_core::priority::Priority::High.key(at)),
                    ..Task::new_pending(format!("tight-{i}"), payload, at, 60, 4)
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    h.store.put_new(&tight).await.unwrap();
    created.extend(tight.iter().map(|t| t.task_id.clone()));
    for t in &tight {
        witness
            .payloads
            .lock()
            .unwrap()
            .insert(t.task_id.clone(), t.payload.clone());
    }

    let injected = Arc::new(AtomicUsize::new(0));
    let enabled = Arc::new(AtomicBool::new(true));
    let ddb_conf = h.stack.ddb.config().to_builder().interceptor(Faults {
        rate: FAULT_RATE,
        json: true,
        injected: injected.clone(),
        enabled: enabled.clone(),
    });
    let sns_conf = h.stack.sns.config().to_builder().interceptor(Faults {
        rate: FAULT_RATE,
        json: false,
        injected: injected.clone(),
        enabled: enabled.clone(),
    });
    let ddb = aws_sdk_dynamodb::Client::from_conf(ddb_conf.build());
    let sns = aws_sdk_sns::Client::from_conf(sns_conf.build());
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let processor = || {
        Arc::new(Processor::new(
            Store::new(ddb.clone(), &h.stack.table),
            Notifier::new(sns.clone(), &h.stack.trigger_topic_arn),
            witness.clone(),
            ProcessConfig {
                shard_count: 4,
                time_budget: Duration::from_secs(1),
                deadline_margin: Duration::from_millis(200),
                idle_poll: Duration::from_millis(20),
                processors,
                max_attempts: 50,
                lease_margin: Duration::from_millis(200),
                order,
                ..h.process_config()
            },
        ))
    };
    let mut workers: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(worker(processor(), counts.clone(), stop.clone())))
        .collect();
    // A producer writing newer tasks of the keys while they run, through
    // the faults: a write whose answer is lost is sent again (same id).
    let producer = lifo_ops::create::Creator::new(
        Store::new(ddb.clone(), &h.stack.table),
        lifo_ops::create::CreateConfig {
            shard_count: 4,
            ..lifo_ops::create::CreateConfig::new(h.stack.table.clone())
        },
    );
    let updates: Vec<(String, String)> = (0..UPDATES)
        .map(|i| {
            (
                format!("update-{i:03}"),
                format!("key-{}", (i / PRODUCERS) % KEYS),
            )
        })
        .collect();
    for (id, key) in &updates {
        keys.insert(id.clone(), key.clone());
        let payload = serde_json::json!({"update": id})
            .as_object()
            .cloned()
            .unwrap();
        witness
            .payloads
            .lock()
            .unwrap()
            .insert(id.clone(), payload.into());
    }
    // Eight clients at once, each its share in turn; when each write was
    // answered (epoch ms).
    let answered: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let producer = Arc::new(producer);
    let producing: Vec<_> = (0..PRODUCERS)
        .map(|c| {
            let mine: Vec<(String, String)> =
                updates.iter().skip(c).step_by(PRODUCERS).cloned().collect();
            let (producer, answered) = (producer.clone(), answered.clone());
            tokio::spawn(async move {
                for (id, key) in mine {
                    tokio::time::sleep(Duration::from_millis(fastrand::u64(0..150))).await;
                    let request = serde_json::json!({"tasks": [{"taskId": id, "supersedeKey": key, "payload": {"update": id}}]});
                    while producer.handle(request.clone()).await.is_err() {}
                    if let Ok(mut a) = answered.lock() {
                        a.insert(id, lifo_core::now_ms());
                    }
                }
            })
        })
        .collect();
    // The sweep's reaper, through the same faults, about once a second.
    let reaper = Store::new(ddb.clone(), &h.stack.table);
    let reaping = stop.clone();
    workers.push(tokio::spawn(async move {
        while !reaping.load(Ordering::Relaxed) {
            let now = lifo_core::now_ms();
            let until = Instant::now() + Duration::from_millis(500);
            let _ = reaper
                .reap(&[0, 1, 2, 3], now, now - 3_600_000, until)
                .await;
            tokio::time::sleep(Duration::from_millis(fastrand::u64(300..1200))).await;
        }
    }));

    let started = Instant::now();
    for p in producing {
        p.await.unwrap();
    }
    created.extend(updates.iter().map(|(id, _)| id.clone()));
    loop {
        let tasks = h.tasks().await;
        let open = tasks
            .iter()
            .filter(|t| !t.task_status.is_terminal())
            .count();
        if open == 0 {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "{open} tasks still open after {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    enabled.store(false, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let elapsed = started.elapsed();

    // The stream is the witness of every committed change (DynamoDB
    // Local's stream has one shard: its order is the order the writes
    // committed in).
    let changes = stream_changes(&h).await;
    let final_tasks = h.tasks().await;
    let answered = answered.lock().map(|a| a.clone()).unwrap_or_default();
    let start_times = witness
        .start_times
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    let (verdict, ledger) = judge(&Evidence {
        created: &created,
        tasks: &final_tasks,
        changes: &changes,
        keys: &keys,
        answered: &answered,
        starts: &start_times,
    });
    let Verdict {
        lost,
        stuck,
        duplicates,
        stale_commits,
        late_starts,
        starts_after_answer,
        newest_unrun,
        shed_twice,
        succeeded,
        failed,
        shed,
        reclaims,
        superseded_unstarted,
        arrived_superseded,
        ..
    } = verdict;
    let Ledger {
        claims,
        settled,
        outcomes,
        sheds,
    } = ledger;
    // Sheds: each backlog task shed exactly once, from PENDING (or a lapsed
    // TAKEN), and never a live task.
    let shed_live = sheds
        .keys()
        .filter(|id| !id.starts_with("expired-") && !id.starts_with("tight-"))
        .count();
    // The tasks near their deadline: each ran once or was shed once.
    let tight_ran = outcomes
        .keys()
        .filter(|id| id.starts_with("tight-"))
        .count();
    let tight_shed = sheds.keys().filter(|id| id.starts_with("tight-")).count();
    let backlog_run = witness
        .started
        .lock()
        .map(|s| {
            s.iter()
                .filter(|(id, _)| id.starts_with("expired-"))
                .count()
        })
        .unwrap_or(0);
    let reruns: usize = witness
        .runs
        .lock()
        .map(|c| c.values().map(|n| n.saturating_sub(1)).sum())
        .unwrap_or(0);
    let started_runs = witness
        .started
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    let completed_runs = witness
        .completed
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    // Where claims were cut short: claimed but never run, run but never
    // completed, completed but no outcome recorded with that claim's token.
    let cut_before_run = claims.difference(&started_runs).count();
    let cut_during_run = started_runs.difference(&completed_runs).count();
    let cut_before_finish = completed_runs.difference(&settled).count();

    let conflicts = h.stack.contention.as_ref().map_or(0, |c| c.injected());
    println!(
        "chaos: processors {processors}, tasks {TASKS}, succeeded {succeeded}, failed {failed}, faults injected {}, \
         transaction conflicts {} (processor stops from them {}), invocations {}, \
         aborted {} (claims cut before run {cut_before_run}, during run {cut_during_run}, before finish {cut_before_finish}), \
         invocation errors {}, stalled runs {}, reclaims {reclaims}, rejected stale finishes {}, re-runs {reruns}, \
         stuck {stuck}, duplicates {duplicates}, stale commits {stale_commits}, lost {lost}, \
         backlog {BACKLOG}: shed {shed} (twice {shed_twice}, run {backlog_run}), \
         runs without their payload {}, keyed {} (superseded before a start {superseded_unstarted}, \
         written superseded behind a newer write {arrived_superseded}, starts after a newer write \
         {late_starts}, starts after a newer write was answered {starts_after_answer}, newest not run \
         {newest_unrun}), \
         order {order}: near their deadline {} (ran {tight_ran}, shed {tight_shed}), deadline-lane claims {}, in {:.1} s",
        injected.load(Ordering::Relaxed),
        conflicts,
        counts.conflict_stops.load(Ordering::Relaxed),
        counts.invocations.load(Ordering::Relaxed),
        counts.aborted.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed),
        witness.stalls.load(Ordering::Relaxed),
        counts.stale_rejected.load(Ordering::Relaxed),
        witness.wrong_payload.load(Ordering::Relaxed),
        keys.len(),
        tight.len(),
        counts.deadline_starts.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
    );
    assert_eq!(lost, 0, "every task ends SUCCESS, FAILURE or SUPERSEDED");
    assert!(conflicts > 0, "transaction conflicts were answered");
    assert_eq!(
        counts.conflict_stops.load(Ordering::Relaxed),
        0,
        "no transaction conflict stops a processor"
    );
    assert_eq!(
        late_starts, 0,
        "no task starts after a newer task of its key"
    );
    assert_eq!(
        starts_after_answer, 0,
        "no task starts after a newer task of its key was answered"
    );
    assert_eq!(newest_unrun, 0, "each key's newest task runs");
    assert!(superseded_unstarted > 0, "keys were superseded");
    assert_eq!(stuck, 0, "no task stays TAKEN");
    assert_eq!(duplicates, 0, "no task's outcome is committed twice");
    assert_eq!(
        stale_commits, 0,
        "no outcome is committed with another claim's token"
    );
    assert_eq!(
        outcomes.len() - tight_ran + superseded_unstarted + arrived_superseded,
        TASKS + UPDATES,
        "the stream shows one outcome per task (or its supersede before a start)"
    );
    assert_eq!(
        tight_ran + tight_shed,
        tight.len(),
        "each task near its deadline ran once or was shed once"
    );
    if order == lifo_core::Order::Adaptive {
        assert!(
            counts.deadline_starts.load(Ordering::Relaxed) > 0,
            "the deadline lane claimed through the faults"
        );
    }
    assert_eq!(
        shed,
        BACKLOG + tight_shed,
        "every expired task ends EXPIRED"
    );
    assert_eq!(
        sheds.len(),
        BACKLOG + tight_shed,
        "the stream shows one shed per expired task"
    );
    assert_eq!(shed_twice, 0, "no task is shed twice");
    assert_eq!(shed_live, 0, "no live task is shed");
    assert_eq!(backlog_run, 0, "no expired task is ever run");
    assert_eq!(
        witness.wrong_payload.load(Ordering::Relaxed),
        0,
        "every run carried its task's payload"
    );
    assert!(
        injected.load(Ordering::Relaxed) > 0 && counts.aborted.load(Ordering::Relaxed) > 0,
        "chaos happened"
    );
}
