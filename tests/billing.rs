//! The meter's figures come from DynamoDB Local's `ConsumedCapacity`. This
//! checks them against AWS's documented billing rules
//! ([`lifo_core::store::billing`]), computed from the items themselves:
//! where they agree, a write or read unit measured locally is AWS's
//! (issue 32, item 11).

use lifo_core::store::Item;
use lifo_core::store::billing;
use lifo_core::{Move, Op, Step, Task, TaskStatus, now_ms};
use lifo_tests::Harness;

async fn image(h: &Harness, id: &str) -> Option<Item> {
    h.store
        .client()
        .get_item()
        .table_name(h.store.table())
        .key(
            "taskId",
            aws_sdk_dynamodb::types::AttributeValue::S(id.into()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_put_claim_and_finish_cost_what_aws_bills() {
    let h = Harness::start(1).await;
    let indexes = h
        .stack
        .template
        .table(lifo_local::stack::TABLE)
        .unwrap()
        .billed_indexes();
    let store = h.store.with_fresh_meter();
    for (id, bytes) in [("small", 60), ("mid", 700), ("big", 3000)] {
        let payload = lifo_local::payloads::realistic(1, bytes);
        let task = Task::new_pending(id.into(), payload, now_ms(), 3600, 1);
        let before = store.meter().spent(Op::Put).units;
        store.put_new(&[task]).await.unwrap();
        let put = image(&h, id).await.unwrap();
        let mut expected = billing::write_units(None, Some(&put), &indexes, "taskId");
        // A payload over the task item's share goes to an item of its own.
        if let Some(p) = image(&h, &lifo_core::store::payload::payload_key(id)).await {
            expected += billing::write_units(None, Some(&p), &indexes, "taskId");
        }
        assert_eq!(
            store.meter().spent(Op::Put).units - before,
            expected,
            "{id}: put"
        );

        let before = store.meter().spent(Op::Claim).units;
        let claimed = lifo_tests::claim(&store, id).await;
        let taken = image(&h, id).await.unwrap();
        assert_eq!(
            store.meter().spent(Op::Claim).units - before,
            billing::write_units(Some(&put), Some(&taken), &indexes, "taskId"),
            "{id}: claim"
        );

        let step = Step {
            now_ms: now_ms(),
            token: claimed.token,
            attempts: 1,
        };
        let before = store.meter().spent(Op::Finish).units;
        store
            .record(
                id,
                &Move::Succeed {
                    history: &claimed.history,
                },
                TaskStatus::Taken,
                &step,
            )
            .await
            .unwrap();
        let done = image(&h, id).await.unwrap();
        assert_eq!(
            store.meter().spent(Op::Finish).units - before,
            billing::write_units(Some(&taken), Some(&done), &indexes, "taskId"),
            "{id}: finish"
        );
    }
}
