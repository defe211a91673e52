//! The model under DynamoDB's per-partition limits ([`super::limits`]).

use super::*;
use crate::clock::{Clock, Instant, SharedClock, TokioClock};
use crate::expr::attr;
use crate::store::billing::{Index, Projection};
use limits::Kind;
use std::time::Duration;

const T0: u64 = 1_800_000_000_000;

/// template.yaml's claimable index, as billing and the limits read it.
pub(super) fn claimable_index() -> Index {
    Index {
        name: crate::expr::CLAIMABLE_INDEX.into(),
        keys: vec![attr::SHARD.into(), attr::CLAIMABLE_AT.into()],
        projection: Projection::Include(
            [
                "expiresAt",
                "leaseUntil",
                "token",
                "attempts",
                "retryAt",
                "tenant",
            ]
            .map(String::from)
            .to_vec(),
        ),
    }
}

/// A clock that stands still, whatever the runtime's does: no partition
/// refills while a request waits to be sent again.
#[derive(Debug)]
struct Stopped;

impl Clock for Stopped {
    fn now_ms(&self) -> u64 {
        T0
    }
    fn instant(&self) -> Instant {
        Instant::now()
    }
}

fn limited(clock: SharedClock) -> Memory {
    Memory::new(Lag::Off)
        .with_partition_limits(PartitionLimits::new(vec![claimable_index()], clock))
}

/// Task `i` of shard `shard` (of 2), created at `T0`.
fn task_in(shard: u32, i: usize) -> Task {
    let mut t = Task::new_pending(format!("t{shard}-{i}"), crate::Payload::new(), T0, 60, 1);
    t.lifo_shard = shard;
    t.claimable_at = Some(T0 as i64);
    t
}

fn tasks(shard: u32, n: usize) -> Vec<Task> {
    (0..n).map(|i| task_in(shard, i)).collect()
}

fn claimable(shard: u32) -> IndexRead {
    IndexRead::ClaimableNow {
        shard,
        now_ms: T0,
        horizon_ms: 0,
    }
}

/// A shard's partition of the claimable index takes 1,000 entries a
/// second: a put past them is refused on the table too (GSI
/// back-pressure), after the SDK's three tries, and nothing is written;
/// another shard, and reads of the same one, go on.
#[tokio::test(start_paused = true)]
async fn a_shards_index_partition_refuses_writes_past_its_limit() {
    let m = limited(Arc::new(Stopped));
    assert_eq!(m.put_new(&tasks(0, 1_000)).await.unwrap(), 1_000);
    let started = tokio::time::Instant::now();
    let late = task_in(0, 1_000);
    let err = m.put_if_absent(&late).await.unwrap_err();
    assert!(err.is_throttled(), "{err}");
    assert_eq!(
        crate::error::chain(&err),
        "PutItem throttled: ProvisionedThroughputExceededException: \
         IndexWriteKeyRangeThroughputExceeded (claimable-index 0)"
    );
    assert!(m.task(&late.task_id).is_none(), "nothing written");
    // Three tries: two backoffs of up to 1 s and 2 s.
    assert!(started.elapsed() < Duration::from_secs(3));
    let throttled = |index| m.partition_limits(|l| l.throttled(Kind::Write, index));
    assert_eq!((throttled(true), throttled(false)), (Some(3), Some(0)));
    assert!(m.put_if_absent(&task_in(1, 0)).await.unwrap());
    let page = m.index_page(claimable(0), false, Some(10), None).await;
    assert_eq!(page.unwrap().entries.len(), 10);
    let busiest = m
        .partition_limits(|l| l.busiest(Kind::Write, true))
        .flatten()
        .unwrap();
    assert_eq!(
        (busiest.partition.to_string(), busiest.units),
        ("claimable-index 0".to_owned(), 1_000.0)
    );
}

/// The same writes without the limits all pass at once.
#[tokio::test(start_paused = true)]
async fn without_limits_a_shard_takes_any_rate() {
    let m = Memory::new(Lag::Off);
    assert_eq!(m.put_new(&tasks(0, 1_001)).await.unwrap(), 1_001);
    assert!(m.partition_limits(|_| ()).is_none());
}

/// A batch past the limit is written as the partition refills: the
/// refused tasks are resent (BatchWriteItem's unprocessed items) until
/// every one is in, half a second of the partition's rate later.
#[tokio::test(start_paused = true)]
async fn a_batch_past_the_limit_is_resent_as_the_partition_refills() {
    let clock: SharedClock = Arc::new(TokioClock::starting_at(T0));
    let m = limited(clock);
    let started = tokio::time::Instant::now();
    assert_eq!(m.put_new(&tasks(0, 1_500)).await.unwrap(), 1_500);
    assert!(
        started.elapsed() >= Duration::from_millis(499),
        "{:?}",
        started.elapsed()
    );
    assert!(m.partition_limits(|l| l.throttled(Kind::Write, true)) > Some(0));
}

/// 3,000 read units a second per shard: 6,000 queries of half a unit,
/// then a read is refused; the shard's writes are not.
#[tokio::test(start_paused = true)]
async fn a_shards_index_partition_refuses_reads_past_its_limit() {
    let m = limited(Arc::new(Stopped));
    let mut served = 0;
    let err = loop {
        match m.index_count(claimable(0)).await {
            Ok(_) => served += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(served, 6_000);
    assert!(
        crate::error::chain(&err)
            .ends_with("IndexReadKeyRangeThroughputExceeded (claimable-index 0)"),
        "{err}"
    );
    assert!(m.put_if_absent(&task_in(0, 0)).await.unwrap());
}
