use super::*;
use crate::order::{Candidate, Order};
use crate::store::QueueOps;
use std::collections::BTreeMap;

const T0: u64 = 1_800_000_000_000;

fn task(id: &str, created: u64) -> Task {
    Task::new_pending(id.into(), crate::Payload::new(), created, 60, 1)
}

fn claim(c: &Candidate, now: u64) -> (Move<'static>, Step) {
    (
        Move::Claim {
            lease_until: now + 1_000,
            claimed_by: "p",
        },
        Step {
            now_ms: now,
            token: c.token,
            attempts: c.attempts + 1,
        },
    )
}

fn read(now_ms: u64) -> IndexRead {
    IndexRead::ClaimableNow {
        shard: 0,
        now_ms,
        horizon_ms: 0,
    }
}

#[tokio::test]
async fn a_claim_fences_the_finish_of_an_older_claim() {
    let m = Memory::new(Lag::Off);
    m.put_new(&[task("a", T0)]).await.unwrap();
    let c = m
        .index_page(read(T0), false, None, None)
        .await
        .unwrap()
        .entries[0]
        .clone();
    let (mv, step) = claim(&c, T0 + 1);
    let taken = m.apply("a", &mv, TaskStatus::Pending, &step).await.unwrap();
    assert_eq!((taken.task_status, taken.token), (TaskStatus::Taken, 1));
    // The same claim again: its token is stale, and the item comes back.
    match m.apply("a", &mv, TaskStatus::Pending, &step).await {
        Err(StoreError::ConditionFailed {
            current: Some(cur), ..
        }) => assert_eq!(cur.token, 1),
        other => panic!("{other:?}"),
    }
    let finish = |token| Step {
        now_ms: T0 + 2,
        token,
        attempts: 1,
    };
    let succeed = Move::Succeed { history: &[] };
    assert!(
        m.record("a", &succeed, TaskStatus::Taken, &finish(0))
            .await
            .is_err()
    );
    m.record("a", &succeed, TaskStatus::Taken, &finish(1))
        .await
        .unwrap();
    let done = m.get_item("a").await.unwrap().unwrap();
    assert_eq!(done.task_status, TaskStatus::Success);
    assert_eq!(done.claimable_at, None, "out of the index");
    assert_eq!(m.index_count(read(T0 + 3)).await.unwrap(), 0);
    // An illegal move is refused before anything is read.
    assert!(matches!(
        m.record("a", &succeed, TaskStatus::Pending, &finish(1))
            .await,
        Err(StoreError::Illegal(_))
    ));
    assert!(matches!(
        m.record("gone", &succeed, TaskStatus::Taken, &finish(1))
            .await,
        Err(StoreError::ConditionFailed { current: None, .. })
    ));
}

#[tokio::test]
async fn a_page_stops_at_its_limit_before_the_filter_and_says_where() {
    let m = Memory::new(Lag::Off);
    let tasks: Vec<Task> = (0..5).map(|i| task(&format!("t{i}"), T0 + i)).collect();
    m.put_new(&tasks).await.unwrap();
    // t3 rests: the filter drops it, but the limit counted it.
    let mut resting = tasks[3].clone();
    resting.retry_at = Some(T0 + 60_000);
    m.put_new(&[resting]).await.unwrap();
    let page = m
        .index_page(read(T0 + 10), false, Some(2), None)
        .await
        .unwrap();
    let ids: Vec<&str> = page.entries.iter().map(|c| c.task_id.as_str()).collect();
    assert_eq!(ids, ["t4"]);
    let page = m
        .index_page(read(T0 + 10), false, Some(3), page.next)
        .await
        .unwrap();
    let ids: Vec<&str> = page.entries.iter().map(|c| c.task_id.as_str()).collect();
    assert_eq!(ids, ["t2", "t1", "t0"]);
    // It stopped at its limit with nothing after: still a next key, and
    // the next page is empty (as DynamoDB pages).
    assert!(page.next.is_some());
    let last = m
        .index_page(read(T0 + 10), false, Some(3), page.next)
        .await
        .unwrap();
    assert_eq!(last, IndexPage::default());
    let all = m.index_page(read(T0 + 10), true, None, None).await.unwrap();
    assert_eq!(all.entries.len(), 4);
    assert_eq!(all.next, None);
}

/// The index's lag: a read misses a change newer than its draw, sees it
/// once the most any draw can be has passed, and the same seed draws the
/// same lags.
#[tokio::test]
async fn a_lagging_index_shows_each_write_late_and_the_same_seed_alike() {
    async fn seen(seed: u64) -> Vec<Vec<String>> {
        let m = Memory::new(Lag::Seeded { seed, max_ms: 500 });
        let tasks: Vec<Task> = (0..20).map(|i| task(&format!("t{i:02}"), T0 + i)).collect();
        m.put_new(&tasks).await.unwrap();
        let mut views = Vec::new();
        for at in [T0 + 20, T0 + 200, T0 + 520] {
            let heads = m
                .claimable_heads(Order::Lifo, &[0], 20, at, 0)
                .await
                .unwrap();
            views.push(heads[0].0.iter().map(|c| c.task_id.clone()).collect());
        }
        views
    }
    let views = seen(7).await;
    assert!(views[0].len() < 20, "some writes not shown yet: {views:?}");
    assert!(views[0].len() <= views[1].len());
    assert_eq!(views[2].len(), 20, "all shown after the longest lag");
    assert_eq!(seen(7).await, views, "the same seed, the same lags");
    assert_ne!(seen(8).await[..2], views[..2], "another seed, other lags");
}

/// A change of an entry lags as its placement does: a read inside the lag
/// of a claim still shows the entry unleased, and the claim it makes on it
/// fails on the token.
#[tokio::test]
async fn a_lagging_index_shows_a_claimed_task_as_it_was() {
    let m = Memory::new(Lag::Seeded {
        seed: 1,
        max_ms: 1_000,
    });
    m.put_new(&[task("a", T0)]).await.unwrap();
    let c = m
        .index_page(read(T0 + 1_000), false, None, None)
        .await
        .unwrap()
        .entries[0]
        .clone();
    let (mv, step) = claim(&c, T0 + 1_000);
    m.apply("a", &mv, TaskStatus::Pending, &step).await.unwrap();
    let stale = m
        .index_page(read(T0 + 1_000), false, None, None)
        .await
        .unwrap();
    let shown = stale.entries.iter().find(|e| e.task_id == "a");
    let later = m
        .index_page(read(T0 + 2_000), false, None, None)
        .await
        .unwrap();
    assert!(later.entries.is_empty(), "leased: filtered out once shown");
    if let Some(old) = shown {
        assert_eq!(old.token, 0);
        let (mv, step) = claim(old, T0 + 1_001);
        assert!(m.apply("a", &mv, TaskStatus::Pending, &step).await.is_err());
    }
}

#[tokio::test]
async fn ttl_deletes_tasks_past_their_retention_and_their_index_entries() {
    let m = Memory::new(Lag::Off);
    let short = task("short", T0).with_retention(10);
    let long = task("long", T0);
    m.put_new(&[short.clone(), long]).await.unwrap();
    let at = (short.delete_at + 1) * 1000;
    let (tasks, keys) = m.expire_ttl(at);
    assert_eq!((tasks, keys), (vec!["short".to_owned()], vec![]));
    assert!(m.get_item("short").await.unwrap().is_none());
    assert_eq!(m.snapshot().tasks.len(), 1);
    let left = m
        .index_page(
            IndexRead::OldEnd {
                shard: 0,
                priority: crate::Priority::Normal,
                horizon_ms: 0,
            },
            true,
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(left.entries.len(), 1);
}

#[tokio::test]
async fn a_group_lease_is_taken_when_free_and_given_back_by_its_holder() {
    let m = Memory::new(Lag::Off);
    assert_eq!(m.take_group(0, T0 + 100, T0, "a").await.unwrap(), Some(1));
    assert_eq!(
        m.take_group(0, T0 + 200, T0 + 100, "b").await.unwrap(),
        None,
        "held until after its end"
    );
    assert_eq!(
        m.take_group(0, T0 + 300, T0 + 101, "b").await.unwrap(),
        Some(2)
    );
    assert!(!m.release_group(0, 1).await.unwrap(), "not its holder");
    assert!(m.release_group(0, 2).await.unwrap());
    assert!(!m.release_group(1, 0).await.unwrap(), "never taken");
    assert_eq!(
        m.take_group(0, T0 + 400, T0 + 102, "c").await.unwrap(),
        Some(3)
    );
}

proptest::proptest! {
    /// Whatever the writes, a lagging index shows each task as one of its
    /// states of the last `max_ms` (never one replaced before that, never a
    /// later one), and once no write is newer than `max_ms` it shows what a
    /// current index shows.
    #[test]
    fn a_lagging_index_is_a_current_one_of_at_most_its_lag_ago(
        seed in 0u64..1_000,
        max_ms in 1u64..2_000,
        steps in proptest::collection::vec((0u8..8, 0u8..4, 1u64..400), 1..80),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let current = Memory::new(Lag::Off);
            let lagging = Memory::new(Lag::Seeded { seed, max_ms });
            // Each task's projections, with the time each was written.
            let mut written: BTreeMap<String, Vec<(u64, Option<Candidate>)>> = BTreeMap::new();
            let mut now = T0;
            async fn seen(m: &Memory, at: u64) -> Vec<Candidate> {
                let whole = IndexRead::OldEnd {
                    shard: 0,
                    priority: crate::Priority::Normal,
                    horizon_ms: at - 3_600_000,
                };
                m.index_page(whole, true, None, None).await.unwrap().entries
            }
            for (i, (what, id, wait)) in steps.into_iter().enumerate() {
                now += wait;
                let id = format!("t{id}");
                let t = current.get_item(&id).await.unwrap();
                for m in [&current, &lagging] {
                    match (what, &t) {
                        (0..=2, _) => {
                            let fresh = task(&id, now - i as u64);
                            m.put_new(&[fresh]).await.unwrap();
                        }
                        (3..=5, Some(t)) => {
                            let c = Entry::of(t).map(|e| e.candidate);
                            if let Some(c) = c {
                                let (mv, step) = claim(&c, now);
                                let _ = m.apply(&id, &mv, t.task_status, &step).await;
                            }
                        }
                        (_, Some(t)) if t.task_status == TaskStatus::Taken => {
                            let step = Step { now_ms: now, token: t.token, attempts: t.attempts };
                            let _ = m.record(&id, &Move::Succeed { history: &[] }, TaskStatus::Taken, &step).await;
                        }
                        _ => {}
                    }
                }
                let after = current.get_item(&id).await.unwrap();
                written.entry(id).or_default().push((now, after.as_ref().and_then(Entry::of).map(|e| e.candidate)));
                // The read names no time: it reads at the model's clock,
                // which a step that wrote nothing left behind.
                lagging.nudge(now).await.unwrap();
                // Every entry shown was its task's projection at some write
                // of the last `max_ms`, or the last one before them.
                for shown in seen(&lagging, now).await {
                    let history = &written[&shown.task_id];
                    let recent = history.iter().rposition(|(at, _)| *at + max_ms <= now).unwrap_or(0);
                    proptest::prop_assert!(
                        history[recent..].iter().any(|(_, p)| p.as_ref() == Some(&shown)),
                        "{shown:?} is none of {:?}", &history[recent..]
                    );
                }
            }
            // A read of the whole band names no time: it reads at the
            // model's clock, which the nudge moves on.
            let settled = now + max_ms;
            for m in [&current, &lagging] {
                m.nudge(settled).await.unwrap();
            }
            proptest::prop_assert_eq!(seen(&lagging, settled).await, seen(&current, settled).await);
            Ok(())
        })?;
    }
}

/// At the last millisecond of a lease the task is still running for the
/// moves' conditions (`leaseUntil < :now` is a lapsed lease): a redrive
/// then is refused as running, not sent and refused as "changed meanwhile".
#[tokio::test]
async fn a_redrive_in_the_last_millisecond_of_a_lease_is_refused_as_running() {
    let m = Memory::new(Lag::Off);
    m.put_new(&[Task::new_pending(
        "a".into(),
        crate::Payload::new(),
        T0,
        1,
        1,
    )])
    .await
    .unwrap();
    let c = m
        .index_page(read(T0), false, None, None)
        .await
        .unwrap()
        .entries[0]
        .clone();
    let (mv, step) = claim(&c, T0 + 1);
    m.apply("a", &mv, TaskStatus::Pending, &step).await.unwrap();
    let lease_end = T0 + 1 + 1_000;
    let settings = |now_ms| crate::store::RedriveSettings {
        now_ms,
        default_ttl_seconds: 60,
        retention_seconds: 60,
        reason: "again",
    };
    match m.redrive("a", settings(lease_end)).await {
        Err(crate::store::OperateError::NotAllowed { status, .. }) => {
            assert_eq!(status, TaskStatus::Taken)
        }
        other => panic!("{other:?}"),
    }
    let t = m.redrive("a", settings(lease_end + 1)).await.unwrap();
    assert_eq!(t.task_status, TaskStatus::Pending, "a millisecond later");
}

/// Pruning forgets only what no read can see: an index pruned after every
/// write reads as one never pruned at each moment after the writes, and
/// keeps only the tasks still in it or on their way out.
#[test]
fn pruning_the_index_changes_no_read_and_forgets_the_tasks_gone() {
    let lag = Lag::Seeded {
        seed: 3,
        max_ms: 500,
    };
    let (mut kept, mut pruned) = (index::Index::new(lag), index::Index::new(lag));
    let mut rng = fastrand::Rng::with_seed(9);
    let mut now = T0;
    let mut last: BTreeMap<String, bool> = BTreeMap::new();
    let whole = |now: u64| IndexRead::OldEnd {
        shard: 0,
        priority: crate::Priority::Normal,
        horizon_ms: now - 3_600_000,
    };
    let page = |i: &index::Index, now: u64| i.page((&whole(now), now), true, None, None);
    // Fewer writes than an index prunes itself after.
    for _ in 0..400 {
        now += rng.u64(1..200);
        let id = format!("t{}", rng.u32(0..20));
        let placed = rng.bool();
        let t = task(&id, now);
        for i in [&mut kept, &mut pruned] {
            i.write(&id, placed.then_some(&t), now);
        }
        last.insert(id, placed);
        pruned.prune(now);
        assert_eq!(page(&kept, now), page(&pruned, now), "at {now}");
    }
    now += 1_000;
    pruned.prune(now);
    assert_eq!(page(&kept, now), page(&pruned, now));
    assert_eq!(kept.tracked(), 20);
    let placed = last.values().filter(|p| **p).count();
    assert_eq!(pruned.tracked(), placed, "only the tasks in the index");
    assert!(placed < 20);
}
