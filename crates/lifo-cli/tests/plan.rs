//! `lifo plan` run as a user runs it: its help's worked example, whose
//! figures are the virtual engine's own; a small plan as JSON; and plans it
//! refuses, in one line naming the flag.

use crate::common;
use common::*;

use lifo_core::Order;
use lifo_lab::report::{percentile, secs};
use lifo_lab::simulate::{Engine, Workload};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// The help's example, as it must stand there.
const EXAMPLE: &str = "lifo plan --rate 20 --burst 100@5s --concurrency 4 --latency-ms 250 --ttl 10 --payload-kb 2 --duration 20";

/// The example's workload for `seed`, built here from its flags, and its
/// arrivals: the rate's Poisson process as `lifo simulate` draws it, and
/// the burst's 100 tasks at 5 s.
fn example_run(seed: u64) -> (Workload, Vec<Duration>) {
    let mut w = Workload::demo(20.0, Duration::from_secs(20), seed);
    w.concurrency = 4;
    w.latency = Duration::from_millis(250);
    w.ttl_seconds = 10;
    w.engine = Engine::Virtual;
    let mut arrivals = w.arrivals();
    arrivals.extend(std::iter::repeat_n(Duration::from_secs(5), 100));
    arrivals.sort();
    (w, arrivals)
}

/// The cells of the orders table's row for `label` (`**lifo** (chosen)`,
/// `adaptive`, `fifo (only to compare)`).
fn row<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("| {label} |")))
        .unwrap_or_else(|| panic!("no row {label} in\n{text}"));
    line.trim_matches('|').split(" | ").map(str::trim).collect()
}

/// `lifo plan --help` shows a worked example. Run as the help gives it, the
/// lines the help quotes are its output's, and its figures are the virtual
/// engine's own: each order's runs of each seed made here, directly, give
/// the same tasks started and shed, the same ages at start and the same
/// write and read units.
#[test]
fn the_helps_worked_example_is_the_virtual_engines_own_result() {
    let help = run_ok(Command::new(lifo_bin()).args(["plan", "--help"]));
    assert!(help.contains(&format!("\nExample: {EXAMPLE}\n")), "{help}");
    assert!(
        help.contains("ShardCount = ⌈(peak + 2 × starts/s + shed/s) / 750⌉"),
        "the sizing formula: {help}"
    );
    let argv: Vec<&str> = EXAMPLE.split_whitespace().skip(1).collect();
    let text = run_ok(Command::new(lifo_bin()).args(&argv));

    // Every line the help quotes (each piece around an ellipsis) is said.
    let quoted: Vec<&str> = help
        .split("answers (abridged):\n\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_default()
        .lines()
        .collect();
    assert_eq!(quoted.len(), 7, "{help}");
    // docs/cli.md shows the help's example as it is.
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    for line in quoted {
        for piece in line.trim().split('…') {
            assert!(text.contains(piece), "{piece:?} is not in\n{text}");
        }
        assert!(docs.contains(line.trim()), "docs/cli.md lacks {line:?}");
    }

    // Each order's row against the engine's runs of seeds 1, 2, 3, made
    // here (a run per core at once).
    let orders = [
        (Order::Lifo, "**lifo** (chosen)"),
        (Order::Adaptive, "adaptive"),
        (Order::Fifo, "fifo (only to compare)"),
    ];
    let jobs: Vec<(Order, u64)> = orders
        .iter()
        .flat_map(|(order, _)| (1..=3).map(|seed| (*order, seed)))
        .collect();
    let outcomes = lifo_lab::parallel::map(
        &jobs,
        lifo_lab::parallel::threads(),
        |(order, seed)| {
            let (w, arrivals) = example_run(*seed);
            // The runs carry a 16-byte payload: a 2 KB one lives in an
            // item of its own, whose units the plan adds (3 write units a
            // task, 1 read unit a start).
            let specs = vec![json!({"payload": {"p": "xxxxxxxx"}}); arrivals.len()];
            let o = lifo_lab::virtual_time::run(&w, *order, &arrivals, Some(&specs))?.outcome;
            assert_eq!(o.created, arrivals.len());
            Ok(o)
        },
        |_| (),
    )
    .unwrap();
    for ((order, label), runs) in orders.iter().zip(outcomes.chunks(3)) {
        let (mut started, mut shed) = (Vec::new(), Vec::new());
        let (mut p50, mut p95, mut p95_every, mut writes, mut reads) =
            (vec![], vec![], vec![], vec![], vec![]);
        for o in runs {
            let mut ages: Vec<u64> = o.starts.iter().map(|s| s.age_ms).collect();
            ages.sort_unstable();
            started.push(o.starts.len().to_string());
            shed.push(o.shed.to_string());
            p50.push(o.age_under_load_ms[0]);
            p95.push(o.age_under_load_ms[1]);
            p95_every.push(percentile(&ages, 95.0));
            writes.push(o.write_units / o.created as f64 + 3.0);
            reads.push((o.read_units + o.starts.len() as f64) / o.created as f64);
        }
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            secs(v[1])
        };
        assert_eq!(
            row(&text, label),
            [
                (*label).to_owned(),
                started.join(", "),
                shed.join(", "),
                median(p50),
                median(p95),
                median(p95_every),
            ],
            "{order}"
        );
        if *order == Order::Lifo {
            // The bill is the chosen order's, from the same runs.
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[1]
            };
            let writes = format!("| DynamoDB writes | {:.3} write units |", median(writes));
            let reads = format!("| DynamoDB reads | {:.3} read units |", median(reads));
            assert!(text.contains(&writes), "{writes} in\n{text}");
            assert!(text.contains(&reads), "{reads} in\n{text}");
        }
    }
}

/// `--json` gives the same answer as data: the prediction is the chosen
/// order's medians, and each price carries its date.
#[test]
fn plan_answers_in_json() {
    let out = run_ok(
        Command::new(lifo_bin())
            .args(["--json", "plan", "--rate", "10", "--concurrency", "4"])
            .args(["--latency-ms", "200", "--ttl", "20", "--duration", "5"])
            .args(["--seeds", "1", "--payload-kb", "2"]),
    );
    let plan: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (plan["shardCount"].as_u64(), plan["processorCount"].as_u64()),
        (Some(1), Some(1))
    );
    let orders: Vec<&Value> = plan["orders"].as_array().unwrap().iter().collect();
    assert_eq!(
        orders
            .iter()
            .map(|o| o["order"].as_str())
            .collect::<Vec<_>>(),
        [Some("lifo"), Some("adaptive"), Some("fifo")]
    );
    let chosen = orders.iter().find(|o| o["order"] == plan["order"]).unwrap();
    assert_eq!(plan["predicted"], chosen["median"], "{plan}");
    assert_eq!(chosen["seeds"].as_array().map(Vec::len), Some(1));
    // 2 KB is past 256 bytes: its own item, 3 write units a task.
    assert_eq!(plan["payloadItem"]["writeUnitsPerTask"], 3.0);
    assert_eq!(plan["costPerMillionTasks"]["sqs"]["usdPerMillion"], 1.2);
    assert_eq!(plan["pricesGathered"], lifo_lab::plan::prices::CHECKED);
    for price in plan["prices"].as_array().unwrap() {
        assert!(
            !price["asOf"].as_str().unwrap_or_default().is_empty(),
            "{price}"
        );
    }
}

/// A plan it cannot make is one line on stderr naming the flag, and no
/// output.
#[test]
fn a_plan_it_cannot_make_is_one_line_naming_the_flag() {
    let base = ["--concurrency", "4", "--latency-ms", "200"];
    for (args, line) in [
        (
            &["--ttl", "20"][..],
            "error: --rate 0 needs --burst: give an arrival rate, a burst, or both",
        ),
        (
            &["--ttl", "20", "--rate", "5", "--burst", "10@90s"],
            "error: --burst entry 1 arrives at 90.0 s, not before --duration's end (60 s)",
        ),
        (
            &["--ttl", "20", "--rate", "5", "--payload-kb", "100"],
            "error: --payload-kb must be from 0 to 64 (a task's payload is at most 64 KB), got 100",
        ),
        (
            &["--ttl", "20", "--rate", "lots"],
            "error: invalid value 'lots' for '--rate <RATE>': invalid float literal",
        ),
        (
            &["--rate", "5", "--ttl", "0"],
            "error: invalid value '0' for '--ttl <TTL>': 0 is not in 1..=604800",
        ),
    ] {
        let out = Command::new(lifo_bin())
            .arg("plan")
            .args(base)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), line);
    }
}
