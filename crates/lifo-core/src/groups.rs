//! Shard groups: how `ProcessorCount` processors share the LIFO shards.
//!
//! Processor group `g` of `P` owns the shards `s` with `s mod P == g`, and
//! holds a fenced lease on the group (an item `#group-<g>` in the table, in
//! no index) while it claims from them: one conditional write at the start
//! of an invocation takes it if it is free or its lease ended, and the lease
//! ends at the invocation's deadline plus the clock margin, like a task's.
//! So no two processors claim from one shard at once, and the shards of a
//! processor that died are taken over by the next wake-up of the group once
//! its lease ends. The runner's concurrency and rate are split between the
//! groups, so together they stay within `RunnerMaxConcurrency` and
//! `RunnerMaxPerSecond`. With one processor there is no group lease: its
//! reserved concurrency of 1 already makes it alone.
//!
//! Here: which shards and what share a group has. The lease's reads and
//! writes are in `store/groups.rs`, its expressions in `expr/groups.rs`.

/// The item key of group `g`'s lease (task ids never contain `#`).
pub fn group_key(group: u32) -> String {
    format!("#group-{group}")
}

/// The group that owns `shard`.
pub fn group_of(shard: u32, processors: u32) -> u32 {
    shard % processors.max(1)
}

/// The shards of `group`.
pub fn shards_of(group: u32, processors: u32, shard_count: u32) -> Vec<u32> {
    (0..shard_count.max(1))
        .filter(|s| group_of(*s, processors) == group)
        .collect()
}

/// Group `group`'s share of `total` (concurrency slots, starts per second):
/// an even split, the remainder to the first groups; at least 1.
pub fn share(total: u32, group: u32, processors: u32) -> u32 {
    let p = processors.max(1);
    (total / p + u32::from(group < total % p)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_partition_the_shards_and_shares_add_up() {
        assert_eq!(shards_of(0, 3, 8), vec![0, 3, 6]);
        assert_eq!(shards_of(2, 3, 8), vec![2, 5]);
        let mut all: Vec<u32> = (0..3).flat_map(|g| shards_of(g, 3, 8)).collect();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
        assert_eq!(shards_of(0, 1, 4), vec![0, 1, 2, 3]);
        for total in 3..40 {
            assert_eq!((0..3).map(|g| share(total, g, 3)).sum::<u32>(), total);
        }
        assert_eq!(group_key(2), "#group-2");
        assert_eq!(group_of(7, 3), 1);
    }
}
