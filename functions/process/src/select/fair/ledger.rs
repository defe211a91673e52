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
    /// How far back service counts, when not [`WINDOW`].
    window: Option<Duration>,
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

    /// The same counting service over `window`.
    pub fn with_window(self, window: Duration) -> Self {
        Self {
            window: Some(window),
            ..self
        }
    }

    /// How far back service counts.
    pub fn window(&self) -> Duration {
        self.window.unwrap_or(WINDOW)
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
        let window = self.window().as_millis() as u64;
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
    keeping_up_within(waiting, flooding, FEW_WAITING)
}

/// [`keeping_up`] with at most `few` waiting.
pub fn keeping_up_within(
    waiting: &HashMap<String, usize>,
    flooding: &HashSet<String>,
    few: usize,
) -> HashSet<String> {
    if flooding.is_empty() {
        return HashSet::new();
    }
    waiting
        .iter()
        .filter(|(t, n)| **n <= few && !flooding.contains(*t))
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
pub(super) mod tests;
