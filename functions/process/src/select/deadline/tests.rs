use super::*;
use crate::tests::select::ids;
use lifo_core::priority::Priority;

/// Deadlines are whole seconds: 700 ms into one.
const NOW: u64 = 1_800_000_000_700;

/// A task that became claimable `age_ms` before [`NOW`], with `ttl_s`
/// to live.
fn task(id: &str, age_ms: u64, ttl_s: u64) -> Candidate {
    let at = NOW - age_ms;
    Candidate {
        expires_at: at / 1000 + ttl_s,
        ..Candidate::pending(id, 0, Priority::Normal.key(at))
    }
}

/// The lane's least slack at `now_ms`.
fn slack(d: &Deadlines, now_ms: u64, throughput: f64) -> f64 {
    d.slack_of(&d.by_deadline(&HashSet::new(), now_ms), now_ms, throughput)
}

/// A lane of one slot whose claims hold it `hold_ms` (1000 / hold_ms
/// starts a second).
fn lane(hold_ms: u64) -> Deadlines {
    let mut d = Deadlines::new(1, None);
    d.held(Duration::from_millis(hold_ms));
    d
}

/// The same, with `backlog` as an oldest-first read brings it.
fn lane_with(hold_ms: u64, backlog: &[Candidate]) -> Deadlines {
    let mut d = lane(hold_ms);
    d.read_oldest(backlog, 0);
    d
}

/// Three tasks 14, 13 and 12 s old, with 20 s to live.
fn abc() -> [Candidate; 3] {
    [
        task("a", 14_000, 20),
        task("b", 13_000, 20),
        task("c", 12_000, 20),
    ]
}

#[test]
fn throughput_is_the_slots_over_the_hold_or_the_rate_if_lower() {
    assert_eq!(Deadlines::new(5, None).throughput(), 5.0);
    let mut d = Deadlines::new(5, None);
    d.held(Duration::from_millis(500));
    assert_eq!(d.throughput(), 10.0);
    // The mean moves a tenth of the way to each new hold.
    d.held(Duration::from_millis(1500));
    assert_eq!(d.throughput(), 5.0 * 1000.0 / 600.0);
    let mut d = Deadlines::new(5, Some(4));
    d.held(Duration::from_millis(500));
    assert_eq!(d.throughput(), 4.0);
}

#[test]
fn newest_first_while_the_backlog_keeps_its_deadlines() {
    // 2 starts a second, a claim holds its slot 0.5 s: three tasks 5.3,
    // 6.3 and 7.3 s from their deadlines, less a hold, leave slacks of
    // 8.6, 9.6 and 10.6 starts.
    let mut d = lane_with(500, &abc());
    let none = HashSet::new();
    assert_eq!(slack(&d, NOW, 2.0), 2.0 * 4.8 - 1.0);
    assert!(
        d.take(5, &none, NOW, |_| true).is_empty(),
        "all five slots fresh"
    );
    // 1.5 s later, with 0.4 starts a second (a 2.5 s hold): a is 3.8 s
    // away, 1.3 s once guarded, 0.52 starts: it goes first; then b
    // (4.8 s, 0.92 starts for two) too. Nothing arrived for 13.5 s.
    let mut d = lane_with(2_500, &abc());
    let got = d.take(2, &none, NOW + 1_500, |_| true);
    assert_eq!(ids(&got), ["a", "b"]);
}

#[test]
fn least_time_left_first_and_one_past_its_deadline_is_forgotten() {
    let mut d = lane(10_000);
    d.observe(
        &[
            task("late", 19_000, 20),
            task("gone", 21_000, 20),
            task("sooner", 18_000, 20),
            task("later", 16_000, 20),
        ],
        NOW,
    );
    // Drained (the read saw nothing newer than 16 s): an infeasible
    // backlog is still served least time left first.
    assert!(!d.arriving());
    // 250 ms on, "late" is 50 ms from its deadline: it still goes first.
    let got = d.take(5, &HashSet::new(), NOW + 250, |_| true);
    assert_eq!(ids(&got), ["late", "sooner", "later"]);
    // The one past its deadline is forgotten.
    assert_eq!(d.backlog.len(), 3);
}

#[test]
fn an_overload_no_order_catches_up_with_is_served_newest_first_while_tasks_arrive() {
    // One start a second, 30 tasks due within 10 s: 20 starts short,
    // more than OVERLOAD_SECONDS of throughput.
    let mut d = lane(1_000);
    let backlog: Vec<Candidate> = (0..30)
        .map(|i| task(&format!("t{i}"), 10_000 + i, 20))
        .collect();
    d.observe(&backlog, NOW - 200);
    let none = HashSet::new();
    d.observe(&[task("fresh", 100, 20)], NOW);
    assert!(d.arriving());
    assert!(slack(&d, NOW, 1.0) < -OVERLOAD_SECONDS);
    assert!(d.take(3, &none, NOW, |_| true).is_empty(), "newest first");
    // Once a read sees nothing new for 500 ms, least time left first
    // (one deadline: newest first among them).
    d.observe(&[], NOW + 400);
    assert!(d.arriving());
    d.observe(&[], NOW + 700);
    assert!(!d.arriving());
    let got = d.take(3, &none, NOW + 700, |_| true);
    assert_eq!(ids(&got), ["t0", "t1", "t2"]);
}

#[test]
fn arrivals_at_overload_ratio_times_the_throughput_are_served_newest_first() {
    // Two starts a second; one task 1.3 s from its deadline: less than
    // a start to spare.
    let near = task("near", 18_000, 20);
    let none = HashSet::new();
    let mut d = lane(500);
    d.observe(std::slice::from_ref(&near), NOW);
    // 17 tasks in the last 5 s: 3.4 a second, under 1.75 × 2.
    let fresh: Vec<Candidate> = (0..17)
        .map(|i| task(&format!("f{i}"), 200 * i + 100, 20))
        .collect();
    d.observe(&fresh, NOW);
    assert_eq!(d.arrival_rate(NOW), 3.4);
    assert_eq!(ids(&d.take(1, &none, NOW, |_| true)), ["near"]);
    // 18 in the last 5 s: 3.6 a second, past it: newest first.
    let mut d = lane(500);
    d.observe(std::slice::from_ref(&near), NOW);
    d.observe(&fresh, NOW);
    d.observe(&[task("f17", 4_000, 20)], NOW);
    assert_eq!(d.arrival_rate(NOW), 3.6);
    assert!(d.take(1, &none, NOW, |_| true).is_empty());
    // Seen again, a task does not count twice.
    d.observe(&fresh, NOW);
    assert_eq!(d.arrival_rate(NOW), 3.6);
}

#[test]
fn once_in_an_overload_it_lasts_down_to_the_leave_ratio() {
    // Half a start a second: enters at 0.875 arrivals a second (5 in
    // 5 s), leaves under 0.75 (3). One task 1.8 to 2 s from its deadline
    // would go first outside an overload.
    let near = task("near", 18_000, 25);
    let fresh: Vec<Candidate> = (0..5)
        .map(|i| task(&format!("f{i}"), 200 * i, 20))
        .collect();
    let none = HashSet::new();
    let mut d = lane(2_000);
    d.observe(std::iter::once(&near).chain(&fresh), NOW);
    assert_eq!(d.arrival_rate(NOW), 1.0);
    assert!(d.take(1, &none, NOW, |_| true).is_empty(), "entered");
    // 4.3 s on, four of them in the last 5 s: 0.8, still in it.
    let mut never = d.clone();
    assert_eq!(d.arrival_rate(NOW + 4_300), 0.8);
    assert!(d.take(1, &none, NOW + 4_300, |_| true).is_empty(), "stays");
    // A lane that was not in it does not enter at 0.8.
    never.overloaded = false;
    assert_eq!(ids(&never.take(1, &none, NOW + 4_300, |_| true)), ["near"]);
    // 4.5 s on, three: 0.6, out.
    assert_eq!(ids(&d.take(1, &none, NOW + 4_500, |_| true)), ["near"]);
}

#[test]
fn given_and_started_tasks_are_not_given_again_nor_back_in_the_backlog() {
    let backlog = [
        task("a", 17_000, 20),
        task("b", 16_500, 20),
        task("c", 16_000, 20),
    ];
    let mut d = lane_with(10_000, &backlog);
    let exclude: HashSet<String> = ["a".to_owned()].into();
    let got = d.take(1, &exclude, NOW, |c| c.task_id != "b");
    assert_eq!(ids(&got), ["c"]);
    // Given: not again until it starts or is handed back.
    assert!(d.take(1, &exclude, NOW, |c| c.task_id != "b").is_empty());
    d.not_started("c");
    assert_eq!(ids(&d.take(1, &exclude, NOW, |c| c.task_id != "b")), ["c"]);
    d.started("c", NOW);
    assert_eq!(d.starts, 1);
    // A read sent before its claim still shows it: not back in the backlog.
    d.observe(&[task("c", 16_000, 20)], NOW);
    assert_eq!(d.backlog.len(), 2);
    // A refused claim's end does not feed the throughput; a run's does.
    d.ended("c", false, NOW + 5_000);
    assert_eq!(d.throughput(), 0.1, "one slot, a 10 s hold");
    d.started("c", NOW);
    d.ended("c", true, NOW + 1_000);
    assert!(d.throughput() > 0.1, "{}", d.throughput());
    let got = d.take(5, &HashSet::new(), NOW + 10_000, |_| true);
    assert!(got.is_empty(), "both are past their deadline by then");
    assert!(d.backlog.is_empty());
}

#[test]
fn the_guard_keeps_two_deviations_of_the_hold_in_reserve() {
    // One hold of 600 ms: no spread yet, the guard is the hold.
    let steady = lane(600);
    assert_eq!(steady.guard(), 600.0);
    // 500 then 1500 ms: mean 600, variance 0.9 × 1000 × 100 = 90 000,
    // a deviation of 300 ms: the guard is 600 + 2 × 300.
    let mut jittery = lane(500);
    jittery.held(Duration::from_millis(1500));
    assert_eq!(jittery.throughput(), steady.throughput());
    assert!(
        (jittery.guard() - 1200.0).abs() < 1e-6,
        "{}",
        jittery.guard()
    );
    // A task 2.3 s from its deadline, 1.67 starts a second: 1.6 s once
    // the steady guard is off, 1.67 starts to spare, so the slot is a
    // fresh one; 1.0 s once the jittery one is, 0.67: it goes now.
    let none = HashSet::new();
    for (mut d, goes) in [(steady, false), (jittery, true)] {
        d.read_oldest(&[task("a", 17_000, 20)], 0);
        let got = d.take(1, &none, NOW, |_| true);
        assert_eq!(!got.is_empty(), goes, "guard {}", d.guard());
    }
}

#[test]
fn its_backlog_is_bounded_and_refreshed() {
    let mut d = lane_with(10_000, &[task("a", 16_000, 20)]);
    let moved = Candidate {
        token: 7,
        ..task("a", 16_000, 20)
    };
    d.read_oldest(&[moved], 0);
    let got = d.take(1, &HashSet::new(), NOW, |_| true);
    assert_eq!(got[0].token, 7, "the latest read's token");
    let many: Vec<Candidate> = (0..MAX_BACKLOG + 10)
        .map(|i| task(&format!("t{i}"), 100, 20))
        .collect();
    d.observe(&many, NOW);
    assert_eq!(d.backlog.len(), MAX_BACKLOG);
}

#[test]
fn an_oldest_first_read_at_the_first_read_and_when_a_burst_stops() {
    // A task that became claimable at `at` (epoch ms).
    let at = |id: &str, at: u64| Candidate {
        expires_at: at / 1000 + 20,
        ..Candidate::pending(id, 0, Priority::Normal.key(at))
    };
    let t0 = NOW - 3_000;
    let mut d = lane(1_000);
    // The first read, while tasks arrive: what was buried before it.
    d.observe(&[at("b0", t0)], t0);
    assert!(d.arriving());
    assert!(d.wants_oldest(true, t0));
    assert!(!d.wants_oldest(false, t0), "later reads wait for a drain");
    d.read_oldest(&[], t0);
    // The burst goes on (what it buries between two reads is unseen)...
    d.observe(&[at("b1", t0 + 300)], t0 + 300);
    assert!(!d.wants_oldest(false, t0 + 300), "not while tasks arrive");
    // ...and stops: one more, for what it buried.
    d.observe(&[], t0 + 1_000);
    assert!(!d.arriving());
    assert!(d.wants_oldest(false, t0 + 1_000));
    d.read_oldest(&[], t0 + 1_000);
    assert!(!d.wants_oldest(false, t0 + 2_500), "nothing arrived since");
    // Arrivals that pause again: at most one an OLDEST_READ_GAP.
    d.observe(&[at("b2", t0 + 1_100)], t0 + 1_200);
    d.observe(&[], t0 + 1_900);
    assert!(!d.wants_oldest(false, t0 + 1_900), "900 ms after the last");
    assert!(d.wants_oldest(false, t0 + 2_000));
}

/// The lane as a layer over the newest-first order, with time given.
mod layer {
    use super::*;
    use crate::select::heads::{Heads, HeadsPolicy};
    use crate::select::{Event, Ids, Purpose, Select};
    use crate::tests::select::{Shards, fill};
    use lifo_core::Order;

    #[test]
    fn it_reads_the_buried_oldest_first_and_gives_what_would_miss_its_deadline() {
        // One slot, holds of 2 s: half a start a second. Forty tasks on one
        // shard, read 8 at a time: the oldest, 3.3 s from its deadline, is
        // buried under them.
        let mut s = DeadlineLane::new(
            Box::new(Heads::lifo(vec![0], HeadsPolicy::new(1, 1))),
            1,
            None,
        );
        s.tell(Event::Started(&task("x", 0, 20)), NOW - 4_000);
        s.tell(
            Event::Ended {
                task_id: "x",
                ran: true,
            },
            NOW - 2_000,
        );
        let shard: Vec<Candidate> = (0..40)
            .map(|i| task(&format!("t{i:02}"), 16_000 - 100 * i, 20))
            .collect();
        let shards = Shards(vec![shard]);
        let none = Ids::new();
        let (reads, got) = fill(&mut s, &shards, 1, &none, NOW);
        let how: Vec<(Order, usize, Purpose)> =
            reads.iter().map(|r| (r.order, r.page, r.purpose)).collect();
        assert_eq!(
            how,
            [
                (Order::Lifo, 8, Purpose::Heads { whole: true }),
                (
                    Order::Fifo,
                    OLDEST_READ_PAGE,
                    Purpose::Layer("deadline lane")
                ),
            ]
        );
        // Least time left first (t00 to t02 share a deadline's second:
        // the newest of them).
        assert_eq!(got, ["t02"]);
        // Not started (the bucket ran dry): the lane's again, not the heads'.
        let t02 = task("t02", 15_800, 20);
        s.tell(Event::NotStarted(&t02), NOW);
        assert_eq!(
            s.heads().first_key(&none),
            Some(task("t39", 12_100, 20).claimable_at)
        );
        let (reads, got) = fill(&mut s, &shards, 1, &none, NOW + 10);
        assert!(reads.is_empty(), "{reads:?}");
        assert_eq!(got, ["t02"]);
        s.tell(Event::Started(&t02), NOW + 10);
        let mut tally = crate::select::Tally::default();
        s.tally(&mut tally);
        assert_eq!(tally.deadline_starts, 1);
    }

    /// The lane's oldest-first read is as deep as its tuning says, and
    /// none at 0 (`lifo simulate --constants` runs it so).
    #[test]
    fn a_tuned_lane_reads_oldest_first_as_deep_as_told() {
        let reads_with = |page: usize| {
            let tuning = crate::select::Tuning {
                oldest_read_page: page,
                ..Default::default()
            };
            let mut s = DeadlineLane::new(
                Box::new(Heads::lifo(vec![0], HeadsPolicy::new(1, 1))),
                1,
                None,
            )
            .with_tuning(tuning);
            let shard: Vec<Candidate> = (0..40)
                .map(|i| task(&format!("t{i:02}"), 16_000 - 100 * i, 20))
                .collect();
            let (reads, _) = fill(&mut s, &Shards(vec![shard]), 1, &Ids::new(), NOW);
            reads.iter().map(|r| (r.order, r.page)).collect::<Vec<_>>()
        };
        assert_eq!(reads_with(7), [(Order::Lifo, 8), (Order::Fifo, 7)]);
        assert_eq!(reads_with(0), [(Order::Lifo, 8)]);
    }

    #[test]
    fn with_every_deadline_in_reach_the_slots_are_the_inner_order_s() {
        let mut s = DeadlineLane::new(
            Box::new(Heads::lifo(vec![0], HeadsPolicy::new(1, 2))),
            2,
            None,
        );
        let shard: Vec<Candidate> = (0..5)
            .map(|i| task(&format!("t{i}"), 100 * i, 60))
            .collect();
        let (_, got) = fill(&mut s, &Shards(vec![shard]), 2, &Ids::new(), NOW);
        assert_eq!(got, ["t0", "t1"], "newest first");
    }
}
