//! The fair share's books: what each tenant has running and was served in
//! the last [`WINDOW`] ([`Ledger`], one per invocation, handed over by a
//! tail call), who floods ([`flooding`]), and one claim round's admission
//! ([`Shares`]): which waiting tenant the next free slot goes to.

use lifo_core::Order;
use lifo_core::priority::{Priority, at_ms};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

/// How far back service counts.
pub const WINDOW: Duration = Duration::from_secs(10);

/// A tenant with at most this many candidates waiting, not flooding, while
/// another floods, keeps up ([`keeping_up`]).
pub const FEW_WAITING: usize = 4;

/// The per-tenant cap (`TENANT_MAX_IN_FLIGHT`, opt-in): at most `in_flight`
/// running and `per_second` starts a second per tenant, slots free or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    pub in_flight: usize,
    pub per_second: Option<usize>,
}

impl Cap {
    /// `in_flight` of `capacity` slots, and that fraction of `per_second`
    /// (at least one).
    pub fn new(in_flight: usize, capacity: usize, per_second: Option<u32>) -> Self {
        let in_flight = in_flight.max(1);
        Self {
            in_flight,
            per_second: per_second
                .map(|r| (r as usize * in_flight).div_ceil(capacity.max(1)).max(1)),
        }
    }
}

/// What one invocation's tenants have running and were served lately.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Starts per second this invocation may make, if rate limited.
    per_second: Option<u32>,
    /// The claim order (newest first unless comparing with FIFO).
    order: Order,
    cap: Option<Cap>,
    running: HashMap<String, usize>,
    /// Task id → tenant, for the tasks running.
    by_task: HashMap<String, String>,
    /// Start times within [`WINDOW`], per tenant, epoch ms, oldest first.
    pub(super) starts: HashMap<String, VecDeque<u64>>,
    /// The tenants flooding at the last round ([`Ledger::flooding`]).
    flooding: HashSet<String>,
    /// What operators see of the share ([`Fairness`]).
    seen: Fairness,
}

/// What an invocation saw of the fair share, for its metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fairness {
    /// Starts of tasks with the fair share's ledger.
    pub starts: usize,
    /// Of them, starts of a tenant that was flooding at the time.
    pub flooding_starts: usize,
    /// The oldest age (ms) of a task waiting, of a tenant not flooding.
    pub quiet_oldest_age_ms: Option<u64>,
}

/// One claim round's admission: each tenant's service, counting what this
/// round admitted, and its share of the rate.
#[derive(Debug, Clone)]
pub struct Shares {
    /// Each tenant's share of the starts in a second, if rate limited.
    per_second: Option<usize>,
    cap: Option<Cap>,
    /// Starts in the window, per tenant.
    served: HashMap<String, usize>,
    /// Starts in the last second, per tenant.
    last_second: HashMap<String, usize>,
    /// Each tenant's last start, epoch ms.
    last_start_ms: HashMap<String, u64>,
    /// Tasks running, per tenant, counting this round's admissions.
    running: HashMap<String, usize>,
    /// This round's time, epoch ms.
    now_ms: u64,
    order: Order,
    /// The tenants keeping up this round ([`keeping_up`]).
    keeping_up: HashSet<String>,
}

impl Ledger {
    /// A ledger for at most `per_second` starts a second.
    pub fn new(per_second: Option<u32>) -> Self {
        Self {
            per_second,
            ..Self::default()
        }
    }

    /// The same in `order` (for the FIFO comparison runs).
    pub fn in_order(self, order: Order) -> Self {
        Self { order, ..self }
    }

    /// The same with a per-tenant cap.
    pub fn with_cap(self, cap: Option<Cap>) -> Self {
        Self { cap, ..self }
    }

    /// Books the start of `task_id` for `tenant` at `now_ms` (epoch ms).
    pub fn start(&mut self, task_id: &str, tenant: &str, now_ms: u64) {
        *self.running.entry(tenant.to_owned()).or_default() += 1;
        self.by_task.insert(task_id.to_owned(), tenant.to_owned());
        self.starts
            .entry(tenant.to_owned())
            .or_default()
            .push_back(now_ms);
        self.seen.starts += 1;
        self.seen.flooding_starts += usize::from(self.flooding.contains(tenant));
    }

    /// Books the end of `task_id` (a run that ended, a claim that failed).
    pub fn end(&mut self, task_id: &str) {
        if let Some(tenant) = self.by_task.remove(task_id)
            && let Some(n) = self.running.get_mut(&tenant)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(&tenant);
            }
        }
    }

    /// What the invocation saw of the share so far.
    pub fn fairness(&self) -> Fairness {
        self.seen
    }

    /// Books a round's flooding tenants and the others' oldest wait.
    pub fn observe(&mut self, flooding: HashSet<String>, quiet_oldest_age_ms: Option<u64>) {
        self.flooding = flooding;
        self.seen.quiet_oldest_age_ms = self.seen.quiet_oldest_age_ms.max(quiet_oldest_age_ms);
    }

    /// Drops the starts older than [`WINDOW`] at `now_ms`.
    pub(super) fn forget(&mut self, now_ms: u64) {
        let window = WINDOW.as_millis() as u64;
        for times in self.starts.values_mut() {
            while times
                .front()
                .is_some_and(|t| now_ms.saturating_sub(*t) >= window)
            {
                times.pop_front();
            }
        }
        self.starts.retain(|_, t| !t.is_empty());
    }

    /// The tenants flooding ([`flooding`]), of `waiting` and those running.
    pub fn flooding(&self, waiting: &HashMap<String, usize>) -> HashSet<String> {
        flooding(
            waiting
                .iter()
                .chain(self.running.iter())
                .map(|(t, n)| (t.as_str(), *n)),
        )
    }

    /// The admission of a round at `now_ms` of the tenants `waiting`.
    pub fn shares<'a>(
        &mut self,
        waiting: impl IntoIterator<Item = &'a str>,
        now_ms: u64,
    ) -> Shares {
        let waiting: HashSet<&str> = waiting
            .into_iter()
            .filter(|t| !self.running.contains_key(*t))
            .collect();
        let n = (self.running.len() + waiting.len()).max(1);
        self.forget(now_ms);
        let mut shares = Shares {
            per_second: self.per_second.map(|r| (r as usize).div_ceil(n).max(1)),
            cap: self.cap,
            served: HashMap::new(),
            last_second: HashMap::new(),
            last_start_ms: HashMap::new(),
            running: self.running.clone(),
            now_ms,
            order: self.order,
            keeping_up: HashSet::new(),
        };
        for (tenant, times) in &self.starts {
            let recent = times
                .iter()
                .filter(|t| now_ms.saturating_sub(**t) < 1_000)
                .count();
            shares.served.insert(tenant.clone(), times.len());
            shares.last_second.insert(tenant.clone(), recent);
            if let Some(last) = times.back() {
                shares.last_start_ms.insert(tenant.clone(), *last);
            }
        }
        shares
    }
}

/// The tenants flooding, of `load` (tasks waiting or running per tenant):
/// more than twice the mean, as SQS calls a message group noisy; a tenant
/// alone never floods. `lifo stats --tenants` judges by it too.
pub fn flooding<'a>(load: impl IntoIterator<Item = (&'a str, usize)>) -> HashSet<String> {
    let mut per: HashMap<&str, usize> = HashMap::new();
    for (t, n) in load {
        *per.entry(t).or_default() += n;
    }
    let total: usize = per.values().sum();
    let tenants = per.len().max(1);
    per.into_iter()
        .filter(|(_, n)| n * tenants > 2 * total)
        .map(|(t, _)| t.to_owned())
        .collect()
}

/// The tenants of `waiting` keeping up while one of `flooding` floods: at
/// most [`FEW_WAITING`] waiting, not flooding. Their work is not piling up,
/// so they go first and give their oldest task first.
pub fn keeping_up(waiting: &HashMap<String, usize>, flooding: &HashSet<String>) -> HashSet<String> {
    if flooding.is_empty() {
        return HashSet::new();
    }
    waiting
        .iter()
        .filter(|(t, n)| **n <= FEW_WAITING && !flooding.contains(*t))
        .map(|(t, _)| t.clone())
        .collect()
}

impl Shares {
    /// The same with `tenants` keeping up ([`keeping_up`]).
    pub fn with_keeping_up(self, tenants: HashSet<String>) -> Self {
        Self {
            keeping_up: tenants,
            ..self
        }
    }

    /// Whether `tenant` keeps up this round.
    pub fn keeps_up(&self, tenant: &str) -> bool {
        self.keeping_up.contains(tenant)
    }

    /// Whether `tenant` gives its oldest candidate, not its first: it keeps
    /// up, newest first (in FIFO order its first is its oldest).
    pub fn gives_oldest(&self, tenant: &str) -> bool {
        self.order.newest_first() && self.keeps_up(tenant)
    }

    /// Of the `waiting` tenants, each with the key of the candidate it gives,
    /// the one the next slot goes to (least by `rank`), not one at its cap.
    pub fn pick<'a>(&self, waiting: impl IntoIterator<Item = (&'a str, i64)>) -> Option<&'a str> {
        let top = self.top();
        waiting
            .into_iter()
            .filter(|(tenant, _)| !self.capped(tenant))
            .min_by_key(|(tenant, key)| (self.rank(tenant, *key, top), *tenant))
            .map(|(tenant, _)| tenant)
    }

    /// Whether `tenant` is at its cap, running or started in the last second.
    pub fn capped(&self, tenant: &str) -> bool {
        self.cap.is_some_and(|cap| {
            self.running.get(tenant).copied().unwrap_or(0) >= cap.in_flight
                || cap
                    .per_second
                    .is_some_and(|r| self.last_second.get(tenant).copied().unwrap_or(0) >= r)
        })
    }

    /// Where a waiting tenant stands, least first:
    /// 1. a higher priority first;
    /// 2. a tenant that keeps up or is under the top before one at the top;
    ///    one past its share of the rate last;
    /// 3. under the top, the one that has waited longest, since its newest
    ///    task was written or its last start, whichever is later (so a
    ///    burst of one tenant does not hold the slots); one that keeps up,
    ///    by its oldest task's age; at the top or past the rate, the least
    ///    served;
    /// 4. then the candidate it gives.
    fn rank(&self, tenant: &str, key: i64, top: usize) -> (i64, u8, i64, i64, i64) {
        // Greater first in LIFO order, smaller first in FIFO.
        let first = |k: i64| {
            if self.order.newest_first() {
                k.saturating_neg()
            } else {
                k
            }
        };
        let priority = first(Priority::of_key(key).shift());
        let served = self.served.get(tenant).copied().unwrap_or(0);
        let last = self.last_second.get(tenant).copied().unwrap_or(0);
        let over_rate = self.per_second.is_some_and(|s| last >= s);
        let below_top = served < top;
        let served = i64::try_from(served).unwrap_or(i64::MAX);
        if over_rate {
            (priority, 2, served, 0, first(key))
        } else if below_top || self.keeps_up(tenant) {
            // One that keeps up: since its oldest task's stamp alone.
            let last = match self.keeps_up(tenant) {
                true => 0,
                false => self.last_start_ms.get(tenant).copied().unwrap_or(0),
            };
            let since = i64::try_from(at_ms(key).max(last)).unwrap_or(i64::MAX);
            (priority, 0, since, served, first(key))
        } else {
            (priority, 1, served, 0, first(key))
        }
    }

    /// Whether `tenant` keeps up or is under the top, within its rate.
    pub fn favoured(&self, tenant: &str) -> bool {
        let served = self.served.get(tenant).copied().unwrap_or(0);
        let last = self.last_second.get(tenant).copied().unwrap_or(0);
        (served < self.top() || self.keeps_up(tenant)) && self.per_second.is_none_or(|s| last < s)
    }

    /// Books one start of `tenant` in this round.
    pub fn book(&mut self, tenant: &str) {
        *self.served.entry(tenant.to_owned()).or_default() += 1;
        *self.last_second.entry(tenant.to_owned()).or_default() += 1;
        *self.running.entry(tenant.to_owned()).or_default() += 1;
        self.last_start_ms.insert(tenant.to_owned(), self.now_ms);
    }

    /// The highest service of any tenant lately.
    pub fn top(&self) -> usize {
        self.served.values().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The wall clock of the tests' rounds, epoch ms.
    pub(crate) const NOW: u64 = 1_764_547_200_000;

    /// Books `n` starts of `tenant` at `at` (epoch ms), still running.
    pub(crate) fn started(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
        for i in 0..n {
            l.start(&format!("{tenant}{i}"), tenant, at);
        }
    }

    /// Books `n` starts of `tenant` at `at` that have ended.
    pub(crate) fn ran(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
        started(l, tenant, n, at);
        for i in 0..n {
            l.end(&format!("{tenant}{i}"));
        }
    }

    /// Fills `n` slots from `waiting` (each tenant's times, newest first):
    /// the tenant [`Shares::pick`] names gives its first.
    fn fill(shares: &mut Shares, waiting: &[(&str, &[u64])], n: usize) -> Vec<String> {
        let mut left: Vec<(&str, Vec<u64>)> =
            waiting.iter().map(|(t, at)| (*t, at.to_vec())).collect();
        let mut out = Vec::new();
        while out.len() < n {
            let heads: Vec<(&str, i64)> = left
                .iter()
                .filter_map(|(t, at)| at.first().map(|at| (*t, Priority::Normal.key(*at))))
                .collect();
            let Some(t) = shares.pick(heads) else { break };
            if let Some((_, at)) = left.iter_mut().find(|(name, _)| *name == t) {
                at.remove(0);
            }
            shares.book(t);
            out.push(t.to_owned());
        }
        out
    }

    #[test]
    fn a_tenant_alone_gets_every_slot() {
        let mut l = Ledger::new(None);
        ran(&mut l, "a", 20, NOW);
        let mut s = l.shares(["a"], NOW);
        let times: Vec<u64> = (0..10).map(|i| NOW - i).collect();
        assert_eq!(fill(&mut s, &[("a", &times)], 8).len(), 8);
    }

    #[test]
    fn tenants_under_the_top_go_first_the_longest_waiting_first() {
        let mut l = Ledger::new(None);
        let t0 = NOW - 5_000;
        started(&mut l, "b", 6, t0);
        started(&mut l, "c", 1, t0);
        // Five seconds later: b was served six, c one (5 s ago), a none.
        // b floods (its newest is 10 ms old); a's newest waited 1 s, c's
        // 3 s. c first, then a; then a again (served less than c, both
        // just started); c; b only once nobody under the top waits.
        let mut s = l.shares(["b", "a", "c"], NOW);
        let b: Vec<u64> = (0..5).map(|i| NOW - 10 - i).collect();
        let got = fill(
            &mut s,
            &[
                ("b", &b),
                ("a", &[NOW - 1_000, NOW - 1_500]),
                ("c", &[NOW - 3_000, NOW - 3_500]),
            ],
            5,
        );
        assert_eq!(got, ["c", "a", "a", "c", "b"]);
        for i in 0..6 {
            l.end(&format!("b{i}"));
        }
        assert_eq!(l.running.get("b"), None);
        // A window later nobody was served lately: newest first.
        let later = t0 + WINDOW.as_millis() as u64;
        let mut s = l.shares(["b", "a"], later);
        assert_eq!(
            fill(&mut s, &[("b", &[later - 10]), ("a", &[later - 1_000])], 1),
            ["b"]
        );
    }

    #[test]
    fn a_burst_of_one_tenant_under_the_top_does_not_hold_the_slots() {
        let mut l = Ledger::new(None);
        started(&mut l, "z", 30, NOW);
        let mut s = l.shares(["a", "c", "z"], NOW);
        // a wrote 20 tasks 2 s ago; c one task 1 s ago: after a's first
        // start, c's task has waited longer than a's just-served turn.
        let a: Vec<u64> = (0..20).map(|i| NOW - 2_000 - i).collect();
        let got = fill(&mut s, &[("a", &a), ("c", &[NOW - 1_000])], 3);
        assert_eq!(got, ["a", "c", "a"]);
    }

    /// `n` waiting per tenant.
    fn counts(n: &[(&str, usize)]) -> HashMap<String, usize> {
        n.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
    }

    /// [`keeping_up`] with `l`'s flooding tenants, as a round finds them.
    fn keeping(l: &Ledger, waiting: &HashMap<String, usize>) -> HashSet<String> {
        keeping_up(waiting, &l.flooding(waiting))
    }

    #[test]
    fn a_tenant_with_few_waiting_keeps_up_while_another_floods() {
        let l = Ledger::new(None);
        // Nobody floods: nobody keeps up, each gives its first; with two
        // tenants nobody ever floods.
        assert!(keeping(&l, &counts(&[("a", 4), ("b", 1)])).is_empty());
        assert!(keeping(&l, &counts(&[("a", 1), ("b", 40)])).is_empty());
        let even = counts(&[("a", 3), ("b", 9), ("c", 8), ("d", 6)]);
        assert!(keeping(&l, &even).is_empty(), "backlogged alike");
        // b floods (20 of 29, past twice the mean): a, with four, keeps
        // up; c, with five, does not.
        let waiting = counts(&[("a", 4), ("b", 20), ("c", 5)]);
        assert_eq!(keeping(&l, &waiting), HashSet::from(["a".to_owned()]));
        // A tenant with few waiting but many running floods (64 of 89 in
        // all, past twice the mean): not keeping up.
        let mut l = Ledger::new(None);
        started(&mut l, "a", 60, NOW);
        assert!(keeping(&l, &waiting).is_empty());
    }

    #[test]
    fn a_tenant_that_keeps_up_goes_first_at_the_top_its_oldest_by_age() {
        let mut l = Ledger::new(None);
        // All three served alike lately: all at the top.
        for t in ["a", "b", "f"] {
            ran(&mut l, t, 5, NOW - 2_000);
        }
        let waiting = counts(&[("a", 2), ("b", 3), ("f", 20)]);
        let s = l
            .shares(["a", "b", "f"], NOW)
            .with_keeping_up(keeping(&l, &waiting));
        assert!(s.keeps_up("a") && s.keeps_up("b") && !s.keeps_up("f"));
        assert!(s.favoured("a") && !s.favoured("f"));
        // a and b give their oldest (a's 1.5 s old, b's 0.8 s): a first,
        // though f's is newer and every one is at the top; without the
        // tenants that keep up, f's newest.
        let heads = [
            ("f", Priority::Normal.key(NOW - 10)),
            ("a", Priority::Normal.key(NOW - 1_500)),
            ("b", Priority::Normal.key(NOW - 800)),
        ];
        assert_eq!(s.pick(heads), Some("a"));
        assert_eq!(s.pick(heads[1..].iter().copied().rev()), Some("a"));
        let without = l.shares(["a", "b", "f"], NOW);
        assert_eq!(without.pick(heads), Some("f"));
    }

    #[test]
    fn priorities_come_first_then_the_fair_share_within_each() {
        let mut l = Ledger::new(None);
        started(&mut l, "z", 10, NOW);
        let s = l.shares(["a", "c", "z"], NOW);
        // z is at the top, a and c under it; z's high-priority task goes first,
        // then, in the normal priority, the longest waiting under the top.
        let heads = [
            ("z", Priority::High.key(NOW - 10)),
            ("a", Priority::Normal.key(NOW - 100)),
            ("c", Priority::Normal.key(NOW - 9_000)),
        ];
        assert_eq!(s.pick(heads), Some("z"));
        assert_eq!(s.pick(heads[1..].iter().copied()), Some("c"));
        assert_eq!(s.pick([]), None);
    }

    #[test]
    fn in_fifo_order_the_oldest_first_at_the_top() {
        let mut l = Ledger::new(None).in_order(Order::Fifo);
        started(&mut l, "a", 5, NOW);
        started(&mut l, "b", 5, NOW);
        // Both at the top: the one whose first candidate (its oldest, in
        // FIFO order) is older goes first; in LIFO, the newer.
        let heads = [
            ("a", Priority::Normal.key(NOW - 10)),
            ("b", Priority::Normal.key(NOW - 5_000)),
        ];
        assert_eq!(l.shares(["a", "b"], NOW).pick(heads), Some("b"));
        let mut l = l.in_order(Order::Lifo);
        assert_eq!(l.shares(["a", "b"], NOW).pick(heads), Some("a"));
    }

    #[test]
    fn the_rate_is_shared_over_the_last_second() {
        let mut l = Ledger::new(Some(10));
        ran(&mut l, "a", 5, NOW);
        ran(&mut l, "b", 5, NOW);
        // Two tenants, 5 starts a second each; both used theirs. A third,
        // c, wants a slot: it goes first, though a's task is older and a
        // under the top would win on waiting time alone.
        let s = l.shares(["a", "b", "c"], NOW);
        let heads = [
            ("a", Priority::Normal.key(NOW - 5_000)),
            ("c", Priority::Normal.key(NOW - 10)),
        ];
        assert_eq!(s.pick(heads), Some("c"));
        // Past its rate, a still gets what nobody else wants.
        assert_eq!(
            s.pick([("a", Priority::Normal.key(NOW - 5_000))]),
            Some("a")
        );
        // A second later the starts have left the last second: both are
        // at the top, and the newest goes first.
        let s = l.shares(["a", "b"], NOW + 1_001);
        let heads = [
            ("a", Priority::Normal.key(NOW - 5_000)),
            ("b", Priority::Normal.key(NOW - 10)),
        ];
        assert_eq!(s.pick(heads), Some("b"));
    }

    #[test]
    fn a_tenant_at_its_cap_waits_though_slots_are_free() {
        let mut l = Ledger::new(None).with_cap(Some(Cap::new(2, 5, None)));
        started(&mut l, "a", 1, NOW);
        let mut s = l.shares(["a"], NOW);
        let a: Vec<u64> = (0..10).map(|i| NOW - i).collect();
        // Five slots, one held by a: a gets one more, then waits.
        assert_eq!(fill(&mut s, &[("a", &a)], 4), ["a"]);
        assert!(s.capped("a"));
        // b is not capped by a's cap.
        assert_eq!(fill(&mut s, &[("a", &a), ("b", &[NOW])], 4), ["b"]);
        // Once a run of a ends, a may start again.
        l.end("a0");
        let mut s = l.shares(["a"], NOW + 10);
        assert_eq!(fill(&mut s, &[("a", &a)], 4), ["a", "a"]);
    }

    #[test]
    fn the_cap_takes_its_share_of_the_rate_limit() {
        // 2 of 5 slots at 10 starts a second: 4 a second for the tenant.
        let cap = Cap::new(2, 5, Some(10));
        assert_eq!(cap.per_second, Some(4));
        assert_eq!(Cap::new(1, 5, Some(2)).per_second, Some(1));
        let mut l = Ledger::new(Some(10)).with_cap(Some(cap));
        ran(&mut l, "a", 4, NOW);
        let s = l.shares(["a"], NOW + 100);
        assert!(s.capped("a"));
        assert_eq!(s.pick([("a", Priority::Normal.key(NOW))]), None);
        let s = l.shares(["a"], NOW + 1_000);
        assert!(!s.capped("a"));
    }

    #[test]
    fn flooding_is_more_than_twice_the_mean_and_a_tenant_alone_never_floods() {
        // Mean 4: 9 is past twice it.
        let load = [("flood", 9), ("a", 1), ("b", 1), ("c", 1), ("c", 0)];
        assert_eq!(flooding(load), ["flood".to_owned()].into());
        assert!(flooding([("a", 10), ("b", 10)]).is_empty());
        // Waiting and running count alike.
        let mut l = Ledger::new(None);
        started(&mut l, "f", 3, NOW);
        let waiting: HashMap<String, usize> = [
            ("f".to_owned(), 37),
            ("a".to_owned(), 1),
            ("b".to_owned(), 2),
        ]
        .into();
        let flooding = l.flooding(&waiting);
        assert_eq!(flooding, HashSet::from(["f".to_owned()]));
        let alone: HashMap<String, usize> = [("f".to_owned(), 37)].into();
        assert!(l.flooding(&alone).is_empty());
        let even: HashMap<String, usize> = [("f".to_owned(), 1), ("a".to_owned(), 4)].into();
        assert!(l.flooding(&even).is_empty());
        // Starts are booked as flooding while the tenant floods.
        l.observe(flooding, Some(120));
        l.start("f9", "f", NOW);
        l.start("a1", "a", NOW);
        l.observe(HashSet::new(), Some(80));
        assert_eq!(
            l.fairness(),
            Fairness {
                starts: 5,
                flooding_starts: 1,
                quiet_oldest_age_ms: Some(120)
            }
        );
    }
}
