//! A fair share per tenant: when several tenants have work, each gets at
//! most its share of the slots and of the rate limit, newest first within
//! each; a tenant alone gets everything.
//!
//! The mechanism is a per-tenant order while claiming, not a change of the
//! index: a task's `tenant` is projected into the LIFO index, so the
//! processor sees it on each candidate at no extra read. Free slots go to
//! the tenants that were served least lately (starts in the last
//! [`WINDOW`]), newest first within each: max-min fair on service. A tenant
//! below its fair share of the service is never kept waiting by one above
//! it; the one that floods the queue gets what the others leave free, and
//! no slot idles while anyone has work. With a rate limit, a tenant also
//! starts at most `ceil(per_second / active)` a second while tenants under
//! that wait (active: running, or waiting in the heads).
//!
//! Service is counted in starts, not slot-time: runs of one downstream take
//! about as long whoever's task they run. Tasks without a tenant share one
//! (the empty name).
//!
//! The LIFO guarantee that remains: within a tenant, exactly what the
//! heads give ([`crate::heads`]); across tenants, a newer task is passed
//! over only for a tenant served less in the last [`WINDOW`]. What it
//! costs, once tasks with a tenant are seen (a queue without tenants pays
//! nothing): the tenant's name in each index entry, and reads of [`PAGE`]
//! entries per shard, again after [`MIN_AGE`] ([`policy`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

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
pub fn policy(base: crate::heads::HeadsPolicy) -> crate::heads::HeadsPolicy {
    crate::heads::HeadsPolicy {
        page: base.page.max(PAGE),
        min_age: MIN_AGE,
        ..base
    }
}

/// How far back service counts.
pub const WINDOW: Duration = Duration::from_secs(10);

/// The tenant name of a task or candidate (none: the empty name).
pub fn tenant_of(tenant: Option<&str>) -> &str {
    tenant.unwrap_or("")
}

/// What one invocation's tenants have running and were served lately.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Slots of this invocation (its share of the runner's concurrency).
    capacity: usize,
    /// Starts per second this invocation may make, if rate limited.
    per_second: Option<u32>,
    running: HashMap<String, usize>,
    /// Task id → tenant, for the tasks running.
    by_task: HashMap<String, String>,
    /// Start times within [`WINDOW`], per tenant.
    starts: HashMap<String, VecDeque<Instant>>,
}

/// One claim round's admission: the service level reached (tenants served
/// less than it are admitted) and each tenant's service, counting what
/// this round admitted.
#[derive(Debug, Clone)]
pub struct Shares {
    level: usize,
    /// Each tenant's share of the starts in a second, if rate limited.
    per_second: Option<usize>,
    /// Starts in the window, per tenant.
    served: HashMap<String, usize>,
    /// Starts in the last second, per tenant (rate limited only).
    last_second: HashMap<String, usize>,
}

impl Ledger {
    pub fn new(capacity: usize, per_second: Option<u32>) -> Self {
        Self {
            capacity: capacity.max(1),
            per_second,
            ..Self::default()
        }
    }

    /// Slots of this invocation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Books the start of `task_id` for `tenant` at `now`.
    pub fn start(&mut self, task_id: &str, tenant: &str, now: Instant) {
        *self.running.entry(tenant.to_owned()).or_default() += 1;
        self.by_task.insert(task_id.to_owned(), tenant.to_owned());
        self.starts
            .entry(tenant.to_owned())
            .or_default()
            .push_back(now);
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

    /// The admission of one round at `now`, with `waiting` the tenants of
    /// the candidates waiting in the heads.
    pub fn shares<'a>(
        &mut self,
        waiting: impl IntoIterator<Item = &'a str>,
        now: Instant,
    ) -> Shares {
        let mut active: HashSet<String> = self.running.keys().cloned().collect();
        active.extend(waiting.into_iter().map(str::to_owned));
        let n = active.len().max(1);
        for times in self.starts.values_mut() {
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) >= WINDOW)
            {
                times.pop_front();
            }
        }
        self.starts.retain(|_, t| !t.is_empty());
        let second = Duration::from_secs(1);
        Shares {
            level: 0,
            per_second: self.per_second.map(|r| (r as usize).div_ceil(n).max(1)),
            served: self
                .starts
                .iter()
                .map(|(k, v)| (k.clone(), v.len()))
                .collect(),
            last_second: self
                .starts
                .iter()
                .map(|(k, v)| {
                    let recent = v
                        .iter()
                        .filter(|t| now.duration_since(**t) < second)
                        .count();
                    (k.clone(), recent)
                })
                .collect(),
        }
    }
}

impl Shares {
    /// Whether `tenant` may start one more at this level; if so, books it.
    /// Past its share of the rate a tenant starts only at the levels above
    /// everyone's service (what nobody under it wants).
    pub fn admit(&mut self, tenant: &str) -> bool {
        let served = self.served.get(tenant).copied().unwrap_or(0);
        let last = self.last_second.get(tenant).copied().unwrap_or(0);
        let over_rate = self.per_second.is_some_and(|s| last >= s) && self.level <= self.top();
        if served > self.level || over_rate {
            return false;
        }
        *self.served.entry(tenant.to_owned()).or_default() += 1;
        *self.last_second.entry(tenant.to_owned()).or_default() += 1;
        true
    }

    /// The next level: tenants served one more are admitted too.
    pub fn raise(&mut self) {
        self.level += 1;
    }

    /// Tenants served at most this many starts in the window are admitted.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The highest service of any tenant: past it every tenant is admitted.
    pub fn top(&self) -> usize {
        self.served.values().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits from `candidates` (tenant names, newest first) level by
    /// level, as the claim loop does, up to `want`.
    fn take(shares: &mut Shares, candidates: &[&str], want: usize) -> Vec<String> {
        let mut left: Vec<&str> = candidates.to_vec();
        let mut out = Vec::new();
        while out.len() < want && !left.is_empty() && shares.level() <= shares.top() + want {
            let mut i = 0;
            while i < left.len() && out.len() < want {
                if shares.admit(left[i]) {
                    out.push(left.remove(i).to_owned());
                } else {
                    i += 1;
                }
            }
            shares.raise();
        }
        out
    }

    #[test]
    fn a_tenant_alone_gets_every_slot() {
        let mut l = Ledger::new(8, None);
        let now = Instant::now();
        for i in 0..20 {
            l.start(&format!("a{i}"), "a", now);
            l.end(&format!("a{i}"));
        }
        let mut s = l.shares(["a"], now);
        assert_eq!(take(&mut s, &["a"; 10], 8).len(), 8);
    }

    #[test]
    fn the_least_served_gain_first_newest_first_within_a_level() {
        let mut l = Ledger::new(8, None);
        let now = Instant::now();
        for i in 0..6 {
            l.start(&format!("b{i}"), "b", now);
        }
        l.start("c0", "c", now);
        // b was served six, c one, a none: a gains first, then a and c take
        // turns, newest first within a level; b only once they reach it.
        let mut s = l.shares(["b", "a", "c"], now);
        let got = take(&mut s, &["b", "b", "a", "c", "a", "c", "a", "a"], 5);
        assert_eq!(got, ["a", "c", "a", "c", "a"]);
        for i in 0..6 {
            l.end(&format!("b{i}"));
        }
        assert_eq!(l.running("b"), 0);
        // A window later nobody was served lately: newest first.
        let later = now + WINDOW;
        let mut s = l.shares(["b", "a"], later);
        assert_eq!(take(&mut s, &["b", "a"], 1), ["b"]);
    }

    #[test]
    fn the_rate_is_shared_over_the_last_second() {
        let mut l = Ledger::new(100, Some(10));
        let t0 = Instant::now();
        for i in 0..5 {
            l.start(&format!("a{i}"), "a", t0);
            l.end(&format!("a{i}"));
        }
        for i in 0..5 {
            l.start(&format!("b{i}"), "b", t0);
            l.end(&format!("b{i}"));
        }
        // Two tenants, 5 starts a second each; both used theirs: neither
        // starts until the levels pass everyone's service.
        let mut s = l.shares(["a", "b"], t0);
        for _ in 0..=5 {
            assert!(!s.admit("a"));
            s.raise();
        }
        assert!(s.admit("a"), "what nobody under it wants");
        // A second later the starts have left the last second.
        let mut s = l.shares(["a", "b"], t0 + Duration::from_millis(1_001));
        s.raise();
        for _ in 0..5 {
            s.raise();
        }
        assert!(s.admit("a"));
        assert_eq!(tenant_of(None), "");
    }
}
