//! What one task uses of each priced thing, from a virtual run, and what
//! that costs per million tasks, beside SQS.
//!
//! - DynamoDB: the write and read units the run metered by AWS's billing
//!   rules (`lifo_core::memory::Billing`), with the payload on the task
//!   item when it stays there (up to 256 bytes). A larger payload lives in
//!   an item of its own (`lifo_core::store::payload`), which the in-memory
//!   model does not keep: its units are computed by the same rules, a put
//!   per task and a strongly consistent read per start, as if it did not
//!   deflate (a JSON payload that compresses costs less).
//! - SNS: the run's publishes (wake-ups, tail calls); deliveries to Lambda
//!   are free.
//! - Lambda: the run's invocations of create (one per create request),
//!   trigger (the sweep's included) and process, and their durations in
//!   virtual time at each function's MemorySize; process's is shown apart,
//!   since it waits on the downstream while tasks run, as any consumer
//!   would.
//!
//! Every figure is per task created (shed ones included), so the total is
//! what a million arrivals cost.

use super::prices::{self, Price};
use crate::virtual_time::VirtualRun;
use aws_sdk_dynamodb::types::AttributeValue;
use lifo_core::expr::attr;
use lifo_core::store::billing;
use lifo_core::store::payload::{self, PayloadPolicy};
use std::collections::HashMap;

/// The functions' MemorySize (MB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionMemory {
    pub create_mb: u64,
    pub trigger_mb: u64,
    pub process_mb: u64,
}

/// The units a payload item costs: its put (every task) and its read (every
/// start); none when the payload stays on the task item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PayloadUnits {
    pub write_per_task: f64,
    pub read_per_start: f64,
}

/// A task id's length (a UUID).
const TASK_ID_BYTES: usize = 36;

/// What the payload item of a `bytes`-byte payload costs, by DynamoDB's
/// billing rules: the item create writes (its key, its TTL, the payload
/// as JSON text, not deflated).
pub fn payload_units(bytes: usize) -> PayloadUnits {
    if bytes <= PayloadPolicy::default().inline_max {
        return PayloadUnits {
            write_per_task: 0.0,
            read_per_start: 0.0,
        };
    }
    let (name, json) = payload::encode("x".repeat(bytes).as_bytes(), false);
    let item: HashMap<String, AttributeValue> = HashMap::from([
        (
            attr::TASK_ID.to_owned(),
            AttributeValue::S(payload::payload_key(&"0".repeat(TASK_ID_BYTES))),
        ),
        // A TTL in epoch seconds: ten digits.
        (
            attr::DELETE_AT.to_owned(),
            AttributeValue::N("1800003601".into()),
        ),
        (name.to_owned(), json),
    ]);
    let size = billing::item_bytes(&item);
    PayloadUnits {
        write_per_task: billing::write_units(None, Some(&item), &[], attr::TASK_ID),
        read_per_start: billing::query_read_units(&[size], true),
    }
}

/// What one created task uses, on average.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub write_units: f64,
    pub read_units: f64,
    pub publishes: f64,
    /// create, trigger and process invocations.
    pub invocations: f64,
    /// create's and trigger's GB-seconds.
    pub queue_gb_seconds: f64,
    /// process's GB-seconds.
    pub process_gb_seconds: f64,
}

impl Usage {
    /// A run's use per task created, with its payload item's units.
    pub fn of(run: &VirtualRun, payload: PayloadUnits, memory: FunctionMemory) -> Self {
        let o = &run.outcome;
        let created = o.created.max(1) as f64;
        let per = |n: f64| n / created;
        let gb_s = |ms: u64, mb: u64| ms as f64 / 1000.0 * mb as f64 / 1024.0;
        let t = &run.lambda;
        Self {
            write_units: per(o.write_units) + payload.write_per_task,
            read_units: per(o.read_units + payload.read_per_start * o.starts.len() as f64),
            publishes: per(o.pipeline.published as f64),
            invocations: per((o.pipeline.process_invocations
                + o.pipeline.trigger_invocations
                + t.create_requests) as f64),
            queue_gb_seconds: per(
                gb_s(t.create_ms, memory.create_mb) + gb_s(t.trigger_ms, memory.trigger_mb)
            ),
            process_gb_seconds: per(gb_s(t.process_ms, memory.process_mb)),
        }
    }

    /// Each field's median over `usages` (the lower middle one).
    pub fn median(usages: &[Usage]) -> Self {
        let m = |f: fn(&Usage) -> f64| {
            crate::loads::median(usages.iter().map(f).collect()).unwrap_or(0.0)
        };
        Self {
            write_units: m(|u| u.write_units),
            read_units: m(|u| u.read_units),
            publishes: m(|u| u.publishes),
            invocations: m(|u| u.invocations),
            queue_gb_seconds: m(|u| u.queue_gb_seconds),
            process_gb_seconds: m(|u| u.process_gb_seconds),
        }
    }
}

/// One line of the bill: what, how much of it a task uses, and the
/// dollars a million tasks pay for it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostLine {
    pub what: &'static str,
    pub per_task: f64,
    pub unit: &'static str,
    pub usd_per_million: f64,
}

impl CostLine {
    fn of(what: &'static str, price: &Price, per_task: f64, unit: &'static str) -> Self {
        Self {
            what,
            per_task,
            unit,
            usd_per_million: price.usd_per_million_tasks(per_task),
        }
    }
}

/// The bill per million tasks.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Costs {
    /// The queue's own lines: DynamoDB, SNS, Lambda's requests, create's
    /// and trigger's durations.
    pub queue: Vec<CostLine>,
    pub queue_usd_per_million: f64,
    /// process's duration: it runs the tasks.
    pub process: CostLine,
    /// SQS standard, unbatched: send, receive, delete.
    pub sqs: CostLine,
}

/// What `usage` costs per million tasks of `payload_bytes`, and SQS beside.
pub fn costs(usage: &Usage, payload_bytes: usize) -> Costs {
    let queue = vec![
        CostLine::of(
            "DynamoDB writes",
            &prices::DYNAMODB_WRITE,
            usage.write_units,
            "write units",
        ),
        CostLine::of(
            "DynamoDB reads",
            &prices::DYNAMODB_READ,
            usage.read_units,
            "read units",
        ),
        CostLine::of(
            "SNS publishes",
            &prices::SNS_PUBLISH,
            usage.publishes,
            "publishes",
        ),
        CostLine::of(
            "Lambda requests",
            &prices::LAMBDA_REQUEST,
            usage.invocations,
            "invocations",
        ),
        CostLine::of(
            "Lambda duration, create and trigger",
            &prices::LAMBDA_ARM64_GB_SECOND,
            usage.queue_gb_seconds,
            "GB-s",
        ),
    ];
    Costs {
        queue_usd_per_million: queue.iter().map(|l| l.usd_per_million).sum(),
        queue,
        process: CostLine::of(
            "Lambda duration, process",
            &prices::LAMBDA_ARM64_GB_SECOND,
            usage.process_gb_seconds,
            "GB-s",
        ),
        sqs: CostLine::of(
            "SQS standard: send, receive, delete",
            &prices::SQS_REQUEST,
            prices::sqs_requests_per_message(payload_bytes),
            "requests",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 256 bytes the payload stays on the task (the run measures
    /// it); past that its item is a put per task, by the started KB, and a
    /// strongly consistent read per start, by the started 4 KB.
    #[test]
    fn a_payload_past_256_bytes_costs_its_own_item() {
        assert_eq!(payload_units(0), payload_units(256));
        assert_eq!(payload_units(256).write_per_task, 0.0);
        // The item: taskId (6) + "#payload/<36>" (45), ttl (3) + ten
        // digits (6), j (1) + the payload.
        let overhead = 6 + 45 + 3 + 6 + 1;
        for (bytes, write, read) in [(257, 1.0, 1.0), (4096, 5.0, 2.0), (64 * 1024, 65.0, 17.0)] {
            let u = payload_units(bytes);
            assert_eq!(
                u.write_per_task,
                ((bytes + overhead) as f64 / 1024.0).ceil(),
                "{bytes}"
            );
            assert_eq!(
                (u.write_per_task, u.read_per_start),
                (write, read),
                "{bytes}"
            );
        }
    }

    /// A known case, by hand: a task that costs 6 write units (put, claim
    /// and finish at 2 each), 0.4 read units, a publish per 10 tasks, 1.2
    /// invocations, 1 ms of create and trigger at 1 GB and 10 ms of
    /// process. Per million tasks: 6 × $0.625 + 0.4 × $0.125 + 0.1 ×
    /// $0.50 + 1.2 × $0.20 + 1,000 GB-s × $0.0000133334 = $4.1033334 for
    /// the queue, $0.133334 for process, and SQS's 3 requests × $0.40 =
    /// $1.20 (5 requests, $2.00, for a 100 KB payload: two 64 KB chunks
    /// for the send and the receive each, and the delete).
    #[test]
    fn the_bill_is_each_use_at_its_price() {
        let usage = Usage {
            write_units: 6.0,
            read_units: 0.4,
            publishes: 0.1,
            invocations: 1.2,
            queue_gb_seconds: 0.001,
            process_gb_seconds: 0.01,
        };
        let c = costs(&usage, 4096);
        let usd: Vec<f64> = c.queue.iter().map(|l| l.usd_per_million).collect();
        let expected = [3.75, 0.05, 0.05, 0.24, 0.013_333_4];
        for (got, want) in usd.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{usd:?}");
        }
        assert!((c.queue_usd_per_million - 4.103_333_4).abs() < 1e-12);
        assert!((c.process.usd_per_million - 0.133_334).abs() < 1e-12);
        assert_eq!((c.sqs.per_task, c.sqs.usd_per_million), (3.0, 1.2));
        let c = costs(&usage, 100 * 1024);
        assert_eq!((c.sqs.per_task, c.sqs.usd_per_million), (5.0, 2.0));
    }

    #[test]
    fn the_median_is_each_fields_own() {
        let u = |w: f64, r: f64| Usage {
            write_units: w,
            read_units: r,
            ..Usage::default()
        };
        let m = Usage::median(&[u(6.0, 0.9), u(7.0, 0.1), u(5.0, 0.5)]);
        assert_eq!((m.write_units, m.read_units), (6.0, 0.5));
    }
}
