//! The order the claimable index is read in, and what one entry of it
//! holds.
//!
//! [`Order::Lifo`] reads each shard newest first (`ScanIndexForward`
//! false); [`Order::Fifo`] oldest first, the same pipeline as a FIFO queue
//! for comparison (`lifo simulate --compare`); [`Order::Adaptive`] reads as
//! LIFO does, and a task near its deadline that can still start goes first
//! (process's `select::deadline`). Merging the shards' answers
//! into one order across the queue is the claim policy's work (process's
//! `select::heads`, which keeps each shard's head between reads).

use serde::{Deserialize, Serialize};

/// Which claimable tasks the processor takes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Newest first: the queue this project is.
    #[default]
    Lifo,
    /// Oldest first: a FIFO queue on the same pipeline, for comparison.
    Fifo,
    /// Newest first, but a task that would otherwise miss its deadline and
    /// can still start goes first; newest first again in an overload no
    /// order catches up with (process's `select::deadline`).
    Adaptive,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lifo => "lifo",
            Self::Fifo => "fifo",
            Self::Adaptive => "adaptive",
        }
    }

    /// Every order, as `lifo simulate --compare` runs them.
    pub const ALL: [Order; 3] = [Order::Lifo, Order::Fifo, Order::Adaptive];

    /// DynamoDB's `ScanIndexForward` for this order (ascending = oldest first).
    pub fn scan_index_forward(self) -> bool {
        self == Self::Fifo
    }

    /// Whether the index is merged newest first (LIFO and adaptive).
    pub fn newest_first(self) -> bool {
        self != Self::Fifo
    }
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lifo" => Ok(Self::Lifo),
            "fifo" => Ok(Self::Fifo),
            "adaptive" => Ok(Self::Adaptive),
            other => Err(format!("expected lifo, fifo or adaptive, got {other:?}")),
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A claimable task as the claimable index shows it (keys and ttl only).
/// It serializes as it reads (the fair share hands kept candidates on in a
/// tail call's wake-up), leaving out what is absent or zero.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub task_id: String,
    pub lifo_shard: u32,
    /// The index key: time shifted by priority ([`crate::priority`]).
    pub claimable_at: i64,
    /// Claim deadline, epoch seconds.
    pub expires_at: u64,
    /// Present when the task is TAKEN and its lease has expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<u64>,
    /// The fencing token the task holds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub token: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Whose work it is (the task's `tenant`), for the claim policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl Candidate {
    /// A PENDING entry `task_id` of `shard` at index key `claimable_at`,
    /// unleased, never expiring, with no `tenant` (the tests' builder).
    pub fn pending(task_id: &str, shard: u32, claimable_at: i64) -> Self {
        Self {
            task_id: task_id.into(),
            lifo_shard: shard,
            claimable_at,
            expires_at: u64::MAX,
            lease_until: None,
            token: 0,
            attempts: 0,
            tenant: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_parses_and_names_the_scan_direction() {
        assert_eq!("LIFO".parse::<Order>(), Ok(Order::Lifo));
        assert_eq!("fifo".parse::<Order>(), Ok(Order::Fifo));
        assert_eq!(" Adaptive".parse::<Order>(), Ok(Order::Adaptive));
        assert_eq!(
            "newest".parse::<Order>(),
            Err("expected lifo, fifo or adaptive, got \"newest\"".to_owned())
        );
        assert!(!Order::Lifo.scan_index_forward());
        assert!(Order::Fifo.scan_index_forward());
        // Adaptive reads and merges as LIFO does.
        assert!(!Order::Adaptive.scan_index_forward());
        assert!(Order::Adaptive.newest_first() && !Order::Fifo.newest_first());
        let names: Vec<String> = Order::ALL.iter().map(|o| o.to_string()).collect();
        assert_eq!(names, ["lifo", "fifo", "adaptive"]);
    }
}
