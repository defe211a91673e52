//! A virtual run's figures at scale: throughput, units per task, and what
//! the busiest partitions of the table and of the claimable index served
//! against DynamoDB's limits of 1,000 write and 3,000 read units a second
//! per partition key value ([`lifo_core::memory::limits`]).

use crate::simulate::Outcome;
use lifo_core::memory::limits::{Busiest, READ_UNITS_PER_SECOND, WRITE_UNITS_PER_SECOND};
use std::fmt::Write as _;

/// The run's scale figures, as Markdown lines (empty for a run that
/// measured no partitions: the local engine's).
pub fn summary(o: &Outcome) -> String {
    let Some(p) = &o.partitions else {
        return String::new();
    };
    let arriving = o.workload.duration.as_secs_f64();
    let run = o.elapsed.as_secs_f64().max(1e-3);
    let started_while_arriving = o.starts.iter().filter(|s| s.at_s <= arriving).count();
    let per_task = |units: f64| units / o.created.max(1) as f64;
    let mut out = format!(
        "\n{} at {:.0} tasks/s for {:.0} s, {} shard(s), {} processor(s): \
         {:.0} tasks/s started while arriving, {:.0} succeeded a second over the run's {:.1} s; \
         {:.2} write and {:.2} read units per created task.\n",
        o.order.as_str().to_uppercase(),
        o.workload.rate,
        arriving,
        o.workload.shards,
        o.workload.processors.clamp(1, o.workload.shards.max(1)),
        started_while_arriving as f64 / arriving.max(1e-3),
        o.processed as f64 / run,
        run,
        per_task(o.write_units),
        per_task(o.read_units),
    );
    let line = |what: &str, b: &Option<Busiest>, limit: f64| match b {
        Some(b) => format!(
            "- busiest {what}: {} — {:.0} units/s over the run, {:.0} in its busiest second \
             (limit {limit:.0})\n",
            b.partition,
            b.units / run,
            b.peak_second
        ),
        None => format!("- busiest {what}: none\n"),
    };
    out.push_str(&line(
        "table partition, writes",
        &p.table_writes,
        WRITE_UNITS_PER_SECOND,
    ));
    out.push_str(&line(
        "index partition, writes",
        &p.index_writes,
        WRITE_UNITS_PER_SECOND,
    ));
    out.push_str(&line(
        "index partition, reads",
        &p.index_reads,
        READ_UNITS_PER_SECOND,
    ));
    let _ = writeln!(
        out,
        "- refused by the partition limits (each try): {} writes by an index's partition, \
         {} by the table's, {} reads",
        p.index_write_throttles, p.table_write_throttles, p.read_throttles
    );
    if let Some(v) = &o.virtual_run {
        let _ = writeln!(out, "- wall time: {:.1} s", v.wall.as_secs_f64());
    }
    out
}
