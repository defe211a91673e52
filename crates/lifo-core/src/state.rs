//! The task state machine: the one place that decides which moves are legal.
//!
//! ```text
//!   SCHEDULED ----------------------> CANCELLED
//!      |          cancel
//!      | start (due date reached)
//!      v         claim                      succeed
//!   PENDING --------------> TAKEN ------------------------> SUCCESS
//!   ^  ^  ^                 |  ^ \      fail (last attempt)
//!   |  |  |  retry later    |  |  +-----------------------> FAILURE
//!   |  |  +-----------------+  |  abandon (lease expired,      ^  |
//!   |  |  |  retry after error |  no attempts left) ----------+  |
//!   |  |  +------------------+ |                                |
//!   |  |                reclaim (lease expired)                  |
//!   |  +--- redrive (operator): a failed task ------------------+
//!   |
//!   |    PENDING, or TAKEN with a lapsed lease,
//!   |    past expiresAt  --------- shed ---------> EXPIRED
//!   |                                                 |
//!   +------ redrive (operator): a shed task ----------+
//!           (also a PENDING / lapsed TAKEN one past expiresAt that no
//!           reader has shed yet)
//!
//!   PENDING --- supersede (a newer task with its key is written) ---> SUPERSEDED
//!   TAKEN, marked by that write --- end superseded ---------------->    ^
//!        (instead of a retry, a reclaim, or after its lease lapsed)     |
//!   a keyed write held back past a newer task of its key ---------------+
//!        (written SUPERSEDED: it is never PENDING)
//!
//!   delete (operator): any task, except TAKEN under a live lease
//! ```
//!
//! A claim grants a lease and a new fencing token. Every later move of that
//! claim is conditional on the token, so a worker whose lease expired and
//! whose task was claimed again cannot record an outcome over the newer one.
//! Every move is one conditional `UpdateItem` (see [`crate::expr`]); delete
//! is one conditional `DeleteItem`.
//!
//! A task not started by its expiry is *shed*: whoever reads its index
//! entry first (the sweep's reaper, or a processor's claim read) moves it
//! to EXPIRED with one conditional update, which takes it out of the LIFO
//! index (so no reader pays for it again) and into the shed index (so it
//! is counted when it happens). A TAKEN task is shed only once its lease
//! lapsed: a running task is never shed.
//!
//! Latest wins per key: the write of a task with a `supersedeKey` moves
//! the key's previous task from PENDING to SUPERSEDED in the same
//! transaction (supersede). If that task was TAKEN, the write marks it
//! instead (`supersededBy`): its run goes on and its success or failure
//! stands, but it never starts again: its retry, or the reclaim of its
//! lapsed lease, becomes the end superseded move. Which task is newer is
//! decided by creation (then id): an older task whose write lands after a
//! newer one's is written SUPERSEDED. So once the newer task is written,
//! the older one never starts.
//!
//! The processor's outcomes are final: SUCCESS, FAILURE, CANCELLED,
//! EXPIRED and SUPERSEDED take no processor move. An operator may *redrive* a FAILURE or
//! an EXPIRED task: it becomes PENDING again with its attempts reset, a new
//! expiry, and the newest position in the LIFO order, as new work. A redrive keeps
//! the token, and every finish needs `TAKEN` with the finishing claim's
//! token, so a late finish of a claim from before the redrive is refused:
//! it can neither resurrect the task nor commit a second outcome.

use crate::model::TaskStatus;
use std::fmt;

/// A legal move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// PENDING → TAKEN: a processor claims the task (new lease and token).
    Claim,
    /// TAKEN → TAKEN: the lease expired; another claim takes over.
    Reclaim,
    /// TAKEN → SUCCESS.
    Succeed,
    /// TAKEN → FAILURE: the run failed and no attempts are left.
    Fail,
    /// TAKEN → FAILURE: the lease expired and no attempts are left.
    Abandon,
    /// TAKEN → PENDING: the downstream was busy; the attempt is given back.
    RetryLater,
    /// TAKEN → PENDING: the run failed; attempts remain.
    RetryAfterError,
    /// SCHEDULED → PENDING: scheduler-start makes a due task claimable.
    Start,
    /// SCHEDULED → CANCELLED: an administrator cancels a task not yet started.
    Cancel,
    /// FAILURE or EXPIRED → PENDING (also a task past its expiry that no
    /// reader has shed yet: PENDING, or TAKEN with a lapsed lease): an
    /// operator runs it again as new work (attempts reset, new expiry,
    /// newest in the LIFO order).
    Redrive,
    /// PENDING, or TAKEN with a lapsed lease, past its expiry → EXPIRED:
    /// shed, out of the claimable index.
    Shed,
    /// PENDING → SUPERSEDED: a newer task with the same `supersedeKey` is
    /// written (in the same transaction).
    Supersede,
    /// TAKEN → SUPERSEDED: a claim marked by a newer task's write ends
    /// instead of being put back (retry) or claimed again (reclaim).
    EndSuperseded,
}

impl Transition {
    pub const ALL: [Transition; 13] = [
        Self::Claim,
        Self::Reclaim,
        Self::Succeed,
        Self::Fail,
        Self::Abandon,
        Self::RetryLater,
        Self::RetryAfterError,
        Self::Start,
        Self::Cancel,
        Self::Redrive,
        Self::Shed,
        Self::Supersede,
        Self::EndSuperseded,
    ];

    /// The status the move starts from (for a redrive, the main one: see
    /// [`Transition::sources`]).
    pub fn from(self) -> TaskStatus {
        match self {
            Self::Claim | Self::Shed | Self::Supersede => TaskStatus::Pending,
            Self::Start | Self::Cancel => TaskStatus::Scheduled,
            Self::Redrive => TaskStatus::Failure,
            _ => TaskStatus::Taken,
        }
    }

    /// Every status the move may start from.
    pub fn sources(self) -> &'static [TaskStatus] {
        match self {
            Self::Claim | Self::Supersede => &[TaskStatus::Pending],
            Self::Start | Self::Cancel => &[TaskStatus::Scheduled],
            Self::Redrive => &[
                TaskStatus::Failure,
                TaskStatus::Expired,
                TaskStatus::Pending,
                TaskStatus::Taken,
            ],
            Self::Shed => &[TaskStatus::Pending, TaskStatus::Taken],
            _ => &[TaskStatus::Taken],
        }
    }

    pub fn to(self) -> TaskStatus {
        match self {
            Self::Claim | Self::Reclaim => TaskStatus::Taken,
            Self::Succeed => TaskStatus::Success,
            Self::Fail | Self::Abandon => TaskStatus::Failure,
            Self::RetryLater | Self::RetryAfterError | Self::Start | Self::Redrive => {
                TaskStatus::Pending
            }
            Self::Cancel => TaskStatus::Cancelled,
            Self::Shed => TaskStatus::Expired,
            Self::Supersede | Self::EndSuperseded => TaskStatus::Superseded,
        }
    }

    /// True for the moves that start a claim (new lease, new token).
    pub fn is_claim(self) -> bool {
        matches!(self, Self::Claim | Self::Reclaim)
    }

    /// Name used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Reclaim => "reclaim",
            Self::Succeed => "succeed",
            Self::Fail => "fail",
            Self::Abandon => "abandon",
            Self::RetryLater => "retry-later",
            Self::RetryAfterError => "retry-after-error",
            Self::Start => "start",
            Self::Cancel => "cancel",
            Self::Redrive => "redrive",
            Self::Shed => "shed",
            Self::Supersede => "supersede",
            Self::EndSuperseded => "end-superseded",
        }
    }
}

/// A move the state machine refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition {transition} from {current}")]
pub struct IllegalTransition {
    pub transition: Transition,
    pub current: TaskStatus,
}

/// The edges of the state graph.
pub fn is_legal(from: TaskStatus, to: TaskStatus) -> bool {
    use TaskStatus::*;
    matches!(
        (from, to),
        (Pending, Taken)
            | (Pending, Pending)
            | (Taken, Taken)
            | (Taken, Success)
            | (Taken, Failure)
            | (Taken, Pending)
            | (Scheduled, Pending)
            | (Scheduled, Cancelled)
            | (Failure, Pending)
            | (Pending, Expired)
            | (Taken, Expired)
            | (Expired, Pending)
            | (Pending, Superseded)
            | (Taken, Superseded)
    )
}

/// The single legality check: `t` may be applied to a task whose status is
/// `current`. Callers go through this before sending any request. (The
/// store's conditions add what a status alone cannot say: the token, the
/// lease, the expiry.)
pub fn check(t: Transition, current: TaskStatus) -> Result<(), IllegalTransition> {
    if t.sources().contains(&current) && is_legal(current, t.to()) {
        Ok(())
    } else {
        Err(IllegalTransition {
            transition: t,
            current,
        })
    }
}

/// Whether a redrive may take a task in `current`: a FAILURE or an
/// EXPIRED one always; a PENDING task, or a TAKEN one whose lease lapsed,
/// only once it is past its expiry (shed, though no reader has moved it to
/// EXPIRED yet). A running or still-claimable task is not redriven.
pub fn may_redrive(current: TaskStatus, expired: bool, lease_live: bool) -> bool {
    match current {
        TaskStatus::Failure | TaskStatus::Expired => true,
        TaskStatus::Pending => expired,
        TaskStatus::Taken => expired && !lease_live,
        _ => false,
    }
}

/// Whether a task in `current` may be shed: past its expiry, PENDING, or
/// TAKEN with a lapsed lease (never one that runs).
pub fn may_shed(current: TaskStatus, expired: bool, lease_live: bool) -> bool {
    expired
        && match current {
            TaskStatus::Pending => true,
            TaskStatus::Taken => !lease_live,
            _ => false,
        }
}

/// Whether an operator may delete a task in `current`: any status, except
/// TAKEN under a live lease (its worker is running it right now).
pub fn may_delete(current: TaskStatus, lease_live: bool) -> bool {
    !(current == TaskStatus::Taken && lease_live)
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} -> {})", self.name(), self.from(), self.to())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;
    use proptest::prelude::*;

    #[test]
    fn every_transition_is_an_edge_of_the_graph() {
        for t in Transition::ALL {
            for s in t.sources() {
                assert!(is_legal(*s, t.to()), "{t} from {s}");
                assert!(check(t, *s).is_ok());
            }
            assert!(t.sources().contains(&t.from()));
        }
        // Only an operator's redrive leaves an outcome.
        for s in TaskStatus::ALL {
            for t in Transition::ALL {
                if t.sources().iter().any(|f| f.is_terminal()) {
                    assert_eq!(t, Transition::Redrive);
                }
            }
            assert!(!is_legal(Success, s) && !is_legal(Cancelled, s));
            assert!(!is_legal(Superseded, s), "SUPERSEDED is final");
            assert_eq!(is_legal(Failure, s), s == Pending);
            assert_eq!(is_legal(Expired, s), s == Pending);
        }
        // Only the shed move reaches EXPIRED; only the two supersede moves
        // reach SUPERSEDED.
        for t in Transition::ALL {
            assert_eq!(t.to() == Expired, t == Transition::Shed, "{t}");
            assert_eq!(
                t.to() == Superseded,
                matches!(t, Transition::Supersede | Transition::EndSuperseded),
                "{t}"
            );
        }
    }

    #[test]
    fn redrive_and_delete_guards() {
        assert!(may_redrive(Failure, false, false));
        assert!(!may_redrive(Pending, false, false), "still claimable");
        assert!(may_redrive(Pending, true, false), "shed");
        assert!(!may_redrive(Taken, true, true), "running");
        assert!(
            may_redrive(Taken, true, false),
            "held by a dead claim, and shed"
        );
        assert!(!may_redrive(Success, true, false) && !may_redrive(Cancelled, true, false));
        assert!(!may_redrive(Scheduled, true, false));
        assert!(
            !may_redrive(Superseded, true, false),
            "its successor carries the work"
        );
        assert!(may_redrive(Expired, true, false));
        assert!(may_shed(Pending, true, false));
        assert!(
            may_shed(Taken, true, false),
            "a dead claim's task, past its expiry"
        );
        assert!(!may_shed(Taken, true, true), "a running task is never shed");
        assert!(!may_shed(Pending, false, false), "not expired yet");
        for s in [Success, Failure, Scheduled, Cancelled, Expired, Superseded] {
            assert!(!may_shed(s, true, false), "{s}");
        }
        assert!(!may_delete(Taken, true));
        for s in TaskStatus::ALL {
            assert!(may_delete(s, false));
        }
    }

    /// The diagram at the top of this file names every move and status, so
    /// a new move cannot land without being drawn.
    #[test]
    fn the_diagram_shows_every_move_and_status() {
        let source = include_str!("state.rs");
        let start = source.find("```text").unwrap();
        let diagram = &source[start..start + source[start..].find("//! ```\n").unwrap()];
        for t in Transition::ALL {
            let label = t.name().replace('-', " ");
            assert!(diagram.contains(&label), "the diagram lacks {label}");
        }
        for s in TaskStatus::ALL {
            assert!(diagram.contains(s.as_str()), "the diagram lacks {s}");
        }
        assert!(diagram.contains("delete"));
    }

    #[test]
    fn illegal_moves_name_the_move_and_the_status() {
        let err = check(Transition::Succeed, Pending).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal transition succeed (TAKEN -> SUCCESS) from PENDING"
        );
        assert!(check(Transition::Redrive, Success).is_err());
    }

    /// A model task driven by random moves, applied as the store applies
    /// them (check first, then the store's condition), with leases, tokens,
    /// expiry, and an operator who redrives and deletes.
    #[derive(Debug)]
    struct Model {
        exists: bool,
        status: TaskStatus,
        token: u64,
        attempts: u32,
        lease_live: bool,
        expired: bool,
        /// Outcomes committed since the last redrive.
        outcomes: u32,
        /// Redrives so far: each starts a new life of the task.
        epochs: u32,
        /// A newer task with the same key was written (this life).
        successor: bool,
        /// That write found the task TAKEN and marked it (`supersededBy`).
        marked: bool,
    }

    const MAX_ATTEMPTS: u32 = 3;
    /// Operator's delete, as one more move index.
    const DELETE: usize = Transition::ALL.len();
    /// A newer task with the task's key is written, as one more.
    const SUCCESSOR: usize = DELETE + 1;

    proptest! {
        /// Random walks never leave the graph; only a redrive leaves an
        /// outcome; at most one outcome per life; attempts never exceed the
        /// maximum; the token only grows and grows on every claim; a
        /// deleted task takes no move at all, and a running one is never
        /// deleted or redriven; once a newer task with its key is written,
        /// the task never starts (until an operator redrives it).
        #[test]
        fn random_walks_stay_legal(
            // A lease lapses and the task expires now and then, not at every
            // other move: walks then reach a running task past its expiry
            // (which a mutant of `may_shed` would shed).
            moves in proptest::collection::vec((0usize..=SUCCESSOR, proptest::bool::weighted(0.15), proptest::bool::weighted(0.15)), 0..100),
            scheduled in any::<bool>(),
            // The task's write was held back past a newer task of its key.
            late in any::<bool>(),
        ) {
            let start = if scheduled { Scheduled } else { Pending };
            let mut m = Model {
                exists: true, status: start, token: 0, attempts: 0, lease_live: false,
                expired: false, outcomes: 0, epochs: 0, successor: false, marked: false,
            };
            if late && !scheduled {
                // Written SUPERSEDED: its one outcome, and a successor.
                m.status = Superseded;
                m.successor = true;
                m.outcomes = 1;
            }
            for (i, lapse, expire) in moves {
                if lapse { m.lease_live = false; }
                if expire { m.expired = true; }
                if !m.exists {
                    // Every conditional write on a missing item fails.
                    continue;
                }
                if i == SUCCESSOR {
                    // The newer task's write: one transaction that supersedes
                    // a PENDING task, marks a TAKEN one, leaves others be. (A
                    // scheduled task has no key: create refuses both.)
                    if !m.successor && !scheduled {
                        m.successor = true;
                        match m.status {
                            Pending => {
                                prop_assert!(check(Transition::Supersede, Pending).is_ok());
                                m.status = Superseded;
                                m.outcomes += 1;
                            }
                            Taken => m.marked = true,
                            _ => {}
                        }
                    }
                    continue;
                }
                if i == DELETE {
                    if may_delete(m.status, m.lease_live) {
                        prop_assert!(!(m.status == Taken && m.lease_live));
                        m.exists = false;
                    }
                    continue;
                }
                let t = Transition::ALL[i];
                // The store's conditions on top of the status check.
                let guard = match t {
                    Transition::Claim => !m.expired && !m.marked,
                    Transition::Reclaim => {
                        !m.lease_live && m.attempts < MAX_ATTEMPTS && !m.expired && !m.marked
                    }
                    Transition::RetryLater => !m.marked,
                    Transition::RetryAfterError => m.attempts < MAX_ATTEMPTS && !m.marked,
                    // Only the successor's write supersedes a PENDING task.
                    Transition::Supersede => false,
                    Transition::EndSuperseded => m.marked,
                    Transition::Abandon => !m.lease_live && m.attempts >= MAX_ATTEMPTS,
                    Transition::Fail => m.attempts >= MAX_ATTEMPTS,
                    Transition::Redrive => may_redrive(m.status, m.expired, m.lease_live),
                    Transition::Shed => may_shed(m.status, m.expired, m.lease_live),
                    _ => true,
                };
                if check(t, m.status).is_err() || !guard {
                    continue;
                }
                prop_assert!(!m.status.is_terminal() || t == Transition::Redrive);
                let before = m.token;
                if t.is_claim() {
                    prop_assert!(!m.successor, "a task started after its successor was written");
                    m.token += 1;
                    m.attempts += 1;
                    m.lease_live = true;
                }
                if t == Transition::RetryLater {
                    m.attempts -= 1;
                }
                if t == Transition::Shed {
                    prop_assert!(m.expired && !(m.status == Taken && m.lease_live), "only an expired task that no one runs is shed");
                    m.lease_live = false;
                }
                if t == Transition::Redrive {
                    prop_assert!(!(m.status == Taken && m.lease_live), "a running task is never redriven");
                    m.attempts = 0;
                    m.expired = false;
                    m.lease_live = false;
                    m.outcomes = 0;
                    m.epochs += 1;
                    m.successor = false;
                    m.marked = false;
                }
                m.status = t.to();
                if m.status.is_terminal() { m.outcomes += 1; }
                prop_assert!(m.token >= before);
                prop_assert!(m.attempts <= MAX_ATTEMPTS);
                prop_assert!(m.outcomes <= 1);
            }
        }
    }
}
