//! The task state machine: the one place that decides which moves are legal.
//!
//! ```text
//!            claim               succeed
//! PENDING ----------> TAKEN ------------> SUCCESS
//!    ^                  |  \    fail
//!    +---- retry later -+   +-----------> FAILURE
//! ```
//!
//! Every legal move is one conditional `UpdateItem` (see [`crate::expr`])
//! whose condition requires the `from` status, so two workers can never both
//! make the same move.

use crate::model::TaskStatus;
use std::fmt;

/// A legal move between two statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// PENDING → TAKEN: a processor claims the task.
    Claim,
    /// TAKEN → SUCCESS.
    Succeed,
    /// TAKEN → FAILURE.
    Fail,
    /// TAKEN → PENDING: the downstream said "retry later"; the task becomes
    /// claimable again at its original LIFO position.
    RetryLater,
}

impl Transition {
    pub const ALL: [Transition; 4] = [Self::Claim, Self::Succeed, Self::Fail, Self::RetryLater];

    pub fn from(self) -> TaskStatus {
        match self {
            Self::Claim => TaskStatus::Pending,
            Self::Succeed | Self::Fail | Self::RetryLater => TaskStatus::Taken,
        }
    }

    pub fn to(self) -> TaskStatus {
        match self {
            Self::Claim => TaskStatus::Taken,
            Self::Succeed => TaskStatus::Success,
            Self::Fail => TaskStatus::Failure,
            Self::RetryLater => TaskStatus::Pending,
        }
    }

    /// Name used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Succeed => "succeed",
            Self::Fail => "fail",
            Self::RetryLater => "retry-later",
        }
    }
}

/// A move the state machine refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition {from} -> {to}")]
pub struct IllegalTransition {
    pub from: TaskStatus,
    pub to: TaskStatus,
}

/// The single legality check: returns the transition for `from → to`, or
/// refuses it. Callers must go through this before sending any request.
pub fn transition(from: TaskStatus, to: TaskStatus) -> Result<Transition, IllegalTransition> {
    Transition::ALL
        .into_iter()
        .find(|t| t.from() == from && t.to() == to)
        .ok_or(IllegalTransition { from, to })
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
    fn exactly_the_documented_moves_are_legal() {
        let legal: Vec<(TaskStatus, TaskStatus)> = TaskStatus::ALL
            .into_iter()
            .flat_map(|f| TaskStatus::ALL.into_iter().map(move |t| (f, t)))
            .filter(|(f, t)| transition(*f, *t).is_ok())
            .collect();
        assert_eq!(
            legal,
            vec![
                (Pending, Taken),
                (Taken, Pending),
                (Taken, Success),
                (Taken, Failure)
            ]
        );
    }

    #[test]
    fn illegal_moves_name_both_ends() {
        let err = transition(Success, Pending).unwrap_err();
        assert_eq!(err.to_string(), "illegal transition SUCCESS -> PENDING");
    }

    proptest! {
        /// Random sequences of attempted moves, applied the way the store
        /// applies them (check first, then move): the status only ever
        /// changes through a legal transition, terminal statuses absorb, and
        /// a task is claimable exactly when it is PENDING.
        #[test]
        fn random_walks_stay_legal(targets in proptest::collection::vec(0usize..4, 0..64)) {
            let mut status = Pending;
            let mut claims = 0u32;
            let mut finished = false;
            for i in targets {
                let to = TaskStatus::ALL[i];
                match transition(status, to) {
                    Ok(t) => {
                        prop_assert_eq!(t.from(), status);
                        prop_assert!(!status.is_terminal());
                        if t == Transition::Claim { claims += 1; }
                        status = t.to();
                        if status.is_terminal() {
                            prop_assert!(!finished, "finished twice");
                            finished = true;
                        }
                    }
                    Err(e) => {
                        prop_assert_eq!(e.from, status);
                        prop_assert!(status.is_terminal() || !matches!(
                            (status, to),
                            (Pending, Taken) | (Taken, Success) | (Taken, Failure) | (Taken, Pending)
                        ));
                    }
                }
                // A task is finished only after it was claimed at least once.
                prop_assert!(!finished || claims >= 1);
            }
        }
    }
}
