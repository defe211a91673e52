//! The fair share alone (over the newest-first order) and stacked, with
//! time given.

use super::ledger::tests::ran;
use super::*;
use crate::select::heads::c;
use crate::tests::select::{NOW, Shards, fill, setup, task};
use lifo_core::Order;

fn share(inner: Heads) -> FairShare {
    let two_shards = Setup {
        shards: vec![0, 1],
        capacity: 5,
        ..setup(Order::Lifo, true)
    };
    FairShare::new(Box::new(inner), &two_shards, None, NOW)
}

/// A flood of 20 (newest `NOW - 50`) in shard 0, cut short or not, and in
/// shard 1 a quiet tenant's two (`quiet_at`, and 2 s old) and another's
/// one: the flood floods, the other two keep up.
fn flood_and_two_keeping_up(order: Order, quiet_at: u64, cut_short: bool) -> Heads {
    let sorted = |mut items: Vec<Candidate>| {
        items.sort_by_key(|c| c.claimable_at);
        if order.newest_first() {
            items.reverse();
        }
        items
    };
    let flood: Vec<Candidate> = (0..20)
        .map(|i| task(&format!("f{i:02}"), Some("flood"), NOW - 50 - i, 3600))
        .collect();
    let quiet = vec![
        task("q-new", Some("quiet"), quiet_at, 3600),
        task("q-old", Some("quiet"), NOW - 2_000, 3600),
        task("r", Some("other"), NOW - 300, 3600),
    ];
    let mut h = Heads::new(order, vec![0, 1], tenanted(HeadsPolicy::new(2, 5)));
    h.replace(
        vec![(sorted(flood), !cut_short), (sorted(quiet), true)],
        NOW,
    );
    h
}

fn take_ids(h: &mut Heads, want: usize, ledger: &mut Ledger) -> Vec<String> {
    let none = Ids::new();
    let ask = Ask::new(want, &none);
    let (got, _) = take(h, &ask, &mut |_| true, ledger, &Tuning::default(), NOW);
    got.into_iter().map(|c| c.task_id).collect()
}

#[test]
fn a_tenant_that_keeps_up_gives_its_oldest_in_either_order() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut h = flood_and_two_keeping_up(order, NOW - 100, false);
        let mut ledger = Ledger::new(None).in_order(order);
        assert_eq!(take_ids(&mut h, 1, &mut ledger), ["q-old"], "{order:?}");
    }
}

#[test]
fn a_tenant_whose_oldest_is_out_of_reach_gives_its_first() {
    // Shard 0 is cut short: the merge cannot pass its flood to q-old.
    let mut h = flood_and_two_keeping_up(Order::Lifo, NOW - 10, true);
    assert_eq!(take_ids(&mut h, 1, &mut Ledger::new(None)), ["q-new"]);
}

#[test]
fn a_slot_for_the_tenant_at_the_top_waits_for_fresh_heads_a_favoured_one_does_not() {
    let mut s = share(Heads::lifo(vec![0], HeadsPolicy::new(1, 5)));
    ran(&mut s.ledger, "flood", 30, NOW - 2_000);
    ran(&mut s.ledger, "quiet", 1, NOW - 2_000);
    let none = Ids::new();
    let ask = |want| Ask::new(want, &none);
    let fresh_at = NOW + FRESH.as_millis() as u64;
    // Only the flood waits: its slot wants heads at most FRESH old.
    s.heads_mut().replace(
        vec![(vec![task("f1", Some("flood"), NOW - 10, 60)], true)],
        NOW,
    );
    assert!(s.needs_fresh_heads(&ask(1), fresh_at));
    assert!(!s.needs_fresh_heads(&ask(1), fresh_at - 1));
    let read = s.next_read(&ask(1), fresh_at);
    assert_eq!(
        read.map(|r| r.purpose),
        Some(Purpose::Heads { whole: true })
    );
    // A quiet task waits: the slot goes to it from the heads in hand.
    let both = vec![
        task("f1", Some("flood"), NOW - 10, 60),
        task("q1", Some("quiet"), NOW - 500, 60),
    ];
    s.heads_mut().replace(vec![(both, true)], NOW);
    assert!(!s.needs_fresh_heads(&ask(1), fresh_at));
    // Two slots: the second goes to the flood, so read first.
    assert!(s.needs_fresh_heads(&ask(2), fresh_at));
    // Deciding took nothing.
    let got = s.pick(&ask(2), &mut |_| true, fresh_at);
    let got: Vec<&str> = got.iter().map(|c| c.task_id.as_str()).collect();
    assert_eq!(got, ["q1", "f1"]);
}

#[test]
fn without_tenants_it_picks_as_its_inner_order_and_reads_alike_but_reaching_back() {
    let shards = Shards(vec![
        vec![c("a3", 3), c("a1", 1)],
        vec![Candidate {
            lifo_shard: 1,
            ..c("b2", 2)
        }],
    ]);
    let none = Ids::new();
    let mut plain = Heads::lifo(vec![0, 1], HeadsPolicy::new(2, 5));
    let mut shared = share(Heads::lifo(vec![0, 1], HeadsPolicy::new(2, 5)));
    let (_, a) = fill(&mut plain, &shards, 3, &none, NOW);
    let (reads, b) = fill(&mut shared, &shards, 3, &none, NOW);
    assert_eq!(a, b);
    assert_eq!(reads[0].page, FIRST_READ_PAGE);
    // The next read, 2 s on: the usual page, and a late read is due (the
    // first counts as one), so it reaches the late reach back, past the
    // first read less the margin.
    let reach = LATE_REACH.reach.as_millis() as u64;
    assert!(reach > 2_000 + REACH_BACK.as_millis() as u64);
    let (reads, _) = fill(&mut shared, &shards, 1, &none, NOW + 2_000);
    assert_eq!(reads[0].page, HeadsPolicy::new(2, 5).page);
    assert_eq!(reads[0].since_ms, Some(NOW + 2_000 - reach));
    // 1.1 s after the late one, another is due: the reach back from its own time.
    let (reads, _) = fill(&mut shared, &shards, 1, &none, NOW + 3_100);
    assert_eq!(reads[0].since_ms, Some(NOW + 3_100 - reach));
}

#[test]
fn once_a_read_showed_a_tenant_the_share_s_reads_begin_though_all_was_taken() {
    let mut s = share(Heads::lifo(vec![0, 1], HeadsPolicy::new(2, 8)));
    let shards = Shards(vec![vec![c("a", 1)], vec![]]);
    let none = Ids::new();
    fill(&mut s, &shards, 5, &none, NOW);
    assert!(!s.tenanted);
    let tenanted_shards = Shards(vec![vec![c("a", 1)], vec![task("b", Some("t"), NOW, 60)]]);
    let (_, got) = fill(&mut s, &tenanted_shards, 5, &none, NOW + 2_000);
    assert_eq!(got.len(), 2, "all taken: the heads hold no tenant");
    assert!(s.tenanted);
    assert_eq!(s.heads().policy().page, PAGE);
    assert_eq!(s.heads().policy().min_age, MIN_AGE);
}

#[test]
fn candidates_handed_over_stay_in_view_past_the_first_read_s_end_only() {
    let t = |id: &str, tenant: &str, shard: u32, at: i64| Candidate {
        tenant: Some(tenant.into()),
        lifo_shard: shard,
        ..c(id, at)
    };
    // Two quiet tasks under shard 0's flood, one within the first read's
    // range (claimed meanwhile), one of a shard this invocation lacks.
    let handed = Handed {
        at: NOW,
        served: Served::new(),
        in_view: vec![
            t("q3", "quiet", 0, 3),
            t("q8", "quiet", 0, 8),
            t("q1", "quiet", 0, 1),
            t("x2", "quiet", 7, 2),
        ],
    };
    let mut handover = Handover::new();
    handed.into_handover(&mut handover);
    let handed = Handed::from_handover(&handover);
    let two_shards = Setup {
        shards: vec![0, 1],
        ..setup(Order::Lifo, true)
    };
    let inner = Box::new(Heads::lifo(vec![0, 1], HeadsPolicy::new(2, 5)));
    let mut s = FairShare::new(inner, &two_shards, handed, NOW);
    let in_order: Vec<&str> = s
        .heads()
        .in_order()
        .iter()
        .map(|c| c.task_id.as_str())
        .collect();
    assert_eq!(in_order, ["q8", "q3", "q1"]);
    let read = Read {
        order: Order::Lifo,
        shards: vec![0, 1],
        page: FIRST_READ_PAGE,
        since_ms: None,
        purpose: Purpose::Heads { whole: true },
    };
    let heads = [
        (vec![t("f9", "flood", 0, 9), t("f7", "flood", 0, 7)], false),
        (vec![t("b6", "quiet", 1, 6)], true),
    ];
    s.tell(
        Event::Read {
            read: &read,
            sent_ms: NOW,
            heads: &heads,
        },
        NOW,
    );
    let none = Ids::new();
    let all = s.heads_mut().take_by(10, &none, &mut |_| true);
    let all: Vec<&str> = all.iter().map(|c| c.task_id.as_str()).collect();
    // Past the read's end, q3 and q1 are carried (q8 it could have shown).
    assert_eq!(all, ["f9", "f7", "b6", "q3", "q1"]);
}
