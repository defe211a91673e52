//! The adaptive limit in an invocation: the claim loop's free slots come
//! from it, refusals bring it down, and a tail call hands it on.

use super::*;
use crate::runner::Concurrency;
use aws_sdk_sns::operation::publish::PublishOutput;

/// An invocation of 60 ms over a queue that never empties, into a
/// downstream of 8 slots that refuses every run; the report and the tail
/// call's message.
async fn refused_everywhere(concurrency: Concurrency) -> (ProcessReport, serde_json::Value) {
    let query = mock!(Ddb::query).then_compute_output(|_| {
        QueryOutput::builder()
            .items(index_entry(&lifo_core::new_task_id(), now_ms()))
            .build()
    });
    let (claim, finish) = updates();
    let sent = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&sent);
    let sns = mock!(aws_sdk_sns::Client::publish)
        .match_requests(move |r| {
            if let Ok(mut s) = seen.lock() {
                s.push(r.message().unwrap_or_default().to_owned());
            }
            true
        })
        .then_output(|| PublishOutput::builder().message_id("m").build());
    let mut p = processor(&[&query, &claim, &finish], &sns, Duration::from_millis(60));
    p.config.concurrency = concurrency;
    p.runner = Arc::new(SimulatedRunner::new(8, Duration::from_millis(2), 0.0, 1.0));
    let report = p.handle(&crate::Wakeups::one(), deadline()).await.unwrap();
    let message = sent.lock().unwrap().first().cloned().expect("a tail call");
    (report, serde_json::from_str(&message).unwrap())
}

#[tokio::test]
async fn refusals_bring_the_adaptive_limit_down_and_the_tail_call_hands_it_on() {
    let (report, wakeup) = refused_everywhere(Concurrency::Adaptive).await;
    assert!(report.tail_call);
    // 8 → 4 → 2 → 1 → 1: each refusal of a run started after the last
    // halving halves it (how many fit in 60 ms depends on the machine).
    assert!(report.limit_halvings >= 1, "{report:?}");
    let halved = (8usize >> report.limit_halvings.min(3)).max(1);
    assert_eq!(report.downstream_limit, halved, "{report:?}");
    assert_eq!(report.runs_refused, report.retried_later);
    assert_eq!(
        wakeup["handover"]["limit"]["limit"], halved as f64,
        "{wakeup}"
    );

    let (report, wakeup) = refused_everywhere(Concurrency::Fixed).await;
    assert_eq!((report.downstream_limit, report.limit_halvings), (8, 0));
    assert!(report.runs_refused > 0);
    assert!(wakeup["handover"].get("limit").is_none(), "{wakeup}");
}

/// An invocation of 100 ms over a queue that never empties (3 tasks a
/// read), with 8 slots, into a downstream that runs 2 at once and refuses
/// a third (no queue), each run 20 ms; handed `handover`.
async fn two_at_once(concurrency: Concurrency, handover: serde_json::Value) -> ProcessReport {
    use crate::runner::downstream::{Downstream, Schedule};
    let query = mock!(Ddb::query).then_compute_output(|_| {
        (0..3)
            .fold(QueryOutput::builder(), |b, _| {
                b.items(index_entry(&lifo_core::new_task_id(), now_ms()))
            })
            .build()
    });
    let (claim, finish) = updates();
    let sns = publish();
    let mut p = processor(&[&query, &claim, &finish], &sns, Duration::from_millis(100));
    p.config.concurrency = concurrency;
    let downstream = Downstream::new(Schedule::constant(2), 0, Duration::from_secs(1));
    p.runner = Arc::new(
        SimulatedRunner::new(8, Duration::from_millis(20), 0.0, 0.0)
            .with_downstream(Arc::new(downstream)),
    );
    let mut wake = crate::Wakeups::one();
    if let serde_json::Value::Object(value) = handover {
        wake.handover = Some(crate::Handover { group: None, value });
    }
    p.handle(&wake, deadline()).await.unwrap()
}

#[tokio::test]
async fn the_claim_loops_free_slots_are_the_handed_limits() {
    // Handed a limit of 2 whose unloaded latency was 1 ms: 20 ms runs look
    // queued, so it only falls, and never more than 2 run at once.
    let handed = serde_json::json!({"limit": {"limit": 2.0, "unloadedMs": 1.0}});
    let report = two_at_once(Concurrency::Adaptive, handed.clone()).await;
    assert!(report.succeeded > 0, "{report:?}");
    assert_eq!((report.retried_later, report.runs_refused), (0, 0));
    assert!(report.downstream_limit <= 2, "{report:?}");
    // Fixed, the handover's limit is not read: 8 at once, some refused.
    let report = two_at_once(Concurrency::Fixed, handed).await;
    assert!(report.retried_later > 0, "{report:?}");
    assert_eq!(report.downstream_limit, 8);
}
