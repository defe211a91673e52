//! `lifo simulate` run as a user runs it: `--compare` on a short overload,
//! in virtual time (the same handlers over the queue's model, so that no
//! load on the machine moves the figures it checks; `lifo bench`'s test
//! runs the local engine on DynamoDB Local), and refusals of workloads that
//! cannot run.

use crate::common;
use common::*;

use std::process::Command;

#[test]
fn simulate_compare_runs_every_order_on_the_same_arrivals_and_plots_them() {
    let dir = scratch("simulate");
    let svg = dir.join("age.svg");
    let stdout = run_ok(
        Command::new(LIFO)
            .args([
                "--json",
                "--shards",
                "2",
                "simulate",
                "--compare",
                "--rate",
                "20",
                "--duration",
                "6",
                "--ttl",
                "3",
                "--capacity",
                "5",
                "--latency-ms",
                "500",
                "--budget",
                "3",
                "--engine",
                "virtual",
                "--plot",
            ])
            .arg(&svg),
    );
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let orders: Vec<&str> = rows.iter().filter_map(|r| r["order"].as_str()).collect();
    assert_eq!(orders, ["lifo", "fifo", "adaptive"]);
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    for r in &rows[1..] {
        assert_eq!(n(&rows[0], "created"), n(r, "created"), "same arrivals");
    }
    // 6 s at 20/s: about 120 arrivals.
    assert!((70..=170).contains(&n(&rows[0], "created")));
    for r in rows {
        assert!(n(r, "processed") > 0, "{r}");
        assert!(n(r, "shedByExpiry") > 0, "2× overload sheds: {r}");
        assert_eq!(
            n(r, "processed") + n(r, "shedByExpiry") + n(r, "failed"),
            n(r, "created"),
            "every task is run or shed: {r}"
        );
        // put 2 + claim 2 + finish 2; all writes / successes adds the puts
        // of the shed tasks.
        assert_eq!(r["writeUnitsPerSuccessfulTask"].as_f64(), Some(6.0), "{r}");
        assert!(r["writeUnitsPerSuccess"].as_f64().unwrap() > 6.0, "{r}");
        assert!(r["snsPublishesPerTask"].as_f64().unwrap() > 0.0, "{r}");
    }
    let p95 = |r: &serde_json::Value| r["ageAtStartMs"]["p95"].as_u64().unwrap();
    assert!(
        p95(&rows[0]) < p95(&rows[1]),
        "LIFO is fresher than FIFO under overload: {} vs {} ms",
        p95(&rows[0]),
        p95(&rows[1])
    );
    // Starts that skipped a newer waiting task: most for FIFO, at most
    // half as many for LIFO. LIFO's are not none: the check allows 250 ms
    // for a write to become visible, but the heads a start comes from may be
    // up to 1 s old by design (docs/design.md), and the claimable index
    // lags as AWS's does, so the bound is relative to FIFO's.
    let inversions =
        |r: &serde_json::Value| n(r, "lifoInversions") as f64 / n(r, "processed") as f64;
    assert!(inversions(&rows[1]) >= 0.5, "{}", rows[1]);
    assert!(
        inversions(&rows[0]) <= inversions(&rows[1]) / 2.0,
        "{}\n{}",
        rows[0],
        rows[1]
    );
    // Adaptive passes newer tasks over only for those near their deadline.
    assert!(inversions(&rows[2]) < inversions(&rows[1]), "{}", rows[2]);
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    for name in ["<svg", "LIFO", "FIFO", "ADAPTIVE"] {
        assert!(svg_text.contains(name), "{name}");
    }
    let png = std::fs::read(svg.with_extension("png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn a_workload_that_cannot_run_is_one_line_naming_the_flag() {
    let out = Command::new(LIFO)
        .args(["simulate", "--rate", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: --rate must be in (0, 500] with --engine local, got 0"
    );
    let out = Command::new(LIFO)
        .args(["bench", "--only", "sizes", "--minutes", "NaN"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: --minutes must be in (0, 1440], got NaN"
    );
}
