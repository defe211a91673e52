//! Priorities as a layer: `high`, `normal` and `low` are bands of the
//! index key (`lifo_core::priority`), so every order's merge already
//! drains them in turn. What this layer adds is the rule for the layers
//! above it that start a candidate out of the order (the deadline lane):
//! never one of a lower priority than the first candidate waiting.

use super::heads::Heads;
use super::{Ask, Event, Ids, Read, Select};
use lifo_core::Candidate;
use lifo_core::priority::Priority;

pub struct Priorities {
    inner: Box<dyn Select>,
}

impl Priorities {
    pub fn new(inner: Box<dyn Select>) -> Self {
        Self { inner }
    }
}

/// Whether `c` is of a priority at least that of the index key `first`
/// (none: any).
pub fn at_least(first: Option<i64>, c: &Candidate) -> bool {
    first.is_none_or(|f| Priority::of_key(c.claimable_at).shift() >= Priority::of_key(f).shift())
}

impl Select for Priorities {
    fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read> {
        self.inner.next_read(ask, now)
    }

    fn pick(
        &mut self,
        ask: &Ask<'_>,
        admit: &mut dyn FnMut(&Candidate) -> bool,
        now: u64,
    ) -> Vec<Candidate> {
        self.inner.pick(ask, admit, now)
    }

    fn tell(&mut self, event: Event<'_>, now: u64) {
        self.inner.tell(event, now)
    }

    fn allows(&self, exclude: &Ids) -> Box<dyn Fn(&Candidate) -> bool + '_> {
        let first = self.inner.heads().first_key(exclude);
        let inner = self.inner.allows(exclude);
        Box::new(move |c| at_least(first, c) && inner(c))
    }

    fn heads(&self) -> &Heads {
        self.inner.heads()
    }

    fn heads_mut(&mut self) -> &mut Heads {
        self.inner.heads_mut()
    }

    fn hand_over(&mut self, exclude: &Ids, now: u64, out: &mut super::Handover) {
        self.inner.hand_over(exclude, now, out)
    }

    fn tally(&self, out: &mut super::Tally) {
        self.inner.tally(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::heads::HeadsPolicy;
    use super::*;

    #[test]
    fn an_out_of_order_start_never_passes_a_higher_priority_waiting() {
        let high = Candidate::pending("h", 0, Priority::High.key(1_000));
        let normal = Candidate::pending("n", 0, Priority::Normal.key(5_000));
        let low = Candidate::pending("l", 0, Priority::Low.key(9_000));
        let mut p = Priorities::new(Box::new(Heads::lifo(vec![0], HeadsPolicy::new(1, 1))));
        p.heads_mut()
            .replace(vec![(vec![high.clone(), normal.clone()], true)], 0);
        let none = Ids::new();
        let allows = p.allows(&none);
        assert!(allows(&high) && !allows(&normal) && !allows(&low));
        // With the high one running, normal is the first waiting.
        let running = Ids::from(["h".to_owned()]);
        let allows = p.allows(&running);
        assert!(allows(&high) && allows(&normal) && !allows(&low));
        // Nothing waiting: anything.
        let empty = Priorities::new(Box::new(Heads::lifo(vec![0], HeadsPolicy::new(1, 1))));
        assert!(empty.allows(&none)(&low));
    }
}
