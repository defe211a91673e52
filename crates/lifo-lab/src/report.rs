//! What a local run shows: start order, counts by status, freshness, cost.

use lifo_core::store::{CapacityMeter, Op};
use lifo_core::{Task, TaskStatus};
use std::collections::{BTreeMap, HashMap};

/// Keeps the last state seen of every task, so tasks that DynamoDB's TTL
/// deletes after they ran still count.
#[derive(Debug, Default)]
pub struct Observer {
    seen: HashMap<String, Task>,
}

impl Observer {
    pub fn observe(&mut self, tasks: Vec<Task>) {
        for t in tasks {
            self.seen.insert(t.task_id.clone(), t);
        }
    }

    pub fn get(&self, id: &str) -> Option<&Task> {
        self.seen.get(id)
    }

    /// Tasks neither finished nor expired: still to do.
    pub fn outstanding(&self, created: &[String], now_ms: u64) -> usize {
        created
            .iter()
            .filter(|id| match self.seen.get(*id) {
                Some(t) => {
                    t.task_status == TaskStatus::Taken
                        || (t.task_status == TaskStatus::Pending && !t.is_expired(now_ms))
                }
                None => false,
            })
            .count()
    }
}

/// Write units per successful task, from ConsumedCapacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteCost {
    pub put_per_task: f64,
    pub claim_per_claim: f64,
    pub finish_per_finish: f64,
    /// put + claim + finish: the cost of one task that succeeded first time.
    pub per_successful_task: f64,
    /// Every write unit spent (including tasks shed unrun and rejected
    /// conditional writes) / successes.
    pub total_per_success: f64,
    /// Conditional writes whose condition failed (claim conflicts).
    pub rejected: u64,
}

/// The report of a run.
#[derive(Debug, Clone)]
pub struct Report {
    pub created: usize,
    pub by_status: BTreeMap<&'static str, usize>,
    /// Never started, and expired: shed by TTL.
    pub shed: usize,
    /// Creation rank (1 = first created) of each task, in the order they started.
    pub start_order: Vec<usize>,
    /// Starts that happened while a newer, unexpired task was waiting.
    pub lifo_inversions: usize,
    pub age_p50_ms: u64,
    pub age_p95_ms: u64,
    pub age_max_ms: u64,
    pub write: WriteCost,
}

/// The `p`th percentile (nearest rank) of an ascending slice; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// How long after its creation time a task counts as waiting: `readyAt` is
/// taken before the BatchWriteItem that makes the task visible, which takes
/// tens of milliseconds under load on a 2-core machine.
const INVERSION_TOLERANCE_MS: u64 = 250;

impl Report {
    /// `created`: ids in creation order.
    pub fn build(
        created: &[String],
        observer: &Observer,
        meter: &CapacityMeter,
        now_ms: u64,
    ) -> Self {
        let rank: HashMap<&str, usize> = created
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i + 1))
            .collect();
        let tasks: Vec<&Task> = created.iter().filter_map(|id| observer.get(id)).collect();
        let mut by_status = BTreeMap::new();
        for t in &tasks {
            *by_status.entry(t.task_status.as_str()).or_insert(0) += 1;
        }
        let shed = created
            .iter()
            .filter(|id| match observer.get(id) {
                Some(t) => t.started_at.is_none() && t.is_expired(now_ms),
                None => true,
            })
            .count();
        let mut started: Vec<&Task> = tasks
            .iter()
            .copied()
            .filter(|t| t.started_at.is_some())
            .collect();
        started.sort_by_key(|t| (t.started_at, std::cmp::Reverse(t.ready_at)));
        let start_order = started
            .iter()
            .map(|t| rank.get(t.task_id.as_str()).copied().unwrap_or(0))
            .collect();
        let lifo_inversions = lifo_inversions(&started, &tasks);
        let mut ages: Vec<u64> = started
            .iter()
            .map(|t| t.started_at.unwrap_or(0).saturating_sub(t.ready_at))
            .collect();
        ages.sort_unstable();
        let successes = by_status.get("SUCCESS").copied().unwrap_or(0);
        let per = |op: Op, n: f64| {
            if n > 0.0 {
                meter.spent(op).units / n
            } else {
                0.0
            }
        };
        let put_per_task = per(Op::Put, created.len() as f64);
        let claim_per_claim = per(Op::Claim, meter.spent(Op::Claim).requests as f64);
        let finish_per_finish = per(Op::Finish, meter.spent(Op::Finish).requests as f64);
        Self {
            created: created.len(),
            by_status,
            shed,
            start_order,
            lifo_inversions,
            age_p50_ms: percentile(&ages, 50.0),
            age_p95_ms: percentile(&ages, 95.0),
            age_max_ms: ages.last().copied().unwrap_or(0),
            write: WriteCost {
                put_per_task,
                claim_per_claim,
                finish_per_finish,
                per_successful_task: put_per_task + claim_per_claim + finish_per_finish,
                total_per_success: if successes > 0 {
                    meter.write_units() / successes as f64
                } else {
                    0.0
                },
                rejected: meter.spent(Op::Rejected).requests,
            },
        }
    }
}

/// Starts that happened while a newer task of the same priority and tenant
/// waited, ready for more than [`INVERSION_TOLERANCE_MS`], not started and
/// not expired. Per priority and tenant, the tasks by `readyAt`: a start at
/// `at` of a task ready at `r` is one when a task ready in `(r, at −
/// tolerance)` had neither started nor expired by `at`, that is when the
/// largest `min(start, expiry)` over that range is past `at` (a sparse
/// table answers each in O(1): a run of 20,000 tasks took minutes when each
/// start looked at every task).
fn lifo_inversions(started: &[&Task], tasks: &[&Task]) -> usize {
    type Group<'a> = (lifo_core::priority::Priority, Option<&'a str>);
    fn group(t: &Task) -> Group<'_> {
        (t.priority(), t.tenant.as_deref())
    }
    // Each group's tasks as (readyAt, min(start, expiry)), by readyAt.
    let mut groups: HashMap<Group<'_>, Vec<(u64, u64)>> = HashMap::new();
    for t in tasks {
        let waits_until = t
            .started_at
            .unwrap_or(u64::MAX)
            .min(t.expires_at.saturating_mul(1000));
        groups
            .entry(group(t))
            .or_default()
            .push((t.ready_at, waits_until));
    }
    let tables: HashMap<Group<'_>, (Vec<u64>, SparseMax)> = groups
        .into_iter()
        .map(|(g, mut v)| {
            v.sort_unstable();
            let ready = v.iter().map(|(r, _)| *r).collect();
            (
                g,
                (ready, SparseMax::new(v.iter().map(|(_, w)| *w).collect())),
            )
        })
        .collect();
    started
        .iter()
        .filter(|s| {
            let at = s.started_at.unwrap_or(0);
            let Some((ready, table)) = tables.get(&group(s)) else {
                return false;
            };
            // Ready after s, and more than the tolerance before `at`.
            let from = ready.partition_point(|r| *r <= s.ready_at);
            let to = ready.partition_point(|r| r.saturating_add(INVERSION_TOLERANCE_MS) < at);
            from < to && table.max(from, to) > at
        })
        .count()
}

/// Range maxima of a fixed list: `levels[k][i]` is the largest of
/// `[i, i + 2^k)`.
struct SparseMax {
    levels: Vec<Vec<u64>>,
}

impl SparseMax {
    fn new(values: Vec<u64>) -> Self {
        let mut levels = vec![values];
        let mut width = 1;
        // Level k has an entry for each window of 2^k that fits.
        while let Some(last) = levels.last()
            && width < last.len()
        {
            let next = (0..last.len() - width)
                .map(|i| last[i].max(last[i + width]))
                .collect();
            levels.push(next);
            width *= 2;
        }
        Self { levels }
    }

    /// The largest of `[from, to)` (`from < to`).
    fn max(&self, from: usize, to: usize) -> u64 {
        let k = (usize::BITS - 1 - (to - from).leading_zeros()) as usize;
        let level = &self.levels[k];
        level[from].max(level[to - (1 << k)])
    }
}

/// `ms` as seconds, to the hundredth.
pub fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, ready: u64, started: Option<u64>, status: TaskStatus) -> Task {
        let mut t = Task::new_pending(id.into(), lifo_core::Payload::new(), ready, 3600, 1);
        t.started_at = started;
        t.task_status = status;
        t
    }

    /// The count as first written: every start against every task.
    fn inversions_one_by_one(started: &[&Task], tasks: &[&Task]) -> usize {
        started
            .iter()
            .filter(|s| {
                let at = s.started_at.unwrap_or(0);
                tasks.iter().any(|t| {
                    t.priority() == s.priority()
                        && t.tenant == s.tenant
                        && t.ready_at > s.ready_at
                        && t.ready_at + INVERSION_TOLERANCE_MS < at
                        && t.started_at.is_none_or(|st| st > at)
                        && t.expires_at * 1000 > at
                })
            })
            .count()
    }

    /// Random runs (tenants, priorities, starts, expiries, ties): the
    /// table's count is the one-by-one count.
    #[test]
    fn the_inversion_count_is_the_one_by_one_count() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut counted = 0;
        for round in 0..300 {
            let n = rng.usize(0..60);
            let all: Vec<Task> = (0..n)
                .map(|i| {
                    let ready = rng.u64(0..20) * 100;
                    let started = rng.bool().then(|| ready + rng.u64(0..3_000));
                    let mut t = task(
                        &format!("t{i}"),
                        1_000_000 + ready,
                        None,
                        TaskStatus::Pending,
                    );
                    t.started_at = started.map(|s| 1_000_000 + s);
                    t.expires_at = (1_000_000 + ready + rng.u64(0..4_000)) / 1000;
                    t.tenant =
                        [None, Some("a".to_owned()), Some("b".to_owned())][rng.usize(0..3)].clone();
                    t.priority_shift = [None, Some(1), Some(-1)][rng.usize(0..3)];
                    t
                })
                .collect();
            let tasks: Vec<&Task> = all.iter().collect();
            let started: Vec<&Task> = all.iter().filter(|t| t.started_at.is_some()).collect();
            let count = inversions_one_by_one(&started, &tasks);
            assert_eq!(lifo_inversions(&started, &tasks), count, "round {round}");
            counted += count;
        }
        assert!(
            counted > 300,
            "{counted} inversions in all: the rounds must hold some"
        );
    }

    #[test]
    fn counts_inversions_and_percentiles() {
        let created: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut o = Observer::default();
        // c (newest) waited while a started: one inversion.
        o.observe(vec![
            task("a", 1_000, Some(5_000), TaskStatus::Success),
            task("b", 2_000, Some(1_900_000), TaskStatus::Success),
            task("c", 3_000, Some(6_000), TaskStatus::Success),
        ]);
        let r = Report::build(&created, &o, &CapacityMeter::default(), 10_000);
        assert_eq!(r.start_order, vec![1, 3, 2]);
        assert_eq!(
            r.lifo_inversions, 1,
            "only a started while newer tasks (b, c) waited"
        );
        assert_eq!((r.age_p50_ms, r.age_max_ms), (4_000, 1_898_000));
        assert_eq!(r.by_status["SUCCESS"], 3);
    }
}
