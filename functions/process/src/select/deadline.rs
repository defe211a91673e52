//! The adaptive order's deadline lane ([`lifo_core::Order::Adaptive`]):
//! newest first while every task waiting can still start in time, least
//! time left first when one would not.
//!
//! Why: newest first sheds what a queue that could catch up would have
//! started (at 1.2× its capacity for 40 s, a fifth of the tasks), and in
//! the drain after an overload it starts the newest of the backlog while
//! the oldest expire. Every task carries its own deadline (`expiresAt`),
//! so the processor can tell which old tasks can still start in time.
//!
//! The rule, per free slot (slack stealing, as real-time schedulers serve
//! aperiodic work beside deadlines):
//! - The backlog the lane knows, least time left first: its `i`-th task
//!   has `slack = throughput × (time to its deadline − guard) − i` starts
//!   to spare ([`Deadlines::slack`]; throughput: the slots over how long a
//!   claim holds one, measured, or the rate limit if lower; the guard:
//!   [`MARGIN`], one mean hold and [`JITTER_DEVIATIONS`] deviations of it,
//!   [`Deadlines::guard`]).
//! - **Slack of a start or more everywhere:** the slot goes to the newest
//!   task (the heads, as LIFO), and every slack drops by one.
//! - **Less:** the slot goes to the task with the least time left that can
//!   still start (at least [`MARGIN`] before its deadline): waiting, it
//!   would miss it.
//! - **Overloaded beyond catching up** (the backlog misses its deadlines by
//!   more than [`OVERLOAD_SECONDS`] of throughput even served oldest
//!   first) **while tasks arrive:** newest first, as LIFO. Serving the old
//!   then only trades fresh starts for stale ones (every slot is busy
//!   either way), so the freshness LIFO is for is kept.
//! - **Draining** (the last read saw no task that became claimable within
//!   [`ARRIVAL_GAP`] before it): the
//!   same rule without the overload switch, so an infeasible backlog is
//!   drained least time left first, which starts the most of it in time.
//!
//! No read LIFO does not pay: the lane is what the newest-first reads
//! already brought and was not claimed, kept across refills (a task buried
//! under newer ones was seen when it was new), plus a read oldest first
//! (up to [`FIRST_READ_PAGE`] entries) of each shard whose head is cut
//! short, at the invocation's first read (what was buried before it) and
//! when tasks stop arriving after some arrived since the last such read
//! (what a burst buried between two reads), at most one every
//! [`OLDEST_READ_GAP`] (a shard read whole showed it all). A
//! kept task claimed or cancelled meanwhile fails its conditional claim, as
//! any candidate does: the claim protocol is unchanged, and so is the state
//! machine (`model/lifo.pml` has no new move). With priorities, the lane
//! never passes a higher priority's task in the heads over; with the fair
//! share, it passes over a flooding tenant's tasks.

use lifo_core::Candidate;
use lifo_core::priority::{Priority, at_ms};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// A task this close to its deadline is left to expire: its claim would
/// race the deadline (a claim's round trip is 10 to 30 ms; the claim's
/// condition refuses it from the deadline's second on).
pub const MARGIN: u64 = 100;
/// While tasks arrive, a backlog that misses its deadlines by more than
/// this much throughput, served least time left first, is an overload no
/// order catches up with: newest first.
pub const OVERLOAD_SECONDS: f64 = 2.0;
/// So are arrivals at this many times the throughput or more: past 2×,
/// what piles up in one TTL is more than the queue serves in one, so
/// starting the old only trades fresh starts for stale ones (1.75 leaves
/// room for the estimate's noise; a 1.2× overload measures about 1.4×).
pub const OVERLOAD_RATIO: f64 = 1.75;
/// Once past [`OVERLOAD_RATIO`], the overload lasts while tasks arrive at
/// this many times the throughput or more: a 5 s count of a 2× load dips
/// under 1.75× now and then, and each dip would start stale tasks.
pub const OVERLOAD_LEAVE_RATIO: f64 = 1.5;
/// Arrivals are counted over this window (ms).
pub const ARRIVALS_WINDOW_MS: u64 = 5_000;
/// Tasks arrive while each newest-first read sees one that became
/// claimable at most this long before it; once one does not, the queue is
/// draining. Judged at the reads, not by the clock: reads come every 0.1 to
/// 1 s, and each second of a drain judged late spends its slots on the
/// newest tasks, which it could still start later, while the oldest
/// expire. (At 13 arrivals a second, a 500 ms gap comes once in 700.)
pub const ARRIVAL_GAP: u64 = 500;
/// Tasks kept at most (about 170 bytes each); past it, newer ones are not
/// kept (the oldest are the nearest their deadline).
pub const MAX_KEPT: usize = 20_000;
/// Entries per shard of an oldest-first read: what the queue can start
/// before the oldest deadlines is what the lane must know (200 tasks
/// written at once, drained at 10 a second, 20 s to live: every one).
/// About 6 read units at most, at an invocation's first read and when a
/// drain begins, and only behind a backlog.
pub const FIRST_READ_PAGE: usize = 500;
/// Oldest-first reads come at most this often (ms): one a drain, and a
/// queue whose arrivals pause now and then behind a deep backlog drains
/// every time they do.
pub const OLDEST_READ_GAP: u64 = 1_000;
/// Until a claim ended, a claim is taken to hold its slot this long (ms).
pub const PRIOR_HOLD_MS: f64 = 1000.0;
/// Weight of the latest claim in the mean time a claim holds a slot, and
/// in its variance.
const HOLD_WEIGHT: f64 = 0.1;
/// The guard keeps this many deviations of the hold in reserve beside its
/// mean: a run or a claim slower than the mean would otherwise eat the
/// last start's margin (two deviations: about 98 holds in 100 fit, if they
/// are spread normally).
pub const JITTER_DEVIATIONS: f64 = 2.0;

/// The lane: the tasks seen and not claimed, and the throughput.
#[derive(Debug, Clone)]
pub struct Deadlines {
    kept: HashMap<String, Candidate>,
    /// Ids the lane gave and that have not started yet.
    given: HashSet<String>,
    /// Ids started by this invocation, and when (until they end): a read
    /// sent before a claim may still show its task claimable, and the lane
    /// must not keep it (the heads serve a task put back again).
    started: HashMap<String, Option<Instant>>,
    /// When the newest task seen became claimable (epoch ms).
    newest_ms: u64,
    /// When the last newest-first read was sent (epoch ms).
    read_ms: u64,
    /// When each task first seen within [`ARRIVALS_WINDOW_MS`] became
    /// claimable (epoch ms).
    arrivals: std::collections::VecDeque<u64>,
    /// Slots, and starts per second at most (the rate limit).
    slots: usize,
    per_second: Option<f64>,
    /// Mean time a claim holds a slot (ms), once one ended.
    hold_ms: Option<f64>,
    /// Variance of that time (ms²), weighted as the mean is.
    hold_var: f64,
    /// When the last oldest-first read was made (epoch ms; none yet). A
    /// task seen since that became claimable after it arrived since: what
    /// came between two newest-first reads may lie buried under newer ones.
    oldest_read_ms: Option<u64>,
    /// In an overload no order catches up with, at the last take.
    overloaded: bool,
    /// Starts the lane gave.
    pub starts: usize,
}

impl Deadlines {
    /// A lane for `slots` slots and at most `per_second` starts a second.
    pub fn new(slots: usize, per_second: Option<u32>) -> Self {
        Self {
            kept: HashMap::new(),
            given: HashSet::new(),
            started: HashMap::new(),
            newest_ms: 0,
            read_ms: 0,
            arrivals: std::collections::VecDeque::new(),
            slots: slots.max(1),
            per_second: per_second.map(f64::from),
            hold_ms: None,
            hold_var: 0.0,
            oldest_read_ms: None,
            overloaded: false,
            starts: 0,
        }
    }

    /// Whether an oldest-first read (of the shards whose heads are cut
    /// short) is due at `now_ms`: at the invocation's first read (what was
    /// buried before it), and once tasks stop arriving, if any arrived
    /// since the last one (what a burst buried between two reads), at most
    /// one every [`OLDEST_READ_GAP`].
    pub fn wants_oldest(&self, first_read: bool, now_ms: u64) -> bool {
        match self.oldest_read_ms {
            None => first_read || !self.arriving(),
            Some(at) => self.newest_ms > at && !self.arriving() && now_ms >= at + OLDEST_READ_GAP,
        }
    }

    /// An oldest-first read was made at `now_ms`.
    pub fn read_oldest(&mut self, now_ms: u64) {
        self.oldest_read_ms = Some(now_ms);
    }

    /// Tasks kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Keeps what a newest-first read sent at `read_ms` brought (a task
    /// already kept is replaced: its token or lease may have changed), and
    /// counts the arrivals it shows.
    pub fn observe<'a>(&mut self, read: impl IntoIterator<Item = &'a Candidate>, read_ms: u64) {
        self.read_ms = self.read_ms.max(read_ms);
        for c in read {
            self.newest_ms = self.newest_ms.max(at_ms(c.claimable_at));
            if !self.started.contains_key(&c.task_id) && !self.kept.contains_key(&c.task_id) {
                self.arrivals.push_back(at_ms(c.claimable_at));
            }
            self.keep_one(c);
        }
    }

    /// Keeps what an oldest-first read brought (no arrivals there).
    pub fn keep<'a>(&mut self, read: impl IntoIterator<Item = &'a Candidate>) {
        for c in read {
            self.keep_one(c);
        }
    }

    fn keep_one(&mut self, c: &Candidate) {
        if self.started.contains_key(&c.task_id) {
            return;
        }
        if self.kept.len() < MAX_KEPT || self.kept.contains_key(&c.task_id) {
            self.kept.insert(c.task_id.clone(), c.clone());
        }
    }

    /// Whether tasks still arrive: the last newest-first read saw one that
    /// became claimable within [`ARRIVAL_GAP`] before it.
    pub fn arriving(&self) -> bool {
        self.newest_ms > 0 && self.newest_ms + ARRIVAL_GAP >= self.read_ms
    }

    /// Tasks that became claimable per second over the last
    /// [`ARRIVALS_WINDOW_MS`] at `now_ms`, as the reads saw them.
    pub fn arrival_rate(&mut self, now_ms: u64) -> f64 {
        let from = now_ms.saturating_sub(ARRIVALS_WINDOW_MS);
        self.arrivals.retain(|at| *at >= from);
        self.arrivals.len() as f64 * 1000.0 / ARRIVALS_WINDOW_MS as f64
    }

    /// Starts per second: the slots over the mean time a claim holds one
    /// ([`PRIOR_HOLD_MS`] until one ended), or the rate limit if lower.
    pub fn throughput(&self) -> Option<f64> {
        let by_slots = self.slots as f64 * 1000.0 / self.hold().max(1.0);
        Some(self.per_second.map_or(by_slots, |r| r.min(by_slots)))
    }

    /// The backlog's least slack at `now_ms`, in starts: over the kept
    /// tasks that can still start (none in `exclude`), least time left
    /// first, the least of `throughput × seconds to its deadline − i` for
    /// the `i`-th (the seconds less the [`Deadlines::guard`]: the start
    /// must be sent by then, and the next free slot may be a hold away),
    /// less the starts given and not yet sent. Infinite for an empty
    /// backlog.
    pub fn slack(&self, exclude: &HashSet<String>, now_ms: u64, throughput: f64) -> f64 {
        self.slack_of(&self.by_deadline(exclude, now_ms), now_ms, throughput)
    }

    /// [`Deadlines::slack`] of `backlog`, already least time left first.
    fn slack_of(&self, backlog: &[&Candidate], now_ms: u64, throughput: f64) -> f64 {
        let guard = self.guard();
        let mut least = f64::INFINITY;
        for (i, c) in backlog.iter().enumerate() {
            let left_s = ((deadline_ms(c) - now_ms) as f64 - guard).max(0.0) / 1000.0;
            least = least.min(throughput * left_s - (i + 1) as f64);
        }
        least - self.given.len() as f64
    }

    /// The kept tasks that can still start at `now_ms` (at least [`MARGIN`]
    /// before their deadline), none in `exclude` or given, least time left
    /// first (then newest first).
    fn by_deadline(&self, exclude: &HashSet<String>, now_ms: u64) -> Vec<&Candidate> {
        let mut v: Vec<&Candidate> = self
            .kept
            .values()
            .filter(|c| {
                deadline_ms(c) >= now_ms + MARGIN
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

    /// Of `want` free slots, the tasks that must go first so that the
    /// backlog keeps its deadlines (none in `exclude`, each one `admit`
    /// accepts), least time left first; the other slots are the heads'
    /// (newest first). Forgets the tasks past their deadline.
    pub fn take(
        &mut self,
        want: usize,
        exclude: &HashSet<String>,
        now_ms: u64,
        mut admit: impl FnMut(&Candidate) -> bool,
    ) -> Vec<Candidate> {
        self.kept.retain(|_, c| deadline_ms(c) > now_ms);
        let Some(throughput) = self.throughput() else {
            return Vec::new();
        };
        let rate = self.arrival_rate(now_ms);
        // One sort per refill: the slack and the picks read the same order.
        let backlog = self.by_deadline(exclude, now_ms);
        let mut slack = self.slack_of(&backlog, now_ms, throughput);
        let enters =
            slack < -(throughput * OVERLOAD_SECONDS) || rate >= OVERLOAD_RATIO * throughput;
        let stays = self.overloaded && rate >= OVERLOAD_LEAVE_RATIO * throughput;
        let overloaded = self.arriving() && (enters || stays);
        let mut out: Vec<Candidate> = Vec::new();
        if !overloaded {
            let mut next = backlog.into_iter().filter(|c| admit(c));
            for _ in 0..want {
                if slack >= 1.0 {
                    // A fresh start keeps every deadline: the heads'.
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

    /// A claim of `task_id` was sent: it leaves the lane, and counts as the
    /// lane's start if the lane gave it.
    pub fn started(&mut self, task_id: &str) {
        self.kept.remove(task_id);
        self.started
            .insert(task_id.to_owned(), Some(super::clock::now()));
        self.starts += usize::from(self.given.remove(task_id));
    }

    /// The handling of `task_id` ended: if it `ran`, how long it held its
    /// slot goes into the throughput. A claim refused (another worker's, a
    /// task superseded meanwhile) takes one round trip and starts nothing:
    /// counted, it would make starts look cheaper and the hold's spread
    /// wider than the downstream's. A run the downstream answered busy
    /// counts: it held its slot for the downstream's answer.
    pub fn ended(&mut self, task_id: &str, ran: bool) {
        if let Some(at) = self.started.get_mut(task_id).and_then(Option::take)
            && ran
        {
            self.held(super::clock::now().saturating_duration_since(at));
        }
    }

    /// The mean time a claim holds a slot (ms).
    fn hold(&self) -> f64 {
        self.hold_ms.unwrap_or(PRIOR_HOLD_MS)
    }

    /// How long before its deadline a task's start is due (ms): a start
    /// must be sent [`MARGIN`] before the deadline, the next free slot may
    /// be a whole hold away, and a hold may run [`JITTER_DEVIATIONS`]
    /// deviations over its mean.
    pub fn guard(&self) -> f64 {
        MARGIN as f64 + self.hold() + JITTER_DEVIATIONS * self.hold_var.sqrt()
    }

    /// An exponentially weighted mean and variance of the hold (Finch,
    /// "Incremental calculation of weighted mean and variance", 2009).
    fn held(&mut self, held: Duration) {
        let ms = held.as_secs_f64() * 1000.0;
        match self.hold_ms {
            Some(mean) => {
                let diff = ms - mean;
                let step = HOLD_WEIGHT * diff;
                self.hold_ms = Some(mean + step);
                self.hold_var = (1.0 - HOLD_WEIGHT) * (self.hold_var + diff * step);
            }
            None => self.hold_ms = Some(ms),
        }
    }

    /// Whether the lane gave `task_id` and it has not started.
    pub fn gave(&self, task_id: &str) -> bool {
        self.given.contains(task_id)
    }

    /// What the lane gave was not started (the rate limit's bucket ran
    /// dry): it may give it again.
    pub fn not_started(&mut self, task_id: &str) {
        self.given.remove(task_id);
    }
}

/// A task's deadline (epoch ms).
fn deadline_ms(c: &Candidate) -> u64 {
    c.expires_at.saturating_mul(1000)
}

/// The lane admits a task of a priority at least that of the heads' first
/// candidate (`first`, its index key; none: any).
pub fn no_lower_priority(first: Option<i64>) -> impl Fn(&Candidate) -> bool {
    let floor = first.map(Priority::of_key);
    move |c| floor.is_none_or(|f| Priority::of_key(c.claimable_at).shift() >= f.shift())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deadlines are whole seconds: 700 ms into one.
    const NOW: u64 = 1_800_000_000_700;

    /// A task that became claimable `age_ms` before [`NOW`], with `ttl_s`
    /// to live.
    fn task(id: &str, age_ms: u64, ttl_s: u64) -> Candidate {
        let at = NOW - age_ms;
        Candidate {
            expires_at: at / 1000 + ttl_s,
            ..Candidate::pending(id, 0, Priority::Normal.key(at))
        }
    }

    fn ids(v: &[Candidate]) -> Vec<&str> {
        v.iter().map(|c| c.task_id.as_str()).collect()
    }

    /// A lane of one slot whose claims hold it `hold_ms` (1000 / hold_ms
    /// starts a second).
    fn lane(hold_ms: u64) -> Deadlines {
        let mut d = Deadlines::new(1, None);
        d.held(Duration::from_millis(hold_ms));
        d
    }

    #[test]
    fn throughput_is_the_slots_over_the_hold_or_the_rate_if_lower() {
        assert_eq!(Deadlines::new(5, None).throughput(), Some(5.0));
        let mut d = Deadlines::new(5, None);
        d.held(Duration::from_millis(500));
        assert_eq!(d.throughput(), Some(10.0));
        // The mean moves a tenth of the way to each new hold.
        d.held(Duration::from_millis(1500));
        assert_eq!(d.throughput(), Some(5.0 * 1000.0 / 600.0));
        let mut d = Deadlines::new(5, Some(4));
        d.held(Duration::from_millis(500));
        assert_eq!(d.throughput(), Some(4.0));
    }

    #[test]
    fn newest_first_while_the_backlog_keeps_its_deadlines() {
        // 2 starts a second, a claim holds its slot 0.5 s: three tasks 5.3,
        // 6.3 and 7.3 s from their deadlines, less MARGIN and a hold, leave
        // slacks of 8.4, 9.4 and 10.4 starts.
        let mut d = lane(500);
        d.keep(&[
            task("a", 14_000, 20),
            task("b", 13_000, 20),
            task("c", 12_000, 20),
        ]);
        let none = HashSet::new();
        assert_eq!(d.slack(&none, NOW, 2.0), 2.0 * 4.7 - 1.0);
        assert!(
            d.take(5, &none, NOW, |_| true).is_empty(),
            "all five slots fresh"
        );
        // 1.5 s later, with 0.4 starts a second (a 2.5 s hold): a is 3.8 s
        // away, 1.2 s once guarded, 0.48 starts: it goes first; then b
        // (4.8 s, 0.88 starts for two) too. Nothing arrived for 13.5 s.
        let mut d = lane(2_500);
        d.keep(&[
            task("a", 14_000, 20),
            task("b", 13_000, 20),
            task("c", 12_000, 20),
        ]);
        let got = d.take(2, &none, NOW + 1_500, |_| true);
        assert_eq!(ids(&got), ["a", "b"]);
    }

    #[test]
    fn least_time_left_first_and_one_that_cannot_start_is_left_to_expire() {
        let mut d = lane(10_000);
        d.observe(
            &[
                task("late", 19_000, 20),
                task("gone", 21_000, 20),
                task("sooner", 18_000, 20),
                task("later", 16_000, 20),
            ],
            NOW,
        );
        // Drained (the read saw nothing newer than 16 s): an infeasible
        // backlog is still served least time left first.
        assert!(!d.arriving());
        // 250 ms on, "late" is 50 ms from its deadline.
        let got = d.take(5, &HashSet::new(), NOW + 250, |_| true);
        assert_eq!(ids(&got), ["sooner", "later"]);
        // The one past its deadline is forgotten; the one within MARGIN kept
        // until then.
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn an_overload_no_order_catches_up_with_is_served_newest_first_while_tasks_arrive() {
        // One start a second, 30 tasks due within 10 s: 20 starts short,
        // more than OVERLOAD_SECONDS of throughput.
        let mut d = lane(1_000);
        let backlog: Vec<Candidate> = (0..30)
            .map(|i| task(&format!("t{i}"), 10_000 + i, 20))
            .collect();
        d.observe(&backlog, NOW - 200);
        let none = HashSet::new();
        d.observe(&[task("fresh", 100, 20)], NOW);
        assert!(d.arriving());
        assert!(d.slack(&none, NOW, 1.0) < -OVERLOAD_SECONDS);
        assert!(d.take(3, &none, NOW, |_| true).is_empty(), "newest first");
        // Once a read sees nothing new for 500 ms, least time left first
        // (one deadline: newest first among them).
        d.observe(&[], NOW + 400);
        assert!(d.arriving());
        d.observe(&[], NOW + 700);
        assert!(!d.arriving());
        let got = d.take(3, &none, NOW + 700, |_| true);
        assert_eq!(ids(&got), ["t0", "t1", "t2"]);
    }

    #[test]
    fn arrivals_at_overload_ratio_times_the_throughput_are_served_newest_first() {
        // Two starts a second; one task 1.3 s from its deadline: less than
        // a start to spare.
        let near = task("near", 18_000, 20);
        let none = HashSet::new();
        let mut d = lane(500);
        d.observe(std::slice::from_ref(&near), NOW);
        // 17 tasks in the last 5 s: 3.4 a second, under 1.75 × 2.
        let fresh: Vec<Candidate> = (0..17)
            .map(|i| task(&format!("f{i}"), 200 * i + 100, 20))
            .collect();
        d.observe(&fresh, NOW);
        assert_eq!(d.arrival_rate(NOW), 3.4);
        assert_eq!(ids(&d.take(1, &none, NOW, |_| true)), ["near"]);
        // 18 in the last 5 s: 3.6 a second, past it: newest first.
        let mut d = lane(500);
        d.observe(std::slice::from_ref(&near), NOW);
        d.observe(&fresh, NOW);
        d.observe(&[task("f17", 4_000, 20)], NOW);
        assert_eq!(d.arrival_rate(NOW), 3.6);
        assert!(d.take(1, &none, NOW, |_| true).is_empty());
        // Seen again, a task does not count twice.
        d.observe(&fresh, NOW);
        assert_eq!(d.arrival_rate(NOW), 3.6);
    }

    #[test]
    fn once_in_an_overload_it_lasts_down_to_the_leave_ratio() {
        // Half a start a second: enters at 0.875 arrivals a second (5 in
        // 5 s), leaves under 0.75 (3). One task 1.8 to 2 s from its deadline
        // would go first outside an overload.
        let near = task("near", 18_000, 25);
        let fresh: Vec<Candidate> = (0..5)
            .map(|i| task(&format!("f{i}"), 200 * i, 20))
            .collect();
        let none = HashSet::new();
        let mut d = lane(2_000);
        d.observe(std::iter::once(&near).chain(&fresh), NOW);
        assert_eq!(d.arrival_rate(NOW), 1.0);
        assert!(d.take(1, &none, NOW, |_| true).is_empty(), "entered");
        // 4.3 s on, four of them in the last 5 s: 0.8, still in it.
        let mut never = d.clone();
        assert_eq!(d.arrival_rate(NOW + 4_300), 0.8);
        assert!(d.take(1, &none, NOW + 4_300, |_| true).is_empty(), "stays");
        // A lane that was not in it does not enter at 0.8.
        never.overloaded = false;
        assert_eq!(ids(&never.take(1, &none, NOW + 4_300, |_| true)), ["near"]);
        // 4.5 s on, three: 0.6, out.
        assert_eq!(ids(&d.take(1, &none, NOW + 4_500, |_| true)), ["near"]);
    }

    #[test]
    fn given_and_started_tasks_are_not_given_again_nor_kept() {
        let mut d = lane(10_000);
        d.keep(&[
            task("a", 17_000, 20),
            task("b", 16_500, 20),
            task("c", 16_000, 20),
        ]);
        let exclude: HashSet<String> = ["a".to_owned()].into();
        let got = d.take(1, &exclude, NOW, |c| c.task_id != "b");
        assert_eq!(ids(&got), ["c"]);
        // Given: not again until it starts or is handed back.
        assert!(d.take(1, &exclude, NOW, |c| c.task_id != "b").is_empty());
        d.not_started("c");
        assert_eq!(ids(&d.take(1, &exclude, NOW, |c| c.task_id != "b")), ["c"]);
        d.started("c");
        assert_eq!(d.starts, 1);
        // A read sent before its claim still shows it: not kept again.
        d.observe(&[task("c", 16_000, 20)], NOW);
        assert_eq!(d.len(), 2);
        // A refused claim's end does not feed the throughput; a run's does.
        d.ended("c", false);
        assert_eq!(d.throughput(), Some(0.1), "one slot, a 10 s hold");
        d.started("c");
        d.ended("c", true);
        assert!(
            d.throughput().is_some_and(|t| t > 0.1),
            "{:?}",
            d.throughput()
        );
        let got = d.take(5, &HashSet::new(), NOW + 10_000, |_| true);
        assert!(got.is_empty(), "both are past their deadline by then");
        assert!(d.is_empty());
    }

    #[test]
    fn the_guard_keeps_two_deviations_of_the_hold_in_reserve() {
        // One hold of 600 ms: no spread yet, the guard is MARGIN + 600.
        let steady = lane(600);
        assert_eq!(steady.guard(), 700.0);
        // 500 then 1500 ms: mean 600, variance 0.9 × 1000 × 100 = 90 000,
        // a deviation of 300 ms: the guard is 100 + 600 + 2 × 300.
        let mut jittery = lane(500);
        jittery.held(Duration::from_millis(1500));
        assert_eq!(jittery.throughput(), steady.throughput());
        assert!(
            (jittery.guard() - 1300.0).abs() < 1e-6,
            "{}",
            jittery.guard()
        );
        // A task 2.3 s from its deadline, 1.67 starts a second: 1.6 s once
        // the steady guard is off, 1.67 starts to spare, so the slot is a
        // fresh one; 1.0 s once the jittery one is, 0.67: it goes now.
        let none = HashSet::new();
        for (mut d, goes) in [(steady, false), (jittery, true)] {
            d.keep(&[task("a", 17_000, 20)]);
            let got = d.take(1, &none, NOW, |_| true);
            assert_eq!(!got.is_empty(), goes, "guard {}", d.guard());
        }
    }

    #[test]
    fn the_lane_never_passes_over_a_higher_priority() {
        let high = Candidate {
            claimable_at: Priority::High.key(NOW - 100),
            ..task("h", 100, 20)
        };
        let low = Candidate {
            claimable_at: Priority::Low.key(NOW - 17_000),
            ..task("l", 17_000, 20)
        };
        let normal = task("n", 17_000, 20);
        let admit = no_lower_priority(Some(high.claimable_at));
        assert!(admit(&high) && !admit(&normal) && !admit(&low));
        let admit = no_lower_priority(Some(normal.claimable_at));
        assert!(admit(&high) && admit(&normal) && !admit(&low));
        assert!(no_lower_priority(None)(&low));
    }

    #[test]
    fn what_it_keeps_is_bounded_and_refreshed() {
        let mut d = lane(10_000);
        d.keep(&[task("a", 16_000, 20)]);
        let moved = Candidate {
            token: 7,
            ..task("a", 16_000, 20)
        };
        d.keep(&[moved]);
        let got = d.take(1, &HashSet::new(), NOW, |_| true);
        assert_eq!(got[0].token, 7, "the latest read's token");
        let many: Vec<Candidate> = (0..MAX_KEPT + 10)
            .map(|i| task(&format!("t{i}"), 100, 20))
            .collect();
        d.observe(&many, NOW);
        assert_eq!(d.len(), MAX_KEPT);
    }

    #[test]
    fn an_oldest_first_read_at_the_first_read_and_when_a_burst_stops() {
        // A task that became claimable at `at` (epoch ms).
        let at = |id: &str, at: u64| Candidate {
            expires_at: at / 1000 + 20,
            ..Candidate::pending(id, 0, Priority::Normal.key(at))
        };
        let t0 = NOW - 3_000;
        let mut d = lane(1_000);
        // The first read, while tasks arrive: what was buried before it.
        d.observe(&[at("b0", t0)], t0);
        assert!(d.arriving());
        assert!(d.wants_oldest(true, t0));
        assert!(!d.wants_oldest(false, t0), "later reads wait for a drain");
        d.read_oldest(t0);
        // The burst goes on (what it buries between two reads is unseen)...
        d.observe(&[at("b1", t0 + 300)], t0 + 300);
        assert!(!d.wants_oldest(false, t0 + 300), "not while tasks arrive");
        // ...and stops: one more, for what it buried.
        d.observe(&[], t0 + 1_000);
        assert!(!d.arriving());
        assert!(d.wants_oldest(false, t0 + 1_000));
        d.read_oldest(t0 + 1_000);
        assert!(!d.wants_oldest(false, t0 + 2_500), "nothing arrived since");
        // Arrivals that pause again: at most one an OLDEST_READ_GAP.
        d.observe(&[at("b2", t0 + 1_100)], t0 + 1_200);
        d.observe(&[], t0 + 1_900);
        assert!(!d.wants_oldest(false, t0 + 1_900), "900 ms after the last");
        assert!(d.wants_oldest(false, t0 + 2_000));
    }
}
