//! The chaos runs' judge: what every committed change of the queue's tasks
//! says about a run made under faults. The chaos test on DynamoDB Local
//! (tests/chaos.rs) reads the changes from the table's stream; the chaos
//! run in virtual time ([`crate::virtual_time::chaos`]) from the store it
//! wraps. Both are held to the same invariants:
//! - nothing lost: every task created ends SUCCESS, FAILURE, SUPERSEDED or
//!   EXPIRED (shed by expiry);
//! - nothing stuck: no task is TAKEN once the queue drained;
//! - nothing committed twice: one outcome (TAKEN → SUCCESS, FAILURE or
//!   SUPERSEDED) per task, with the token of the claim that ran it;
//! - nothing stale: no task of a supersede key starts (a claim, or a
//!   reclaim) after a newer task of its key (by creation, then id) was
//!   written, nor after that write was answered; each key's newest runs
//!   (or is shed by expiry).

use lifo_core::{Task, TaskStatus};
use std::collections::{HashMap, HashSet};

/// A task item's status and fencing token, as a change shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub status: TaskStatus,
    pub token: u64,
}

/// A committed change of a task item: before and after (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub id: String,
    pub old: Option<Image>,
    pub new: Option<Image>,
}

impl Change {
    /// A claim (PENDING → TAKEN) or a reclaim (TAKEN → TAKEN with a new
    /// token; a newer task's mark keeps the token).
    pub fn is_start(&self) -> bool {
        match (self.old, self.new) {
            (Some(o), Some(n)) => {
                n.status == TaskStatus::Taken
                    && (o.status == TaskStatus::Pending || n.token > o.token)
            }
            _ => false,
        }
    }

    /// A run's outcome: TAKEN → SUCCESS, FAILURE or SUPERSEDED.
    pub fn is_outcome(&self) -> bool {
        matches!(
            (self.old, self.new),
            (Some(o), Some(n)) if o.status == TaskStatus::Taken
                && matches!(n.status, TaskStatus::Success | TaskStatus::Failure | TaskStatus::Superseded)
        )
    }
}

/// What a chaos run leaves to be judged.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Every task the run created.
    pub created: &'a [String],
    /// Every task as it ended.
    pub tasks: &'a [Task],
    /// Every committed change, in commit order.
    pub changes: &'a [Change],
    /// The supersede key of each keyed task, by id.
    pub keys: &'a HashMap<String, String>,
    /// When each keyed task's write was answered (epoch ms), by id.
    pub answered: &'a HashMap<String, u64>,
    /// Each run: its task and its claim's stamp (`startedAt`, epoch ms; read
    /// before the claim was sent, so at or before it committed).
    pub starts: &'a [(String, u64)],
}

/// What the changes say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Created tasks not ended (SUCCESS, FAILURE, SUPERSEDED, EXPIRED, …).
    pub lost: usize,
    /// Tasks still TAKEN.
    pub stuck: usize,
    /// Tasks with more than one outcome committed.
    pub duplicates: usize,
    /// Outcomes committed with another claim's token.
    pub stale_commits: usize,
    /// Starts of a keyed task after a newer task of its key was written.
    pub late_starts: usize,
    /// Runs whose claim was stamped after a newer task of its key was
    /// answered.
    pub starts_after_answer: usize,
    /// Keys whose newest task neither ran (no outcome) nor was shed by
    /// expiry, or ended SUPERSEDED.
    pub newest_unrun: usize,
    /// Tasks shed (moved to EXPIRED) more than once.
    pub shed_twice: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Tasks that ended EXPIRED.
    pub shed: usize,
    /// Tasks that ended SUPERSEDED.
    pub superseded: usize,
    /// Lapsed claims claimed again (TAKEN → TAKEN, a new token).
    pub reclaims: usize,
    /// Keyed tasks superseded while PENDING (before any start).
    pub superseded_unstarted: usize,
    /// Keyed tasks written SUPERSEDED (a newer one of their key was there).
    pub arrived_superseded: usize,
}

/// The changes in detail, for a caller's own checks.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Every claim committed: (task, its token).
    pub claims: HashSet<(String, u64)>,
    /// Every move out of TAKEN: (task, the token it was written with).
    pub settled: HashSet<(String, u64)>,
    /// Outcomes committed, by task.
    pub outcomes: HashMap<String, usize>,
    /// Sheds committed (a move to EXPIRED), by task.
    pub sheds: HashMap<String, usize>,
}

/// Judges `e` (see the module's documentation).
pub fn judge(e: &Evidence<'_>) -> (Verdict, Ledger) {
    let mut v = Verdict::default();
    let mut l = Ledger::default();
    for c in e.changes {
        if let Some(n) = c.new {
            if n.status == TaskStatus::Taken {
                l.claims.insert((c.id.clone(), n.token));
            } else if c.old.is_some_and(|o| o.status == TaskStatus::Taken) {
                l.settled.insert((c.id.clone(), n.token));
            }
            if n.status == TaskStatus::Expired
                && c.old.is_some_and(|o| o.status != TaskStatus::Expired)
            {
                *l.sheds.entry(c.id.clone()).or_default() += 1;
            }
        }
        if let (Some(o), Some(n)) = (c.old, c.new)
            && o.status == TaskStatus::Taken
            && n.status == TaskStatus::Taken
            && n.token > o.token
        {
            v.reclaims += 1;
        }
        if c.is_outcome() {
            *l.outcomes.entry(c.id.clone()).or_default() += 1;
            if c.old.map(|o| o.token) != c.new.map(|n| n.token) {
                v.stale_commits += 1;
            }
        }
    }
    v.duplicates = l.outcomes.values().filter(|n| **n > 1).count();
    v.shed_twice = l.sheds.values().filter(|n| **n > 1).count();
    judge_keys(e, &l, &mut v);

    let by_id: HashMap<&str, &Task> = e.tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    v.lost = e
        .created
        .iter()
        .filter(|id| {
            !by_id
                .get(id.as_str())
                .is_some_and(|t| t.task_status.is_terminal())
        })
        .count();
    let count = |s: TaskStatus| e.tasks.iter().filter(|t| t.task_status == s).count();
    v.stuck = count(TaskStatus::Taken);
    v.succeeded = count(TaskStatus::Success);
    v.failed = count(TaskStatus::Failure);
    v.shed = count(TaskStatus::Expired);
    v.superseded = count(TaskStatus::Superseded);
    (v, l)
}

/// Latest wins: newer by creation (then id). No task starts (a claim, a
/// reclaim) after a newer task of its key was inserted (the changes are in
/// commit order), nor after a newer one's write was answered; each key's
/// newest task runs (or is shed by expiry).
fn judge_keys(e: &Evidence<'_>, l: &Ledger, v: &mut Verdict) {
    let created_at: HashMap<&str, u64> = e
        .tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t.task_created))
        .collect();
    let newer = |a: &str, b: &str| match (created_at.get(a), created_at.get(b)) {
        (Some(ca), Some(cb)) => (ca, a) > (cb, b),
        _ => false,
    };
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for (id, key) in e.keys {
        by_key.entry(key.as_str()).or_default().push(id.as_str());
    }
    let mut inserted: HashMap<&str, usize> = HashMap::new();
    for (pos, c) in e.changes.iter().enumerate() {
        if c.old.is_none() && c.new.is_some() {
            inserted.entry(c.id.as_str()).or_insert(pos);
        }
    }
    let mut last_change: HashMap<&str, &Change> = HashMap::new();
    for (pos, c) in e.changes.iter().enumerate() {
        let Some(key) = e.keys.get(&c.id) else {
            continue;
        };
        if c.new.is_some() {
            last_change.insert(c.id.as_str(), c);
        }
        if c.new.is_some_and(|n| n.status == TaskStatus::Superseded) {
            match c.old {
                Some(o) if o.status == TaskStatus::Pending => v.superseded_unstarted += 1,
                None => v.arrived_superseded += 1,
                _ => {}
            }
        }
        if c.is_start()
            && by_key[key.as_str()]
                .iter()
                .any(|other| newer(other, &c.id) && inserted.get(other).is_some_and(|&i| i < pos))
        {
            v.late_starts += 1;
        }
    }
    v.starts_after_answer = e
        .starts
        .iter()
        .filter(|(id, at)| {
            e.keys.get(id).is_some_and(|key| {
                by_key[key.as_str()]
                    .iter()
                    .any(|other| newer(other, id) && e.answered.get(*other).is_some_and(|a| a < at))
            })
        })
        .count();
    v.newest_unrun = by_key
        .values()
        .filter_map(|ids| {
            ids.iter()
                .max_by_key(|id| (created_at.get(*id).copied(), **id))
        })
        .filter(|id| {
            let ended_superseded = last_change
                .get(*id)
                .is_some_and(|c| c.new.is_some_and(|n| n.status == TaskStatus::Superseded));
            let ended = l.outcomes.contains_key(**id) || l.sheds.contains_key(**id);
            !ended || ended_superseded
        })
        .count();
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::{Pending, Success, Superseded, Taken};

    fn change(id: &str, old: Option<(TaskStatus, u64)>, new: Option<(TaskStatus, u64)>) -> Change {
        let image = |(status, token)| Image { status, token };
        Change {
            id: id.into(),
            old: old.map(image),
            new: new.map(image),
        }
    }

    /// Judges `changes` with `tasks` (id, creation, status as they ended:
    /// every one created), the keyed tasks' keys and answers, the runs.
    fn judged(
        changes: &[Change],
        tasks: &[(&str, u64, TaskStatus)],
        keys: &[(&str, &str)],
        answered: &[(&str, u64)],
        starts: &[(&str, u64)],
    ) -> (Verdict, Ledger) {
        let tasks: Vec<Task> = tasks
            .iter()
            .map(|(id, created, status)| Task {
                task_status: *status,
                ..Task::new_pending((*id).into(), lifo_core::Payload::new(), *created, 60, 1)
            })
            .collect();
        let created: Vec<String> = tasks.iter().map(|t| t.task_id.clone()).collect();
        let owned = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
            pairs.iter().map(|(id, at)| ((*id).into(), *at)).collect()
        };
        let keys = keys
            .iter()
            .map(|(id, k)| ((*id).into(), (*k).into()))
            .collect();
        let answered = owned(answered).into_iter().collect();
        judge(&Evidence {
            created: &created,
            tasks: &tasks,
            changes,
            keys: &keys,
            answered: &answered,
            starts: &owned(starts),
        })
    }

    /// A clean run: one claim and one outcome per task, the older task of
    /// the key superseded before it started.
    #[test]
    fn a_clean_run_is_judged_clean() {
        let changes = [
            change("a", None, Some((Pending, 0))),
            change("k1", None, Some((Pending, 0))),
            change("a", Some((Pending, 0)), Some((Taken, 1))),
            change("k2", None, Some((Pending, 0))),
            change("k1", Some((Pending, 0)), Some((Superseded, 0))),
            change("a", Some((Taken, 1)), Some((Success, 1))),
            change("k2", Some((Pending, 0)), Some((Taken, 1))),
            change("k2", Some((Taken, 1)), Some((Success, 1))),
        ];
        let (v, l) = judged(
            &changes,
            &[("a", 1, Success), ("k1", 2, Superseded), ("k2", 3, Success)],
            &[("k1", "k"), ("k2", "k")],
            &[("k1", 2), ("k2", 3)],
            &[("a", 2), ("k2", 4)],
        );
        assert_eq!(
            v,
            Verdict {
                succeeded: 2,
                superseded: 1,
                superseded_unstarted: 1,
                ..Verdict::default()
            }
        );
        assert_eq!(l.outcomes.len(), 2);
        assert_eq!(l.claims, l.settled);
    }

    /// Each invariant's breach is counted: a task left PENDING (lost), one
    /// TAKEN (stuck), two outcomes, an outcome on a stale token, an older
    /// task started after the newer one was written and answered, a
    /// reclaim, a task shed twice.
    #[test]
    fn each_breach_is_counted() {
        let changes = [
            change("p", None, Some((Pending, 0))),
            change("t", None, Some((Taken, 1))),
            change("d", Some((Taken, 1)), Some((Success, 1))),
            change("d", Some((Taken, 2)), Some((Success, 3))),
            change("new", None, Some((Pending, 0))),
            change("old", None, Some((Pending, 0))),
            change("old", Some((Pending, 0)), Some((Taken, 1))),
            change("old", Some((Taken, 1)), Some((Taken, 2))),
            change("old", Some((Taken, 2)), Some((Success, 2))),
            change("e", Some((Pending, 0)), Some((TaskStatus::Expired, 0))),
            change("e", Some((Taken, 0)), Some((TaskStatus::Expired, 0))),
        ];
        let (v, l) = judged(
            &changes,
            &[
                ("p", 1, Pending),
                ("t", 1, Taken),
                ("d", 1, Success),
                ("old", 1, Success),
                ("new", 2, Pending),
                ("e", 1, TaskStatus::Expired),
            ],
            &[("old", "k"), ("new", "k")],
            &[("new", 5)],
            &[("old", 6)],
        );
        assert_eq!(v.lost, 3, "p, t and new");
        assert_eq!(v.stuck, 1);
        assert_eq!(v.duplicates, 1);
        assert_eq!(v.stale_commits, 1);
        assert_eq!(v.late_starts, 2, "the claim and the reclaim");
        assert_eq!(v.reclaims, 1);
        assert_eq!(v.starts_after_answer, 1);
        assert_eq!(v.newest_unrun, 1, "new never ran");
        assert_eq!((v.shed_twice, v.shed), (1, 1));
        assert_eq!(l.sheds["e"], 2);
    }

    /// A key's newest task shed by expiry (it waited past its TTL) ended:
    /// not counted as unrun; one still PENDING is.
    #[test]
    fn a_newest_task_shed_by_expiry_ended() {
        let changes = [
            change("n", None, Some((Pending, 0))),
            change("n", Some((Pending, 0)), Some((TaskStatus::Expired, 0))),
        ];
        let keys = [("n", "k")];
        let (v, _) = judged(&changes, &[("n", 1, TaskStatus::Expired)], &keys, &[], &[]);
        assert_eq!((v.newest_unrun, v.shed, v.lost), (0, 1, 0));
        let (v, _) = judged(&changes[..1], &[("n", 1, Pending)], &keys, &[], &[]);
        assert_eq!((v.newest_unrun, v.lost), (1, 1));
    }
}
