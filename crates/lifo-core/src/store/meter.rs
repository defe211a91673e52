//! What each kind of request spent, from DynamoDB's ConsumedCapacity.

use crate::state::Transition;
use aws_sdk_dynamodb::types::ConsumedCapacity;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a kind of request has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub requests: u64,
    /// Capacity units (write units for writes, read units for reads), table
    /// and indexes together.
    pub units: f64,
}

/// The kinds of request the meter tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Claim,
    Finish,
    Requeue,
    Read,
    /// SCHEDULED → PENDING (scheduler-start).
    Start,
    /// An operator's writes: redrive, delete, pause and resume, nudge.
    Operate,
    /// Shard group leases (more than one processor).
    Group,
    /// Sheds: an expired task leaves the claimable index for the shed index.
    Shed,
    /// Reads of payload items (a claimed task's payload, once).
    Payload,
    /// Latest wins per key: a keyed task's write (one transaction: the
    /// task, its key item, the previous task's supersede or mark) and a
    /// marked claim's end. (The key item's read is a [`Op::Read`].)
    Supersede,
    /// Conditional writes whose condition failed. DynamoDB still charges
    /// them (1 write unit for an item under 1 KB) but returns no
    /// ConsumedCapacity with the error, so the meter books 1 unit each.
    Rejected,
}

/// What a write whose condition failed costs (an item under 1 KB).
const REJECTED_WRITE_UNITS: f64 = 1.0;

impl Op {
    pub const ALL: [Op; 12] = [
        Op::Put,
        Op::Claim,
        Op::Finish,
        Op::Requeue,
        Op::Read,
        Op::Start,
        Op::Operate,
        Op::Group,
        Op::Shed,
        Op::Payload,
        Op::Supersede,
        Op::Rejected,
    ];
    fn index(self) -> usize {
        self as usize
    }
    pub(crate) fn of(t: Transition) -> Self {
        match t {
            Transition::Claim | Transition::Reclaim => Op::Claim,
            Transition::Succeed | Transition::Fail | Transition::Abandon | Transition::Cancel => {
                Op::Finish
            }
            Transition::Start => Op::Start,
            Transition::RetryLater | Transition::RetryAfterError => Op::Requeue,
            Transition::Redrive => Op::Operate,
            Transition::Shed => Op::Shed,
            Transition::Supersede | Transition::EndSuperseded => Op::Supersede,
        }
    }
}

/// Capacity consumed, by kind of request. Shared by clones of a [`Store`].
#[derive(Debug, Default)]
pub struct CapacityMeter {
    requests: [AtomicU64; Op::ALL.len()],
    milli_units: [AtomicU64; Op::ALL.len()],
}

impl CapacityMeter {
    pub(super) fn record<'a>(
        &self,
        op: Op,
        consumed: impl IntoIterator<Item = &'a ConsumedCapacity>,
    ) {
        let units: f64 = consumed
            .into_iter()
            .filter_map(|c| c.capacity_units())
            .sum();
        self.requests[op.index()].fetch_add(1, Ordering::Relaxed);
        self.milli_units[op.index()].fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
    }

    /// `units` spent by one request of `op`, as the billing rules count
    /// them (the in-memory model's meter).
    pub(crate) fn add(&self, op: Op, units: f64) {
        self.requests[op.index()].fetch_add(1, Ordering::Relaxed);
        self.milli_units[op.index()].fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_rejected(&self) {
        let i = Op::Rejected.index();
        self.requests[i].fetch_add(1, Ordering::Relaxed);
        self.milli_units[i].fetch_add((REJECTED_WRITE_UNITS * 1000.0) as u64, Ordering::Relaxed);
    }

    pub fn spent(&self, op: Op) -> Spent {
        Spent {
            requests: self.requests[op.index()].load(Ordering::Relaxed),
            units: self.milli_units[op.index()].load(Ordering::Relaxed) as f64 / 1000.0,
        }
    }

    /// Write units of every kind of write.
    pub fn write_units(&self) -> f64 {
        [
            Op::Put,
            Op::Claim,
            Op::Finish,
            Op::Requeue,
            Op::Start,
            Op::Operate,
            Op::Group,
            Op::Rejected,
        ]
        .into_iter()
        .map(|op| self.spent(op).units)
        .sum()
    }
}
