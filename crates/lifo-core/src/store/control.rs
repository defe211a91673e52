//! The queue's control item: pause and resume, and the operator's nudge.
//!
//! One item in the queue table under the key [`CONTROL_ID`], which no task
//! can have (task ids never contain `#`). It carries no index attribute, so
//! it is in no index and costs them nothing. process reads it when an
//! invocation starts and every few seconds; the sweep reads it every
//! minute. A change of it reaches trigger through the table's stream (the
//! event source mapping passes it), which wakes the processor unless the
//! queue is paused: that is how `lifo resume`, and the nudge after a
//! redrive, wake the queue with no SNS permission for the operator.

use super::error::classify;
use super::{Op, Store, StoreError};
use crate::expr;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity, ReturnValue};
use serde::{Deserialize, Serialize};

/// The key of the control item (`taskId`).
pub const CONTROL_ID: &str = "#control";
/// The key of the downstream item: the last adaptive limit
/// ([`DownstreamLimit`]). In no index, and no stream filter passes it.
pub const DOWNSTREAM_ID: &str = "#downstream";

/// The adaptive limit the last invocation that ran something ended with
/// (`RunnerConcurrency: adaptive`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownstreamLimit {
    /// Runs it allowed in flight.
    pub limit: u64,
    /// Its ceiling: the processor's share of `RunnerMaxConcurrency`.
    pub ceiling: u64,
    /// The downstream's unloaded latency as it measured it (0: unknown).
    #[serde(default)]
    pub unloaded_ms: u64,
    /// The shard group of the processor (0 with one processor).
    #[serde(default)]
    pub group: u32,
    /// When, epoch ms.
    pub at: u64,
}

/// The queue's control state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueControl {
    /// While true, process claims nothing (it finishes what it runs and
    /// makes no tail call) and the sweep wakes nobody.
    #[serde(default)]
    pub paused: bool,
    /// When `paused` last changed, epoch ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<u64>,
    /// Why, as the operator said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last nudge (a wake-up asked for by an operator), epoch ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nudged_at: Option<u64>,
}

fn parse(item: super::Item) -> Result<QueueControl, StoreError> {
    serde_dynamo::from_item(item).map_err(|source| StoreError::Malformed {
        task_id: CONTROL_ID.to_owned(),
        source,
    })
}

/// True for the control item's key, in a stream record or an item.
pub fn is_control_id(task_id: &str) -> bool {
    task_id == CONTROL_ID
}

/// True for the queue's own items (the control item, shard group leases):
/// their keys start with `#`, which no task id may contain.
pub fn is_queue_item(key: &str) -> bool {
    key.starts_with('#')
}

impl Store {
    /// The control state (not paused when the item does not exist).
    /// `consistent`: a strongly consistent read (1 read unit instead of
    /// 0.5), for an operator who just changed it.
    pub async fn control(&self, consistent: bool) -> Result<QueueControl, StoreError> {
        self.queue_item(CONTROL_ID, consistent)
            .await?
            .map_or(Ok(QueueControl::default()), parse)
    }

    /// The queue's own item `key`, if it exists.
    async fn queue_item(
        &self,
        key: &str,
        consistent: bool,
    ) -> Result<Option<super::Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(key.to_owned()))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        Ok(out.item)
    }

    /// Records the adaptive limit an invocation ended with (one write
    /// unit; the processor writes it once per invocation that ran a task).
    pub async fn record_limit(&self, d: &DownstreamLimit) -> Result<(), StoreError> {
        let e = expr::downstream_limit(d.group, d.limit, d.ceiling, d.unloaded_ms, d.at);
        self.update_queue_item(DOWNSTREAM_ID, &e).await.map(drop)
    }

    /// The last adaptive limit recorded, if any.
    pub async fn downstream_limit(&self) -> Result<Option<DownstreamLimit>, StoreError> {
        self.queue_item(DOWNSTREAM_ID, false)
            .await?
            .map(|item| {
                serde_dynamo::from_item(item).map_err(|source| StoreError::Malformed {
                    task_id: DOWNSTREAM_ID.to_owned(),
                    source,
                })
            })
            .transpose()
    }

    /// Pauses or resumes the queue; returns the new state.
    pub async fn set_paused(
        &self,
        paused: bool,
        reason: &str,
        now_ms: u64,
    ) -> Result<QueueControl, StoreError> {
        self.update_control(&expr::set_paused(paused, reason, now_ms))
            .await
    }

    /// Asks for a wake-up (through the stream and trigger), unless paused.
    pub async fn nudge(&self, now_ms: u64) -> Result<QueueControl, StoreError> {
        self.update_control(&expr::nudge(now_ms)).await
    }

    async fn update_control(&self, e: &expr::Expr) -> Result<QueueControl, StoreError> {
        parse(self.update_queue_item(CONTROL_ID, e).await?)
    }

    /// Applies `e` to the queue's own item `key`; the item as it is now.
    async fn update_queue_item(
        &self,
        key: &str,
        e: &expr::Expr,
    ) -> Result<super::Item, StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(key.to_owned()))
            .update_expression(&e.main)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("UpdateItem", e))?;
        self.meter.record(Op::Operate, out.consumed_capacity());
        Ok(out.attributes.unwrap_or_default())
    }
}
