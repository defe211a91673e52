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
use std::collections::BTreeMap;

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

/// Writes between two [`Index::prune`]s.
const PRUNE_EVERY: u32 = 512;

/// The index: each task's changes, `(visible from, projection)`, oldest first.
#[derive(Debug)]
pub struct Index {
    lag: Lag,
    rng: fastrand::Rng,
    versions: BTreeMap<String, Vec<(u64, Option<Entry>)>>,
    /// Writes since the last prune.
    writes: u32,
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
            versions: BTreeMap::new(),
            writes: 0,
        }
    }

    /// Tasks the index keeps changes of (those in it, those leaving it).
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.versions.len()
    }

    /// Forgets what no read can see any more. Reads and writes happen at
    /// the model's clock, which only moves forward, so no read comes before
    /// `now_ms`: of a task's changes visible by then only the last one
    /// counts, and a task whose last visible change took it out of the
    /// index, with none to come, is out for good. (Without this every read
    /// went through every task ever written.)
    pub fn prune(&mut self, now_ms: u64) {
        self.versions.retain(|_, versions| {
            if let Some(last_seen) = versions.iter().rposition(|(at, _)| *at <= now_ms) {
                versions.drain(..last_seen);
            }
            let gone = match versions.as_slice() {
                [] => true,
                [(at, None)] => *at <= now_ms,
                _ => false,
            };
            !gone
        });
    }

    /// Task `id` is now `task` (`None`: deleted), written at `now_ms`.
    pub fn write(&mut self, id: &str, task: Option<&Task>, now_ms: u64) {
        let entry = task.and_then(Entry::of);
        let versions = self.versions.entry(id.to_owned()).or_default();
        if versions
            .last()
            .map_or(entry.is_none(), |(_, e)| *e == entry)
        {
            return;
        }
        let visible = match self.lag {
            Lag::Off => {
                versions.clear();
                0
            }
            lagging => {
                let lag = match lagging {
                    Lag::Seeded { max_ms, .. } => self.rng.u64(0..=max_ms),
                    Lag::Aws { .. } => aws_lag(self.rng.f64(), self.rng.f64()).as_millis() as u64,
                    Lag::Fixed { ms } => ms,
                    Lag::Off => 0,
                };
                let at = now_ms.saturating_add(lag);
                versions.last().map_or(at, |(v, _)| at.max(*v))
            }
        };
        versions.push((visible, entry));
        self.writes += 1;
        if self.writes >= PRUNE_EVERY {
            self.writes = 0;
            self.prune(now_ms);
        }
    }

    /// The entries a read at `now_ms` sees, by task id.
    fn visible(&self, now_ms: u64) -> impl Iterator<Item = &Entry> {
        self.versions.values().filter_map(move |versions| {
            versions
                .iter()
                .rev()
                .find(|(at, _)| *at <= now_ms || self.lag == Lag::Off)
                .and_then(|(_, e)| e.as_ref())
        })
    }

    /// The entries of `read`'s shard and key range that a read at `at`
    /// (epoch ms) sees, in key order (ties by task id; the queue's keys are
    /// times, and the tests keep them apart).
    fn range(&self, read: &IndexRead, at: u64) -> Vec<&Entry> {
        let (shard, low, high) = bounds(read);
        let mut found: Vec<&Entry> = self
            .visible(at)
            .filter(|e| {
                let c = &e.candidate;
                c.lifo_shard == shard && c.claimable_at >= low && c.claimable_at <= high
            })
            .collect();
        found.sort_by(|a, b| {
            (a.candidate.claimable_at, &a.candidate.task_id)
                .cmp(&(b.candidate.claimable_at, &b.candidate.task_id))
        });
        found
    }

    /// One page of `read` at `at` (see [`crate::store::Queue::index_page`]).
    pub fn page(
        &self,
        (read, at): (&IndexRead, u64),
        forward: bool,
        limit: Option<i32>,
        start: Option<&Item>,
    ) -> IndexPage {
        let mut entries = self.range(read, at);
        if !forward {
            entries.reverse();
        }
        let after = start.and_then(start_key);
        let from = after.map_or(0, |k| {
            entries
                .iter()
                .position(|e| {
                    let at = (e.candidate.claimable_at, e.candidate.task_id.as_str());
                    let key = (k.0, k.1.as_str());
                    if forward { at > key } else { at < key }
                })
                .unwrap_or(entries.len())
        });
        let rest = &entries[from..];
        let limit = limit.map(|l| usize::try_from(l.max(1)).unwrap_or(usize::MAX));
        let evaluated = &rest[..limit.map_or(rest.len(), |l| l.min(rest.len()))];
        let next = match (limit, evaluated.last()) {
            (Some(l), Some(last)) if evaluated.len() == l => Some(key_of(&last.candidate)),
            _ => None,
        };
        IndexPage {
            entries: evaluated
                .iter()
                .filter(|e| matches(read, e))
                .map(|e| e.candidate.clone())
                .collect(),
            next,
        }
    }

    /// How many entries `read` at `at` matches.
    pub fn count(&self, read: &IndexRead, at: u64) -> usize {
        self.range(read, at)
            .into_iter()
            .filter(|e| matches(read, e))
            .count()
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
