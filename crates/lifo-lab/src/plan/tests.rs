use super::runs::{arrival_spec, workload};
use super::*;
use clap::Parser;
use serde_json::json;
use std::sync::Arc;

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: PlanArgs,
}

fn args(argv: &[&str]) -> PlanArgs {
    Cmd::try_parse_from([&["plan"], argv].concat())
        .unwrap()
        .args
}

/// The answer's text says the chosen order's own figures, and each
/// order's row holds its seeds' runs (1.5× what the downstream serves, so
/// that LIFO sheds). `lifo-cli`'s tests/plan.rs holds the figures to the
/// virtual engine's own runs of the same workload and seeds.
#[test]
fn the_text_answers_with_the_chosen_orders_figures() {
    let a = args(&[
        "--rate",
        "15",
        "--concurrency",
        "5",
        "--latency-ms",
        "500",
        "--ttl",
        "5",
        "--payload-kb",
        "0.2",
        "--duration",
        "12",
        "--seeds",
        "1",
        "--seed",
        "4",
    ]);
    let plan = plan(&a).unwrap();
    assert_eq!(
        (plan.sizing.shards, plan.sizing.processors, plan.runs),
        (1, 1, 3)
    );
    assert_eq!(
        plan.rows.iter().map(|r| r.order).collect::<Vec<_>>(),
        runs::ORDERS
    );
    for row in &plan.rows {
        assert_eq!(row.seeds, [row.figures], "{}", row.order);
        assert_eq!(row.figures.started + row.figures.shed, row.figures.created);
    }
    assert!(
        plan.rows[0].figures.shed > 0,
        "1.5× load sheds in LIFO order"
    );
    let text = report::text(&plan);
    let f = plan.chosen().figures;
    for said in [
        format!("Order: {}. Why: {}.", plan.choice.order, plan.choice.why),
        format!(
            "p95 age at start {} while tasks arrive",
            crate::report::secs(f.p95_arriving_ms)
        ),
        format!("{} of {} tasks shed", f.shed, f.created),
        format!("| **{}** (chosen) |", plan.choice.order),
        format!(
            "ShardCount ⌈{:.0} / 750⌉",
            plan.sizing.index_writes_per_second
        ),
    ] {
        assert!(text.contains(&said), "{said:?} in\n{text}");
    }
    // Its payload is 205 bytes of JSON, which the runs carried.
    assert_eq!(
        arrival_spec(205),
        json!({"payload": {"p": "x".repeat(197)}}),
        "a 0.2 KB payload"
    );
    assert!(text.contains("Payload: 0.2 KB stays on the task item"));
}

/// A payload past 256 bytes adds its item's units to the run's (which
/// carried a small one); up to 256 bytes the run carries it.
#[test]
fn a_large_payload_costs_its_item_on_top_of_the_runs_units() {
    let base = [
        "--rate",
        "4",
        "--concurrency",
        "4",
        "--latency-ms",
        "100",
        "--ttl",
        "30",
        "--duration",
        "5",
        "--seeds",
        "1",
    ];
    let small = plan(&args(&[&base[..], &["--payload-kb", "0.1"]].concat())).unwrap();
    let large = plan(&args(&[&base[..], &["--payload-kb", "4"]].concat())).unwrap();
    assert_eq!(small.payload.write_per_task, 0.0);
    assert_eq!(
        (large.payload.write_per_task, large.payload.read_per_start),
        (5.0, 2.0)
    );
    let (s, l) = (small.chosen(), large.chosen());
    assert_eq!(s.figures.shed, 0, "the downstream keeps up");
    assert!(
        (l.usage.write_units - s.usage.write_units - 5.0).abs() < 1e-9,
        "{} against {}",
        l.usage.write_units,
        s.usage.write_units
    );
    // Every task started: 2 read units each on top.
    assert!((l.usage.read_units - s.usage.read_units - 2.0).abs() < 1e-9);
    // The rest of the bill is the runs' own: the same workload and seed.
    assert_eq!(s.usage.publishes, l.usage.publishes);
    assert_eq!(large.costs.sqs.usd_per_million, 1.2);
}

/// A burst sizes the shards (its puts land in one second), and the runs
/// carry it at that size.
#[test]
fn a_burst_sizes_the_shards_and_the_runs_carry_it() {
    let a = args(&[
        "--burst",
        "500@1s",
        "--concurrency",
        "50",
        "--latency-ms",
        "100",
        "--ttl",
        "2",
        "--payload-kb",
        "0",
        "--duration",
        "2",
        "--seeds",
        "1",
        "--memory-mb",
        "1769",
    ]);
    let plan = plan(&a).unwrap();
    // 50 / 110 ms = 454.5 start in the burst's second: 500 puts and
    // 2 × 454.5 claims and finishes, over 750 a key; one processor of a
    // whole vCPU keeps up with 750 a second.
    assert!((plan.sizing.index_writes_per_second - 1_409.09).abs() < 0.01);
    assert_eq!((plan.sizing.shards, plan.sizing.processors), (2, 1));
    let template = Arc::new(lifo_local::Template::workspace().unwrap());
    let workload = workload(&a, &template, &plan.sizing, 1).unwrap();
    assert_eq!((workload.shards, workload.processors), (2, 1));
    for row in &plan.rows {
        assert_eq!(row.figures.created, 500, "{}", row.order);
        assert_eq!(row.figures.started + row.figures.shed, 500, "{}", row.order);
    }
}
