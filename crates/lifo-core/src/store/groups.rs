//! Shard group leases (see [`crate::groups`]): taken at the start of an
//! invocation, given back at its end.

use super::error::classify;
use super::{Op, Store, StoreError};
use crate::expr;
use crate::groups::group_key;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity, ReturnValue};

impl Store {
    /// Takes group `group`'s lease until `lease_until` (epoch ms), if it is
    /// free or its lease ended by `now_ms`: the new token, or `None` when
    /// another processor holds it.
    pub async fn take_group(
        &self,
        group: u32,
        lease_until: u64,
        now_ms: u64,
        claimed_by: &str,
    ) -> Result<Option<u64>, StoreError> {
        let e = expr::take_group(lease_until, now_ms, claimed_by);
        let out = self
            .group_update(group, &e, ReturnValue::UpdatedNew)
            .await?;
        Ok(out.map(|attributes| {
            attributes
                .as_ref()
                .and_then(|a| a.get(expr::attr::TOKEN))
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        }))
    }

    /// Gives group `group`'s lease back, if `token` still holds it.
    pub async fn release_group(&self, group: u32, token: u64) -> Result<bool, StoreError> {
        let e = expr::release_group(token);
        let out = self.group_update(group, &e, ReturnValue::None).await?;
        Ok(out.is_some())
    }

    /// The conditional update `e` of group `group`'s item: the attributes
    /// asked for, or `None` when its condition failed.
    async fn group_update(
        &self,
        group: u32,
        e: &expr::Expr,
        values: ReturnValue,
    ) -> Result<Option<Option<super::Item>>, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(group_key(group)))
            .update_expression(&e.main)
            .condition_expression(&e.condition)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(values)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.meter.record(Op::Group, out.consumed_capacity());
                Ok(Some(out.attributes))
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                self.meter.record_rejected();
                Ok(None)
            }
            Err(e) => Err(classify("UpdateItem", e)),
        }
    }
}
