//! The stack as the claim loop drives it: each layer over the others,
//! with time given.

use super::heads::c;
use super::*;
use lifo_core::priority::Priority;

pub const NOW: u64 = 1_800_000_000_000;

/// Scripted shards: each read answers each shard's list (complete), in
/// the read's order, cut to its page.
pub struct Shards(pub Vec<Vec<Candidate>>);

impl Shards {
    pub fn answer(&self, read: &Read) -> Vec<(Vec<Candidate>, bool)> {
        read.shards
            .iter()
            .map(|s| {
                let mut items = self.0.get(*s as usize).cloned().unwrap_or_default();
                items.sort_by_key(|c| std::cmp::Reverse((c.claimable_at, c.task_id.clone())));
                if !read.order.newest_first() {
                    items.reverse();
                }
                let complete = items.len() <= read.page || read.since_ms.is_some();
                if read.since_ms.is_none() {
                    items.truncate(read.page);
                }
                (items, complete)
            })
            .collect()
    }
}

/// One refill of `want` at `now`, none in `exclude`: the reads made, and
/// the ids picked.
pub fn fill(
    s: &mut dyn Select,
    shards: &Shards,
    want: usize,
    exclude: &Ids,
    now: u64,
) -> (Vec<Read>, Vec<String>) {
    let mut ask = Ask {
        want,
        exclude,
        reads: 0,
    };
    let mut reads = Vec::new();
    while let Some(read) = s.next_read(&ask, now) {
        let heads = shards.answer(&read);
        let event = Event::Read {
            read: &read,
            sent_ms: now,
            heads: &heads,
        };
        s.tell(event, now);
        reads.push(read);
        ask.reads += 1;
    }
    let got = s.pick(&ask, &mut |_| true, now);
    (reads, got.into_iter().map(|c| c.task_id).collect())
}

/// A normal task of `tenant` stamped `at`, `ttl_s` to live.
pub fn task(id: &str, tenant: Option<&str>, at: u64, ttl_s: u64) -> Candidate {
    Candidate {
        tenant: tenant.map(str::to_owned),
        expires_at: at / 1000 + ttl_s,
        ..Candidate::pending(id, 0, Priority::Normal.key(at))
    }
}

fn setup(order: Order, fair_share: bool) -> Setup<'static> {
    Setup {
        order,
        shards: vec![0],
        capacity: 2,
        per_second: None,
        fair_share,
        tenant_max_in_flight: None,
        handover: None,
    }
}

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
    let ask = Ask {
        want: 1,
        exclude: &none,
        reads: 0,
    };
    let first = |order| stack(&setup(order, false), NOW).next_read(&ask, NOW);
    assert_eq!(first(Order::Fifo).map(|r| r.order), Some(Order::Fifo));
    assert_eq!(first(Order::Adaptive).map(|r| r.order), Some(Order::Lifo));
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
    assert_eq!(
        reads[0].page,
        fair::FIRST_READ_PAGE,
        "the first read goes deep"
    );
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
