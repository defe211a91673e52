//! The task state machine: the one place that decides which moves are legal.
//!
//! ```text
//!   SCHEDULED ----------------------> CANCELLED
//!      |          cancel
//!      | start (due date reached)
//!      v         claim                      succeed
//!   PENDING --------------> TAKEN ------------------------> SUCCESS
//!      ^                    |  ^ \      fail (last attempt)
//!      |  retry later       |  |  +-----------------------> FAILURE
//!      +--------------------+  |  abandon (lease expired,      ^
//!      |  retry after error    |  no attempts left) ----------+
//!      +-----------------------+
//!                       reclaim (lease expired)
//! ```
//!
//! A claim grants a lease and a new fencing token. Every later move of that
//! claim is conditional on the token, so a worker whose lease expired and
//! whose task was claimed again cannot record an outcome over the newer one.
//! Every move is one conditional `UpdateItem` (see [`crate::expr`]).

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
}

impl Transition {
    pub const ALL: [Transition; 9] = [
        Self::Claim,
        Self::Reclaim,
        Self::Succeed,
        Self::Fail,
        Self::Abandon,
        Self::RetryLater,
        Self::RetryAfterError,
        Self::Start,
        Self::Cancel,
    ];

    pub fn from(self) -> TaskStatus {
        match self {
            Self::Claim => TaskStatus::Pending,
            Self::Start | Self::Cancel => TaskStatus::Scheduled,
            _ => TaskStatus::Taken,
        }
    }

    pub fn to(self) -> TaskStatus {
        match self {
            Self::Claim | Self::Reclaim => TaskStatus::Taken,
            Self::Succeed => TaskStatus::Success,
            Self::Fail | Self::Abandon => TaskStatus::Failure,
            Self::RetryLater | Self::RetryAfterError | Self::Start => TaskStatus::Pending,
            Self::Cancel => TaskStatus::Cancelled,
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
            | (Taken, Taken)
            | (Taken, Success)
            | (Taken, Failure)
            | (Taken, Pending)
            | (Scheduled, Pending)
            | (Scheduled, Cancelled)
    )
}

/// The single legality check: `t` may be applied to a task whose status is
/// `current`. Callers go through this before sending any request.
pub fn check(t: Transition, current: TaskStatus) -> Result<(), IllegalTransition> {
    if t.from() == current && is_legal(current, t.to()) {
        Ok(())
    } else {
        Err(IllegalTransition {
            transition: t,
            current,
        })
    }
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
            assert!(is_legal(t.from(), t.to()), "{t}");
            assert!(check(t, t.from()).is_ok());
        }
        for s in TaskStatus::ALL {
            assert!(
                !is_legal(Success, s) && !is_legal(Failure, s),
                "terminal statuses absorb"
            );
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
    }

    #[test]
    fn illegal_moves_name_the_move_and_the_status() {
        let err = check(Transition::Succeed, Pending).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal transition succeed (TAKEN -> SUCCESS) from PENDING"
        );
    }

    /// A model task driven by random moves, applied as the store applies
    /// them (check first, then move), with leases and tokens.
    #[derive(Debug)]
    struct Model {
        status: TaskStatus,
        token: u64,
        attempts: u32,
        lease_live: bool,
        outcomes: u32,
    }

    const MAX_ATTEMPTS: u32 = 3;

    proptest! {
        /// Random walks never leave the graph; terminal statuses absorb; one
        /// outcome at most; attempts never exceed the maximum; the token only
        /// grows and grows on every claim.
        #[test]
        fn random_walks_stay_legal(moves in proptest::collection::vec((0usize..9, any::<bool>()), 0..80), scheduled in any::<bool>()) {
            let start = if scheduled { Scheduled } else { Pending };
            let mut m = Model { status: start, token: 0, attempts: 0, lease_live: false, outcomes: 0 };
            for (i, expire) in moves {
                if expire { m.lease_live = false; }
                let t = Transition::ALL[i];
                // The store's guards on top of the status check (conditions).
                let guard = match t {
                    Transition::Claim => true,
                    Transition::Reclaim => !m.lease_live && m.attempts < MAX_ATTEMPTS,
                    Transition::Abandon => !m.lease_live && m.attempts >= MAX_ATTEMPTS,
                    Transition::Fail => m.attempts >= MAX_ATTEMPTS,
                    Transition::RetryAfterError => m.attempts < MAX_ATTEMPTS,
                    _ => true,
                };
                if check(t, m.status).is_err() || !guard {
                    continue;
                }
                prop_assert!(!m.status.is_terminal());
                let before = m.token;
                if t.is_claim() {
                    m.token += 1;
                    m.attempts += 1;
                    m.lease_live = true;
                }
                if t == Transition::RetryLater {
                    m.attempts -= 1;
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
