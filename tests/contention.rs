//! Transaction conflicts as AWS answers them (issue 32, item 1): a write on
//! a task that a supersede transaction holds gets
//! `TransactionConflictException` from DynamoDB, which the SDK does not
//! retry. The local stack answers it too ([`lifo_local::contention`]).

use lifo_core::{Move, Step, TaskStatus, now_ms};
use lifo_tests::{Harness, deadline};
use serde_json::json;
use std::time::Duration;

async fn one_task(h: &Harness, id: &str) {
    h.creator()
        .handle(json!({ "tasks": [{"taskId": id, "payload": {"n": 1}}] }))
        .await
        .expect("create");
}

fn contention(h: &Harness) -> &lifo_local::contention::Contention {
    h.stack
        .contention
        .as_ref()
        .expect("the local stack answers conflicts by default")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_meets_a_transaction_is_sent_again_once_it_ends() {
    let h = Harness::start(1).await;
    one_task(&h, "held-briefly").await;
    let held = contention(&h).hold("held-briefly");
    // The transaction ends 60 ms later, within the store's resends.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        drop(held);
    });
    // The claim goes through once the transaction ends.
    let t = lifo_tests::claim(&h.store, "held-briefly").await;
    assert_eq!(t.task_status, TaskStatus::Taken);
    assert!(
        contention(&h).injected() >= 1,
        "the first send met the transaction"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_held_through_every_resend_is_skipped_and_the_processor_goes_on() {
    let h = Harness::start(1).await;
    one_task(&h, "held").await;
    one_task(&h, "free").await;
    let held = contention(&h).hold("held");
    let p = h.processor(2, Duration::ZERO, Duration::from_secs(3));
    let report = p
        .handle(&process::Wakeups::one(), deadline())
        .await
        .expect("a conflict is contention, not an error of the invocation");
    assert_eq!(report.claimed, ["free"]);
    assert!(report.conflicts >= 1, "{report:?}");
    assert_eq!(report.finish_errors, 0, "{report:?}");
    // The error a direct write gets says what happened.
    let e = h
        .store
        .apply(
            "held",
            &Move::Claim {
                lease_until: now_ms() + 60_000,
                claimed_by: "test",
            },
            TaskStatus::Pending,
            &Step {
                now_ms: now_ms(),
                token: 0,
                attempts: 1,
            },
        )
        .await
        .expect_err("still held");
    assert!(e.is_conflict(), "{e:?}");
    assert!(
        lifo_core::error::chain(&e).contains("TransactionConflictException"),
        "{}",
        lifo_core::error::chain(&e)
    );
    drop(held);
    let report = h
        .processor(2, Duration::ZERO, Duration::from_secs(3))
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        report.claimed,
        ["held"],
        "claimed once the transaction ended"
    );
}
