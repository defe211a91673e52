//! The claim query, read cheaply: each shard's head (its first claimable
//! tasks in LIFO order) is kept in memory and merged newest first, so a
//! refill reads nothing when the heads can answer it.
//!
//! A query costs at least 0.5 read units however little it returns, so
//! reading every shard on every refill costs `shards × 0.5` per refill: with
//! 32 shards and one free slot, 16 read units for one task. Instead the
//! shards are read together (one query each, in parallel) only when
//! - the heads cannot supply the candidates asked for: a shard whose head
//!   was cut short (it has more than was read) and is used up could hide a
//!   newer task than any other shard's head;
//! - the heads have served [`HeadsPolicy::refresh_claims`] candidates since
//!   they were read (`2 × max(shards, in flight)`);
//! - the heads have served [`HeadsPolicy::min_claims`] candidates
//!   (`2 × shards − 1`: a read of every shard, ≥ 0.5 read units each, then
//!   costs at most 0.5 read units per claim) and are older than
//!   [`HeadsPolicy::min_age`] (100 ms): a queue of few shards under
//!   overload stays within 100 ms of exact LIFO, while a fast claim loop
//!   does not stop for a read every few claims;
//! - or they are older than [`HeadsPolicy::max_age`] (1 s).
//!
//! When only a cut-short shard's head ran out (the first case), only that
//! shard is read again ([`ShardHeads::to_read`]): at 32 shards, the other
//! 31 heads still hold their candidates, and a read of all 32 would cost 16
//! read units and a round trip of 32 queries for one shard's want.
//!
//! Each read brings up to `page` candidates per shard, sized so that a read
//! serves `refresh_claims` candidates: a shard's share of them plus two (at
//! least 8, at most 40), no more, since what a read returns beyond what is
//! claimed before the next read is wasted work. Under load a read of `S`
//! shards (`S × 0.5` read units) then serves at least `2 × S − 1` claims:
//! at most 0.5 read units per task, less under load. With the fair share,
//! a read goes on past `page` until it reaches back to the read before
//! ([`HeadsPolicy::reach_back`]): what arrived in between is all seen.
//!
//! **The LIFO guarantee that remains:** candidates come out in exact LIFO
//! order of what was read (the merge never passes a cut-short shard's
//! unread tasks); a task is passed over only if it became claimable after
//! its shard was last read, which is at most `refresh_claims` candidates
//! and one second ago. So never more than one refill's worth out of order.

mod reach;
mod tenants;

pub use reach::{LATE_WINDOW, LateReach, MAX_MARGIN};

use lifo_core::{Candidate, Order};
use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// How often the heads are read again, and how much each read brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadsPolicy {
    /// Candidates per shard per read (the query's Limit).
    pub page: usize,
    /// Read again after serving this many candidates.
    pub refresh_claims: usize,
    /// Read again after serving this many candidates once the heads are
    /// [`HeadsPolicy::min_age`] old.
    pub min_claims: usize,
    pub min_age: Duration,
    /// Read again when the heads are older than this.
    pub max_age: Duration,
    /// With the fair share: of a read cut short, each tenant's candidates
    /// in the heads before it that sort past its end are kept, up to this
    /// many per tenant with the read's own ([`ShardHeads::replace`]); 0:
    /// none.
    pub keep_per_tenant: usize,
    /// With the fair share: each read goes on past `page` until it reaches
    /// back to the read before, less this margin ([`ShardHeads::since_ms`]),
    /// so that no task written between two reads is left unseen under
    /// newer ones; `None`: a page is a read.
    pub reach_back: Option<Duration>,
    /// With [`HeadsPolicy::reach_back`]: how often a read reaches further
    /// back, and how far ([`LateReach`]).
    pub late_reach: Option<LateReach>,
}

impl HeadsPolicy {
    /// The policy for `shards` shards and `in_flight` tasks at most at once.
    pub fn new(shards: usize, in_flight: usize) -> Self {
        let shards = shards.max(1);
        let refresh_claims = 2 * shards.max(in_flight).max(1);
        Self {
            // Index entries are ~100 bytes: 40 fit in one 4 KB read unit.
            page: (refresh_claims / shards + 2).clamp(8, 40),
            refresh_claims,
            min_claims: 2 * shards - 1,
            min_age: Duration::from_millis(100),
            max_age: Duration::from_secs(1),
            keep_per_tenant: 0,
            reach_back: None,
            late_reach: None,
        }
    }
}

/// One shard's head: candidates in order, and whether the shard had more
/// than was read (then its unread tasks sort after the last one read).
#[derive(Debug, Clone, Default)]
struct Head {
    items: VecDeque<Candidate>,
    complete: bool,
}

/// The shards' heads, merged in `order`.
#[derive(Debug, Clone)]
pub struct ShardHeads {
    order: Order,
    policy: HeadsPolicy,
    shards: Vec<u32>,
    heads: Vec<Head>,
    read_at: Option<Instant>,
    /// When the last full read was taken in, epoch ms (the clock the
    /// index keys are stamped by); [`HeadsPolicy::reach_back`]'s margin
    /// covers the read's own flight before it.
    read_at_ms: Option<u64>,
    /// When the last read reaching back [`LateReach::reach`] was taken in
    /// (epoch ms).
    late_read_ms: Option<u64>,
    /// How late tasks have lately shown up ([`ShardHeads::late_by`]).
    lateness: reach::Lateness,
    served: usize,
    reads: usize,
    partial_reads: usize,
    /// A read has shown a task with a tenant ([`ShardHeads::seen_tenant`]).
    seen_tenant: bool,
}

/// One tenant's candidates in the heads ([`ShardHeads::tenant_heads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantHead {
    /// The index key of its first candidate in the claim order.
    pub first: i64,
    /// Its candidates waiting.
    pub waiting: usize,
    /// When its oldest candidate became claimable (epoch ms).
    pub oldest_ms: u64,
}

/// What a refill must read ([`ShardHeads::to_read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Nothing,
    All,
    /// These shards only.
    Some(Vec<u32>),
}

/// The key candidates sort by: newest first for LIFO (greater first).
fn before(order: Order, a: &Candidate, b: &Candidate) -> bool {
    let (ka, kb) = ((a.claimable_at, &a.task_id), (b.claimable_at, &b.task_id));
    if order.newest_first() {
        ka > kb
    } else {
        ka < kb
    }
}

impl ShardHeads {
    pub fn new(order: Order, shards: Vec<u32>, policy: HeadsPolicy) -> Self {
        let heads = vec![Head::default(); shards.len()];
        Self {
            order,
            policy,
            shards,
            heads,
            read_at: None,
            read_at_ms: None,
            late_read_ms: None,
            lateness: reach::Lateness::default(),
            served: 0,
            reads: 0,
            partial_reads: 0,
            seen_tenant: false,
        }
    }

    /// How old the heads are at `now` (`None`: never read).
    pub fn age(&self, now: Instant) -> Option<Duration> {
        self.read_at.map(|at| now.duration_since(at))
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

    /// Reads of all shards so far.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// The shards whose last read was cut short (they hold more than was
    /// read).
    pub fn cut_short(&self) -> Vec<u32> {
        self.heads
            .iter()
            .zip(&self.shards)
            .filter(|(h, _)| !h.complete)
            .map(|(_, s)| *s)
            .collect()
    }

    /// True when the heads must be read before [`ShardHeads::take`] can be
    /// trusted for `want` candidates (none of them in `exclude`).
    pub fn needs_read(&self, want: usize, exclude: &HashSet<String>, now: Instant) -> bool {
        !matches!(self.to_read(want, exclude, now), Read::Nothing)
    }

    /// What must be read before [`ShardHeads::take`] can be trusted for
    /// `want` candidates: nothing; every shard (never read, a refill's
    /// worth served, old heads, or every head complete and spent); or only
    /// the cut-short shards whose heads ran out (they block the merge).
    pub fn to_read(&self, want: usize, exclude: &HashSet<String>, now: Instant) -> Read {
        let Some(at) = self.read_at else {
            return Read::All;
        };
        let age = now.duration_since(at);
        if age >= self.policy.max_age
            || self.served >= self.policy.refresh_claims
            || (self.served >= self.policy.min_claims && age >= self.policy.min_age)
        {
            return Read::All;
        }
        let mut probe = self.clone();
        if probe.take(want, exclude).len() >= want {
            return Read::Nothing;
        }
        let blocked: Vec<u32> = probe
            .heads
            .iter()
            .zip(&self.shards)
            .filter(|(h, _)| !h.complete && h.items.is_empty())
            .map(|(_, s)| *s)
            .collect();
        // None blocked (every head complete and spent: new work may be
        // anywhere), or all of them (one shard): a full read, which also
        // restarts the heads' age and count.
        if blocked.is_empty() || blocked.len() == self.shards.len() {
            Read::All
        } else {
            Read::Some(blocked)
        }
    }

    /// Replaces the heads of `shards` only (a [`Read::Some`]): the others
    /// keep theirs, and the read's age and count are the full read's.
    pub fn replace_some(&mut self, shards: &[u32], read: Vec<(Vec<Candidate>, bool)>) {
        self.saw(&read);
        self.remember(
            read.iter().flat_map(|(items, _)| items),
            crate::select::clock::now_ms(),
        );
        for (shard, (items, complete)) in shards.iter().zip(read) {
            if let Some(i) = self.shards.iter().position(|s| s == shard) {
                self.heads[i] = Head {
                    items: items.into(),
                    complete,
                };
            }
        }
        self.partial_reads += 1;
    }

    /// Reads of some shards only so far.
    pub fn partial_reads(&self) -> usize {
        self.partial_reads
    }

    /// Replaces the heads with a fresh read: per shard (in the order of
    /// [`ShardHeads::shards`]), its candidates in order and whether that
    /// was all of it.
    pub fn replace(&mut self, read: Vec<(Vec<Candidate>, bool)>, now: Instant) {
        self.saw(&read);
        self.learn_late(&read, crate::select::clock::now_ms());
        let before = std::mem::take(&mut self.heads);
        self.heads = read
            .into_iter()
            .map(|(items, complete)| Head {
                items: items.into(),
                complete,
            })
            .collect();
        self.heads.resize(self.shards.len(), Head::default());
        if self.policy.keep_per_tenant > 0 {
            self.keep(before, crate::select::clock::now_ms());
        }
        let now_ms = crate::select::clock::now_ms();
        // The read just taken reached as far as a late one, if one was due.
        if self.late_due(now_ms).is_some() {
            self.late_read_ms = Some(now_ms);
        }
        self.read_at = Some(now);
        self.read_at_ms = Some(now_ms);
        self.served = 0;
        self.reads += 1;
    }

    /// Drops `ids` from the heads: another way (the adaptive order's
    /// deadline lane) claimed them, and a take must not claim them again.
    pub fn forget(&mut self, ids: &HashSet<String>) {
        if ids.is_empty() {
            return;
        }
        for h in &mut self.heads {
            h.items.retain(|c| !ids.contains(&c.task_id));
        }
    }

    /// Puts candidates taken and not claimed back into their shards'
    /// heads, each in its place in the order (the rate limit's bucket ran
    /// dry): one kept past a cut-short read's end would not be read again.
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

    /// Every candidate in the heads, in the claim order across the shards
    /// (a cut-short shard's unread tasks aside).
    pub fn in_order(&self) -> Vec<&Candidate> {
        let mut all: Vec<&Candidate> = self.heads.iter().flat_map(|h| &h.items).collect();
        all.sort_by(
            |a, b| match (before(self.order, a, b), before(self.order, b, a)) {
                (true, _) => std::cmp::Ordering::Less,
                (_, true) => std::cmp::Ordering::Greater,
                _ => std::cmp::Ordering::Equal,
            },
        );
        all
    }

    /// Up to `want` candidates in order, skipping those in `exclude`. Stops
    /// early where a cut-short shard is used up: its unread tasks could come
    /// first.
    pub fn take(&mut self, want: usize, exclude: &HashSet<String>) -> Vec<Candidate> {
        self.take_by(want, exclude, |_| true)
    }

    /// The index key of the first candidate in the claim order (none in
    /// `exclude`), if any waits in the heads.
    pub fn first_key(&self, exclude: &HashSet<String>) -> Option<i64> {
        self.heads
            .iter()
            .filter_map(|h| h.items.iter().find(|c| !exclude.contains(&c.task_id)))
            .reduce(|a, b| if before(self.order, b, a) { b } else { a })
            .map(|c| c.claimable_at)
    }

    /// [`ShardHeads::take`] of the candidates `admit` accepts, in order.
    /// Those it refuses stay in their heads, in place, for a later take
    /// (the fair share passes over a tenant at its share this way); a
    /// cut-short shard whose head holds only refused ones blocks the merge
    /// as an empty one does.
    pub fn take_by(
        &mut self,
        want: usize,
        exclude: &HashSet<String>,
        mut admit: impl FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        let mut held: Vec<Vec<Candidate>> = vec![Vec::new(); self.heads.len()];
        let out = self.merge(want, exclude, &mut admit, &mut held);
        for (head, back) in self.heads.iter_mut().zip(held) {
            for c in back.into_iter().rev() {
                head.items.push_front(c);
            }
        }
        out
    }

    fn merge(
        &mut self,
        want: usize,
        exclude: &HashSet<String>,
        admit: &mut impl FnMut(&Candidate) -> bool,
        held: &mut [Vec<Candidate>],
    ) -> Vec<Candidate> {
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            // A cut-short shard with nothing left blocks the merge.
            if self.heads.iter().any(|h| !h.complete && h.items.is_empty()) {
                break;
            }
            let mut best: Option<usize> = None;
            for (i, h) in self.heads.iter().enumerate() {
                if let Some(c) = h.items.front() {
                    let better = match best {
                        None => true,
                        Some(b) => self.heads[b]
                            .items
                            .front()
                            .is_none_or(|bc| before(self.order, c, bc)),
                    };
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
        out
    }
}

/// A PENDING candidate `id` of shard 0 at index key `at`, for the tests of
/// the heads and their submodules.
#[cfg(test)]
fn c(id: &str, at: i64) -> Candidate {
    Candidate::pending(id, 0, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn the_policy_reads_all_shards_once_per_two_claims_per_shard_less_one() {
        let p = HeadsPolicy::new(32, 3);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 63, 8));
        // One shard: read again after one claim once 100 ms old, however
        // many slots (a small queue under overload stays fresh).
        let p = HeadsPolicy::new(1, 32);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 1, 40));
        let p = HeadsPolicy::new(1, 5);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (10, 1, 12));
        let p = HeadsPolicy::new(8, 32);
        assert_eq!((p.refresh_claims, p.min_claims, p.page), (64, 15, 10));
    }

    #[test]
    fn candidates_put_back_come_out_again_in_their_place() {
        let mut h = ShardHeads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        let one = |id: &str, at: i64| Candidate {
            lifo_shard: 1,
            ..c(id, at)
        };
        h.replace(
            vec![
                (vec![c("a9", 9), c("a5", 5), c("a1", 1)], false),
                (vec![one("b7", 7), one("b3", 3)], true),
            ],
            Instant::now(),
        );
        let none = HashSet::new();
        let taken = h.take(3, &none);
        let ids = |v: &[Candidate]| v.iter().map(|c| c.task_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&taken), ["a9", "b7", "a5"]);
        // Two of them could not start: back in place, a cut-short shard's
        // last one included.
        h.put_back(taken.into_iter().skip(1).collect());
        let mut again = h.clone();
        assert_eq!(ids(&again.take(4, &none)), ["b7", "a5", "b3", "a1"]);
        // Claimed another way: gone from the heads.
        h.forget(&["a5".to_owned(), "b3".to_owned()].into());
        assert_eq!(ids(&h.take(4, &none)), ["b7", "a1"]);
    }

    #[test]
    fn a_cut_short_shard_blocks_the_merge_when_used_up() {
        let mut h = ShardHeads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        let now = Instant::now();
        // Shard 0 read in full; shard 1 cut short after 8 and 6.
        h.replace(
            vec![
                (vec![c("a9", 9), c("a7", 7), c("a1", 1)], true),
                (vec![c("b8", 8), c("b6", 6)], false),
            ],
            now,
        );
        let none = HashSet::new();
        let got: Vec<String> = h.take(10, &none).into_iter().map(|c| c.task_id).collect();
        // After b6, shard 1's unread tasks (older than 6, maybe newer than
        // 1) could come before a1: stop there.
        assert_eq!(got, ["a9", "b8", "a7", "b6"]);
        assert!(h.needs_read(1, &none, now));
        // Only shard 1 is read again; shard 0 keeps its head.
        assert_eq!(h.to_read(1, &none, now), Read::Some(vec![1]));
        h.replace_some(&[1], vec![(vec![c("b5", 5), c("b0", 0)], true)]);
        let got: Vec<String> = h.take(10, &none).into_iter().map(|c| c.task_id).collect();
        assert_eq!(got, ["b5", "a1", "b0"]);
        assert_eq!((h.reads(), h.partial_reads()), (1, 1));
        // Every head complete and spent: all are read (new work anywhere).
        assert_eq!(h.to_read(1, &none, now), Read::All);

        // One shard cut short and used up: that is every shard, a full
        // read (which restarts the heads' age and count).
        let mut one = ShardHeads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 8));
        one.replace(vec![(vec![c("a9", 9)], false)], now);
        assert_eq!(one.take(1, &none).len(), 1);
        assert_eq!(one.to_read(1, &none, now), Read::All);
    }

    #[test]
    fn heads_are_read_again_after_serving_a_refill_or_a_second() {
        let policy = HeadsPolicy {
            page: 8,
            refresh_claims: 3,
            min_claims: 2,
            min_age: Duration::from_millis(100),
            max_age: Duration::from_secs(1),
            keep_per_tenant: 0,
            reach_back: None,
            late_reach: None,
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0], policy);
        let t0 = Instant::now();
        let none = HashSet::new();
        assert!(h.needs_read(1, &none, t0), "never read");
        h.replace(
            vec![(
                (1..=8).rev().map(|i| c(&format!("t{i}"), i)).collect(),
                true,
            )],
            t0,
        );
        assert!(!h.needs_read(2, &none, t0));
        assert_eq!(h.take(2, &none).len(), 2);
        assert!(!h.needs_read(1, &none, t0), "two served, but fresh");
        assert!(
            h.needs_read(1, &none, t0 + Duration::from_millis(100)),
            "two served and 100 ms old"
        );
        assert_eq!(h.take(1, &none).len(), 1);
        assert!(h.needs_read(1, &none, t0), "served a refill's worth");
        h.replace(vec![(vec![c("t9", 9)], true)], t0);
        assert!(
            h.needs_read(1, &none, t0 + Duration::from_secs(1)),
            "a second old"
        );
        assert!(h.needs_read(2, &none, t0), "cannot supply two");
        let skip = HashSet::from(["t9".to_owned()]);
        assert!(h.take(1, &skip).is_empty(), "excluded ids are not given");
    }

    #[test]
    fn refused_candidates_stay_in_place_for_a_later_take() {
        let mut h = ShardHeads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        let now = Instant::now();
        let t = |id: &str, at: i64, tenant: &str| Candidate {
            tenant: Some(tenant.into()),
            ..c(id, at)
        };
        h.replace(
            vec![
                (
                    vec![t("a9", 9, "a"), t("a7", 7, "a"), t("b3", 3, "b")],
                    true,
                ),
                (vec![t("a8", 8, "a"), t("b6", 6, "b")], true),
            ],
            now,
        );
        let none = HashSet::new();
        let head = |first, waiting, oldest_ms| TenantHead {
            first,
            waiting,
            oldest_ms,
        };
        assert_eq!(
            h.tenant_heads(&none),
            HashMap::from([
                ("a".to_owned(), head(9, 3, 7)),
                ("b".to_owned(), head(6, 2, 3))
            ]),
            "each tenant's first candidate in the claim order, its count, its oldest"
        );
        let past_a9 = HashSet::from(["a9".to_owned()]);
        assert_eq!(h.tenant_heads(&past_a9).get("a"), Some(&head(8, 2, 7)));
        assert_eq!(h.tenant_first("a", &past_a9), Some(8));
        assert_eq!(h.tenant_first("b", &none), Some(6));
        assert_eq!(h.tenant_first("c", &none), None);
        // Its last of its first's priority: its oldest, in LIFO order.
        let last = |tenant| h.tenant_last(tenant, &none).map(|c| c.task_id.as_str());
        assert_eq!(last("a"), Some("a7"));
        assert_eq!(last("c"), None);
        let only_b: Vec<String> = h
            .take_by(2, &none, |c| c.tenant.as_deref() == Some("b"))
            .into_iter()
            .map(|c| c.task_id)
            .collect();
        assert_eq!(only_b, ["b6", "b3"], "newest first within the tenant");
        let rest: Vec<String> = h.take(10, &none).into_iter().map(|c| c.task_id).collect();
        assert_eq!(rest, ["a9", "a8", "a7"], "the refused ones, in order");
    }

    proptest! {
        /// Whatever the shards hold and wherever reads cut them short,
        /// what comes out is exactly the global order of the tasks read,
        /// and never passes a task a cut-short shard has not shown yet.
        #[test]
        fn take_is_the_global_order_of_what_was_read(
            shards in proptest::collection::vec(proptest::collection::vec(0i64..1000, 0..20), 1..6),
            page in 1usize..10,
            want in 0usize..60,
            fifo in any::<bool>(),
        ) {
            let order = if fifo { Order::Fifo } else { Order::Lifo };
            let mut n = 0;
            let full: Vec<Vec<Candidate>> = shards.iter().map(|ats| {
                let mut list: Vec<Candidate> = ats.iter().map(|at| { n += 1; c(&format!("{n:04}"), *at) }).collect();
                list.sort_by(|a, b| if before(order, a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
                list
            }).collect();
            let read: Vec<(Vec<Candidate>, bool)> = full.iter()
                .map(|l| (l.iter().take(page).cloned().collect(), l.len() <= page))
                .collect();
            let mut h = ShardHeads::new(order, (0..full.len() as u32).collect(), HeadsPolicy::new(full.len(), 1));
            h.replace(read, Instant::now());
            let got = h.take(want, &HashSet::new());
            // The global order of everything, truncated: what came out is
            // its prefix (nothing unread was passed over).
            let mut all: Vec<Candidate> = full.iter().flatten().cloned().collect();
            all.sort_by(|a, b| if before(order, a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
            prop_assert!(got.len() <= want);
            prop_assert_eq!(&all[..got.len()], &got[..]);
        }
    }
}
