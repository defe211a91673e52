//! How far back a read reaches: to the read before, less a margin
//! ([`super::HeadsPolicy::reach_back`]) that grows to cover how late tasks
//! have lately shown up in the index ([`LATE_WINDOW`]), and once a while
//! further ([`LateReach`]), so that what arrived between two reads, or
//! showed up in the index late, is seen under newer tasks.

use super::ShardHeads;
use lifo_core::Candidate;
use lifo_core::priority::at_ms;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Once every `every`, a read reaches back `reach` from its own time (if
/// that is further than [`super::HeadsPolicy::reach_back`] takes it). A task is
/// stamped (`claimableAt`) before its write is visible in the index: a
/// create request's tasks all share the time it began, and are written
/// chunk after chunk; an index propagates after its table. One that shows
/// up later than the reach back's margin after its stamp sorts under what
/// the read before already passed, and the reads after it stop above it;
/// such a read sees it if it showed up within `reach − every` of its
/// stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateReach {
    pub every: Duration,
    pub reach: Duration,
}

/// How long a task found late keeps the reach back's margin wide: the
/// margin is the policy's plus the most a task found in this window was
/// late by ([`ShardHeads::since_at`]).
pub const LATE_WINDOW: Duration = Duration::from_secs(10);

/// What the margin grows to at most: past it, the [`LateReach`] finds what
/// shows up late.
pub const MAX_MARGIN: Duration = Duration::from_secs(1);

/// What the heads learn of how late tasks show up in the index.
#[derive(Debug, Clone, Default)]
pub(super) struct Lateness {
    /// The tasks the reads have shown lately: id → the time in its key
    /// (epoch ms). Shared by the clones a refill decides on.
    recent: Arc<HashMap<String, u64>>,
    /// What the last full read covered of each shard (in the order of
    /// [`ShardHeads::shards`]), from its reach back, or where a cut-short
    /// head ended, to its own time (epoch ms).
    covered: Vec<Option<(u64, u64)>>,
    /// Tasks found late: when, and at least how late (ms).
    found: Vec<(u64, u64)>,
}

impl ShardHeads {
    /// With [`super::HeadsPolicy::reach_back`]: the time (epoch ms) the next read
    /// must reach back to, the last full read's less the margin, or
    /// further when a [`LateReach`] is due; `None`: a page is a read (no
    /// margin set, or never read).
    pub fn since_ms(&self) -> Option<u64> {
        self.since_at(crate::select::clock::now_ms())
    }

    /// [`ShardHeads::since_ms`] for a read at `now_ms` (epoch ms).
    pub fn since_at(&self, now_ms: u64) -> Option<u64> {
        let margin = self.policy.reach_back?.as_millis() as u64 + self.late_by(now_ms);
        let since = self.read_at_ms?.saturating_sub(margin);
        Some(match self.late_due(now_ms) {
            Some(reach) => since.min(now_ms.saturating_sub(reach.as_millis() as u64)),
            None => since,
        })
    }

    /// How late, at most, a task found in the [`LATE_WINDOW`] before
    /// `now_ms` showed up (ms, at most [`MAX_MARGIN`]): what the reach
    /// back's margin adds.
    pub fn late_by(&self, now_ms: u64) -> u64 {
        let window = LATE_WINDOW.as_millis() as u64;
        let most = self.lateness.found.iter();
        let most = most
            .filter(|(at, _)| now_ms.saturating_sub(*at) < window)
            .map(|(_, by)| *by)
            .max()
            .unwrap_or(0);
        most.min(MAX_MARGIN.as_millis() as u64)
    }

    /// How far back a read at `now_ms` must reach when its [`LateReach`] is
    /// due.
    pub(super) fn late_due(&self, now_ms: u64) -> Option<Duration> {
        let late = self
            .policy
            .late_reach
            .filter(|_| self.policy.reach_back.is_some())?;
        let due = self
            .late_read_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= late.every.as_millis() as u64);
        due.then_some(late.reach)
    }

    /// With a [`LateReach`], before a full read at `now_ms` is taken in:
    /// each first-time task of `read` stamped within the range the read
    /// before covered of its shard was not in the index then: it showed up
    /// at least that read's time less its stamp late. A task claimed
    /// before (`attempts`, a lease) re-enters the index under its first
    /// stamp, and is not counted.
    pub(super) fn learn_late(&mut self, read: &[(Vec<Candidate>, bool)], now_ms: u64) {
        if self.policy.late_reach.is_none() || self.policy.reach_back.is_none() {
            return;
        }
        let since = self.since_at(now_ms);
        let window = LATE_WINDOW.as_millis() as u64;
        let l = &mut self.lateness;
        l.found
            .retain(|(at, _)| now_ms.saturating_sub(*at) < window);
        let fresh = |c: &&Candidate| c.attempts == 0 && c.lease_until.is_none();
        for (i, (items, _)) in read.iter().enumerate() {
            let Some((from, to)) = l.covered.get(i).copied().flatten() else {
                continue;
            };
            for c in items.iter().filter(fresh) {
                let at = at_ms(c.claimable_at);
                if (from..to).contains(&at) && !l.recent.contains_key(&c.task_id) {
                    l.found.push((now_ms, to - at));
                }
            }
        }
        l.covered = read
            .iter()
            .map(|(items, complete)| {
                let since = since?;
                let end = match items.last() {
                    Some(c) if !complete => at_ms(c.claimable_at).max(since),
                    _ => since,
                };
                Some((end, now_ms))
            })
            .collect();
        self.remember(read.iter().flat_map(|(items, _)| items), now_ms);
    }

    /// Remembers `seen` as shown (seeded, or a partial read), forgetting
    /// what no read can find late any more: stamped before the furthest a
    /// read reaches back.
    pub(super) fn remember<'a>(&mut self, seen: impl Iterator<Item = &'a Candidate>, now_ms: u64) {
        let Some(late) = self.policy.late_reach else {
            return;
        };
        let keep_from = now_ms.saturating_sub((late.reach + MAX_MARGIN).as_millis() as u64);
        let recent = Arc::make_mut(&mut self.lateness.recent);
        recent.retain(|_, at| *at >= keep_from);
        for c in seen {
            recent.insert(c.task_id.clone(), at_ms(c.claimable_at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::heads::{HeadsPolicy, c};
    use lifo_core::{Candidate, Order};
    use std::time::Instant;

    #[test]
    fn with_a_reach_back_the_next_read_goes_back_to_the_last_one_less_the_margin() {
        let none = HeadsPolicy::new(1, 5);
        let policy = HeadsPolicy {
            reach_back: Some(Duration::from_millis(200)),
            ..none
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0], policy);
        // Never read: the first read is a page (deeper with the share).
        assert_eq!(h.since_ms(), None);
        let before = lifo_core::now_ms();
        h.replace(vec![(vec![c("a9", 9)], false)], Instant::now());
        let after = lifo_core::now_ms();
        let since = h.since_ms().unwrap();
        assert!((before - 200..=after - 200).contains(&since), "{since}");
        // Without the margin set, a page is a read.
        let mut h = ShardHeads::new(Order::Lifo, vec![0], none);
        h.replace(vec![(vec![c("a9", 9)], false)], Instant::now());
        assert_eq!(h.since_ms(), None);
    }

    #[test]
    fn once_a_while_a_read_reaches_further_back_for_tasks_that_showed_up_late() {
        let late = LateReach {
            every: Duration::from_secs(1),
            reach: Duration::from_secs(2),
        };
        let policy = HeadsPolicy {
            reach_back: Some(Duration::from_millis(200)),
            late_reach: Some(late),
            ..HeadsPolicy::new(1, 5)
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0], policy);
        let at = lifo_core::now_ms();
        h.replace(vec![(vec![c("a9", 9)], false)], Instant::now());
        let read_at = h.read_at_ms.unwrap();
        // The first read counts as one (it is deeper anyway): within a
        // second of it, back to the read before less 200 ms.
        assert_eq!(h.since_at(read_at + 500), Some(read_at - 200));
        // A second after it, two seconds back.
        assert_eq!(h.since_at(read_at + 1_000), Some(read_at + 1_000 - 2_000));
        // Reads further apart than that reach back to the one before.
        assert_eq!(h.since_at(read_at + 5_000), Some(read_at - 200));
        // A read taken then was the late one: the next is a second later.
        h.late_read_ms = Some(at - 1_000);
        h.replace(vec![(vec![c("a9", 9)], false)], Instant::now());
        let second = h.read_at_ms.unwrap();
        assert_eq!(h.late_read_ms, Some(second));
        assert_eq!(h.since_at(second + 999), Some(second - 200));
        // Without a reach back, none.
        let mut plain = ShardHeads::new(
            Order::Lifo,
            vec![0],
            HeadsPolicy {
                late_reach: Some(late),
                ..HeadsPolicy::new(1, 5)
            },
        );
        plain.replace(vec![(vec![c("a9", 9)], false)], Instant::now());
        assert_eq!(plain.since_at(read_at + 1_000), None);
    }

    /// One shard's heads with the share's reach back and late reach.
    fn learning() -> ShardHeads {
        let policy = HeadsPolicy {
            reach_back: Some(Duration::from_millis(200)),
            late_reach: Some(LateReach {
                every: Duration::from_secs(1),
                reach: Duration::from_secs(2),
            }),
            ..HeadsPolicy::new(1, 5)
        };
        ShardHeads::new(Order::Lifo, vec![0], policy)
    }

    #[test]
    fn a_task_that_showed_up_late_widens_the_margin_for_a_while() {
        let mut h = learning();
        let t0 = lifo_core::now_ms() as i64;
        let a = c("a", t0 - 50);
        // The first read covers nothing before it; the second, from the
        // first's time less 200 ms to its own.
        h.replace(vec![(vec![a.clone()], true)], Instant::now());
        h.replace(vec![(vec![a.clone()], true)], Instant::now());
        let second = h.read_at_ms.unwrap();
        assert_eq!(h.late_by(second), 0);
        // The third shows b, stamped 150 ms before the second, which did
        // not show it: b was at least 150 ms late. A retried task under an
        // old stamp and one shown before are not late.
        let b = c("b", second as i64 - 150);
        let retried = Candidate {
            attempts: 1,
            ..c("r", second as i64 - 100)
        };
        h.replace(
            vec![(vec![a.clone(), b.clone(), retried], true)],
            Instant::now(),
        );
        let third = h.read_at_ms.unwrap();
        assert_eq!(h.late_by(third), 150);
        assert_eq!(h.since_at(third + 100), Some(third - 200 - 150));
        h.replace(vec![(vec![a, b], true)], Instant::now());
        assert_eq!(h.late_by(third), 150, "b counted once");
        // For LATE_WINDOW, then the margin is the policy's again.
        let window = LATE_WINDOW.as_millis() as u64;
        assert_eq!(h.late_by(third + window - 1), 150);
        assert_eq!(h.late_by(third + window), 0);
        // At most MAX_MARGIN: past it, the late reach finds what is late.
        h.lateness.found.push((third, 5_000));
        assert_eq!(h.late_by(third), MAX_MARGIN.as_millis() as u64);
    }

    #[test]
    fn a_cut_short_head_covers_only_down_to_its_last_entry() {
        let mut h = learning();
        let t0 = lifo_core::now_ms() as i64;
        h.replace(vec![(vec![c("a", t0 - 50)], true)], Instant::now());
        // Cut short at 20 ms before now (a read that stopped at its pages):
        // what lies under that end was never read, not late.
        let end = lifo_core::now_ms() as i64 - 20;
        h.replace(vec![(vec![c("e", end)], false)], Instant::now());
        let second = h.read_at_ms.unwrap();
        h.replace(vec![(vec![c("under", end - 30)], true)], Instant::now());
        assert_eq!(h.late_by(second), 0);
    }
}
