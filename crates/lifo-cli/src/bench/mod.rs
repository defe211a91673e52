//! `lifo bench`: the figures the README quotes, each with the command line
//! that reproduces it, as a Markdown table.
//!
//! - write units per successful task (DynamoDB Local's ConsumedCapacity);
//! - freshness under 2× overload, LIFO vs FIFO (p95 age at start, per minute);
//! - CPU and peak RSS of the release `process` binary for N tasks, run
//!   against a local Lambda Runtime API ([`lifo_local::runtime_api`]);
//! - cold start of each release binary: from exec to its first request for
//!   an invocation;
//! - release binary sizes;
//! - the downstream rate limit under 5× overload (starts in any second);
//! - throughput per shard count, processor count and tasks in flight, with
//!   and without latency in front of DynamoDB Local, against a floor;
//! - what a shed backlog costs: read units per success, refill latency and
//!   the sweep's reads with 0, 10k and 100k shed tasks in a shard, and the
//!   reaper's cost per shed task;
//! - write and read units per task against payload size (100 B to 60 KB),
//!   for each way of storing the payload;
//! - what the HTTP API adds to a request (direct vs over its router).

use serde_json::{Value, json};
use std::fmt::Write as _;

mod api;
mod backlog;
mod binaries;
mod overload;
mod part;
mod payload;
pub mod throughput;

pub use part::{Bench, BenchArgs, FUNCTIONS, Part, Row};

/// Runs the selected measurements in order.
pub async fn run(args: &BenchArgs) -> anyhow::Result<Bench> {
    args.check()?;
    let mut bench = Bench::default();
    let step = |what: &str| eprintln!("bench: {what}…");
    if args.wants(Part::Sizes) {
        binaries::sizes(args, &mut bench)?;
    }
    if args.wants(Part::ColdStart) {
        step("cold starts");
        binaries::cold_starts(args, &mut bench).await?;
    }
    if args.wants(Part::Process) {
        step(&format!("process binary, {} tasks", args.tasks));
        binaries::process_cost(args, &mut bench).await?;
    }
    if args.wants(Part::WriteUnits) {
        step("write units (a LIFO overload run)");
        overload::write_units(args, &mut bench).await?;
    }
    if args.wants(Part::RateLimit) {
        step("rate limit: 5× overload against RunnerMaxPerSecond=10");
        overload::rate_limit(args, &mut bench).await?;
    }
    if args.wants(Part::Throughput) {
        step(
            "throughput: the grid of shards × processors × in flight × latency, each with its floor",
        );
        throughput::throughput(args, &mut bench).await?;
    }
    if args.wants(Part::PayloadCost) {
        step("payload cost: write and read units per task against payload size");
        payload::payload_cost(args, &mut bench).await?;
    }
    if args.wants(Part::Api) {
        step("HTTP API: added latency per request, direct vs over the router");
        api::api_latency(args, &mut bench).await?;
    }
    if args.wants(Part::ShedBacklog) {
        step("shed backlog: reads per success, refill and sweep with a backlog shed");
        backlog::shed_backlog(args, &mut bench).await?;
    }
    if args.wants(Part::Freshness) {
        step(&format!(
            "freshness: {} min of 2× overload, LIFO then FIFO",
            args.minutes
        ));
        overload::freshness(args, &mut bench).await?;
    }
    Ok(bench)
}

impl Bench {
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| Measure | Result | Target | Met | Reproduce |\n|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | `{}` |",
                r.measure, r.result, r.target, met, r.command
            );
        }
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "rows": self.rows.iter().map(|r| json!({
                "measure": r.measure, "result": r.result, "target": r.target,
                "met": r.met, "command": r.command,
            })).collect::<Vec<_>>(),
            "figures": self.figures,
        })
    }
}

/// `lifo bench`.
pub async fn command(args: &BenchArgs, as_json: bool) -> anyhow::Result<String> {
    let bench = run(args).await?;
    Ok(if as_json {
        bench.json().to_string()
    } else {
        bench.markdown()
    })
}
