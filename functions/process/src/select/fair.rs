//! A fair share per tenant: when several tenants have work, the tenants
//! served less lately than the most served one go first, newest first
//! within each, and a tenant past its share of the rate limit goes last; a
//! tenant alone gets everything.
//!
//! The mechanism is a per-tenant order while claiming, not a change of the
//! index: a task's `tenant` is projected into the claimable index, so the
//! processor sees it on each candidate at no extra read. Each free slot
//! goes to one waiting tenant ([`Shares::pick`]), which gives its newest
//! task:
//! - a tenant served less in the last [`WINDOW`] than the most served one
//!   (under its share) goes before one at the top, so the tenant that
//!   floods the queue gets what the others leave free, and no slot idles
//!   while anyone has work;
//! - among the tenants under the top, the one that has waited longest
//!   (since its newest task was written, or since its last start if that
//!   came later) goes first: across them, as near to first come, first
//!   served as newest first within each allows. Their p95 age at start is
//!   what the share is judged by, and ordering them by service instead let
//!   an unlucky task be passed over again and again;
//! - with a rate limit, a tenant past `ceil(per_second / active)` starts
//!   in the last second goes last (active: running, or waiting in the
//!   heads);
//! - priorities come first: all this orders the tenants within a priority.
//!
//! Service is counted in starts, not slot-time: runs of one downstream take
//! about as long whoever's task they run. Tasks without a tenant share one
//! (the empty name).
//!
//! The LIFO guarantee that remains: within a tenant, exactly what the
//! heads give ([`super::heads`]); across the tenants of a priority, a newer
//! task is passed over only for a tenant under the top, or because its own
//! tenant is past its share of the rate. What it costs, once tasks with a
//! tenant are seen (a queue without tenants pays nothing): the tenant's
//! name in each index entry, and reads of [`PAGE`] entries per shard,
//! again after [`MIN_AGE`] ([`policy`]).

use super::heads::ShardHeads;
use lifo_core::{Candidate, Order, now_ms};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

/// Candidates per shard per read with the fair share on: a tenant's task
/// deeper than this under other tenants' newer tasks is not seen (and gets
/// no slot) until those are claimed or the heads are read again.
pub const PAGE: usize = 40;

/// With the fair share on, heads that served a claim are read again once
/// this old (not 100 ms): a task that a tenant under its share wrote a
/// moment ago is seen before a free slot goes to a tenant above it.
pub const MIN_AGE: Duration = Duration::from_millis(20);

/// The heads' policy once tasks with a tenant are seen: reads of [`PAGE`]
/// entries per shard, again after [`MIN_AGE`]. A queue whose tasks have no
/// tenant keeps `base` and pays nothing for the fair share.
pub fn policy(base: super::heads::HeadsPolicy) -> super::heads::HeadsPolicy {
    super::heads::HeadsPolicy {
        page: base.page.max(PAGE),
        min_age: MIN_AGE,
        ..base
    }
}

/// How far back service counts.
pub const WINDOW: Duration = Duration::from_secs(10);

/// What one invocation's tenants have running and were served lately.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Starts per second this invocation may make, if rate limited.
    per_second: Option<u32>,
    /// The claim order (newest first unless comparing with FIFO).
    order: Order,
    running: HashMap<String, usize>,
    /// Task id → tenant, for the tasks running.
    by_task: HashMap<String, String>,
    /// Start times within [`WINDOW`], per tenant, epoch ms: the wall
    /// clock, as the index keys a tenant's waiting time is read from.
    starts: HashMap<String, VecDeque<u64>>,
}

/// One claim round's admission: each tenant's service, counting what this
/// round admitted, and its share of the rate.
#[derive(Debug, Clone)]
pub struct Shares {
    /// Each tenant's share of the starts in a second, if rate limited.
    per_second: Option<usize>,
    /// Starts in the window, per tenant.
    served: HashMap<String, usize>,
    /// Starts in the last second, per tenant (rate limited only).
    last_second: HashMap<String, usize>,
    /// Each tenant's last start, epoch ms.
    last_start_ms: HashMap<String, u64>,
    /// This round's time, epoch ms.
    now_ms: u64,
    order: Order,
}

impl Ledger {
    /// A ledger for an invocation that may start `per_second` tasks a
    /// second, if rate limited.
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

    /// Books the start of `task_id` for `tenant` at `now_ms` (epoch ms).
    pub fn start(&mut self, task_id: &str, tenant: &str, now_ms: u64) {
        *self.running.entry(tenant.to_owned()).or_default() += 1;
        self.by_task.insert(task_id.to_owned(), tenant.to_owned());
        self.starts
            .entry(tenant.to_owned())
            .or_default()
            .push_back(now_ms);
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

    /// Tasks of `tenant` running now.
    pub fn running(&self, tenant: &str) -> usize {
        self.running.get(tenant).copied().unwrap_or(0)
    }

    /// The admission of one round at `now_ms` (epoch ms), with `waiting`
    /// the tenants of the candidates waiting in the heads.
    pub fn shares<'a>(
        &mut self,
        waiting: impl IntoIterator<Item = &'a str>,
        now_ms: u64,
    ) -> Shares {
        let mut active: HashSet<String> = self.running.keys().cloned().collect();
        active.extend(waiting.into_iter().map(str::to_owned));
        let n = active.len().max(1);
        let ago = |t: &u64| Duration::from_millis(now_ms.saturating_sub(*t));
        for times in self.starts.values_mut() {
            while times.front().is_some_and(|t| ago(t) >= WINDOW) {
                times.pop_front();
            }
        }
        self.starts.retain(|_, t| !t.is_empty());
        let second = Duration::from_secs(1);
        let mut shares = Shares {
            per_second: self.per_second.map(|r| (r as usize).div_ceil(n).max(1)),
            served: HashMap::new(),
            last_second: HashMap::new(),
            last_start_ms: HashMap::new(),
            now_ms,
            order: self.order,
        };
        for (tenant, times) in &self.starts {
            let recent = times.iter().filter(|t| ago(t) < second).count();
            shares.served.insert(tenant.clone(), times.len());
            shares.last_second.insert(tenant.clone(), recent);
            if let Some(last) = times.back() {
                shares.last_start_ms.insert(tenant.clone(), *last);
            }
        }
        shares
    }
}

impl Shares {
    /// Of the waiting tenants, each given with the index key of its first
    /// candidate (its newest, in LIFO order), the one the next free slot
    /// goes to (the least by `rank`); `None` when none waits.
    pub fn pick<'a>(&self, waiting: impl IntoIterator<Item = (&'a str, i64)>) -> Option<&'a str> {
        let top = self.top();
        waiting
            .into_iter()
            .min_by_key(|(tenant, key)| (self.rank(tenant, *key, top), *tenant))
            .map(|(tenant, _)| tenant)
    }

    /// Where a waiting tenant stands, least first:
    /// 1. a higher priority first (in the claim order);
    /// 2. a tenant served less lately than the most served one (under its
    ///    share) before one at the top; one past its share of the rate
    ///    last, when nobody else wants the slot;
    /// 3. under the top, the tenant that has waited longest: since its
    ///    newest task was written or since its last start, whichever is
    ///    later (so one that just got a slot goes behind the others, and a
    ///    burst of one tenant's tasks does not hold the slots): as near to
    ///    first come, first served across the tenants under their share as
    ///    newest first within each allows; then the least served. At the
    ///    top, or past the rate: the least served;
    /// 4. then the first candidate in the claim order (the newest).
    fn rank(&self, tenant: &str, key: i64, top: usize) -> (i64, u8, i64, i64, i64) {
        // Greater first in LIFO order, smaller first in FIFO.
        let first = |k: i64| match self.order {
            Order::Lifo => k.saturating_neg(),
            Order::Fifo => k,
        };
        let priority = first(lifo_core::priority::Priority::of_key(key).shift());
        let served = self.served.get(tenant).copied().unwrap_or(0);
        let last = self.last_second.get(tenant).copied().unwrap_or(0);
        let over_rate = self.per_second.is_some_and(|s| last >= s);
        let below_top = served < top;
        let served = i64::try_from(served).unwrap_or(i64::MAX);
        if over_rate {
            (priority, 2, served, 0, first(key))
        } else if below_top {
            let last = self.last_start_ms.get(tenant).copied().unwrap_or(0);
            let since =
                i64::try_from(lifo_core::priority::at_ms(key).max(last)).unwrap_or(i64::MAX);
            (priority, 0, since, served, first(key))
        } else {
            (priority, 1, served, 0, first(key))
        }
    }

    /// Books one start of `tenant` in this round.
    pub fn book(&mut self, tenant: &str) {
        *self.served.entry(tenant.to_owned()).or_default() += 1;
        *self.last_second.entry(tenant.to_owned()).or_default() += 1;
        self.last_start_ms.insert(tenant.to_owned(), self.now_ms);
    }

    /// The highest service of any tenant lately.
    pub fn top(&self) -> usize {
        self.served.values().copied().max().unwrap_or(0)
    }
}

/// Up to `want` candidates of `heads` by the fair share: each free slot
/// goes to the waiting tenant that [`Shares::pick`] names, and takes that
/// tenant's first candidate in the claim order (its newest).
pub fn take(
    heads: &mut ShardHeads,
    want: usize,
    exclude: &HashSet<String>,
    ledger: &mut Ledger,
) -> Vec<Candidate> {
    let mut taken = exclude.clone();
    let mut waiting = heads.tenant_heads(&taken);
    let mut shares = ledger.shares(waiting.keys().map(String::as_str), now_ms());
    let mut out: Vec<Candidate> = Vec::with_capacity(want);
    // Tenants whose first candidate sits behind a cut-short shard's end.
    let mut blocked: HashSet<String> = HashSet::new();
    while out.len() < want {
        let next = shares.pick(
            waiting
                .iter()
                .filter(|(t, _)| !blocked.contains(*t))
                .map(|(t, key)| (t.as_str(), *key)),
        );
        let Some(tenant) = next.map(str::to_owned) else {
            break;
        };
        let got = heads.take_by(1, &taken, |c| c.tenant_name() == tenant);
        match got.into_iter().next() {
            Some(c) => {
                shares.book(&tenant);
                taken.insert(c.task_id.clone());
                out.push(c);
                waiting = heads.tenant_heads(&taken);
            }
            None => {
                blocked.insert(tenant);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifo_core::priority::Priority;

    /// The wall clock of the tests' rounds, epoch ms.
    const NOW: u64 = 1_764_547_200_000;

    /// Books `n` starts of `tenant` at `at` (epoch ms), still running.
    fn started(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
        for i in 0..n {
            l.start(&format!("{tenant}{i}"), tenant, at);
        }
    }

    /// Books `n` starts of `tenant` at `at` that have ended.
    fn ran(l: &mut Ledger, tenant: &str, n: usize, at: u64) {
        started(l, tenant, n, at);
        for i in 0..n {
            l.end(&format!("{tenant}{i}"));
        }
    }

    /// Fills `n` slots from `waiting` (each tenant's candidates' times,
    /// newest first; normal priority) as the claim loop does: the tenant
    /// [`Shares::pick`] names gives its first candidate.
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
        assert_eq!(l.running("b"), 0);
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
}
