use super::*;

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
