//! The fair share per tenant on DynamoDB Local: a tenant flooding the
//! queue with newer tasks gets its share, the others' tasks start first;
//! with the share off, newest first across tenants; the tenant defaults to
//! the userId; and a tenant costs nothing.

use lifo_core::TaskStatus;
use lifo_tests::{Harness, deadline};
use process::ProcessConfig;
use process::runner::SimulatedRunner;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Three tasks of a small tenant, then 30 newer ones of a big tenant.
async fn flood(h: &Harness) {
    flood_with(h, 30).await;
}

async fn flood_with(h: &Harness, big_tasks: usize) {
    let small: Vec<serde_json::Value> = (0..3)
        .map(|i| json!({"taskId": format!("small-{i}"), "tenant": "small", "payload": {}}))
        .collect();
    h.creator().handle(json!({ "tasks": small })).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let big: Vec<serde_json::Value> = (0..big_tasks)
        .map(|i| json!({"taskId": format!("big-{i:02}"), "tenant": "big", "payload": {}}))
        .collect();
    h.creator().handle(json!({ "tasks": big })).await.unwrap();
}

fn processor(h: &Harness, fair_share: bool) -> process::Processor<SimulatedRunner> {
    let base = h.processor(2, Duration::from_millis(20), Duration::from_secs(10));
    h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(2, Duration::from_millis(20), 0.0, 0.0)),
        ProcessConfig {
            fair_share,
            ..base.config().clone()
        },
    )
}

fn position(claimed: &[String], id: &str) -> usize {
    claimed
        .iter()
        .position(|c| c == id)
        .unwrap_or_else(|| panic!("{id} not claimed: {claimed:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_gets_its_share_and_the_others_start_first() {
    let h = Harness::start(1).await;
    flood(&h).await;
    let report = processor(&h, true)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 33);
    // Two slots, two tenants: one each, so the small tenant's three tasks
    // start among the first six claims, newest first (of two tenants
    // neither floods, so neither keeps up: the claim order within each).
    let small: Vec<usize> = (0..3)
        .map(|i| position(&report.claimed, &format!("small-{i}")))
        .collect();
    assert!(small.iter().all(|p| *p < 6), "{:?}", report.claimed);
    assert!(
        small[2] < small[1] && small[1] < small[0],
        "newest first within a tenant: {:?}",
        report.claimed
    );
    // The big tenant's newest still came first among its own.
    assert!(position(&report.claimed, "big-29") < position(&report.claimed, "big-00"));
}

/// A backlog deeper than a claim read's page: the invocation's first read
/// goes deeper, so the small tenant's tasks under 80 newer ones of the big
/// tenant are seen, and kept in view after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_under_a_deep_backlog_of_another_is_seen_from_the_first_read() {
    let h = Harness::start(1).await;
    flood_with(&h, 80).await;
    let report = processor(&h, true)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 83);
    for i in 0..3 {
        assert!(
            position(&report.claimed, &format!("small-{i}")) < 6,
            "{:?}",
            report.claimed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_share_the_newest_of_any_tenant_starts_first() {
    let h = Harness::start(1).await;
    flood(&h).await;
    let report = processor(&h, false)
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert_eq!(report.succeeded, 33);
    for i in 0..3 {
        assert!(
            position(&report.claimed, &format!("small-{i}")) >= 30,
            "{:?}",
            report.claimed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_defaults_to_the_user_and_costs_nothing() {
    let h = Harness::start(1).await;
    let n = 12;
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"tenant": format!("tenant-{}", i % 4), "payload": {"n": i}}))
        .collect();
    let units = h.write_units_per_task(tasks, 3).await;
    assert_eq!(units, 6.0, "a task with a tenant: 6.00 write units");

    // No tenant given: the user is the tenant.
    h.creator()
        .handle(json!({"tasks": [{"taskId": "by-user", "userId": "user-7", "payload": {}}]}))
        .await
        .unwrap();
    let tasks = h.tasks().await;
    let by_user = tasks.iter().find(|t| t.task_id == "by-user").unwrap();
    assert_eq!(by_user.tenant.as_deref(), Some("user-7"));
    let others = tasks.iter().filter(|t| t.task_id != "by-user");
    assert!(others.clone().all(|t| t.task_status == TaskStatus::Success));
    assert_eq!(others.count(), n);
}

/// The one message waiting on `queue_url` (a topic's subscription), as the
/// SNS event Lambda would be handed, deleted from the queue.
async fn delivered(h: &Harness, queue_url: &str) -> serde_json::Value {
    let got = h
        .stack
        .sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap();
    let messages = got.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    // Taken off the queue, as Lambda's delivery is: left there, it comes back in a later
    // receive once the queue's visibility timeout (5 s) ends.
    lifo_local::pipeline::delete_messages(&h.stack.sqs, queue_url, messages).await;
    let envelope: serde_json::Value =
        serde_json::from_str(messages[0].body().unwrap_or_default()).unwrap();
    lifo_local::pipeline::sns_event_json(&envelope, queue_url)
}

async fn write(h: &Harness, tenant: &str, ids: std::ops::Range<usize>) {
    let tasks: Vec<serde_json::Value> = ids
        .map(|i| json!({"taskId": format!("{tenant}-{i:02}"), "tenant": tenant, "payload": {}}))
        .collect();
    h.plain_creator()
        .handle(json!({ "tasks": tasks }))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// Across tail calls, the flooding tenant does not go back to the top: each
/// invocation hands the ledger of starts on (process → trigger topic →
/// trigger → process topic), so the next one serves a quiet tenant's task
/// before the flood's newer ones. Without the ledger, the flood's newest
/// goes first. The quiet tenant writes five tasks each time, more than a
/// tenant that keeps up has waiting ([`process::select::fair::FEW_WAITING`]),
/// and each invocation has the time to start them all (none is left to
/// keep up in the next): only the ledger puts it first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_tail_call_the_flooding_tenant_does_not_go_back_to_the_top() {
    let h = Harness::start(1).await;
    let latency = Duration::from_millis(50);
    let processor = h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(2, latency, 0.0, 0.0)),
        ProcessConfig {
            fair_share: true,
            // Time for each invocation to start a quiet tenant's five tasks on a busy machine,
            // so none is left to keep up in the control round; the flood is larger than the
            // four invocations can start (2 runners of 50 ms: 80 starts in 2 s), so each ends
            // on its budget and tail-calls.
            time_budget: Duration::from_secs(2),
            ..h.process_config()
        },
    );
    write(&h, "flood", 0..330).await;
    let mut wakeups = process::Wakeups::one();
    for round in 0..4 {
        let report = processor.handle(&wakeups, deadline()).await.unwrap();
        assert!(report.tail_call, "round {round}: {report:?}");
        if round > 0 {
            let first = &report.claimed[0];
            if round < 3 {
                assert!(first.starts_with("quiet"), "round {round}: {report:?}");
            } else {
                // The control: a wake-up without the ledger.
                assert!(first.starts_with("flood-"), "round {round}: {report:?}");
            }
        }
        // The tail call through the trigger, as SNS delivers it.
        let tail = delivered(&h, &h.stack.trigger_queue_url).await;
        assert_eq!(h.trigger().handle_outcome(tail).await.unwrap().wakeups, 1);
        let event = delivered(&h, &h.stack.process_queue_url).await;
        wakeups = process::Wakeups::parse(event).unwrap();
        let handover = wakeups.handover.clone().expect("the ledger travelled");
        let handed = process::select::fair::Handed::from_handover(&handover.value);
        let served = handed.map(|h| h.served).unwrap_or_default();
        assert!(
            served.get("flood").is_some_and(|s| s.len() >= 2),
            "{handover:?}"
        );
        if round == 2 {
            wakeups = process::Wakeups::one();
        }
        // A quiet tenant's tasks, then newer ones of the flood.
        write(&h, &format!("quiet{round}"), 0..5).await;
        write(&h, "flood", 1000 * (round + 1)..1000 * (round + 1) + 10).await;
    }
}

/// A read since the read before sees every task written in between, however
/// many newer ones a flood wrote after them: a page of the newest alone
/// leaves the quiet tenant's tasks unseen (and the fair share cannot keep
/// what it never saw: they would wait for their expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_since_the_last_one_sees_what_a_flood_buried_in_between() {
    let h = Harness::start(1).await;
    let since = lifo_core::now_ms();
    tokio::time::sleep(Duration::from_millis(5)).await;
    write(&h, "quiet", 0..3).await;
    write(&h, "flood", 0..60).await;
    let now = lifo_core::now_ms();
    let read = |since: Option<u64>| {
        let store = h.store.clone();
        async move {
            let mut heads = store
                .claimable_heads_since(lifo_core::Order::Lifo, &[0], 20, now, 0, since)
                .await
                .unwrap();
            let (items, complete) = heads.remove(0);
            let ids: Vec<String> = items.into_iter().map(|c| c.task_id).collect();
            (ids, complete)
        }
    };
    // A page: the flood's 20 newest, cut short.
    let (page, complete) = read(None).await;
    assert_eq!(page.len(), 20);
    assert!(!complete && page.iter().all(|id| id.starts_with("flood-")));
    // Since the read before: all 63, the quiet tenant's (the oldest) last.
    let (all, complete) = read(Some(since)).await;
    assert_eq!(all.len(), 63, "{all:?}");
    assert!(complete);
    assert!(
        all[60..].iter().all(|id| id.starts_with("quiet-")),
        "{all:?}"
    );
    // Oldest first, `since` changes nothing (it bounds newest-first reads).
    let oldest = h
        .store
        .claimable_heads_since(lifo_core::Order::Fifo, &[0], 20, now, 0, Some(since))
        .await
        .unwrap();
    assert_eq!(oldest[0].0.len(), 20);
}

/// A read since the read before stops once it has reached it (on the page
/// that got there), not at the shard's end: older tasks cost no more pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_since_the_last_one_stops_once_it_reaches_it() {
    let h = Harness::start(1).await;
    write(&h, "old", 0..100).await;
    let since = lifo_core::now_ms();
    tokio::time::sleep(Duration::from_millis(5)).await;
    write(&h, "flood", 0..30).await;
    let now = lifo_core::now_ms();
    let mut heads = h
        .store
        .claimable_heads_since(lifo_core::Order::Lifo, &[0], 20, now, 0, Some(since))
        .await
        .unwrap();
    let (items, complete) = heads.remove(0);
    let ids: Vec<String> = items.into_iter().map(|c| c.task_id).collect();
    // Two pages of 20: the 30 since, then 10 older; not all 130.
    assert_eq!(ids.len(), 40, "{ids:?}");
    assert!(!complete);
    assert!(
        ids[..30].iter().all(|id| id.starts_with("flood-")),
        "{ids:?}"
    );
}

/// A quiet tenant's tasks that one invocation's reads had found under a
/// flood, left unclaimed when its budget ran out, with `keep` handed on in
/// the tail call (through the trigger, as SNS delivers it); the tasks the
/// next invocation claimed. A flood of 150 newer tasks, written between
/// the two, fills the next invocation's first read.
async fn next_after_a_buried_handover(keep: bool) -> Vec<String> {
    let h = Harness::start(1).await;
    let processor = h.stack.processor(
        h.store.clone(),
        Arc::new(SimulatedRunner::new(2, Duration::from_millis(50), 0.0, 0.0)),
        ProcessConfig {
            fair_share: true,
            time_budget: Duration::from_millis(300),
            ..h.process_config()
        },
    );
    write(&h, "flood", 0..50).await;
    write(&h, "quiet", 0..30).await;
    write(&h, "flood", 50..100).await;
    let first = processor
        .handle(&process::Wakeups::one(), deadline())
        .await
        .unwrap();
    assert!(first.tail_call, "{first:?}");
    let quiet_first = first.claimed.iter().filter(|id| id.starts_with("quiet-"));
    assert!(quiet_first.count() < 20, "{first:?}");
    let tail = delivered(&h, &h.stack.trigger_queue_url).await;
    assert_eq!(h.trigger().handle_outcome(tail).await.unwrap().wakeups, 1);
    let event = delivered(&h, &h.stack.process_queue_url).await;
    let mut wakeups = process::Wakeups::parse(event).unwrap();
    let handover = wakeups.handover.as_mut().expect("the handover travelled");
    let mut handed = process::select::fair::Handed::from_handover(&handover.value)
        .expect("the fair share's part");
    // The quiet tenant's, a page of them (the flood's too, unless its
    // waiting ones in the heads make it a flooding tenant).
    let quiet_in_view = handed
        .in_view
        .iter()
        .filter(|c| c.task_id.starts_with("quiet-"));
    assert!((10..=20).contains(&quiet_in_view.count()), "{handed:?}");
    if !keep {
        handed.in_view.clear();
        handover.value.clear();
        handed.into_handover(&mut handover.value);
    }
    write(&h, "flood", 100..250).await;
    let next = processor.handle(&wakeups, deadline()).await.unwrap();
    next.claimed
}

/// After a tail call, a quiet tenant's tasks that the invocation before
/// had in view stay in view, however many newer tasks of a flood fill
/// the first read (100 deep); without them, that read shows the flood
/// alone and the quiet tenant's tasks wait until the flood's above them
/// are claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_tail_call_the_candidates_in_view_of_a_quiet_tenant_stay_in_view() {
    let quiet = |claimed: &[String]| claimed.iter().filter(|id| id.starts_with("quiet-")).count();
    // In its 300 ms budget the next invocation claims only a few tasks on a busy machine, the
    // share alternating between the two tenants: at least one of the quiet tenant's.
    let with = next_after_a_buried_handover(true).await;
    assert!(quiet(&with) >= 1, "{with:?}");
    let without = next_after_a_buried_handover(false).await;
    assert!(!without.is_empty());
    // Without them, at most one: on a busy machine a later read of the invocation has reached
    // one.
    assert!(quiet(&without) <= 1, "{without:?}");
    assert!(quiet(&without) < quiet(&with), "{with:?} {without:?}");
}
