//! The deadline lane around an inner selection: it reads oldest first
//! when its books want it, gives the slots its backlog needs, and leaves
//! the others to the inner selection.

use super::Deadlines;
use crate::select::heads::Heads;
use crate::select::{Ask, Event, Handover, Ids, Purpose, Read, Select, Tally, Tuning};
use lifo_core::{Candidate, Order};

/// The lane's own reads.
const OLDEST: Purpose = Purpose::Layer("deadline lane");

pub struct DeadlineLane {
    inner: Box<dyn Select>,
    lane: Deadlines,
    /// This refill has asked for its oldest-first read, or decided not to.
    asked: bool,
    /// Entries per shard of an oldest-first read (0: none).
    page: usize,
}

impl DeadlineLane {
    /// The lane for `slots` slots and at most `per_second` starts a second.
    pub fn new(inner: Box<dyn Select>, slots: usize, per_second: Option<u32>) -> Self {
        Self {
            inner,
            lane: Deadlines::new(slots, per_second),
            asked: false,
            page: super::OLDEST_READ_PAGE,
        }
    }

    /// The same with `tuning`'s constants.
    pub fn with_tuning(self, tuning: Tuning) -> Self {
        Self {
            lane: self.lane.with_tuning(tuning),
            page: tuning.oldest_read_page,
            ..self
        }
    }
}

impl Select for DeadlineLane {
    /// The inner selection's reads; then, once a refill, an oldest-first
    /// read of the cut-short shards if the books want one.
    fn next_read(&mut self, ask: &Ask<'_>, now: u64) -> Option<Read> {
        if let Some(read) = self.inner.next_read(ask, now) {
            return Some(read);
        }
        if std::mem::replace(&mut self.asked, true) {
            return None;
        }
        let heads = self.inner.heads();
        if !self.lane.wants_oldest(heads.reads() == 1, now) {
            return None;
        }
        let shards = heads.cut_short();
        (!shards.is_empty() && self.page > 0).then_some(Read {
            order: Order::Fifo,
            shards,
            page: self.page,
            since_ms: None,
            purpose: OLDEST,
        })
    }

    fn pick(
        &mut self,
        ask: &Ask<'_>,
        admit: &mut dyn FnMut(&Candidate) -> bool,
        now: u64,
    ) -> Vec<Candidate> {
        self.asked = false;
        let mut out = {
            let allows = self.inner.allows(ask.exclude);
            self.lane
                .take(ask.want, ask.exclude, now, |c| admit(c) && allows(c))
        };
        let given: Ids = out.iter().map(|c| c.task_id.clone()).collect();
        self.inner.heads_mut().forget(&given);
        if out.len() == ask.want {
            return out;
        }
        let mut taken = ask.exclude.clone();
        taken.extend(given);
        let rest = Ask {
            want: ask.want - out.len(),
            exclude: &taken,
            reads: ask.reads,
        };
        out.extend(self.inner.pick(&rest, admit, now));
        out
    }

    fn tell(&mut self, event: Event<'_>, now: u64) {
        match event {
            Event::Read {
                read,
                sent_ms,
                heads,
            } => {
                let entries = heads.iter().flat_map(|(items, _)| items);
                if read.purpose == OLDEST {
                    self.lane.read_oldest(entries, sent_ms);
                    return;
                }
                self.lane.observe(entries, sent_ms);
            }
            Event::Started(c) => self.lane.started(&c.task_id, now),
            Event::Ended { task_id, ran } => self.lane.ended(task_id, ran, now),
            Event::NotStarted(c) if self.lane.gave(&c.task_id) => {
                self.lane.not_started(&c.task_id);
                return;
            }
            Event::NotStarted(_) => {}
        }
        self.inner.tell(event, now);
    }

    fn allows(&self, exclude: &Ids) -> Box<dyn Fn(&Candidate) -> bool + '_> {
        self.inner.allows(exclude)
    }

    fn heads(&self) -> &Heads {
        self.inner.heads()
    }

    fn heads_mut(&mut self) -> &mut Heads {
        self.inner.heads_mut()
    }

    fn hand_over(&mut self, exclude: &Ids, now: u64, out: &mut Handover) {
        self.inner.hand_over(exclude, now, out)
    }

    fn tally(&self, out: &mut Tally) {
        out.deadline_starts = self.lane.starts;
        self.inner.tally(out);
    }
}
