//! A small async API over the queue table, one file per concern:
//! `write.rs` (creating tasks), `claim.rs` (the claim read of each shard's
//! head), `transition.rs` (every move, conditional on its state),
//! `operate.rs` (an operator's redrive and delete), `failed.rs` (the
//! failed-task index), `shed.rs` (shedding what expired), [`supersede`]
//! (latest wins per key), [`payload`] (a large payload's own item),
//! `control.rs` (pause and resume), `schedule.rs` (scheduled tasks),
//! `groups.rs` (shard-group leases), `read.rs` (reads), `counts.rs` (COUNT
//! queries and the stats' reads), `error.rs` (errors and resends),
//! `meter.rs` (the capacity meter), [`billing`] (AWS's billing rules), and
//! [`queue`], the seam these calls make up (`dynamodb.rs` implements it for
//! the store; [`crate::memory`] is its in-memory reference model), with
//! [`ops`], what the queue does over any implementation of it.
//!
//! Every request asks for `ReturnConsumedCapacity = INDEXES` and adds what it
//! spent to a [`CapacityMeter`], so the cost per task is measured, not guessed.

pub mod billing;
mod claim;
mod control;
mod counts;
mod dynamodb;
mod error;
mod failed;
mod groups;
pub mod item;
mod meter;
mod operate;
pub mod ops;
pub mod payload;
pub mod queue;
mod read;
mod schedule;
mod shed;
pub mod supersede;
mod transition;
mod write;

pub use control::{
    CONTROL_ID, DOWNSTREAM_ID, DownstreamLimit, QueueControl, is_control_id, is_queue_item,
};
pub use error::{CancelError, StoreError};
pub use failed::{Failed, FailedQuery};
pub use meter::{CapacityMeter, Op, Spent};
pub use operate::{OperateError, RedriveSettings};
pub use ops::QueueOps;
pub use payload::PayloadPolicy;
pub use queue::{IndexPage, IndexRead, Queue};
pub use shed::{REAP_MAX_PER_SHARD, REAP_PAGE, Reaped, sheddable};
pub use supersede::Keyed;
pub use write::{BATCH_WRITE_MAX, UNPROCESSED_RESENDS};

use crate::expr;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use error::classify;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A DynamoDB item (also a continuation key).
pub type Item = HashMap<String, AttributeValue>;

/// The queue table.
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    table: String,
    meter: Arc<CapacityMeter>,
    /// Tasks this store's claim reads shed on their way (for the
    /// invocation's `TasksShed`); shared by clones.
    shed_by_reads: Arc<std::sync::atomic::AtomicU64>,
    /// Where new tasks' payloads go (see [`payload`]).
    payload_policy: PayloadPolicy,
}

impl Store {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            meter: Arc::default(),
            shed_by_reads: Arc::default(),
            payload_policy: PayloadPolicy::default(),
        }
    }

    /// With `policy` for the payloads of the tasks it writes.
    pub fn with_payload_policy(mut self, policy: PayloadPolicy) -> Self {
        self.payload_policy = policy;
        self
    }

    /// A store over the same table and client whose meter (and shed
    /// count) starts at zero: what one part of a run spent, alone.
    pub fn with_fresh_meter(&self) -> Self {
        Self::new(self.client.clone(), self.table.clone()).with_payload_policy(self.payload_policy)
    }

    /// The same store (its meter shared) over another client: the same
    /// table through other credentials, endpoints or interceptors.
    pub fn with_client(&self, client: Client) -> Self {
        Self {
            client,
            ..self.clone()
        }
    }

    /// Tasks the claim reads of this store (and its clones) have shed so far.
    pub fn shed_by_reads(&self) -> u64 {
        self.shed_by_reads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn meter(&self) -> &CapacityMeter {
        &self.meter
    }

    /// A query of `index` with `q`'s key condition (and filter, if any),
    /// asking for ConsumedCapacity.
    pub(super) fn index_query(&self, index: &str, q: &expr::Expr) -> QueryFluentBuilder {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(index)
            .key_condition_expression(&q.main)
            .set_expression_attribute_names(Some(q.names_map()))
            .set_expression_attribute_values(q.values_map())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        if q.condition.is_empty() {
            query
        } else {
            query.filter_expression(&q.condition)
        }
    }

    /// One page of task ids from a keys-only index.
    pub(super) async fn index_ids(
        &self,
        query: QueryFluentBuilder,
        start: Option<Item>,
    ) -> Result<(Vec<String>, Option<Item>), StoreError> {
        let out = query
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| classify("Query", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        let ids = out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|mut item| match item.remove(expr::attr::TASK_ID) {
                Some(AttributeValue::S(id)) => Some(id),
                _ => None,
            })
            .collect();
        Ok((ids, out.last_evaluated_key))
    }
}

/// The wait before resend `attempt` (1, 2, …) of our own resends
/// (unprocessed batch items, recording an outcome): a ceiling of 100 ms,
/// 200 ms, 400 ms … capped at 3.2 s, with "equal jitter": a random wait
/// between half the ceiling and the ceiling, so a resend never comes at once
/// but resends of many tasks still spread out.
pub fn resend_wait(attempt: u32) -> Duration {
    let ceiling = 50u64 << attempt.clamp(1, 6);
    Duration::from_millis(fastrand::u64(ceiling / 2..=ceiling))
}

/// Sends of one single-item write while DynamoDB answers
/// `TransactionConflictException` (a supersede transaction was writing the
/// item at that moment): the first and three resends, over about 0.35 s.
pub const CONFLICT_TRIES: u32 = 4;

/// Sends `call` again, after a jittered [`resend_wait`], while DynamoDB
/// answers that a transaction holds the item (the SDK does not retry it;
/// the write was not applied, so sending it again is safe). After
/// [`CONFLICT_TRIES`] the last answer stands, and [`error::classify`]
/// makes it [`StoreError::Conflict`].
pub(crate) async fn resend_conflicts<O, E, R, F, Fut>(
    mut call: F,
) -> Result<O, aws_sdk_dynamodb::error::SdkError<E, R>>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<O, aws_sdk_dynamodb::error::SdkError<E, R>>>,
{
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    let mut tries = 1;
    loop {
        match call().await {
            Err(e) if e.code() == Some(error::CONFLICT_CODE) && tries < CONFLICT_TRIES => {
                tracing::debug!(tries, "transaction conflict; sending again");
                tokio::time::sleep(resend_wait(tries) / 2).await;
                tries += 1;
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resend_wait_draws_between_half_the_ceiling_and_the_ceiling() {
        for (attempt, ceiling) in [(1, 100), (2, 200), (3, 400), (6, 3200), (30, 3200)] {
            let waits: Vec<u64> = (0..2000)
                .map(|_| resend_wait(attempt).as_millis() as u64)
                .collect();
            let (min, max) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
            assert!(
                *min >= ceiling / 2 && *max <= ceiling,
                "attempt {attempt}: {min}..{max}"
            );
            // Jittered: the draws cover most of the range.
            assert!(max - min > ceiling / 3, "attempt {attempt}: {min}..{max}");
        }
    }
}
