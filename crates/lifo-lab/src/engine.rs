//! A workload's run on the engine it names ([`crate::simulate::Engine`]):
//! DynamoDB Local and moto in real time ([`crate::simulate`]), or the
//! in-memory queue in virtual time ([`crate::virtual_time`]). What every
//! command of the lab calls.

use crate::simulate::{self, Engine, Outcome, Progress, VirtualRunInfo, Workload};
use anyhow::Result;
use lifo_core::Order;
use std::time::Duration;

/// A workload's run on its engine, every arrival a demo task.
pub async fn run(
    workload: &Workload,
    order: Order,
    arrivals: &[Duration],
    on_progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Outcome> {
    run_specs(workload, order, arrivals, None, on_progress).await
}

/// [`simulate::run_specs`] on the workload's engine.
pub async fn run_specs(
    workload: &Workload,
    order: Order,
    arrivals: &[Duration],
    specs: Option<&[serde_json::Value]>,
    on_progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Outcome> {
    if workload.engine == Engine::Local {
        return simulate::run_specs(workload, order, arrivals, specs, on_progress).await;
    }
    let run = crate::virtual_time::run(workload, order, arrivals, specs)?;
    let mut outcome = run.outcome;
    outcome.virtual_run = Some(VirtualRunInfo {
        wall: run.wall,
        log_hash: run.log.hash(),
    });
    Ok(outcome)
}
