//! A task's priority: `high`, `normal` or `low`, drained in that order,
//! newest first within each.
//!
//! A priority is a band of the claimable index's range key: a task's `claimableAt`
//! is its time (epoch ms) shifted by its priority, `+10^13` for high, 0 for
//! normal, `-10^13` for low. Every high task then sorts above every normal
//! one, and every normal one above every low one, so the one newest-first
//! query per shard that the processor already reads returns the priorities in
//! order: no extra read, no extra write, and the LIFO guarantee of the
//! merge (process's `select::heads`) holds within each priority. A task without a priority is
//! normal: its key is its time, as before priorities existed.
//!
//! The shift is stored on the task (as `laneShift`, its name before
//! "lane" and "priority" became one word; only when not normal), so
//! the moves that set `claimableAt` anew (a scheduled task's start, a
//! redrive) add it in the update expression itself, without reading the
//! task. Readers bound the key from below with [`floor`] (the low priority's
//! horizon); the reaper reads each priority's band from its oldest end.
//!
//! Low priorities starve while higher priorities have work: that is the intent, and
//! each task's TTL bounds it (a task nobody had capacity for is shed).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Ten trillion ms (about 317 years): wider than any epoch-ms time until
/// the year 2286, so the three bands never overlap.
pub const SHIFT: i64 = 10_000_000_000_000;

/// A task's priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    High,
    #[default]
    Normal,
    Low,
}

impl Priority {
    /// Every priority, in the order they are drained.
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// How far the priority shifts a task's key.
    pub fn shift(self) -> i64 {
        match self {
            Priority::High => SHIFT,
            Priority::Normal => 0,
            Priority::Low => -SHIFT,
        }
    }

    /// The stored shift: none for the normal priority.
    pub fn stored_shift(self) -> Option<i64> {
        (self != Priority::Normal).then(|| self.shift())
    }

    /// The priority of a stored shift (none: normal).
    pub fn of_shift(shift: Option<i64>) -> Self {
        match shift {
            Some(s) if s > 0 => Priority::High,
            Some(s) if s < 0 => Priority::Low,
            _ => Priority::Normal,
        }
    }

    /// The index key of a task of this priority claimable since `at_ms`.
    pub fn key(self, at_ms: u64) -> i64 {
        i64::try_from(at_ms).unwrap_or(i64::MAX / 4) + self.shift()
    }

    /// The priority of an index key.
    pub fn of_key(key: i64) -> Self {
        if key >= SHIFT / 2 {
            Priority::High
        } else if key < -SHIFT / 2 {
            Priority::Low
        } else {
            Priority::Normal
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// A priority by name, as a producer writes it.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "high" => Ok(Priority::High),
            "normal" => Ok(Priority::Normal),
            "low" => Ok(Priority::Low),
            other => Err(format!(
                "{other:?} is not a priority; use \"high\", \"normal\" or \"low\""
            )),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The time (epoch ms) an index key stands for, whatever its priority.
pub fn at_ms(key: i64) -> u64 {
    u64::try_from(key - Priority::of_key(key).shift()).unwrap_or(0)
}

/// The lowest key of a task claimable since `horizon_ms` in any priority: the
/// lower bound of a read of every priority.
pub fn floor(horizon_ms: u64) -> i64 {
    Priority::Low.key(horizon_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_764_547_200_123;

    #[test]
    fn a_normal_task_keeps_its_time_as_its_key() {
        assert_eq!(Priority::Normal.key(NOW), NOW as i64);
        assert_eq!(Priority::Normal.stored_shift(), None);
        assert_eq!(Priority::High.key(NOW), 11_764_547_200_123);
        assert_eq!(Priority::Low.key(NOW), -8_235_452_799_877);
        assert_eq!(
            Priority::of_shift(Priority::Low.stored_shift()),
            Priority::Low
        );
        assert_eq!(Priority::of_shift(None), Priority::Normal);
        assert_eq!(floor(NOW), Priority::Low.key(NOW));
        assert_eq!(Priority::parse("high"), Ok(Priority::High));
        assert_eq!(
            Priority::parse("urgent").unwrap_err(),
            "\"urgent\" is not a priority; use \"high\", \"normal\" or \"low\""
        );
    }

    proptest! {
        /// Whatever two times and priorities: a higher priority always sorts first
        /// (newest first: greater key), the same priority sorts by time, and
        /// the key gives back its priority and time.
        #[test]
        fn priorities_sort_before_time_and_round_trip(
            a in 0u64..4_000_000_000_000, b in 0u64..4_000_000_000_000,
            la in 0usize..3, lb in 0usize..3,
        ) {
            let (la, lb) = (Priority::ALL[la], Priority::ALL[lb]);
            let (ka, kb) = (la.key(a), lb.key(b));
            let rank = |l: Priority| Priority::ALL.iter().position(|x| *x == l).unwrap();
            if la != lb {
                prop_assert_eq!(ka > kb, rank(la) < rank(lb));
            } else {
                prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            }
            prop_assert_eq!((Priority::of_key(ka), at_ms(ka)), (la, a));
            prop_assert!(floor(a) <= ka);
        }
    }
}
