//! The claim policy's layers stacked, as [`crate::select::stack`] builds
//! them and the claim loop drives them, with time given (the scenario
//! corpus runs the same stacks on scripted workloads).

use crate::select::fair::{FIRST_READ_PAGE, FairShare};
use crate::select::heads::{Heads, HeadsPolicy, c};
use crate::select::*;
use crate::tests::select::{NOW, Shards, fill, setup, task};
use lifo_core::priority::Priority;
use lifo_core::{Candidate, Order};

#[test]
fn the_stack_has_the_layers_the_settings_turn_on() {
    let mut tally = Tally::default();
    stack(&setup(Order::Lifo, false), NOW).tally(&mut tally);
    assert_eq!(tally, Tally::default());
    let mut tally = Tally::default();
    stack(&setup(Order::Adaptive, true), NOW).tally(&mut tally);
    assert!(tally.fairness.is_some());
    // FIFO reads oldest first; LIFO and adaptive newest first.
    let none = Ids::new();
    let ask = Ask::new(1, &none);
    let first = |order| stack(&setup(order, false), NOW).next_read(&ask, NOW);
    assert_eq!(first(Order::Fifo).map(|r| r.order), Some(Order::Fifo));
    assert_eq!(first(Order::Adaptive).map(|r| r.order), Some(Order::Lifo));
}

/// The stack reads with the setup's tuning: the heads' ages, the fair
/// share's first page.
#[test]
fn the_stack_reads_as_its_tuning_says() {
    let none = Ids::new();
    let ask = Ask::new(1, &none);
    let tuned = Tuning {
        first_read_page: 0,
        heads_max_age: std::time::Duration::from_secs(3),
        ..Tuning::default()
    };
    let first_page = |tuning| {
        let setup = Setup {
            tuning,
            ..setup(Order::Lifo, true)
        };
        stack(&setup, NOW).next_read(&ask, NOW).map(|r| r.page)
    };
    assert_eq!(first_page(Tuning::default()), Some(FIRST_READ_PAGE));
    assert_eq!(first_page(tuned), Some(HeadsPolicy::new(1, 2).page));
    let policy = HeadsPolicy::tuned(1, 2, &tuned);
    assert_eq!(policy.max_age, std::time::Duration::from_secs(3));
    assert_eq!(
        HeadsPolicy::tuned(1, 2, &Tuning::default()),
        HeadsPolicy::new(1, 2)
    );
}

#[test]
fn the_whole_stack_a_high_task_then_the_lane_then_the_share() {
    // Two slots, 5 s holds: 0.4 starts a second. "near" has 3 s left,
    // "high" is of a higher priority, the flood has twenty, "quiet" one.
    let mut s = stack(&setup(Order::Adaptive, true), NOW);
    let mut shard: Vec<Candidate> = (0..20)
        .map(|i| task(&format!("f{i:02}"), Some("flood"), NOW - 100 - i, 60))
        .collect();
    shard.push(task("quiet", Some("quiet"), NOW - 2_000, 60));
    shard.push(task("near", Some("other"), NOW - 17_000, 20));
    shard.push(Candidate {
        claimable_at: Priority::High.key(NOW - 9_000),
        ..task("high", Some("flood"), NOW - 9_000, 60)
    });
    let shards = Shards(vec![shard]);
    let none = Ids::new();
    // Holds of 5 s: the lane needs "near" now, but "high" waits.
    for (id, end) in [("x", NOW - 5_000), ("y", NOW - 5_000)] {
        let x = c(id, 0);
        s.tell(Event::Started(&x), end - 5_000);
        s.tell(
            Event::Ended {
                task_id: id,
                ran: true,
            },
            end,
        );
    }
    let (reads, got) = fill(&mut *s, &shards, 1, &none, NOW);
    assert_eq!(reads[0].page, FIRST_READ_PAGE, "the first read goes deep");
    assert_eq!(got, ["high"]);
    let running = Ids::from(["high".to_owned()]);
    let (_, got) = fill(&mut *s, &shards, 2, &running, NOW + 10);
    assert_eq!(
        got,
        ["near", "quiet"],
        "the lane's, then the share's quiet tenant"
    );
    let mut tally = Tally::default();
    s.tally(&mut tally);
    assert_eq!(tally.deadline_starts, 0, "given, not yet started");
}

#[test]
fn what_one_invocation_hands_over_the_next_starts_from() {
    let mut first = stack(&setup(Order::Lifo, true), NOW);
    let flood: Vec<Candidate> = (0..30)
        .map(|i| task(&format!("f{i:02}"), Some("flood"), NOW - 100 - i, 60))
        .collect();
    let quiet = vec![task("q1", Some("quiet"), NOW - 3_000, 60)];
    let shards = Shards(vec![[flood.clone(), quiet].concat()]);
    let none = Ids::new();
    let (_, got) = fill(&mut *first, &shards, 1, &none, NOW);
    assert_eq!(got, ["f00"], "two tenants at the top: the newest");
    let started = Candidate {
        tenant: Some("flood".into()),
        ..c("f00", 0)
    };
    first.tell(Event::Started(&started), NOW);
    let mut handover = Handover::new();
    let claimed: Ids = got.iter().cloned().collect();
    first.hand_over(&claimed, NOW + 500, &mut handover);
    assert!(handover.contains_key("fairShare"), "{handover:?}");
    // The next invocation: 150 newer flood tasks, so its first read (100
    // deep) is cut short above q1.
    let more: Vec<Candidate> = (0..150)
        .map(|i| task(&format!("g{i:03}"), Some("flood"), NOW + 550 - i, 60))
        .collect();
    let later = Shards(vec![[more, flood].concat()]);
    let next_setup = Setup {
        handover: Some(&handover),
        ..setup(Order::Lifo, true)
    };
    let mut next = stack(&next_setup, NOW + 600);
    let (_, got) = fill(&mut *next, &later, 1, &claimed, NOW + 600);
    assert_eq!(got, ["q1"], "kept in view, and the flood was served");
    // Without the handover, q1 is out of view: the flood's newest.
    let mut fresh = stack(&setup(Order::Lifo, true), NOW + 600);
    let (_, got) = fill(&mut *fresh, &later, 1, &claimed, NOW + 600);
    assert_eq!(got, ["g000"]);
}

/// The share over priorities over the newest-first order, on one shard,
/// and that shard: a flood of twelve and three tenants' one each.
fn over_priorities() -> (FairShare, Vec<Candidate>) {
    let inner = crate::select::priorities::Priorities::new(Box::new(Heads::lifo(
        vec![0],
        HeadsPolicy::new(1, 5),
    )));
    let one_shard = Setup {
        capacity: 5,
        fair_share: true,
        ..setup(Order::Lifo, true)
    };
    let mut shard: Vec<Candidate> = (0..12)
        .map(|i| task(&format!("f{i:02}"), Some("flood"), NOW - 100 - i, 60))
        .collect();
    shard.push(task("a", Some("a"), NOW - 500, 60));
    shard.push(task("b", Some("b"), NOW - 400, 60));
    shard.push(task("c", Some("c"), NOW - 300, 60));
    (
        FairShare::new(Box::new(inner), &one_shard, None, NOW),
        shard,
    )
}

#[test]
fn stacked_over_priorities_a_high_task_goes_first_and_a_flood_is_not_allowed_ahead() {
    let (mut s, mut shard) = over_priorities();
    shard.push(Candidate {
        claimable_at: Priority::High.key(NOW - 5_000),
        ..task("bh", Some("b"), NOW - 5_000, 60)
    });
    let none = Ids::new();
    let (_, got) = fill(&mut s, &Shards(vec![shard]), 1, &none, NOW);
    assert_eq!(got, ["bh"], "the high task first, whoever's");
    let (_, got) = fill(&mut s, &Shards(vec![]), 3, &none, NOW + 10);
    let keeping_up = "those that keep up, oldest first, before the flood";
    assert_eq!(got, ["a", "b", "c"], "{keeping_up}");
    // Out of order, nothing of the flood's (12 of 15 waiting) is allowed.
    let (mut t, shard) = over_priorities();
    let mut ask = Ask::new(1, &none);
    while let Some(read) = t.next_read(&ask, NOW) {
        let heads = Shards(vec![shard.clone()]).answer(&read);
        t.tell(
            Event::Read {
                read: &read,
                sent_ms: NOW,
                heads: &heads,
            },
            NOW,
        );
        ask.reads += 1;
    }
    let allows = t.allows(&none);
    assert!(!allows(&task("f05", Some("flood"), NOW - 105, 60)));
    assert!(allows(&task("a", Some("a"), NOW - 500, 60)));
}
