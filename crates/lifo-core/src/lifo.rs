//! LIFO selection across write shards.
//!
//! Each shard of the index is read newest-first; [`merge_newest`] merges the
//! sorted answers (k-way, with a heap) into one newest-first list, so the
//! order is LIFO across the whole queue, not just within a shard.

use serde::Deserialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A claimable task as the LIFO index shows it (keys and ttl only).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub task_id: String,
    pub lifo_shard: u32,
    pub claimable_at: u64,
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
}

impl Candidate {
    /// Newest first; ties broken by id so the order is total.
    fn key(&self) -> (u64, &str) {
        (self.claimable_at, self.task_id.as_str())
    }
}

/// Merges per-shard lists, each sorted newest-first, into the `want` newest
/// overall, newest first.
pub fn merge_newest(per_shard: Vec<Vec<Candidate>>, want: usize) -> Vec<Candidate> {
    let mut lists: Vec<std::vec::IntoIter<Candidate>> =
        per_shard.into_iter().map(Vec::into_iter).collect();
    let mut heads: Vec<Option<Candidate>> = lists.iter_mut().map(Iterator::next).collect();
    // Max-heap on (claimableAt, id); Reverse(shard) only breaks exact ties.
    let mut heap: BinaryHeap<((u64, String), Reverse<usize>)> = heads
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            h.as_ref()
                .map(|c| ((c.claimable_at, c.task_id.clone()), Reverse(i)))
        })
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
            let (at, id) = c.key();
            heap.push(((at, id.to_owned()), Reverse(i)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(id: &str, shard: u32, at: u64) -> Candidate {
        Candidate {
            task_id: id.into(),
            lifo_shard: shard,
            claimable_at: at,
            expires_at: u64::MAX,
            lease_until: None,
            token: 0,
            attempts: 0,
        }
    }

    #[test]
    fn interleaves_shards_newest_first() {
        let merged = merge_newest(
            vec![
                vec![c("a", 0, 9), c("b", 0, 4)],
                vec![c("c", 1, 7), c("d", 1, 5)],
                vec![],
            ],
            3,
        );
        let ids: Vec<&str> = merged.iter().map(|c| c.task_id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "d"]);
    }

    proptest! {
        /// The merge equals "sort everything newest first, take `want`".
        #[test]
        fn merge_equals_global_sort(
            shards in proptest::collection::vec(proptest::collection::vec(0u64..50, 0..12), 1..6),
            want in 0usize..40,
        ) {
            let mut n = 0;
            let per_shard: Vec<Vec<Candidate>> = shards.iter().enumerate().map(|(s, ats)| {
                let mut list: Vec<Candidate> = ats.iter().map(|at| { n += 1; c(&format!("{n:04}"), s as u32, *at) }).collect();
                list.sort_by(|x, y| y.key().cmp(&x.key()));
                list
            }).collect();
            let mut all: Vec<Candidate> = per_shard.iter().flatten().cloned().collect();
            all.sort_by(|x, y| y.key().cmp(&x.key()));
            all.truncate(want);
            prop_assert_eq!(merge_newest(per_shard, want), all);
        }
    }
}
