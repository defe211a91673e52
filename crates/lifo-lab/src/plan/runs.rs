//! The runs behind a plan: the size from [`super::sizing`], then the
//! workload in virtual time in every order for each seed (a run per core at
//! once, [`crate::parallel`]), the order chosen from them and the chosen
//! one's bill.

use super::choice::{self, Choice, Figures};
use super::cost::{self, Costs, FunctionMemory, PayloadUnits, Usage};
use super::inputs::PlanArgs;
use super::sizing::{self, Sizing};
use crate::simulate::{Engine, STORE_LATENCY, Workload};
use crate::virtual_time::{self, VirtualRun};
use anyhow::{Context, Result, anyhow};
use lifo_core::Order;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One order's runs: each seed's figures, their medians, and its use per
/// task (medians too).
#[derive(Debug, Clone)]
pub struct Row {
    pub order: Order,
    pub seeds: Vec<Figures>,
    pub figures: Figures,
    pub usage: Usage,
}

/// The answer.
#[derive(Debug, Clone)]
pub struct Plan {
    pub args: PlanArgs,
    pub sizing: Sizing,
    pub memory: FunctionMemory,
    /// The payload item's units (none up to 256 bytes: measured instead).
    pub payload: PayloadUnits,
    /// LIFO, adaptive, FIFO.
    pub rows: Vec<Row>,
    pub choice: Choice,
    /// The chosen order's row, in `rows`.
    chosen: usize,
    /// The chosen order's bill.
    pub costs: Costs,
    /// The runs made, and the wall time they took.
    pub runs: usize,
    pub wall: Duration,
}

impl Plan {
    /// The chosen order's row.
    pub fn chosen(&self) -> &Row {
        &self.rows[self.chosen]
    }
}

/// The orders run, in the order shown.
pub const ORDERS: [Order; 3] = [Order::Lifo, Order::Adaptive, Order::Fifo];

/// One arrival as the runs create it: a payload of `bytes` bytes of
/// compact JSON when it stays on the task item (up to 256 bytes, so the
/// run measures it), else a small one (the task item keeps only the
/// payload's size; [`cost::payload_units`] adds its own item).
pub fn arrival_spec(bytes: usize) -> Value {
    let inline = lifo_core::store::payload::PayloadPolicy::default().inline_max;
    let bytes = if bytes <= inline { bytes } else { 16 };
    // `{"p":"…"}` is 8 bytes around its text.
    let text = "x".repeat(bytes.saturating_sub(8));
    json!({ "payload": { "p": text } })
}

/// The workload the runs of `seed` carry, at `size`'s shards and
/// processors.
pub fn workload(
    args: &PlanArgs,
    template: &Arc<lifo_local::Template>,
    size: &Sizing,
    seed: u64,
) -> Result<Workload> {
    let (runner_concurrency, budget) = crate::simulate_command::template_settings(template)?;
    Ok(Workload {
        concurrency: args.concurrency,
        latency: Duration::from_millis(args.latency_ms),
        ttl_seconds: args.ttl,
        shards: size.shards,
        processors: size.processors,
        budget: Duration::from_secs(budget),
        runner_concurrency,
        template: args.template.is_some().then(|| Arc::clone(template)),
        warm_up: Duration::ZERO,
        engine: Engine::Virtual,
        ..Workload::demo(args.rate, Duration::from_secs(args.duration), seed)
    })
}

/// Plans for `args`: sizes the queue, runs every order for each seed in
/// virtual time, chooses, prices.
pub fn plan(args: &PlanArgs) -> Result<Plan> {
    args.check().map_err(|e| anyhow!(e))?;
    let started = Instant::now();
    let template = Arc::new(lifo_local::Template::load_or_workspace(
        args.template.as_deref(),
    )?);
    let memory = FunctionMemory {
        create_mb: template.function_memory("CreateFunction")?,
        trigger_mb: template.function_memory("TriggerFunction")?,
        process_mb: match args.memory_mb {
            Some(mb) => mb,
            None => template.function_memory("ProcessFunction")?,
        },
    };
    let sizing = sizing::size(&sizing::Demand {
        peak_per_second: args.peak_per_second(),
        rate_per_second: args.rate,
        concurrency: args.concurrency,
        latency: Duration::from_millis(args.latency_ms),
        store_rtt: STORE_LATENCY,
        memory_mb: memory.process_mb,
    })
    .map_err(|e| anyhow!(e))?;
    let payload_bytes = args.payload_bytes();
    let payload = cost::payload_units(payload_bytes);
    let spec = arrival_spec(payload_bytes);
    let mut jobs = Vec::new();
    for seed in args.seed..args.seed + args.seeds {
        let arrivals = Arc::new(args.arrivals(seed));
        let specs = Arc::new(vec![spec.clone(); arrivals.len()]);
        let workload = workload(args, &template, &sizing, seed)?;
        for order in ORDERS {
            jobs.push((
                workload.clone(),
                order,
                Arc::clone(&arrivals),
                Arc::clone(&specs),
            ));
        }
    }
    let runs: Vec<(Order, Figures, Usage)> = crate::parallel::map(
        &jobs,
        crate::parallel::threads(),
        |(workload, order, arrivals, specs)| {
            let run: VirtualRun = virtual_time::run(workload, *order, arrivals, Some(specs))
                .with_context(|| format!("the {order} run of seed {}", workload.seed))?;
            Ok((
                *order,
                Figures::of(&run.outcome),
                Usage::of(&run, payload, memory),
            ))
        },
        |_| (),
    )?;
    let rows: Vec<Row> = ORDERS
        .iter()
        .map(|order| {
            let of: Vec<&(Order, Figures, Usage)> =
                runs.iter().filter(|(o, _, _)| o == order).collect();
            let seeds: Vec<Figures> = of.iter().map(|(_, f, _)| *f).collect();
            let usages: Vec<Usage> = of.iter().map(|(_, _, u)| *u).collect();
            Row {
                order: *order,
                figures: Figures::median(&seeds),
                seeds,
                usage: Usage::median(&usages),
            }
        })
        .collect();
    let figures = |order: Order| {
        rows.iter()
            .find(|r| r.order == order)
            .map(|r| r.figures)
            .unwrap_or_default()
    };
    let choice = choice::choose(
        &figures(Order::Lifo),
        &figures(Order::Adaptive),
        args.prefer,
    );
    let chosen = rows
        .iter()
        .position(|r| r.order == choice.order)
        .ok_or_else(|| anyhow!("no run in the {} order", choice.order))?;
    let usage = rows[chosen].usage;
    Ok(Plan {
        args: args.clone(),
        sizing,
        memory,
        payload,
        costs: cost::costs(&usage, payload_bytes),
        rows,
        choice,
        chosen,
        runs: runs.len(),
        wall: started.elapsed(),
    })
}
