use super::*;

mod lane;

/// A processor over `memory` on `clock` whose tail calls go nowhere (one
/// invocation at a time), running `slots.0` tasks at once for `slots.1`.
fn processor(
    memory: &Memory,
    clock: &SharedClock,
    slots: (usize, Duration),
    config: ProcessConfig,
) -> process::Processor<process::runner::SimulatedRunner, Memory> {
    let stats = Arc::new(PipelineStats::default());
    let tail = Topic::new("process", stats, EventLog::new(Arc::clone(clock)), None);
    let runner = Arc::new(process::runner::SimulatedRunner::new(
        slots.0, slots.1, 0.0, 0.0,
    ));
    process::Processor::over(memory.clone(), Arc::new(tail), runner, config)
        .with_clock(Arc::clone(clock))
}

/// A runtime of one thread on tokio's paused clock, as [`run`]'s.
fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

fn demo(seed: u64, seconds: u64) -> Workload {
    Workload::demo(20.0, Duration::from_secs(seconds), seed)
}

fn run_demo(seed: u64, order: Order) -> VirtualRun {
    let w = demo(seed, 20);
    run(&w, order, &w.arrivals(), None).expect("a virtual run")
}

/// Three runs of one seed write one log, byte for byte; another seed
/// another.
#[test]
fn the_same_seed_writes_the_same_log_and_another_seed_another() {
    let runs: Vec<VirtualRun> = (0..3).map(|_| run_demo(7, Order::Lifo)).collect();
    let first = runs[0].log.text();
    assert!(
        first.lines().count() > 400,
        "{} lines",
        first.lines().count()
    );
    for r in &runs[1..] {
        assert_eq!(r.log.text(), first, "the same seed, the same log");
        assert_eq!(r.log.hash(), runs[0].log.hash());
    }
    assert_ne!(run_demo(8, Order::Lifo).log.hash(), runs[0].log.hash());
}

/// Twice what the downstream serves, through the real handlers: every
/// task created is run or shed, none twice; LIFO starts the newest (fresh
/// under overload) and FIFO the oldest (about a TTL late).
#[test]
fn overload_is_run_fresh_in_lifo_and_late_in_fifo() {
    let lifo = run_demo(3, Order::Lifo).outcome;
    let fifo = run_demo(3, Order::Fifo).outcome;
    for o in [&lifo, &fifo] {
        assert_eq!(o.created, o.workload.arrivals().len());
        assert_eq!(o.processed + o.shed, o.created, "{:?}", o.pipeline);
        assert_eq!(o.failed, 0);
        // 5 slots of 500 ms for 20 s of arrivals and the drain after.
        assert!(o.processed > 150, "{} processed", o.processed);
        assert!(o.shed > 0, "2x overload sheds");
    }
    let [_, lifo_p95, _] = lifo.age_under_load_ms;
    let [fifo_p50, _, _] = fifo.age_under_load_ms;
    assert!(lifo_p95 < 1_500, "LIFO p95 {lifo_p95} ms");
    assert!(fifo_p50 > 5_000, "FIFO p50 {fifo_p50} ms");
    assert!(lifo.pipeline.tail_calls == 0 || lifo.pipeline.process_invocations > 1);
}

/// A producer that writes past create is woken only by the table's stream,
/// which the engine does not model: refused, naming the flag.
#[test]
fn a_producer_past_create_is_refused_naming_the_flag() {
    let w = Workload {
        through_create: false,
        ..demo(1, 5)
    };
    let e = run(&w, Order::Lifo, &w.arrivals(), None).expect_err("refused");
    assert!(e.to_string().contains("--producer direct"), "{e}");
}

/// Two processors over four shards (`ProcessorCount` 2): each wake-up names
/// a group, both groups run, and every task created is run or shed, none
/// twice, as with one.
#[test]
fn two_processors_split_the_shards_and_every_task_is_run_or_shed_once() {
    let w = Workload {
        shards: 4,
        processors: 2,
        ..demo(5, 20)
    };
    let run = run(&w, Order::Lifo, &w.arrivals(), None).expect("a virtual run");
    let o = &run.outcome;
    assert_eq!(o.processed + o.shed, o.created, "{:?}", o.pipeline);
    assert!(o.processed > 150, "{} processed", o.processed);
    let log = run.log.text();
    for group in ["group=Some(0)", "group=Some(1)"] {
        let wakeups = log
            .lines()
            .filter(|l| l.contains("publish process") && l.contains(group))
            .count();
        assert!(wakeups > 0, "no wake-up for {group}");
    }
    let claimed: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split(" claims=").nth(1))
        .flat_map(|ids| ids.split(',').filter(|id| !id.is_empty()))
        .collect();
    let mut unique = claimed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), claimed.len(), "a task claimed twice");
    // One processor's figures, for comparison: the slots are split, not
    // added.
    let one = run_demo(5, Order::Lifo).outcome;
    assert!(
        o.processed <= one.processed + one.processed / 10,
        "{} against {}",
        o.processed,
        one.processed
    );
}

/// Arrivals due at one instant go out in one create request (up to
/// create's 1,000), as the local engine sends each moment's arrivals; each
/// request is a create invocation, its time counted as Lambda bills it,
/// beside process's; the run's units are totalled too.
#[test]
fn arrivals_due_together_are_one_create_request_of_at_most_1000() {
    let w = Workload {
        concurrency: 50,
        latency: Duration::from_millis(10),
        ttl_seconds: 10,
        ..demo(1, 2)
    };
    let arrivals = vec![Duration::from_millis(500); 1005];
    let run = run(&w, Order::Lifo, &arrivals, None).expect("a virtual run");
    let o = &run.outcome;
    assert_eq!(o.created, 1005);
    assert_eq!(run.lambda.create_requests, 2, "1,000 then 5");
    let mut stamps: Vec<u64> = o.written_ms.values().copied().collect();
    stamps.sort_unstable();
    stamps.dedup();
    assert_eq!(stamps.len(), 2, "{stamps:?}");
    let trip = crate::simulate::STORE_LATENCY.as_millis() as u64;
    assert!(run.lambda.create_ms >= 2 * trip, "{:?}", run.lambda);
    assert!(run.lambda.process_ms > 0, "{:?}", run.lambda);
    assert!(
        (o.write_units_per_success * o.processed as f64 - o.write_units).abs() < 1e-6,
        "{} × {} against {}",
        o.write_units_per_success,
        o.processed,
        o.write_units
    );
    assert!(o.read_units > 0.0);
}

/// With the sweep at the template's rate (every minute), a task shed by
/// expiry is counted (`TasksShed`) within two minutes of its expiry and has
/// left the claimable index. The queue is paused, so nothing is claimed and
/// the sweep sheds every task.
#[test]
fn the_sweep_counts_a_shed_task_within_two_minutes_of_its_expiry() {
    let runtime = paused();
    runtime.block_on(async {
        let template = lifo_local::Template::workspace().expect("the template");
        let clock = seeded_clock(1);
        let memory = Memory::new(lifo_core::memory::Lag::Aws { seed: 1 })
            .with_latency(crate::simulate::STORE_LATENCY);
        memory
            .set_paused(true, "test", clock.now_ms())
            .await
            .expect("paused");
        let stats = Arc::new(PipelineStats::default());
        let log = EventLog::new(Arc::clone(&clock));
        let runner = Arc::new(process::runner::SimulatedRunner::new(
            3,
            Duration::from_millis(100),
            0.0,
            0.0,
        ));
        let functions = Functions::deploy(Setup {
            template: &template,
            clock: &clock,
            stats: &stats,
            log: &log,
            store: memory.clone(),
            runner,
            config: ProcessConfig {
                shard_count: 1,
                max_ttl_seconds: 60,
                ..ProcessConfig::new("virtual", "virtual")
            },
            faults: None,
            racing: 0,
        })
        .expect("deployed");
        let creator = Creator::new(
            memory.clone(),
            CreateConfig {
                shard_count: 1,
                max_ttl_seconds: 60,
                ..CreateConfig::new("virtual")
            },
        )
        .with_clock(Arc::clone(&clock))
        .with_wakeups(functions.wakeups());
        let tasks: Vec<serde_json::Value> = (0..20)
            .map(|i| serde_json::json!({"taskId": format!("t-{i}"), "payload": {"n": i}, "ttlSeconds": 2}))
            .collect();
        creator
            .handle(serde_json::json!({ "tasks": tasks }))
            .await
            .expect("created");
        let expires_at_ms = (clock.now_ms() / 1000 + 2) * 1000;
        let started = tokio::time::Instant::now();
        while PipelineStats::get(&stats.shed) < 20 {
            assert!(
                started.elapsed() < Duration::from_secs(125),
                "only {} counted",
                PipelineStats::get(&stats.shed)
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let counted_ms = clock.now_ms() - expires_at_ms;
        functions.stop().await;
        assert!(counted_ms <= 120_000, "counted {counted_ms} ms after expiry");
        let tasks = memory.snapshot().tasks;
        assert_eq!(tasks.len(), 20);
        for t in tasks.values() {
            assert_eq!(t.task_status, TaskStatus::Expired, "{t:?}");
            assert!(t.claimable_at.is_none(), "left the claimable index: {t:?}");
            let shed_at = t.shed_at.expect("shed");
            assert!(shed_at >= t.expires_at * 1000 && shed_at - t.expires_at * 1000 <= 120_000);
        }
    });
}

/// Over a backlog that expired and that no sweep has reached yet (the
/// minute after an overload), a quiet queue's reads stay flat in the
/// backlog: a claim read runs into it by a page at most and leaves the rest
/// to the sweep, instead of reading (and shedding) pages of it on every
/// refill. Read units per success of 10 new tasks, by AWS's billing rules,
/// over 1,000 and 4,000 expired tasks.
#[test]
fn reads_stay_flat_over_a_backlog_no_sweep_has_reached() {
    let runtime = paused();
    let per_success: Vec<f64> = [1_000u64, 4_000]
        .into_iter()
        .map(|n| runtime.block_on(reads_per_success_over_a_backlog(n, 10)))
        .collect();
    println!("read units per success over 1,000 and 4,000 expired tasks: {per_success:?}");
    let (lo, hi) = (
        per_success[0].min(per_success[1]),
        per_success[0].max(per_success[1]),
    );
    // Within 1.2× or two queries of each other (a query is 0.05 read units
    // per success of 10 tasks).
    assert!(
        hi <= (lo * 1.2).max(lo + 0.1) + 1e-9,
        "flat in the backlog: {per_success:?}"
    );
    // A claim read is a page into the backlog at most: not the 1.6 and 2.15
    // read units per success that reading (and shedding) eight pages of it
    // on every refill cost on DynamoDB Local.
    assert!(hi <= 1.5, "{per_success:?}");
}

/// `backlog` tasks that expired a minute ago, then `live` new ones drained
/// by one invocation after another: the read units per success.
async fn reads_per_success_over_a_backlog(backlog: u64, live: usize) -> f64 {
    let template = lifo_local::Template::workspace().expect("the template");
    let clock = seeded_clock(1);
    let meter = Arc::new(CapacityMeter::default());
    let memory = Memory::new(lifo_core::memory::Lag::Off).with_billing(Billing {
        indexes: template
            .table(lifo_local::stack::TABLE)
            .expect("the table")
            .billed_indexes(),
        meter: Arc::clone(&meter),
    });
    let created = clock.now_ms() - 120_000;
    let old: Vec<lifo_core::Task> = (0..backlog)
        .map(|i| {
            let payload = serde_json::json!({"n": i})
                .as_object()
                .cloned()
                .unwrap_or_default();
            lifo_core::Task::new_pending(format!("old-{i:06}"), payload, created + i, 60, 1)
        })
        .collect();
    memory.put_new(&old).await.expect("the backlog");
    let creator = Creator::new(
        memory.clone(),
        CreateConfig {
            shard_count: 1,
            ..CreateConfig::new("virtual")
        },
    )
    .with_clock(Arc::clone(&clock));
    let tasks: Vec<serde_json::Value> = (0..live)
        .map(|i| serde_json::json!({"taskId": format!("live-{i}"), "payload": {"n": 1}}))
        .collect();
    creator
        .handle(serde_json::json!({ "tasks": tasks }))
        .await
        .expect("created");
    let config = ProcessConfig {
        shard_count: 1,
        max_ttl_seconds: 604_800,
        time_budget: Duration::from_secs(5),
        ..ProcessConfig::new("virtual", "virtual")
    };
    let p = processor(&memory, &clock, (3, Duration::ZERO), config);
    let before = meter.spent(lifo_core::store::Op::Read).units;
    let mut succeeded = 0;
    for _ in 0..20 {
        let deadline = UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 900_000);
        let report = p
            .handle(&process::Wakeups::one(), deadline)
            .await
            .expect("an invocation");
        succeeded += report.succeeded;
        if succeeded >= live {
            break;
        }
    }
    assert_eq!(succeeded, live);
    (meter.spent(lifo_core::store::Op::Read).units - before) / live as f64
}
