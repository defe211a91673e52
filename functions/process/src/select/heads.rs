//! The heads: each shard's first claimable tasks, kept in memory between
//! reads and merged into one order, so that a refill reads nothing when
//! the heads can answer it. Every order reads the index through them, and
//! they are the two orders at the bottom of every stack: [`Heads::lifo`]
//! merges newest first (the queue this project is), [`Heads::fifo`]
//! oldest first (for comparison).
//!
//! A query costs at least 0.5 read units, so the shards are read again
//! ([`Heads::to_read`]) only when the heads cannot supply the candidates
//! asked for (then only the cut-short shards that ran out, if others still
//! hold some), or have served enough, or are old ([`HeadsPolicy`]). The
//! merge never passes a cut-short shard's unread tasks: candidates come out
//! in the exact order of what was read.

use super::{Ask, Event, Ids, Purpose, Read, Select};
use lifo_core::{Candidate, Order};
use std::collections::VecDeque;
use std::time::Duration;

/// How often the heads are read again, and how much each read brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadsPolicy {
    /// Candidates per shard per read (the query's Limit).
    pub page: usize,
    /// Read again after serving this many candidates.
    pub refresh_claims: usize,
    /// Read again after serving this many once [`HeadsPolicy::min_age`] old.
    pub min_claims: usize,
    pub min_age: Duration,
    /// Read again when older than this.
    pub max_age: Duration,
}

impl HeadsPolicy {
    /// The policy for `shards` shards and `in_flight` tasks at most at once:
    /// a read of `S` shards (0.5 read units each) serves at least `2S − 1`
    /// claims, and brings a shard's share of them plus two (8 to 40: an
    /// index entry is about 100 bytes, 40 fit in one read unit).
    pub fn new(shards: usize, in_flight: usize) -> Self {
        Self::tuned(shards, in_flight, &super::Tuning::default())
    }

    /// [`HeadsPolicy::new`] with `tuning`'s read-again ages.
    pub fn tuned(shards: usize, in_flight: usize, tuning: &super::Tuning) -> Self {
        let shards = shards.max(1);
        let refresh_claims = 2 * shards.max(in_flight).max(1);
        Self {
            page: (refresh_claims / shards + 2).clamp(8, 40),
            refresh_claims,
            min_claims: 2 * shards - 1,
            min_age: tuning.heads_min_age,
            max_age: tuning.heads_max_age,
        }
    }
}

/// One shard's head: candidates in order, and whether the shard had no
/// more than was read (else its unread tasks sort after the last one).
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub items: VecDeque<Candidate>,
    pub complete: bool,
}

/// The shards' heads, merged in `order`.
#[derive(Debug, Clone)]
pub struct Heads {
    order: Order,
    policy: HeadsPolicy,
    shards: Vec<u32>,
    heads: Vec<Head>,
    /// When the last read of every shard was taken in (epoch ms).
    read_at: Option<u64>,
    served: usize,
    reads: usize,
}

/// What must be read before a take can be trusted ([`Heads::to_read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    Nothing,
    All,
    /// These shards only.
    Some(Vec<u32>),
}

/// Whether `a` comes before `b` in `order`: the greater key (then id)
/// first when newest first.
pub fn before(order: Order, a: &Candidate, b: &Candidate) -> bool {
    let (ka, kb) = ((a.claimable_at, &a.task_id), (b.claimable_at, &b.task_id));
    if order.newest_first() {
        ka > kb
    } else {
        ka < kb
    }
}

impl Heads {
    pub fn new(order: Order, shards: Vec<u32>, policy: HeadsPolicy) -> Self {
        Self {
            order,
            policy,
            heads: vec![Head::default(); shards.len()],
            shards,
            read_at: None,
            served: 0,
            reads: 0,
        }
    }

    /// Newest first.
    pub fn lifo(shards: Vec<u32>, policy: HeadsPolicy) -> Self {
        Self::new(Order::Lifo, shards, policy)
    }

    /// Oldest first.
    pub fn fifo(shards: Vec<u32>, policy: HeadsPolicy) -> Self {
        Self::new(Order::Fifo, shards, policy)
    }

    pub fn order(&self) -> Order {
        self.order
    }

    pub fn shards(&self) -> &[u32] {
        &self.shards
    }

    pub fn policy(&self) -> HeadsPolicy {
        self.policy
    }

    /// Reads from now on follow `policy`.
    pub fn set_policy(&mut self, policy: HeadsPolicy) {
        self.policy = policy;
    }

    /// Reads of every shard so far.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// When the last read of every shard was taken in (epoch ms).
    pub fn read_at(&self) -> Option<u64> {
        self.read_at
    }

    /// How old the heads are at `now` (epoch ms; `None`: never read).
    pub fn age(&self, now: u64) -> Option<Duration> {
        self.read_at
            .map(|at| Duration::from_millis(now.saturating_sub(at)))
    }

    /// Each shard's head, in the order of [`Heads::shards`].
    pub fn each(&self) -> &[Head] {
        &self.heads
    }

    /// Every candidate in the heads, shard after shard.
    pub fn candidates(&self) -> impl Iterator<Item = &Candidate> {
        self.heads.iter().flat_map(|h| &h.items)
    }

    /// The shards whose last read was cut short.
    pub fn cut_short(&self) -> Vec<u32> {
        self.heads
            .iter()
            .zip(&self.shards)
            .filter(|(h, _)| !h.complete)
            .map(|(_, s)| *s)
            .collect()
    }

    /// What must be read at `now` before a take of `want` candidates (none
    /// in `exclude`) can be trusted: nothing; every shard (never read, a
    /// refill's worth served, old heads, or every head complete and spent);
    /// or only the cut-short shards whose heads ran out.
    pub fn to_read(&self, want: usize, exclude: &Ids, now: u64) -> Due {
        let Some(age) = self.age(now) else {
            return Due::All;
        };
        if age >= self.policy.max_age
            || self.served >= self.policy.refresh_claims
            || (self.served >= self.policy.min_claims && age >= self.policy.min_age)
        {
            return Due::All;
        }
        let mut probe = self.clone();
        if probe.take_by(want, exclude, &mut |_| true).len() >= want {
            return Due::Nothing;
        }
        let blocked: Vec<u32> = probe
            .heads
            .iter()
            .zip(&self.shards)
            .filter(|(h, _)| !h.complete && h.items.is_empty())
            .map(|(_, s)| *s)
            .collect();
        // None blocked (new work may be anywhere) or every shard: a full
        // read, which also restarts the heads' age and count.
        if blocked.is_empty() || blocked.len() == self.shards.len() {
            Due::All
        } else {
            Due::Some(blocked)
        }
    }

    /// The read of `due`, in the heads' order and page.
    pub fn read_of(&self, due: Due) -> Option<Read> {
        let (shards, whole) = match due {
            Due::Nothing => return None,
            Due::All => (self.shards.clone(), true),
            Due::Some(shards) => (shards, false),
        };
        Some(Read {
            order: self.order,
            shards,
            page: self.policy.page,
            since_ms: None,
            purpose: Purpose::Heads { whole },
        })
    }

    /// Replaces every head with a read taken in at `now`: per shard (in the
    /// order of [`Heads::shards`]), its candidates in order and whether that
    /// was all of it.
    pub fn replace(&mut self, read: Vec<(Vec<Candidate>, bool)>, now: u64) {
        self.heads = read
            .into_iter()
            .map(|(items, complete)| Head {
                items: items.into(),
                complete,
            })
            .collect();
        self.heads.resize(self.shards.len(), Head::default());
        self.read_at = Some(now);
        self.served = 0;
        self.reads += 1;
    }

    /// Replaces the heads of `shards` only: the others keep theirs, and the
    /// heads' age and count stay the last full read's.
    pub fn replace_some(&mut self, shards: &[u32], read: Vec<(Vec<Candidate>, bool)>) {
        for (shard, (items, complete)) in shards.iter().zip(read) {
            if let Some(i) = self.shards.iter().position(|s| s == shard) {
                self.heads[i] = Head {
                    items: items.into(),
                    complete,
                };
            }
        }
    }

    /// Appends `items` to shard `i`'s head, past its end.
    pub fn append(&mut self, i: usize, items: impl IntoIterator<Item = Candidate>) {
        if let Some(h) = self.heads.get_mut(i) {
            h.items.extend(items);
        }
    }

    /// Drops `ids`: claimed another way, not to be taken again.
    pub fn forget(&mut self, ids: &Ids) {
        if ids.is_empty() {
            return;
        }
        for h in &mut self.heads {
            h.items.retain(|c| !ids.contains(&c.task_id));
        }
    }

    /// Puts candidates taken and not started back into their heads, each in
    /// its place (one past a cut-short read's end would not be read again).
    pub fn put_back(&mut self, taken: Vec<Candidate>) {
        for c in taken {
            let Some(i) = self.shards.iter().position(|s| *s == c.lifo_shard) else {
                continue;
            };
            let order = self.order;
            let items = &mut self.heads[i].items;
            let at = items
                .iter()
                .position(|x| before(order, &c, x))
                .unwrap_or(items.len());
            items.insert(at, c);
            self.served = self.served.saturating_sub(1);
        }
    }

    /// Every candidate, in the claim order across the shards.
    pub fn in_order(&self) -> Vec<&Candidate> {
        let mut all: Vec<&Candidate> = self.candidates().collect();
        all.sort_by(
            |a, b| match (before(self.order, a, b), before(self.order, b, a)) {
                (true, _) => std::cmp::Ordering::Less,
                (_, true) => std::cmp::Ordering::Greater,
                _ => std::cmp::Ordering::Equal,
            },
        );
        all
    }

    /// The index key of the first candidate in the claim order (none in
    /// `exclude`).
    pub fn first_key(&self, exclude: &Ids) -> Option<i64> {
        self.heads
            .iter()
            .filter_map(|h| h.items.iter().find(|c| !exclude.contains(&c.task_id)))
            .reduce(|a, b| if before(self.order, b, a) { b } else { a })
            .map(|c| c.claimable_at)
    }

    /// Up to `want` candidates in order, none in `exclude`, that `admit`
    /// accepts. Those it refuses stay in their heads, in place; the merge
    /// stops where a cut-short shard's head is used up (or holds only
    /// refused ones): its unread tasks could come first.
    pub fn take_by(
        &mut self,
        want: usize,
        exclude: &Ids,
        admit: &mut dyn FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        let mut held: Vec<Vec<Candidate>> = vec![Vec::new(); self.heads.len()];
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            if self.heads.iter().any(|h| !h.complete && h.items.is_empty()) {
                break;
            }
            let mut best: Option<usize> = None;
            for (i, h) in self.heads.iter().enumerate() {
                if let Some(c) = h.items.front() {
                    let better = best.is_none_or(|b| {
                        self.heads[b]
                            .items
                            .front()
                            .is_none_or(|bc| before(self.order, c, bc))
                    });
                    if better {
                        best = Some(i);
                    }
                }
            }
            let Some(i) = best else { break };
            let Some(c) = self.heads[i].items.pop_front() else {
                break;
            };
            if exclude.contains(&c.task_id) {
                continue;
            }
            if admit(&c) {
                self.served += 1;
                out.push(c);
            } else {
                held[i].push(c);
            }
        }
        for (head, back) in self.heads.iter_mut().zip(held) {
            for c in back.into_iter().rev() {
                head.items.push_front(c);
            }
        }
        out
    }
}

/// The merge as an order: it reads what its heads need once a refill, and
/// picks as they stand.
impl Select for Heads {
    fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read> {
        if ask.reads > 0 {
            return None;
        }
        self.read_of(self.to_read(ask.want, ask.exclude, now))
    }

    fn pick(
        &mut self,
        ask: &Ask<'_>,
        admit: &mut dyn FnMut(&Candidate) -> bool,
        _now: u64,
    ) -> Vec<Candidate> {
        self.take_by(ask.want, ask.exclude, admit)
    }

    /// A read of the heads, or a candidate not started.
    fn tell(&mut self, event: Event<'_>, now: u64) {
        match event {
            Event::Read { read, heads, .. } => match read.purpose {
                Purpose::Heads { whole: true } => self.replace(heads.to_vec(), now),
                Purpose::Heads { whole: false } => self.replace_some(&read.shards, heads.to_vec()),
                Purpose::Layer(_) => {}
            },
            Event::NotStarted(c) => self.put_back(vec![c.clone()]),
            Event::Started(_) | Event::Ended { .. } => {}
        }
    }

    fn heads(&self) -> &Heads {
        self
    }

    fn heads_mut(&mut self) -> &mut Heads {
        self
    }
}

/// A PENDING candidate `id` of shard 0 at index key `at` (tests).
#[cfg(test)]
pub fn c(id: &str, at: i64) -> Candidate {
    Candidate::pending(id, 0, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::select::ids;
    use proptest::prelude::*;

    const NOW: u64 = 1_800_000_000_000;

    fn take(h: &mut Heads, want: usize, exclude: &Ids) -> Vec<Candidate> {
        h.take_by(want, exclude, &mut |_| true)
    }

    #[test]
    fn the_policy_reads_all_shards_once_per_two_claims_per_shard_less_one() {
        let p = HeadsPolicy::new(32, 3);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 63, 8));
        let p = HeadsPolicy::new(1, 32);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 1, 40));
        let p = HeadsPolicy::new(1, 5);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (10, 1, 12));
        let p = HeadsPolicy::new(8, 32);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 15, 10));
    }

    #[test]
    fn candidates_put_back_come_out_again_in_their_place() {
        let mut h = Heads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        let one = |id: &str, at: i64| Candidate {
            lifo_shard: 1,
            ..c(id, at)
        };
        h.replace(
            vec![
                (vec![c("a9", 9), c("a5", 5), c("a1", 1)], false),
                (vec![one("b7", 7), one("b3", 3)], true),
            ],
            NOW,
        );
        let none = Ids::new();
        let taken = take(&mut h, 3, &none);
        assert_eq!(ids(&taken), ["a9", "b7", "a5"]);
        h.put_back(taken.into_iter().skip(1).collect());
        assert_eq!(
            ids(&take(&mut h.clone(), 4, &none)),
            ["b7", "a5", "b3", "a1"]
        );
        h.forget(&["a5".to_owned(), "b3".to_owned()].into());
        assert_eq!(ids(&take(&mut h, 4, &none)), ["b7", "a1"]);
    }

    #[test]
    fn a_cut_short_shard_blocks_the_merge_when_used_up() {
        let mut h = Heads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        h.replace(
            vec![
                (vec![c("a9", 9), c("a7", 7), c("a1", 1)], true),
                (vec![c("b8", 8), c("b6", 6)], false),
            ],
            NOW,
        );
        let none = Ids::new();
        // After b6, shard 1's unread tasks could come before a1.
        assert_eq!(ids(&take(&mut h, 10, &none)), ["a9", "b8", "a7", "b6"]);
        assert_eq!(h.to_read(1, &none, NOW), Due::Some(vec![1]));
        h.replace_some(&[1], vec![(vec![c("b5", 5), c("b0", 0)], true)]);
        assert_eq!(ids(&take(&mut h, 10, &none)), ["b5", "a1", "b0"]);
        assert_eq!(h.reads(), 1, "a read of some shards is not a full read");
        // Every head complete and spent: all are read.
        assert_eq!(h.to_read(1, &none, NOW), Due::All);
        // One shard cut short and used up is every shard: a full read.
        let mut one = Heads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 8));
        one.replace(vec![(vec![c("a9", 9)], false)], NOW);
        assert_eq!(take(&mut one, 1, &none).len(), 1);
        assert_eq!(one.to_read(1, &none, NOW), Due::All);
    }

    #[test]
    fn heads_are_read_again_after_serving_a_refill_or_a_second() {
        let policy = HeadsPolicy {
            page: 8,
            refresh_claims: 3,
            min_claims: 2,
            min_age: Duration::from_millis(100),
            max_age: Duration::from_secs(1),
        };
        let mut h = Heads::new(Order::Lifo, vec![0], policy);
        let none = Ids::new();
        let due = |h: &Heads, want, at| h.to_read(want, &none, at) != Due::Nothing;
        assert!(due(&h, 1, NOW), "never read");
        let eight = (1..=8).rev().map(|i| c(&format!("t{i}"), i)).collect();
        h.replace(vec![(eight, true)], NOW);
        assert!(!due(&h, 2, NOW));
        assert_eq!(take(&mut h, 2, &none).len(), 2);
        assert!(!due(&h, 1, NOW), "two served, but fresh");
        assert!(due(&h, 1, NOW + 100), "two served and 100 ms old");
        assert_eq!(take(&mut h, 1, &none).len(), 1);
        assert!(due(&h, 1, NOW), "served a refill's worth");
        h.replace(vec![(vec![c("t9", 9)], true)], NOW);
        assert!(due(&h, 1, NOW + 1_000), "a second old");
        assert!(due(&h, 2, NOW), "cannot supply two");
        let skip = Ids::from(["t9".to_owned()]);
        assert!(
            take(&mut h, 1, &skip).is_empty(),
            "excluded ids are not given"
        );
    }

    #[test]
    fn refused_candidates_stay_in_place_for_a_later_take() {
        let mut h = crate::tests::select::two_tenants();
        let none = Ids::new();
        let only_b = h.take_by(2, &none, &mut |c| c.tenant.as_deref() == Some("b"));
        assert_eq!(ids(&only_b), ["b6", "b3"]);
        assert_eq!(ids(&take(&mut h, 10, &none)), ["a9", "a8", "a7"]);
    }

    #[test]
    fn as_an_order_it_reads_once_a_refill_and_picks_as_it_stands() {
        let policy = HeadsPolicy::new(1, 2);
        let mut lifo = Heads::lifo(vec![0], policy);
        let shards = crate::tests::select::Shards(vec![vec![c("a", 1), c("b", 2), c("c", 3)]]);
        let none = Ids::new();
        let fill =
            |s: &mut Heads, want, at| crate::tests::select::fill(s, &shards, want, &none, at);
        assert_eq!(fill(&mut lifo, 2, NOW).1, ["c", "b"]);
        // Served from the heads until they are spent or old.
        assert_eq!(
            (fill(&mut lifo, 1, NOW + 10).1, lifo.reads()),
            (vec!["a".to_owned()], 1)
        );
        let mut fifo = Heads::fifo(vec![0], policy);
        assert_eq!(fill(&mut fifo, 2, NOW).1, ["a", "b"]);
        // A pick not started goes back in its place.
        fifo.tell(Event::NotStarted(&c("a", 1)), NOW);
        assert_eq!(fill(&mut fifo, 2, NOW).1, ["a", "c"]);
    }

    proptest! {
        /// Whatever the shards hold and wherever reads cut them short,
        /// what comes out is the global order of the tasks read, and never
        /// passes a task a cut-short shard has not shown yet.
        #[test]
        fn take_is_the_global_order_of_what_was_read(
            shards in proptest::collection::vec(proptest::collection::vec(0i64..1000, 0..20), 1..6),
            page in 1usize..10,
            want in 0usize..60,
            fifo in any::<bool>(),
        ) {
            let order = if fifo { Order::Fifo } else { Order::Lifo };
            let cmp = |a: &Candidate, b: &Candidate| if before(order, a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater };
            let mut n = 0;
            let full: Vec<Vec<Candidate>> = shards.iter().map(|ats| {
                let mut list: Vec<Candidate> = ats.iter().map(|at| { n += 1; c(&format!("{n:04}"), *at) }).collect();
                list.sort_by(cmp);
                list
            }).collect();
            let read: Vec<(Vec<Candidate>, bool)> = full.iter()
                .map(|l| (l.iter().take(page).cloned().collect(), l.len() <= page))
                .collect();
            let mut h = Heads::new(order, (0..full.len() as u32).collect(), HeadsPolicy::new(full.len(), 1));
            h.replace(read, NOW);
            let got = take(&mut h, want, &Ids::new());
            let mut all: Vec<Candidate> = full.iter().flatten().cloned().collect();
            all.sort_by(cmp);
            prop_assert!(got.len() <= want);
            prop_assert_eq!(&all[..got.len()], &got[..]);
        }
    }
}
