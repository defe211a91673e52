//! How far back the fair share's reads reach: to the read before, less a
//! margin that grows with how late tasks have lately shown up in the index,
//! and once a while further ([`LateReach`]). A task is stamped before its
//! write shows in the index (a create request's tasks share the time it
//! began); one that shows up later than the margin sorts under what the
//! read before passed.

use lifo_core::Candidate;
use lifo_core::priority::at_ms;
use std::collections::HashMap;
use std::time::Duration;

/// Once every `every`, a read reaches back `reach` from its own time: it
/// sees a task that showed up within `reach − every` of its stamp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LateReach {
    pub every: Duration,
    pub reach: Duration,
}

/// How long a task found late keeps the margin wide.
pub const LATE_WINDOW: Duration = Duration::from_secs(10);

/// What the lateness adds to the margin at most: past it, the
/// [`LateReach`] finds what shows up late.
pub const MAX_MARGIN: Duration = Duration::from_secs(1);

/// The reads' reach and what they learnt of how late tasks show up.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// How far before the read before each read reaches, at least.
    margin: Duration,
    late: LateReach,
    /// When the last read reaching back [`LateReach::reach`] was taken in.
    late_read_ms: Option<u64>,
    /// The tasks the reads showed lately: id → the time in its key.
    recent: HashMap<String, u64>,
    /// What the last full read covered of each shard, from its reach, or
    /// where a cut-short head ended, to its own time (epoch ms).
    covered: Vec<Option<(u64, u64)>>,
    /// Tasks found late: when, and at least how late (ms).
    found: Vec<(u64, u64)>,
    /// [`LATE_WINDOW`] and [`MAX_MARGIN`], unless tuned.
    late_window: Duration,
    max_margin: Duration,
}

impl Reach {
    pub fn new(margin: Duration, late: LateReach) -> Self {
        Self {
            margin,
            late,
            late_window: LATE_WINDOW,
            max_margin: MAX_MARGIN,
            ..Self::default()
        }
    }

    /// The same with `late_window` for [`LATE_WINDOW`] and `max_margin`
    /// for [`MAX_MARGIN`].
    pub fn with_limits(self, late_window: Duration, max_margin: Duration) -> Self {
        Self {
            late_window,
            max_margin,
            ..self
        }
    }

    /// The time (epoch ms) a read at `now` must reach back to, given the
    /// last full read's (`read_at`): that read's time less the margin, or
    /// further when a [`LateReach`] is due; `None` before any read.
    pub fn since(&self, read_at: Option<u64>, now: u64) -> Option<u64> {
        let margin = self.margin.as_millis() as u64 + self.late_by(now);
        let since = read_at?.saturating_sub(margin);
        Some(match self.late_due(now) {
            true => since.min(now.saturating_sub(self.late.reach.as_millis() as u64)),
            false => since,
        })
    }

    /// How late, at most, a task found in the [`LATE_WINDOW`] before `now`
    /// showed up (ms, at most [`MAX_MARGIN`]).
    pub fn late_by(&self, now: u64) -> u64 {
        let window = self.late_window.as_millis() as u64;
        let found = self.found.iter();
        let most = found
            .filter(|(at, _)| now.saturating_sub(*at) < window)
            .map(|(_, by)| *by)
            .max()
            .unwrap_or(0);
        most.min(self.max_margin.as_millis() as u64)
    }

    /// Whether a read at `now` must reach [`LateReach::reach`] back.
    fn late_due(&self, now: u64) -> bool {
        let every = self.late.every.as_millis() as u64;
        self.late_read_ms
            .is_none_or(|at| now.saturating_sub(at) >= every)
    }

    /// Before a full read taken in at `now` replaces the one of `read_at`:
    /// a new task of `read` stamped within what that read covered of its
    /// shard showed up at least that read's time less its stamp late (one
    /// claimed before re-enters under its first stamp: not counted).
    pub fn learn(&mut self, read: &[(Vec<Candidate>, bool)], read_at: Option<u64>, now: u64) {
        let since = self.since(read_at, now);
        let window = self.late_window.as_millis() as u64;
        self.found
            .retain(|(at, _)| now.saturating_sub(*at) < window);
        let fresh = |c: &&Candidate| c.attempts == 0 && c.lease_until.is_none();
        for (i, (items, _)) in read.iter().enumerate() {
            let Some((from, to)) = self.covered.get(i).copied().flatten() else {
                continue;
            };
            for c in items.iter().filter(fresh) {
                let at = at_ms(c.claimable_at);
                if (from..to).contains(&at) && !self.recent.contains_key(&c.task_id) {
                    self.found.push((now, to - at));
                }
            }
        }
        self.covered = read
            .iter()
            .map(|(items, complete)| {
                let since = since?;
                let end = match items.last() {
                    Some(c) if !complete => at_ms(c.claimable_at).max(since),
                    _ => since,
                };
                Some((end, now))
            })
            .collect();
        self.remember(read.iter().flat_map(|(items, _)| items), now);
    }

    /// After a full read taken in at `now`: it reached as far as a late
    /// one, if one was due.
    pub fn read_taken(&mut self, now: u64) {
        if self.late_due(now) {
            self.late_read_ms = Some(now);
        }
    }

    /// Remembers `seen` as shown at `now` (handed over, or a partial read),
    /// forgetting what no read can find late any more.
    pub fn remember<'a>(&mut self, seen: impl Iterator<Item = &'a Candidate>, now: u64) {
        let keep = self.late.reach.saturating_add(self.max_margin);
        let keep_from = now.saturating_sub(keep.as_millis() as u64);
        self.recent.retain(|_, at| *at >= keep_from);
        for c in seen {
            self.recent.insert(c.task_id.clone(), at_ms(c.claimable_at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::heads::c;

    const NOW: u64 = 1_800_000_000_000;
    const LATE: LateReach = LateReach {
        every: Duration::from_secs(1),
        reach: Duration::from_secs(2),
    };

    fn reach() -> Reach {
        Reach::new(Duration::from_millis(200), LATE)
    }

    #[test]
    fn a_read_goes_back_to_the_last_one_less_the_margin_and_now_and_then_further() {
        let mut r = reach();
        assert_eq!(r.since(None, NOW), None, "never read: a page is a read");
        // The first read counts as a late one.
        r.read_taken(NOW);
        assert_eq!(r.since(Some(NOW), NOW + 500), Some(NOW - 200));
        assert_eq!(r.since(Some(NOW), NOW + 1_000), Some(NOW + 1_000 - 2_000));
        // Reads further apart than that reach back to the one before.
        assert_eq!(r.since(Some(NOW), NOW + 5_000), Some(NOW - 200));
        r.read_taken(NOW + 1_000);
        assert_eq!(r.since(Some(NOW + 1_000), NOW + 1_999), Some(NOW + 800));
    }

    #[test]
    fn a_task_that_showed_up_late_widens_the_margin_for_a_while() {
        let mut r = reach();
        let a = c("a", NOW as i64 - 50);
        // Reads at NOW and NOW + 100: the second covers NOW - 200 to NOW + 100.
        r.learn(&[(vec![a.clone()], true)], None, NOW);
        r.read_taken(NOW);
        r.learn(&[(vec![a.clone()], true)], Some(NOW), NOW + 100);
        r.read_taken(NOW + 100);
        assert_eq!(r.late_by(NOW + 100), 0);
        // The third shows b, stamped 150 ms before the second: at least
        // 150 ms late. A retried task and one shown before are not late.
        let b = c("b", NOW as i64 - 50);
        let retried = Candidate {
            attempts: 1,
            ..c("r", NOW as i64)
        };
        r.learn(
            &[(vec![a.clone(), b.clone(), retried], true)],
            Some(NOW + 100),
            NOW + 200,
        );
        assert_eq!(r.late_by(NOW + 200), 150);
        assert_eq!(
            r.since(Some(NOW + 200), NOW + 300),
            Some(NOW + 200 - 200 - 150)
        );
        r.learn(&[(vec![a, b], true)], Some(NOW + 200), NOW + 300);
        assert_eq!(r.late_by(NOW + 300), 150, "b counted once");
        let window = LATE_WINDOW.as_millis() as u64;
        assert_eq!(r.late_by(NOW + 200 + window - 1), 150);
        assert_eq!(r.late_by(NOW + 200 + window), 0);
        r.found.push((NOW, 5_000));
        assert_eq!(r.late_by(NOW), MAX_MARGIN.as_millis() as u64);
    }

    #[test]
    fn a_cut_short_head_covers_only_down_to_its_last_entry() {
        let mut r = reach();
        r.learn(&[(vec![c("a", NOW as i64 - 50)], true)], None, NOW);
        r.read_taken(NOW);
        // Cut short at NOW + 80: what lies under it was never read.
        let end = NOW as i64 + 80;
        r.learn(&[(vec![c("e", end)], false)], Some(NOW), NOW + 100);
        r.learn(
            &[(vec![c("under", end - 30)], true)],
            Some(NOW + 100),
            NOW + 200,
        );
        assert_eq!(r.late_by(NOW + 200), 0);
    }
}
