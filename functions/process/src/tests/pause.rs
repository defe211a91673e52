//! A paused queue, or a processor its host stops ([`crate::Halt`]):
//! nothing claimed, what runs finishes, no tail call.

use super::*;

/// An endless queue: every refill finds two more tasks.
fn endless_queue() -> Rule {
    mock!(Ddb::query)
        .sequence()
        .output(|| {
            QueryOutput::builder()
                .items(index_entry("x", 20))
                .items(index_entry("y", 10))
                .build()
        })
        .repeatedly()
        .build()
}

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
    let query = endless_queue();
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

/// `lifo local up` on SIGTERM (issue 51: 15 claims followed the signal):
/// once its host stops it, an invocation sends no claim, finishes the
/// tasks it runs, and ends without a tail call; the halt counted them
/// while they ran.
#[tokio::test]
async fn a_stopped_processor_claims_nothing_more_and_finishes_what_runs() {
    let query = endless_queue();
    let (claim, finish) = updates();
    let sns = publish();
    let processor = processor_with(
        &[&query, &claim, &finish],
        &control(false),
        &sns,
        Duration::from_secs(10),
    );
    let halt = processor.halt().clone();
    let started = Instant::now();
    let wake = crate::Wakeups::one();
    let (report, ()) = tokio::join!(processor.handle(&wake, deadline()), async {
        // Stop once the runner's two slots are taken (each run takes
        // 5 ms: none has ended yet).
        while halt.running() < 2 {
            tokio::task::yield_now().await;
        }
        halt.stop();
    });
    let report = report.unwrap();
    assert_eq!(report.stop, StopReason::Stopped);
    // The endless queue would have given a claim every 5 ms for 10 s.
    assert_eq!(claim.num_calls(), 2, "no claim after the stop");
    assert_eq!(report.claimed.len(), 2);
    assert_eq!(report.succeeded, 2, "what ran was finished");
    assert_eq!(halt.running(), 0);
    assert!(!report.tail_call && sns.num_calls() == 0);
    assert!(started.elapsed() < Duration::from_secs(5));
    // Stopped before it starts: nothing at all.
    let report = processor
        .handle(&crate::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(
        (report.stop, report.claimed.len()),
        (StopReason::Stopped, 0)
    );
}
