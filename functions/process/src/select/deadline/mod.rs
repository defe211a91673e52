//! The adaptive order ([`lifo_core::Order::Adaptive`]), as a layer:
//! newest first while every task waiting can still start in time, least
//! time left first when one would not (slack stealing, as real-time
//! schedulers serve aperiodic work beside deadlines). The `i`-th task of
//! the backlog, least time left first, has `throughput × (time to its
//! deadline − guard) − i` starts to spare ([`Deadlines::slack`]): while
//! every one has a start to spare, the slot is the inner selection's;
//! else it goes to the task with the least time left that can still start.
//! In an overload no order catches up with, while tasks arrive, the slots
//! stay newest first: serving the old would trade fresh starts for stale
//! ones. The backlog is what the reads brought and nobody claimed, plus an
//! oldest-first read of the cut-short shards at the first read and when
//! arrivals stop ([`Deadlines::wants_oldest`]). The lane starts nothing
//! its inner selection does not allow.

mod layer;

pub use layer::DeadlineLane;

use super::Tuning;
use lifo_core::Candidate;
use lifo_core::priority::at_ms;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

/// A backlog short of this many seconds of throughput is an overload.
pub const OVERLOAD_SECONDS: f64 = 2.0;
/// So are arrivals at this many times the throughput or more.
pub const OVERLOAD_RATIO: f64 = 1.75;
/// Once overloaded, while arrivals stay at this many times the throughput.
pub const OVERLOAD_LEAVE_RATIO: f64 = 1.5;
/// Arrivals are counted over this window (ms).
pub const ARRIVALS_WINDOW_MS: u64 = 5_000;
/// Tasks arrive while each read sees one claimable this long (ms) before.
pub const ARRIVAL_GAP: u64 = 500;
/// Tasks in the backlog at most; past it, newer ones are not added.
pub const MAX_BACKLOG: usize = 20_000;
/// Entries per shard of an oldest-first read.
pub const OLDEST_READ_PAGE: usize = 500;
/// Oldest-first reads come at most this often (ms).
pub const OLDEST_READ_GAP: u64 = 1_000;
/// Until a claim ended, a claim is taken to hold its slot this long (ms).
pub const PRIOR_HOLD_MS: f64 = 1000.0;
/// Weight of the latest hold in the hold's mean and variance.
pub const HOLD_WEIGHT: f64 = 0.1;
/// Deviations of the hold the guard keeps in reserve.
pub const JITTER_DEVIATIONS: f64 = 2.0;

/// The lane's books: the tasks seen and not claimed, and the throughput.
#[derive(Debug, Clone, Default)]
pub struct Deadlines {
    backlog: HashMap<String, Candidate>,
    /// Ids the lane gave that have not started.
    given: HashSet<String>,
    /// Ids started, and when (until they end): a read sent before a
    /// claim may still show its task.
    started: HashMap<String, Option<u64>>,
    /// When the newest task seen became claimable (epoch ms).
    newest_ms: u64,
    /// When the last newest-first read was sent (epoch ms).
    read_ms: u64,
    /// When each task seen in [`ARRIVALS_WINDOW_MS`] became claimable.
    arrivals: VecDeque<u64>,
    slots: usize,
    /// Starts a second at most (the rate limit).
    per_second: Option<f64>,
    /// Mean time a claim holds a slot (ms), once one ended.
    hold_ms: Option<f64>,
    /// Variance of that time (ms²).
    hold_var: f64,
    /// When the last oldest-first read was made (epoch ms).
    oldest_read_ms: Option<u64>,
    /// In an overload no order catches up with, at the last take.
    overloaded: bool,
    /// Starts the lane gave.
    pub starts: usize,
    /// The lane's constants.
    tuning: Tuning,
}

impl Deadlines {
    /// A lane for `slots` slots and at most `per_second` starts a second.
    pub fn new(slots: usize, per_second: Option<u32>) -> Self {
        Self {
            slots: slots.max(1),
            per_second: per_second.map(f64::from),
            ..Self::default()
        }
    }

    /// The same with `tuning`'s constants.
    pub fn with_tuning(self, tuning: Tuning) -> Self {
        Self { tuning, ..self }
    }

    /// Whether an oldest-first read is due at `now_ms`: at the `first_read`,
    /// and once arrivals stop after some came since the last one, at most
    /// one every [`OLDEST_READ_GAP`].
    pub fn wants_oldest(&self, first_read: bool, now_ms: u64) -> bool {
        match self.oldest_read_ms {
            None => first_read || !self.arriving(),
            Some(at) => {
                self.newest_ms > at
                    && !self.arriving()
                    && now_ms >= at.saturating_add(self.tuning.oldest_read_gap)
            }
        }
    }

    /// An oldest-first read was made at `now_ms`, bringing `read`.
    pub fn read_oldest<'a>(&mut self, read: impl IntoIterator<Item = &'a Candidate>, now_ms: u64) {
        for c in read {
            self.add(c);
        }
        self.oldest_read_ms = Some(now_ms);
    }

    /// Adds what a newest-first read sent at `read_ms` brought (a task
    /// already there is replaced: its token may have changed), and counts
    /// the arrivals it shows.
    pub fn observe<'a>(&mut self, read: impl IntoIterator<Item = &'a Candidate>, read_ms: u64) {
        self.read_ms = self.read_ms.max(read_ms);
        for c in read {
            self.newest_ms = self.newest_ms.max(at_ms(c.claimable_at));
            if !self.started.contains_key(&c.task_id) && !self.backlog.contains_key(&c.task_id) {
                self.arrivals.push_back(at_ms(c.claimable_at));
            }
            self.add(c);
        }
    }

    fn add(&mut self, c: &Candidate) {
        if self.started.contains_key(&c.task_id) {
            return;
        }
        if self.backlog.len() < MAX_BACKLOG || self.backlog.contains_key(&c.task_id) {
            self.backlog.insert(c.task_id.clone(), c.clone());
        }
    }

    /// Whether tasks still arrive: the last newest-first read saw one that
    /// became claimable within [`ARRIVAL_GAP`] before it.
    pub fn arriving(&self) -> bool {
        self.newest_ms > 0 && self.newest_ms.saturating_add(self.tuning.arrival_gap) >= self.read_ms
    }

    /// Tasks that became claimable per second over the last
    /// [`ARRIVALS_WINDOW_MS`] before `now_ms`, as the reads saw them.
    pub fn arrival_rate(&mut self, now_ms: u64) -> f64 {
        let window = self.tuning.arrivals_window_ms.max(1);
        let from = now_ms.saturating_sub(window);
        self.arrivals.retain(|at| *at >= from);
        self.arrivals.len() as f64 * 1000.0 / window as f64
    }

    /// Starts per second: the slots over the mean hold, or the rate limit
    /// if lower.
    pub fn throughput(&self) -> f64 {
        let by_slots = self.slots as f64 * 1000.0 / self.hold().max(1.0);
        self.per_second.map_or(by_slots, |r| r.min(by_slots))
    }

    /// The least slack at `now_ms` of `backlog` (least time left first), in
    /// starts, less those given and not sent (infinite for none).
    fn slack_of(&self, backlog: &[&Candidate], now_ms: u64, throughput: f64) -> f64 {
        let guard = self.guard();
        let mut least = f64::INFINITY;
        for (i, c) in backlog.iter().enumerate() {
            let left_s = ((deadline_ms(c) - now_ms) as f64 - guard).max(0.0) / 1000.0;
            least = least.min(throughput * left_s - (i + 1) as f64);
        }
        least - self.given.len() as f64
    }

    /// The backlog that can still start at `now_ms`, none in `exclude` or
    /// given, least time left first (then newest first).
    fn by_deadline(&self, exclude: &HashSet<String>, now_ms: u64) -> Vec<&Candidate> {
        let mut v: Vec<&Candidate> = self
            .backlog
            .values()
            .filter(|c| {
                deadline_ms(c) > now_ms
                    && !exclude.contains(&c.task_id)
                    && !self.given.contains(&c.task_id)
            })
            .collect();
        v.sort_by(|a, b| {
            (a.expires_at, std::cmp::Reverse(a.claimable_at), &a.task_id).cmp(&(
                b.expires_at,
                std::cmp::Reverse(b.claimable_at),
                &b.task_id,
            ))
        });
        v
    }

    /// Of `want` free slots at `now_ms`, the tasks that must go first for
    /// the backlog to keep its deadlines (each one `admit` accepts).
    pub fn take(
        &mut self,
        want: usize,
        exclude: &HashSet<String>,
        now_ms: u64,
        mut admit: impl FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        self.backlog.retain(|_, c| deadline_ms(c) > now_ms);
        let throughput = self.throughput();
        let rate = self.arrival_rate(now_ms);
        let backlog = self.by_deadline(exclude, now_ms);
        let mut slack = self.slack_of(&backlog, now_ms, throughput);
        let t = &self.tuning;
        let enters =
            slack < -(throughput * t.overload_seconds) || rate >= t.overload_ratio * throughput;
        let stays = self.overloaded && rate >= t.overload_leave_ratio * throughput;
        let overloaded = self.arriving() && (enters || stays);
        let mut out: Vec<Candidate> = Vec::new();
        if !overloaded {
            let mut next = backlog.into_iter().filter(|c| admit(c));
            for _ in 0..want {
                if slack >= 1.0 {
                    // A fresh start keeps every deadline: the inner's.
                    slack -= 1.0;
                    continue;
                }
                match next.next() {
                    Some(c) => out.push(c.clone()),
                    None => break,
                }
            }
        }
        self.overloaded = overloaded;
        self.given.extend(out.iter().map(|c| c.task_id.clone()));
        out
    }

    /// A claim of `task_id` was sent at `now_ms`: it leaves the backlog,
    /// and counts as the lane's start if the lane gave it.
    pub fn started(&mut self, task_id: &str, now_ms: u64) {
        self.backlog.remove(task_id);
        self.started.insert(task_id.to_owned(), Some(now_ms));
        self.starts += usize::from(self.given.remove(task_id));
    }

    /// The handling of `task_id` ended at `now_ms`: if it `ran` (a refused
    /// claim starts nothing), its hold goes into the throughput.
    pub fn ended(&mut self, task_id: &str, ran: bool, now_ms: u64) {
        if let Some(at) = self.started.get_mut(task_id).and_then(Option::take)
            && ran
        {
            self.held(Duration::from_millis(now_ms.saturating_sub(at)));
        }
    }

    fn hold(&self) -> f64 {
        self.hold_ms.unwrap_or(self.tuning.prior_hold_ms)
    }

    /// How long before its deadline a start is due (ms): a hold (the next
    /// free slot), and [`JITTER_DEVIATIONS`] of it.
    pub fn guard(&self) -> f64 {
        self.hold() + self.tuning.jitter_deviations * self.hold_var.sqrt()
    }

    /// An exponentially weighted mean and variance of the hold (Finch,
    /// "Incremental calculation of weighted mean and variance", 2009).
    fn held(&mut self, held: Duration) {
        let ms = held.as_secs_f64() * 1000.0;
        match self.hold_ms {
            Some(mean) => {
                let diff = ms - mean;
                let weight = self.tuning.hold_weight;
                let step = weight * diff;
                self.hold_ms = Some(mean + step);
                self.hold_var = (1.0 - weight) * (self.hold_var + diff * step);
            }
            None => self.hold_ms = Some(ms),
        }
    }

    /// Whether the lane gave `task_id` and it has not started.
    pub fn gave(&self, task_id: &str) -> bool {
        self.given.contains(task_id)
    }

    /// What the lane gave was not started: it may give it again.
    pub fn not_started(&mut self, task_id: &str) {
        self.given.remove(task_id);
    }
}

/// A task's deadline (epoch ms).
fn deadline_ms(c: &Candidate) -> u64 {
    c.expires_at.saturating_mul(1000)
}

#[cfg(test)]
mod tests;
