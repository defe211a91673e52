//! What the model's operations would cost on AWS, by DynamoDB's documented
//! billing rules ([`crate::store::billing`]), counted into a
//! [`CapacityMeter`] as the DynamoDB store counts its `ConsumedCapacity`:
//! a simulation's write and read units.
//!
//! - a write: the larger of the item's images, per started KB, plus each
//!   index entry it places, changes or removes (each in its partition, for
//!   [`super::limits`]); a transaction's writes (latest wins per key) twice
//!   that; a write whose condition fails, 1;
//! - a query: the index entries it evaluates (before the filter), summed
//!   and rounded up to 4 KB, halved (eventually consistent);
//! - a read of one item: its size rounded up to 4 KB, halved unless
//!   strongly consistent.

use super::index::Entry;
use crate::expr::attr;
use crate::model::Task;
use crate::store::billing::{self, Index, Partition};
use crate::store::{CapacityMeter, Item, Op, item};
use std::sync::Arc;

/// The table's indexes and the meter the model's units go to.
#[derive(Debug, Clone)]
pub struct Billing {
    pub indexes: Vec<Index>,
    pub meter: Arc<CapacityMeter>,
}

impl Billing {
    /// `units` spent by one request of `op`.
    pub(super) fn spend(&self, op: Op, units: f64) {
        self.meter.add(op, units);
    }

    /// A conditional write whose condition failed.
    pub(super) fn rejected(&self) {
        self.meter.record_rejected();
    }
}

/// The units of a write that changed an item from `before` to `after`
/// (their images), by the partition each goes to, over `indexes`.
pub(super) fn write_charges(
    before: Option<&Item>,
    after: Option<&Item>,
    indexes: &[Index],
) -> Vec<(Partition, f64)> {
    billing::write_units_by_partition(before, after, indexes, attr::TASK_ID)
}

/// The read units of a query of the claimable index that evaluated
/// `entries` (eventually consistent).
pub(super) fn query_units<'a>(entries: impl Iterator<Item = &'a Entry>) -> f64 {
    let bytes: usize = entries.map(Entry::bytes).sum();
    billing::query_read_units(&[bytes], false)
}

/// The read units of a read of one item (a small queue item when `None`).
pub(super) fn get_units(task: Option<&Task>, consistent: bool) -> f64 {
    let bytes = task
        .and_then(|t| item::to_item(t).ok())
        .map_or(0, |i| billing::item_bytes(&i));
    billing::query_read_units(&[bytes], consistent)
}

impl Entry {
    /// The entry's size as the claimable index projects it: the table's
    /// key, the index's keys and `expiresAt`, `leaseUntil`, `token`,
    /// `attempts`, `retryAt`, `tenant` (template.yaml's projection).
    pub fn bytes(&self) -> usize {
        let c = &self.candidate;
        let number = |name: &str, v: i128| name.len() + billing::integer_bytes(v);
        let mut bytes = attr::TASK_ID.len() + c.task_id.len();
        bytes += number(attr::SHARD, c.lifo_shard.into());
        bytes += number(attr::CLAIMABLE_AT, c.claimable_at.into());
        bytes += number(attr::EXPIRES_AT, c.expires_at.into());
        bytes += number(attr::TOKEN, c.token.into());
        bytes += number(attr::ATTEMPTS, c.attempts.into());
        if let Some(l) = c.lease_until {
            bytes += number(attr::LEASE_UNTIL, l.into());
        }
        if let Some(r) = self.retry_at {
            bytes += number(attr::RETRY_AT, r.into());
        }
        if let Some(t) = &c.tenant {
            bytes += attr::TENANT.len() + t.len();
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::throttle_tests::claimable_index as claimable;

    /// An entry's size is its projected item's, as DynamoDB sizes it.
    #[test]
    fn an_entry_is_sized_as_its_projection() {
        let mut t = Task::new_pending(
            "0199c0de-0000-7000-8000-000000000001".into(),
            serde_json::Map::new(),
            1_800_000_000_123,
            60,
            4,
        );
        for (lease, retry, tenant) in [
            (None, None, None),
            (
                Some(1_800_000_030_000),
                Some(1_800_000_001_000),
                Some("acme"),
            ),
        ] {
            t.lease_until = lease;
            t.retry_at = retry;
            t.tenant = tenant.map(String::from);
            t.token = 3;
            let item = item::to_item(&t).expect("an item");
            let projected = billing::entry(&item, &claimable(), attr::TASK_ID).expect("indexed");
            let entry = Entry::of(&t).expect("claimable");
            assert_eq!(
                entry.bytes(),
                billing::item_bytes(&projected),
                "{projected:?}"
            );
        }
    }
}
