//! The claim order across write shards: newest first (LIFO), or oldest
//! first for comparison.
//!
//! Each shard of the index is read newest-first; [`merge`] merges the sorted
//! answers (k-way, with a heap) into one newest-first list, so the order is
//! LIFO across the whole queue, not just within a shard. [`Order::Fifo`]
//! reads and merges oldest-first instead: the same pipeline as a FIFO queue,
//! for comparison (`lifo simulate --compare`).

use serde::Deserialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Which claimable tasks the processor takes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Newest first: the queue this project is.
    #[default]
    Lifo,
    /// Oldest first: a FIFO queue on the same pipeline, for comparison.
    Fifo,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lifo => "lifo",
            Self::Fifo => "fifo",
        }
    }

    /// DynamoDB's `ScanIndexForward` for this order (ascending = oldest first).
    pub fn scan_index_forward(self) -> bool {
        self == Self::Fifo
    }
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lifo" => Ok(Self::Lifo),
            "fifo" => Ok(Self::Fifo),
            other => Err(format!("expected lifo or fifo, got {other:?}")),
        }
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A claimable task as the LIFO index shows it (keys and ttl only).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub task_id: String,
    pub lifo_shard: u32,
    /// The index key: time shifted by lane ([`crate::lanes`]).
    pub claimable_at: i64,
    /// Claim deadline, epoch seconds.
    pub expires_at: u64,
    /// Present when the task is TAKEN and its lease has expired.
    #[serde(default)]
    pub lease_until: Option<u64>,
    /// The fencing token the task holds.
    #[serde(default)]
    pub token: u64,
    #[serde(default)]
    pub attempts: u32,
    /// Whose work it is ([`crate::fair`]).
    #[serde(default)]
    pub tenant: Option<String>,
}

/// Merges per-shard lists, each sorted in `order` (newest first for LIFO,
/// oldest first for FIFO), into the first `want` overall in that order.
pub fn merge(per_shard: Vec<Vec<Candidate>>, want: usize, order: Order) -> Vec<Candidate> {
    // A max-heap on the key: Ok((claimableAt, id)) for LIFO,
    // Err(Reverse(..)) for FIFO (one merge never mixes the two).
    // Reverse(shard) only breaks exact ties.
    type Key = (
        Result<(i64, String), Reverse<(i64, String)>>,
        Reverse<usize>,
    );
    let key = |c: &Candidate, i: usize| -> Key {
        let k = (c.claimable_at, c.task_id.clone());
        let k = match order {
            Order::Lifo => Ok(k),
            Order::Fifo => Err(Reverse(k)),
        };
        (k, Reverse(i))
    };
    let mut lists: Vec<std::vec::IntoIter<Candidate>> =
        per_shard.into_iter().map(Vec::into_iter).collect();
    let mut heads: Vec<Option<Candidate>> = lists.iter_mut().map(Iterator::next).collect();
    let mut heap: BinaryHeap<Key> = heads
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.as_ref().map(|c| key(c, i)))
        .collect();
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let Some((_, Reverse(i))) = heap.pop() else {
            break;
        };
        if let Some(c) = heads[i].take() {
            out.push(c);
        }
        heads[i] = lists[i].next();
        if let Some(c) = &heads[i] {
            heap.push(key(c, i));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A PENDING candidate `id` of `shard` at index key `at` (also the
    /// heads' tests' builder).
    pub(crate) fn c(id: &str, shard: u32, at: i64) -> Candidate {
        Candidate {
            task_id: id.into(),
            lifo_shard: shard,
            claimable_at: at,
            tenant: None,
            expires_at: u64::MAX,
            lease_until: None,
            token: 0,
            attempts: 0,
        }
    }

    #[test]
    fn interleaves_shards_newest_first() {
        let merged = merge(
            vec![
                vec![c("a", 0, 9), c("b", 0, 4)],
                vec![c("c", 1, 7), c("d", 1, 5)],
                vec![],
            ],
            3,
            Order::Lifo,
        );
        let ids: Vec<&str> = merged.iter().map(|c| c.task_id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "d"]);
    }

    #[test]
    fn fifo_interleaves_shards_oldest_first() {
        let merged = merge(
            vec![
                vec![c("b", 0, 4), c("a", 0, 9)],
                vec![c("d", 1, 5), c("c", 1, 7)],
            ],
            3,
            Order::Fifo,
        );
        let ids: Vec<&str> = merged.iter().map(|c| c.task_id.as_str()).collect();
        assert_eq!(ids, ["b", "d", "c"]);
    }

    #[test]
    fn order_parses_and_names_the_scan_direction() {
        assert_eq!("LIFO".parse::<Order>(), Ok(Order::Lifo));
        assert_eq!("fifo".parse::<Order>(), Ok(Order::Fifo));
        assert!("newest".parse::<Order>().is_err());
        assert!(!Order::Lifo.scan_index_forward());
        assert!(Order::Fifo.scan_index_forward());
    }

    proptest! {
        /// The merge equals "sort everything newest (or oldest) first, take
        /// `want`".
        #[test]
        fn merge_equals_global_sort(
            shards in proptest::collection::vec(proptest::collection::vec(0i64..50, 0..12), 1..6),
            want in 0usize..40,
            fifo in any::<bool>(),
        ) {
            let order = if fifo { Order::Fifo } else { Order::Lifo };
            let sort = |list: &mut Vec<Candidate>| {
                list.sort_by(|x, y| {
                    let (x, y) = ((x.claimable_at, &x.task_id), (y.claimable_at, &y.task_id));
                    if fifo { x.cmp(&y) } else { y.cmp(&x) }
                });
            };
            let mut n = 0;
            let per_shard: Vec<Vec<Candidate>> = shards.iter().enumerate().map(|(s, ats)| {
                let mut list: Vec<Candidate> = ats.iter().map(|at| { n += 1; c(&format!("{n:04}"), s as u32, *at) }).collect();
                sort(&mut list);
                list
            }).collect();
            let mut all: Vec<Candidate> = per_shard.iter().flatten().cloned().collect();
            sort(&mut all);
            all.truncate(want);
            prop_assert_eq!(merge(per_shard, want, order), all);
        }
    }
}
