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
pub mod backlog;
mod binaries;
mod overload;
mod part;
mod payload;
pub mod throughput;
mod xray;

pub use part::{Bench, BenchArgs, Binaries, FUNCTIONS, Line, Part, Report, Row};

/// Runs the selected measurements in order; finds the binaries once, for
/// the parts that run them.
pub async fn run(args: &BenchArgs) -> anyhow::Result<Bench> {
    args.check()?;
    let mut bench = Bench::default();
    let step = |what: &str| eprintln!("bench: {what}…");
    let bins = Binaries::find(args)?;
    for part in [
        Part::Sizes,
        Part::ColdStart,
        Part::Process,
        Part::WriteUnits,
        Part::RateLimit,
        Part::Throughput,
        Part::PayloadCost,
        Part::Api,
        Part::ShedBacklog,
        Part::Freshness,
    ] {
        if !args.wants(part) {
            continue;
        }
        let report = match part {
            Part::Sizes => binaries::sizes(args, &bins)?,
            Part::ColdStart => {
                step("cold starts");
                binaries::cold_starts(args, &bins).await?
            }
            Part::Process => {
                step(&format!("process binary, {} tasks", args.tasks));
                binaries::process_cost(args, &bins).await?
            }
            Part::WriteUnits => {
                step("write units (a LIFO overload run)");
                overload::write_units(args).await?
            }
            Part::RateLimit => {
                step("rate limit: 5× overload against RunnerMaxPerSecond=10");
                overload::rate_limit(args).await?
            }
            Part::Throughput => {
                step(
                    "throughput: the grid of shards × processors × in flight × latency, each with its floor",
                );
                throughput::throughput(args).await?
            }
            Part::PayloadCost => {
                step("payload cost: write and read units per task against payload size");
                payload::payload_cost(args).await?
            }
            Part::Api => {
                step("HTTP API: added latency per request, direct vs over the router");
                api::api_latency().await?
            }
            Part::ShedBacklog => {
                step("shed backlog: reads per success, refill and sweep with a backlog shed");
                backlog::shed_backlog(args).await?
            }
            Part::Freshness => {
                step(&format!(
                    "freshness: {} min of 2× overload, LIFO then FIFO",
                    args.minutes
                ));
                overload::freshness(args).await?
            }
        };
        bench.add(args, part, report);
    }
    Ok(bench)
}

impl Bench {
    /// Adds what `part` measured: each line as a row whose command line
    /// is `lifo bench --only <part>` with the line's flags.
    fn add(&mut self, args: &BenchArgs, part: Part, report: Report) {
        self.rows.extend(report.lines.into_iter().map(|line| Row {
            command: args.command(part, &line.flags),
            line,
        }));
        self.figures.extend(report.figures);
        for (key, flags) in report.commands {
            self.figures
                .insert(key.into(), Value::String(args.command(part, &flags)));
        }
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| Measure | Result | Target | Met | Reproduce |\n|---|---|---|---|---|\n",
        );
        for Row { line: r, command } in &self.rows {
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | `{}` |",
                r.measure, r.result, r.target, met, command
            );
        }
        let _ = writeln!(
            out,
            "\nWhere measured: this machine, on DynamoDB Local and moto. {}",
            crate::simulate_command::UNITS_NOTE
        );
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "rows": self.rows.iter().map(|Row { line: r, command }| json!({
                "measure": r.measure, "result": r.result, "target": r.target,
                "met": r.met, "command": command,
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
