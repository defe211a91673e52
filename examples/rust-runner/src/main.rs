//! A team's own work behind the LIFO queue, in Rust: implement
//! [`TaskRunner`] and `process::serve` turns it into the complete process
//! function (settings, clients, claims, leases, retries, tail calls), the
//! same as the built-in runners get.
//!
//! This one "renders invoices": a task's payload names an `invoiceId`; a
//! payload without one fails (and, after `MaxAttempts`, ends FAILURE with
//! this reason); one marked `"quotaExceeded": true` is refused as busy, so
//! it is put back without burning an attempt and rests 2 s first.
//!
//! Build it as the stack's process function: in template.yaml, set
//! `BuildProperties: Binary: lifo-example-rust-runner` on ProcessFunction.

use lifo_core::Task;
use process::runner::{RunOutcome, TaskRunner};
use std::time::Duration;

struct Invoices;

impl TaskRunner for Invoices {
    /// Invoices rendered at once (the queue never claims more).
    fn capacity(&self) -> usize {
        4
    }

    /// The longest a render takes: process stops claiming when a render
    /// started now could outlast its invocation.
    fn max_duration(&self) -> Duration {
        Duration::from_secs(5)
    }

    async fn run(&self, task: &Task) -> RunOutcome {
        // The payload as serde_json values (`task.payload.parse::<T>()` reads
        // it as your own type, `task.payload.json()` is its text: both keep
        // every digit of its numbers).
        let payload = task.payload.to_map();
        if payload.get("quotaExceeded") == Some(&serde_json::Value::Bool(true)) {
            return RunOutcome::RetryAfter("render quota exceeded".into(), Duration::from_secs(2));
        }
        match payload.get("invoiceId").and_then(|v| v.as_str()) {
            Some(id) => {
                tracing::info!(event = "invoice.rendered", taskId = %task.task_id, invoiceId = id);
                RunOutcome::Success
            }
            None => RunOutcome::Failure("payload has no invoiceId".into()),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    process::serve(Invoices).await
}
