//! The plan as a user reads it: the answer first (the order, the sizes and
//! how they were reached, the prediction), then the rows the order was
//! chosen from, the bill beside SQS's, and the prices with their dates.
//! Or all of it as JSON (`--json`).

use super::choice::Figures;
use super::cost::CostLine;
use super::runs::Plan;
use super::{prices, sizing};
use crate::report::secs;
use lifo_core::Order;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// `n` dollars, to the cent (to 4 places below a cent).
fn usd(n: f64) -> String {
    if n != 0.0 && n.abs() < 0.01 {
        format!("${n:.4}")
    } else {
        format!("${n:.2}")
    }
}

/// A quantity per task, to 3 significant places.
fn per_task(n: f64) -> String {
    if n == 0.0 || n.abs() >= 0.01 {
        format!("{n:.3}")
    } else {
        format!("{n:.2e}")
    }
}

/// What the plan was asked for, in a line.
fn workload_line(plan: &Plan) -> String {
    let a = &plan.args;
    let mut arrivals = if a.rate > 0.0 {
        format!("{} tasks/s for {} s", a.rate, a.duration)
    } else {
        format!("{} s", a.duration)
    };
    for b in a.bursts() {
        let _ = write!(
            arrivals,
            ", {} at once at {:.1} s",
            b.tasks,
            b.at.as_secs_f64()
        );
    }
    format!(
        "{arrivals} into a downstream of {} × {} ms, TTL {} s, {} KB payloads",
        a.concurrency, a.latency_ms, a.ttl, a.payload_kb
    )
}

/// How the sizes were reached, a line each.
fn sizing_lines(plan: &Plan) -> String {
    let s = &plan.sizing;
    let a = &plan.args;
    let rtt = crate::simulate::STORE_LATENCY.as_millis();
    let key = sizing::KEY_WRITES_PER_SECOND * sizing::HEADROOM;
    let mb = plan.memory.process_mb;
    let vcpu = 100.0 * mb.min(sizing::FULL_VCPU_MB) as f64 / sizing::FULL_VCPU_MB as f64;
    format!(
        "  the downstream runs {c} / ({l} ms + 2 × {rtt} ms) = {d:.1} tasks/s; at the peak ({p:.1} arriving a second) \
         {st:.1} start\n  \
         index writes at the peak: {p:.1} puts + 2 × {st:.1} claims and finishes + {sh:.1} sheds (the rate past the \
         downstream; a burst's are shed a TTL later) = {w:.0}/s; a shard's key takes {key:.0} ({h:.0}% of {k:.0}): \
         ShardCount ⌈{w:.0} / {key:.0}⌉\n  \
         one processor at {mb} MB ({vcpu:.0}% of a vCPU, {cpu} ms of CPU a task at a whole one) keeps up with {pp:.0} \
         tasks/s: ProcessorCount ⌈{st:.1} / ({hh:.2} × {pp:.0})⌉, at most the downstream's slots; ShardCount at least that\n",
        c = a.concurrency,
        l = a.latency_ms,
        d = s.downstream_per_second,
        p = a.peak_per_second(),
        st = s.starts_per_second,
        sh = s.shed_per_second,
        w = s.index_writes_per_second,
        h = sizing::HEADROOM * 100.0,
        k = sizing::KEY_WRITES_PER_SECOND,
        cpu = sizing::CPU_MS_PER_TASK,
        pp = s.processor_per_second,
        hh = sizing::HEADROOM,
    )
}

fn list(v: impl Iterator<Item = usize>) -> String {
    v.map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}

fn order_label(plan: &Plan, order: Order) -> String {
    if order == plan.choice.order {
        format!("**{order}** (chosen)")
    } else if order == Order::Fifo {
        format!("{order} (only to compare)")
    } else {
        order.to_string()
    }
}

fn cost_row(out: &mut String, l: &CostLine) {
    let _ = writeln!(
        out,
        "| {} | {} {} | {} |",
        l.what,
        per_task(l.per_task),
        l.unit,
        usd(l.usd_per_million)
    );
}

/// The plan as text (Markdown tables, readable as plain text).
pub fn text(plan: &Plan) -> String {
    let chosen = plan.chosen();
    let f: &Figures = &chosen.figures;
    let mut out = format!("Plan for {}\n\n", workload_line(plan));
    let _ = writeln!(
        out,
        "Order: {}. Why: {}.",
        plan.choice.order, plan.choice.why
    );
    let _ = writeln!(
        out,
        "Size: ShardCount {}, ProcessorCount {}.",
        plan.sizing.shards, plan.sizing.processors
    );
    out.push_str(&sizing_lines(plan));
    let shed_share = 100.0 * f.shed as f64 / f.created.max(1) as f64;
    let _ = writeln!(
        out,
        "Predicted ({}, the median of {} seed(s)): p95 age at start {} while tasks arrive ({} over every start, \
         the drain's included); {} of {} tasks shed ({shed_share:.1}%).",
        plan.choice.order,
        plan.args.seeds,
        secs(f.p95_arriving_ms),
        secs(f.p95_every_ms),
        f.shed,
        f.created,
    );
    if let Some(fifo) = plan.rows.iter().find(|r| r.order == Order::Fifo)
        && fifo.figures.p95_arriving_ms < f.p95_arriving_ms
        && fifo.figures.p50_arriving_ms > f.p50_arriving_ms
    {
        let _ = writeln!(
            out,
            "Oldest first (fifo, only to compare) has the lower p95 here ({}) and the higher median ({} against {}): \
             newest first keeps most starts fresh and leaves the oldest to wait.",
            secs(fifo.figures.p95_arriving_ms),
            secs(fifo.figures.p50_arriving_ms),
            secs(f.p50_arriving_ms)
        );
    }
    if plan.sizing.starts_per_second < plan.args.peak_per_second() {
        let _ = writeln!(
            out,
            "The downstream is the bound: more shards or processors do not start more; more concurrency does."
        );
    }
    let _ = write!(
        out,
        "\nThe orders, each seed's run from seed {} (ShardCount {}, ProcessorCount {}):\n\n\
         | order | started in TTL (each seed) | shed (each seed) | age at start p50 while arriving | p95 while arriving | p95 over every start |\n\
         |---|---|---|---:|---:|---:|\n",
        plan.args.seed, plan.sizing.shards, plan.sizing.processors
    );
    for r in &plan.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            order_label(plan, r.order),
            list(r.seeds.iter().map(|s| s.started)),
            list(r.seeds.iter().map(|s| s.shed)),
            secs(r.figures.p50_arriving_ms),
            secs(r.figures.p95_arriving_ms),
            secs(r.figures.p95_every_ms),
        );
    }
    let c = &plan.costs;
    let _ = write!(
        out,
        "\nCost per million tasks ({}, every task created counted, shed ones too; {}):\n\n\
         | item | per task | USD per million tasks |\n|---|---:|---:|\n",
        plan.choice.order,
        prices::REGION
    );
    for l in &c.queue {
        cost_row(&mut out, l);
    }
    let _ = writeln!(
        out,
        "| **the queue** | | **{}** |",
        usd(c.queue_usd_per_million)
    );
    cost_row(&mut out, &c.process);
    cost_row(&mut out, &c.sqs);
    let _ = writeln!(
        out,
        "\nThe queue's lines are its own machinery; process's duration is the time it waits on the downstream \
         while tasks run ({} MB), which any consumer pays (an SQS consumer too), and SQS's line is the queue \
         alone, unbatched (a batch of 10 divides it by up to 10; empty receives add to it).",
        plan.memory.process_mb
    );
    let p = &plan.payload;
    let _ = if p.write_per_task > 0.0 {
        writeln!(
            out,
            "Payload: {} KB is past 256 bytes, so it lives in an item of its own (write units a task: {}; read units \
             a start: {}), computed from DynamoDB's billing rules (the in-memory model keeps payloads on the task), \
             as if it did not deflate.",
            plan.args.payload_kb, p.write_per_task, p.read_per_start
        )
    } else {
        writeln!(
            out,
            "Payload: {} KB stays on the task item; the runs carried it, so its units are measured.",
            plan.args.payload_kb
        )
    };
    let _ = write!(
        out,
        "\nPrices ({}, on demand, gathered {}):\n\n| price | USD | per | as of | source |\n|---|---:|---|---|---|\n",
        prices::REGION,
        prices::CHECKED
    );
    for p in prices::PRICES {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            p.name,
            p.usd,
            p.per_text(),
            p.as_of,
            p.source
        );
    }
    let _ = write!(
        out,
        "\n{} runs in virtual time ({} orders × {} seeds, the real process handler over the queue's in-memory \
         model) took {:.1} s of wall time.",
        plan.runs,
        plan.rows.len(),
        plan.args.seeds,
        plan.wall.as_secs_f64()
    );
    out
}

/// The plan as JSON.
pub fn json(plan: &Plan) -> Value {
    let s = &plan.sizing;
    json!({
        "order": plan.choice.order.as_str(),
        "why": plan.choice.why,
        "shardCount": s.shards,
        "processorCount": s.processors,
        "predicted": plan.chosen().figures,
        "sizing": {
            "downstreamPerSecond": s.downstream_per_second,
            "startsPerSecond": s.starts_per_second,
            "shedPerSecond": s.shed_per_second,
            "indexWritesPerSecond": s.index_writes_per_second,
            "processorPerSecond": s.processor_per_second,
            "processMemoryMb": plan.memory.process_mb,
        },
        "orders": plan.rows.iter().map(|r| json!({
            "order": r.order.as_str(),
            "median": r.figures,
            "seeds": r.seeds,
            "usagePerTask": r.usage,
        })).collect::<Vec<_>>(),
        "costPerMillionTasks": plan.costs,
        "payloadItem": {
            "writeUnitsPerTask": plan.payload.write_per_task,
            "readUnitsPerStart": plan.payload.read_per_start,
        },
        "prices": prices::PRICES.iter().map(|p| json!({
            "name": p.name, "usd": p.usd, "per": p.per, "unit": p.unit,
            "source": p.source, "asOf": p.as_of,
        })).collect::<Vec<_>>(),
        "pricesGathered": prices::CHECKED,
        "region": prices::REGION,
        "runs": plan.runs,
        "wallMs": plan.wall.as_millis() as u64,
    })
}
