//! The claimable index as the model keeps it: one projection per task that
//! has a `claimableAt`, its queries (key condition, `Limit` before the
//! filter, `LastEvaluatedKey`, `ExclusiveStartKey`) and its lag.
//!
//! AWS writes a global secondary index after the table, "within a second"
//! normally (every read of a GSI is eventually consistent): with a lag, each
//! change of a task's projection (placed, changed, removed) becomes visible
//! some time after its write, drawn from a seeded generator, so a read may
//! miss writes newer than the lag and return projections they replaced. A
//! task's changes become visible in the order they were written.

use crate::expr::attr;
use crate::model::Task;
use crate::order::Candidate;
use crate::priority::{self, SHIFT};
use crate::store::{IndexPage, IndexRead, Item};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// What the index holds of a task: the projection a [`Candidate`] reads,
/// and `retryAt`, which the filters read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub candidate: Candidate,
    pub retry_at: Option<u64>,
}

impl Entry {
    /// The task's entry, if it is in the index (it has a `claimableAt`).
    pub fn of(t: &Task) -> Option<Self> {
        Some(Self {
            candidate: Candidate {
                task_id: t.task_id.clone(),
                lifo_shard: t.lifo_shard,
                claimable_at: t.claimable_at?,
                expires_at: t.expires_at,
                lease_until: t.lease_until,
                token: t.token,
                attempts: t.attempts,
                tenant: t.tenant.clone(),
            },
            retry_at: t.retry_at,
        })
    }
}

/// How late the index shows a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lag {
    /// Current after every write (DynamoDB Local).
    #[default]
    Off,
    /// Each change visible a draw of `0..=max_ms` after its write, from a
    /// generator seeded with `seed`: the same writes, the same lags.
    Seeded { seed: u64, max_ms: u64 },
    /// Each change visible [`aws_lag`] after its write, drawn from a
    /// generator seeded with `seed`.
    Aws { seed: u64 },
    /// Every change visible exactly `ms` after its write.
    Fixed { ms: u64 },
}

/// The median of an AWS-like index lag ([`aws_lag`]).
pub const AWS_LAG_MEDIAN_MS: f64 = 100.0;
/// Its spread: σ of the logarithm (p99 = median × e^(2.33 σ) ≈ 1 s).
const AWS_LAG_SIGMA: f64 = 1.0;
/// Its cap, ms.
const AWS_LAG_CAP_MS: f64 = 5_000.0;

/// One change's lag as AWS documents a global secondary index's ("within
/// a second" normally), from two uniform draws in `[0, 1)`: log-normal
/// with a median of 100 ms and a p99 near 1 s, capped at 5 s.
pub fn aws_lag(u1: f64, u2: f64) -> std::time::Duration {
    // Box–Muller: one standard normal from two uniforms.
    let z = (-2.0 * u1.max(f64::MIN_POSITIVE).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    let ms = (AWS_LAG_MEDIAN_MS * (AWS_LAG_SIGMA * z).exp()).min(AWS_LAG_CAP_MS);
    std::time::Duration::from_secs_f64(ms / 1000.0)
}

/// An entry's place in the index: its shard, its key (`claimableAt`), its
/// task; reads go in this order.
type Key = (u32, i64, String);

/// The index: what reads see now, in key order, and the changes not yet
/// visible, by when they become visible. Reads move on with the model's
/// clock (never back), so a change, once visible, stays visible.
#[derive(Debug)]
pub struct Index {
    lag: Lag,
    rng: fastrand::Rng,
    /// What a read at `settled` sees.
    visible: BTreeMap<Key, Entry>,
    /// Each task's key in `visible`.
    keys: HashMap<String, (u32, i64)>,
    /// Changes not visible yet: (visible from, write order) → the task and
    /// its entry (`None`: it leaves the index).
    pending: BTreeMap<(u64, u64), (String, Option<Entry>)>,
    /// Each task's latest change: when it becomes visible (a task's
    /// changes show in the order they were written) and its entry.
    last: HashMap<String, (u64, Option<Entry>)>,
    writes: u64,
}

impl Index {
    pub fn new(lag: Lag) -> Self {
        let seed = match lag {
            Lag::Off | Lag::Fixed { .. } => 0,
            Lag::Seeded { seed, .. } | Lag::Aws { seed } => seed,
        };
        Self {
            lag,
            rng: fastrand::Rng::with_seed(seed),
            visible: BTreeMap::new(),
            keys: HashMap::new(),
            pending: BTreeMap::new(),
            last: HashMap::new(),
            writes: 0,
        }
    }

    /// Task `id` is now `task` (`None`: deleted), written at `now_ms`.
    pub fn write(&mut self, id: &str, task: Option<&Task>, now_ms: u64) {
        let entry = task.and_then(Entry::of);
        let prev = self.last.get(id);
        if prev.map_or(entry.is_none(), |(_, e)| *e == entry) {
            return;
        }
        let lag = match self.lag {
            Lag::Off => {
                self.last.insert(id.to_owned(), (now_ms, entry.clone()));
                self.place(id, entry);
                return;
            }
            Lag::Seeded { max_ms, .. } => self.rng.u64(0..=max_ms),
            Lag::Aws { .. } => aws_lag(self.rng.f64(), self.rng.f64()).as_millis() as u64,
            Lag::Fixed { ms } => ms,
        };
        let at = now_ms.saturating_add(lag);
        let at = prev.map_or(at, |(v, _)| at.max(*v));
        self.last.insert(id.to_owned(), (at, entry.clone()));
        self.writes += 1;
        self.pending
            .insert((at, self.writes), (id.to_owned(), entry));
    }

    /// Makes visible every change visible by `at` (epoch ms), in order.
    pub fn settle(&mut self, at: u64) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > at {
                return;
            }
            let (id, e) = entry.remove();
            self.place(&id, e);
        }
    }

    /// Task `id`'s entry is now `entry` in what reads see.
    fn place(&mut self, id: &str, entry: Option<Entry>) {
        if let Some((shard, key)) = self.keys.remove(id) {
            self.visible.remove(&(shard, key, id.to_owned()));
        }
        if let Some(e) = entry {
            let (shard, key) = (e.candidate.lifo_shard, e.candidate.claimable_at);
            self.keys.insert(id.to_owned(), (shard, key));
            self.visible.insert((shard, key, id.to_owned()), e);
        }
    }

    /// The entries of `read`'s shard and key range from `start` (exclusive)
    /// on, in key order (`forward`) or backwards: what a read sees once
    /// [`Index::settle`]d.
    fn range<'a>(
        &'a self,
        read: &IndexRead,
        forward: bool,
        start: Option<(i64, String)>,
    ) -> Box<dyn Iterator<Item = &'a Entry> + 'a> {
        let (shard, low, high) = bounds(read);
        let from = Bound::Included((shard, low, String::new()));
        let to = match (high.checked_add(1), shard.checked_add(1)) {
            (Some(next), _) => Bound::Excluded((shard, next, String::new())),
            (None, Some(next_shard)) => Bound::Excluded((next_shard, i64::MIN, String::new())),
            (None, None) => Bound::Unbounded,
        };
        // From a page's start key on (exclusive), within the range.
        let (from, to) = match start {
            Some((at, id)) if forward && at >= low => (Bound::Excluded((shard, at, id)), to),
            Some((at, id)) if !forward && at <= high => (from, Bound::Excluded((shard, at, id))),
            _ => (from, to),
        };
        // A start key outside the range leaves nothing to read.
        if let (Bound::Excluded(a) | Bound::Included(a), Bound::Excluded(b)) = (&from, &to)
            && a >= b
        {
            return Box::new(std::iter::empty());
        }
        let entries = self.visible.range((from, to)).map(|(_, e)| e);
        if forward {
            Box::new(entries)
        } else {
            Box::new(entries.rev())
        }
    }

    /// One page of `read` (see [`crate::store::Queue::index_page`]), and
    /// the entries it evaluated (before the filter: what it is billed
    /// for). Call [`Index::settle`] first.
    pub fn page(
        &self,
        read: &IndexRead,
        forward: bool,
        limit: Option<i32>,
        start: Option<&Item>,
    ) -> (IndexPage, Vec<&Entry>) {
        let limit = limit.map(|l| usize::try_from(l.max(1)).unwrap_or(usize::MAX));
        let evaluated: Vec<&Entry> = self
            .range(read, forward, start.and_then(start_key))
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        let next = match (limit, evaluated.last()) {
            (Some(l), Some(last)) if evaluated.len() == l => Some(key_of(&last.candidate)),
            _ => None,
        };
        let page = IndexPage {
            entries: evaluated
                .iter()
                .filter(|e| matches(read, e))
                .map(|e| e.candidate.clone())
                .collect(),
            next,
        };
        (page, evaluated)
    }

    /// How many entries `read` matches, and the entries it evaluated (what
    /// a COUNT query is billed for). Call [`Index::settle`] first.
    pub fn count(&self, read: &IndexRead) -> (usize, Vec<&Entry>) {
        let evaluated: Vec<&Entry> = self.range(read, true, None).collect();
        let count = evaluated.iter().filter(|e| matches(read, e)).count();
        (count, evaluated)
    }
}

/// A read's shard and key range (inclusive).
fn bounds(read: &IndexRead) -> (u32, i64, i64) {
    match *read {
        IndexRead::ClaimRead {
            shard, horizon_ms, ..
        }
        | IndexRead::ClaimableNow {
            shard, horizon_ms, ..
        }
        | IndexRead::Leased {
            shard, horizon_ms, ..
        }
        | IndexRead::BackingOff {
            shard, horizon_ms, ..
        } => (shard, priority::floor(horizon_ms) + 1, i64::MAX),
        IndexRead::OldEnd {
            shard,
            priority,
            horizon_ms,
        } => (
            shard,
            priority.key(horizon_ms),
            priority.shift() + SHIFT / 2 - 1,
        ),
    }
}

/// The shard a read reads (its partition of the index).
pub(super) fn shard_of(read: &IndexRead) -> u32 {
    bounds(read).0
}

/// Whether entry `e` passes `read`'s filter.
fn matches(read: &IndexRead, e: &Entry) -> bool {
    let c = &e.candidate;
    let lapsed = |now: u64| c.lease_until.is_none_or(|l| l < now);
    let rested = |now: u64| e.retry_at.is_none_or(|r| r <= now);
    match *read {
        IndexRead::ClaimableNow { now_ms, .. } => {
            c.expires_at > now_ms / 1000 && lapsed(now_ms) && rested(now_ms)
        }
        IndexRead::ClaimRead { now_ms, .. } => {
            lapsed(now_ms) && (c.expires_at <= now_ms / 1000 || rested(now_ms))
        }
        IndexRead::Leased { now_ms, .. } => c.lease_until.is_some_and(|l| l >= now_ms),
        IndexRead::BackingOff { now_ms, .. } => {
            e.retry_at.is_some_and(|r| r > now_ms) && c.expires_at > now_ms / 1000
        }
        IndexRead::OldEnd { .. } => true,
    }
}

/// The `LastEvaluatedKey` of an index entry: the index's keys and the table's.
fn key_of(c: &Candidate) -> Item {
    Item::from([
        (
            attr::TASK_ID.to_owned(),
            AttributeValue::S(c.task_id.clone()),
        ),
        (
            attr::SHARD.to_owned(),
            AttributeValue::N(c.lifo_shard.to_string()),
        ),
        (
            attr::CLAIMABLE_AT.to_owned(),
            AttributeValue::N(c.claimable_at.to_string()),
        ),
    ])
}

/// The position an `ExclusiveStartKey` names.
fn start_key(k: &Item) -> Option<(i64, String)> {
    let at = k.get(attr::CLAIMABLE_AT)?.as_n().ok()?.parse().ok()?;
    let id = k.get(attr::TASK_ID)?.as_s().ok()?.clone();
    Some((at, id))
}
