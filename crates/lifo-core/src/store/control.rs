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
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(
                expr::attr::TASK_ID,
                AttributeValue::S(CONTROL_ID.to_owned()),
            )
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("GetItem", e))?;
        self.meter.record(Op::Read, out.consumed_capacity());
        out.item.map_or(Ok(QueueControl::default()), parse)
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
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(
                expr::attr::TASK_ID,
                AttributeValue::S(CONTROL_ID.to_owned()),
            )
            .update_expression(&e.main)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await
            .map_err(|e| classify("UpdateItem", e))?;
        self.meter.record(Op::Operate, out.consumed_capacity());
        parse(out.attributes.unwrap_or_default())
    }
}
