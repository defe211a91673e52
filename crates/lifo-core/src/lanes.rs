//! Priority lanes: `high`, `normal` and `low`, drained in that order,
//! newest first within each lane.
//!
//! A lane is a band of the LIFO index's range key: a task's `claimableAt`
//! is its time (epoch ms) shifted by its lane, `+10^13` for high, 0 for
//! normal, `-10^13` for low. Every high task then sorts above every normal
//! one, and every normal one above every low one, so the one newest-first
//! query per shard that the processor already reads returns the lanes in
//! order: no extra read, no extra write, and the LIFO guarantee of the
//! merge ([`crate::heads`]) holds within each lane. A task without a lane is
//! normal: its key is its time, as before lanes existed.
//!
//! The shift is stored on the task (`laneShift`, only when not normal), so
//! the moves that set `claimableAt` anew (a scheduled task's start, a
//! redrive) add it in the update expression itself, without reading the
//! task. Readers bound the key from below with [`floor`] (the low lane's
//! horizon); the reaper reads each lane's band from its oldest end.
//!
//! Low lanes starve while higher lanes have work: that is the intent, and
//! each task's TTL bounds it (a task nobody had capacity for is shed).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Ten trillion ms (about 317 years): wider than any epoch-ms time until
/// the year 2286, so the three bands never overlap.
pub const SHIFT: i64 = 10_000_000_000_000;

/// A priority lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    High,
    #[default]
    Normal,
    Low,
}

impl Lane {
    /// Every lane, in the order they are drained.
    pub const ALL: [Lane; 3] = [Lane::High, Lane::Normal, Lane::Low];

    /// How far the lane shifts a task's key.
    pub fn shift(self) -> i64 {
        match self {
            Lane::High => SHIFT,
            Lane::Normal => 0,
            Lane::Low => -SHIFT,
        }
    }

    /// The stored shift: none for the normal lane.
    pub fn stored_shift(self) -> Option<i64> {
        (self != Lane::Normal).then(|| self.shift())
    }

    /// The lane of a stored shift (none: normal).
    pub fn of_shift(shift: Option<i64>) -> Self {
        match shift {
            Some(s) if s > 0 => Lane::High,
            Some(s) if s < 0 => Lane::Low,
            _ => Lane::Normal,
        }
    }

    /// The index key of a task of this lane claimable since `at_ms`.
    pub fn key(self, at_ms: u64) -> i64 {
        i64::try_from(at_ms).unwrap_or(i64::MAX / 4) + self.shift()
    }

    /// The lane of an index key.
    pub fn of_key(key: i64) -> Self {
        if key >= SHIFT / 2 {
            Lane::High
        } else if key < -SHIFT / 2 {
            Lane::Low
        } else {
            Lane::Normal
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Lane::High => "high",
            Lane::Normal => "normal",
            Lane::Low => "low",
        }
    }

    /// A lane by name, as a producer writes it.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "high" => Ok(Lane::High),
            "normal" => Ok(Lane::Normal),
            "low" => Ok(Lane::Low),
            other => Err(format!(
                "{other:?} is not a priority; use \"high\", \"normal\" or \"low\""
            )),
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The time (epoch ms) an index key stands for, whatever its lane.
pub fn at_ms(key: i64) -> u64 {
    u64::try_from(key - Lane::of_key(key).shift()).unwrap_or(0)
}

/// The lowest key of a task claimable since `horizon_ms` in any lane: the
/// lower bound of a read of every lane.
pub fn floor(horizon_ms: u64) -> i64 {
    Lane::Low.key(horizon_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_764_547_200_123;

    #[test]
    fn a_normal_task_keeps_its_time_as_its_key() {
        assert_eq!(Lane::Normal.key(NOW), NOW as i64);
        assert_eq!(Lane::Normal.stored_shift(), None);
        assert_eq!(Lane::High.key(NOW), 11_764_547_200_123);
        assert_eq!(Lane::Low.key(NOW), -8_235_452_799_877);
        assert_eq!(Lane::of_shift(Lane::Low.stored_shift()), Lane::Low);
        assert_eq!(Lane::of_shift(None), Lane::Normal);
        assert_eq!(floor(NOW), Lane::Low.key(NOW));
        assert_eq!(Lane::parse("high"), Ok(Lane::High));
        assert_eq!(
            Lane::parse("urgent").unwrap_err(),
            "\"urgent\" is not a priority; use \"high\", \"normal\" or \"low\""
        );
    }

    proptest! {
        /// Whatever two times and lanes: a higher lane always sorts first
        /// (newest first: greater key), the same lane sorts by time, and
        /// the key gives back its lane and time.
        #[test]
        fn lanes_sort_before_time_and_round_trip(
            a in 0u64..4_000_000_000_000, b in 0u64..4_000_000_000_000,
            la in 0usize..3, lb in 0usize..3,
        ) {
            let (la, lb) = (Lane::ALL[la], Lane::ALL[lb]);
            let (ka, kb) = (la.key(a), lb.key(b));
            let rank = |l: Lane| Lane::ALL.iter().position(|x| *x == l).unwrap();
            if la != lb {
                prop_assert_eq!(ka > kb, rank(la) < rank(lb));
            } else {
                prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            }
            prop_assert_eq!((Lane::of_key(ka), at_ms(ka)), (la, a));
            prop_assert!(floor(a) <= ka);
        }
    }
}
