//! Applying a move of the state machine: one conditional UpdateItem, its
//! expressions from [`crate::expr::transition`].

use super::error::{classify, parse_task};
use super::{Item, Op, Store, StoreError};
use crate::expr::{self, Move, Step};
use crate::model::{Task, TaskStatus};
use crate::state;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
};

impl Store {
    /// Applies `t` to a task whose status the caller believes is `current`,
    /// with one conditional UpdateItem, and returns the task as it is
    /// afterwards. An illegal move is refused before any request is sent; a
    /// failed condition returns the item as DynamoDB saw it.
    pub async fn apply(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<Task, StoreError> {
        let item = self
            .update(task_id, mv, current, step, ReturnValue::AllNew)
            .await?;
        parse_task(item)
    }

    /// [`Store::apply`] for a caller that does not need the item back (a
    /// finish): DynamoDB returns nothing, so nothing is sent or parsed.
    pub async fn record(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
    ) -> Result<(), StoreError> {
        self.update(task_id, mv, current, step, ReturnValue::None)
            .await
            .map(drop)
    }

    async fn update(
        &self,
        task_id: &str,
        mv: &Move<'_>,
        current: TaskStatus,
        step: &Step,
        returns: ReturnValue,
    ) -> Result<Item, StoreError> {
        let t = mv.transition();
        state::check(t, current)?;
        let e = expr::transition(mv, step);
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(expr::attr::TASK_ID, AttributeValue::S(task_id.to_owned()))
            .update_expression(&e.main)
            .condition_expression(&e.condition)
            .set_expression_attribute_names(Some(e.names_map()))
            .set_expression_attribute_values(e.values_map())
            .return_values(returns)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        let result = super::resend_conflicts(|| request.clone().send()).await;
        match result {
            Ok(out) => {
                self.meter.record(Op::of(t), out.consumed_capacity());
                Ok(out.attributes.unwrap_or_default())
            }
            Err(err) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
                if let Some(UpdateItemError::ConditionalCheckFailedException(ex)) =
                    err.as_service_error()
                {
                    self.meter.record_rejected();
                    let current = ex
                        .item()
                        .and_then(|item| parse_task(item.clone()).ok())
                        .map(Box::new);
                    return Err(StoreError::ConditionFailed {
                        task_id: task_id.to_owned(),
                        current,
                    });
                }
                Err(classify("UpdateItem", err))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
    use aws_sdk_dynamodb::types::error::{
        ConditionalCheckFailedException, ProvisionedThroughputExceededException,
    };
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    fn step() -> Step {
        Step {
            now_ms: 1,
            token: 0,
            attempts: 1,
        }
    }

    const CLAIM: Move<'static> = Move::Claim {
        lease_until: 2,
        claimed_by: "p",
    };
    const SUCCEED: Move<'static> = Move::Succeed { history: &[] };

    fn task(id: &str, status: TaskStatus) -> Task {
        let mut t = Task::new_pending(id.into(), crate::Payload::new(), 1_000_000, 60, 1);
        t.task_status = status;
        t
    }

    #[tokio::test]
    async fn illegal_transition_sends_nothing() {
        let any = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
        let client = mock_client!(aws_sdk_dynamodb, [&any]);
        let store = Store::new(client, "t");
        let err = store
            .apply(
                "a",
                &Move::RetryLater {
                    reason: "",
                    history: &[],
                    retry_at: 0,
                },
                TaskStatus::Success,
                &step(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Illegal(_)), "{err}");
        assert_eq!(any.num_calls(), 0);
    }

    #[tokio::test]
    async fn a_claim_asks_for_the_item_and_a_finish_for_nothing() {
        let claim = mock!(Client::update_item)
            .match_requests(|r| r.return_values() == Some(&ReturnValue::AllNew))
            .then_output(|| {
                let item: Item =
                    crate::store::item::to_item(&task("a", TaskStatus::Taken)).unwrap();
                UpdateItemOutput::builder()
                    .set_attributes(Some(item))
                    .build()
            });
        let finish = mock!(Client::update_item)
            .match_requests(|r| r.return_values() == Some(&ReturnValue::None))
            .then_output(|| UpdateItemOutput::builder().build());
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&claim, &finish]);
        let store = Store::new(client, "t");
        let claimed = store
            .apply("a", &CLAIM, TaskStatus::Pending, &step())
            .await
            .unwrap();
        assert_eq!(claimed.task_status, TaskStatus::Taken);
        store
            .record("a", &SUCCEED, TaskStatus::Taken, &step())
            .await
            .unwrap();
        assert_eq!((claim.num_calls(), finish.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn conditional_failure_carries_the_current_item() {
        let current: Item = crate::store::item::to_item(&task("a", TaskStatus::Success)).unwrap();
        let rule = mock!(Client::update_item).then_error(move || {
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .message("The conditional request failed")
                    .set_item(Some(current.clone()))
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_dynamodb, [&rule]);
        let store = Store::new(client, "t");
        let err = store
            .apply("a", &SUCCEED, TaskStatus::Taken, &step())
            .await
            .unwrap_err();
        match err {
            StoreError::ConditionFailed { task_id, current } => {
                assert_eq!(task_id, "a");
                assert_eq!(current.map(|t| t.task_status), Some(TaskStatus::Success));
            }
            other => panic!("expected ConditionFailed, got {other}"),
        }
    }

    #[tokio::test]
    async fn throttling_is_typed() {
        let rule = mock!(Client::update_item).then_error(|| {
            UpdateItemError::ProvisionedThroughputExceededException(
                ProvisionedThroughputExceededException::builder()
                    .message("slow down")
                    .meta(
                        aws_sdk_dynamodb::error::ErrorMetadata::builder()
                            .code("ProvisionedThroughputExceededException")
                            .message("slow down")
                            .build(),
                    )
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], |c| {
            c.retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        });
        let store = Store::new(client, "t");
        let err = store
            .apply("a", &CLAIM, TaskStatus::Pending, &step())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Throttled {
                    operation: "UpdateItem",
                    ..
                }
            ),
            "{err}"
        );
    }
}
