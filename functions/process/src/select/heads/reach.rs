//! How far back a read reaches: to the read before, less a margin
//! ([`super::HeadsPolicy::reach_back`]), and once a while further
//! ([`LateReach`]), so that what arrived between two reads, or showed up
//! in the index late, is seen under newer tasks.

use super::ShardHeads;
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

impl ShardHeads {
    /// With [`super::HeadsPolicy::reach_back`]: the time (epoch ms) the next read
    /// must reach back to, the last full read's less the margin, or
    /// further when a [`LateReach`] is due; `None`: a page is a read (no
    /// margin set, or never read).
    pub fn since_ms(&self) -> Option<u64> {
        self.since_at(lifo_core::now_ms())
    }

    /// [`ShardHeads::since_ms`] for a read at `now_ms` (epoch ms).
    pub fn since_at(&self, now_ms: u64) -> Option<u64> {
        let margin = self.policy.reach_back?;
        let since = self.read_at_ms?.saturating_sub(margin.as_millis() as u64);
        Some(match self.late_due(now_ms) {
            Some(reach) => since.min(now_ms.saturating_sub(reach.as_millis() as u64)),
            None => since,
        })
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::heads::HeadsPolicy;
    use lifo_core::{Candidate, Order};
    use std::time::Instant;

    fn c(id: &str, at: i64) -> Candidate {
        Candidate::pending(id, 0, at)
    }

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
}
