//! A paused queue: nothing claimed, what runs finishes, no tail call.

use super::*;

#[tokio::test]
async fn a_paused_queue_claims_nothing_and_makes_no_tail_call() {
    let query = one_page(&[("b", 20), ("a", 10)]);
    let (claim, finish) = updates();
    let sns = publish();
    let report = processor_with(
        &[&query, &claim, &finish],
        &control(true),
        &sns,
        Duration::from_secs(10),
    )
    .handle(&crate::Wakeups::one(), deadline())
    .await
    .unwrap();
    assert_eq!(report.stop, StopReason::Paused);
    assert!(report.claimed.is_empty() && !report.tail_call);
    assert_eq!(
        (query.num_calls(), claim.num_calls(), sns.num_calls()),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn a_pause_seen_mid_invocation_stops_claiming_and_finishes_what_runs() {
    // An endless queue: every refill finds two more tasks.
    let query = mock!(Ddb::query)
        .sequence()
        .output(|| {
            QueryOutput::builder()
                .items(index_entry("x", 20))
                .items(index_entry("y", 10))
                .build()
        })
        .repeatedly()
        .build();
    let (claim, finish) = updates();
    let sns = publish();
    // Not paused when the invocation starts, paused from the second read.
    let control = mock!(Ddb::get_item)
        .sequence()
        .output(|| control_read(false))
        .output(|| control_read(true))
        .repeatedly()
        .build();
    let started = Instant::now();
    let report = processor_with(
        &[&query, &claim, &finish],
        &control,
        &sns,
        Duration::from_secs(10),
    )
    .handle(&crate::Wakeups::one(), deadline())
    .await
    .unwrap();
    assert_eq!(report.stop, StopReason::Paused);
    assert!(!report.claimed.is_empty(), "it claimed before the pause");
    assert_eq!(report.succeeded, report.claimed.len(), "and finished those");
    assert!(!report.tail_call && sns.num_calls() == 0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped long before the budget"
    );
}
