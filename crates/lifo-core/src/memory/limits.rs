//! DynamoDB's per-partition limits, as the model enforces them: each
//! partition key value serves at most 1,000 write units and 3,000 read units
//! a second, in the table and, separately, in each global secondary index
//! (adaptive capacity can give a hot key a partition of its own, never more
//! than that). A request past them is refused with
//! `ProvisionedThroughputExceededException` (reason
//! `…KeyRangeThroughputExceeded`), and nothing is written. A write whose
//! index entry lands in a throttled index partition is refused on the
//! table too (GSI back-pressure); a throttled index read leaves the table
//! alone.
//!
//! Each partition is a bucket of one second's units, refilled continuously
//! on the run's clock: a request is admitted while every partition it
//! touches has a balance left, then its units are taken (a large read may
//! leave a debt). So a partition's sustained rate is its limit, and a burst
//! of up to a second's worth passes.
//!
//! The refusal is what the deployed functions' SDK retries (`aws_config`'s
//! standard mode: 3 tries, the n-th retry after a uniform draw of up to
//! 1 s × 2^(n-1)); [`super::Memory`] does the same, then answers
//! [`StoreError::Throttled`]. The SDK's retry quota (a token bucket per
//! client) is not modelled.

use crate::clock::SharedClock;
use crate::store::StoreError;
use crate::store::billing::{Index, Partition};
use std::collections::HashMap;
use std::time::Duration;

/// Write units a second one partition key value serves.
pub const WRITE_UNITS_PER_SECOND: f64 = 1_000.0;
/// Read units a second one partition key value serves.
pub const READ_UNITS_PER_SECOND: f64 = 3_000.0;
/// Tries of one request by the SDK's standard retry mode (the default).
pub const SDK_ATTEMPTS: u32 = 3;
/// The SDK's standard backoff: the n-th retry waits a uniform draw of up
/// to `1 s × 2^(n-1)`, at most 20 s.
const SDK_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const SDK_MAX_BACKOFF: Duration = Duration::from_secs(20);

/// The wait before retry `n` (1, 2, …) of a throttled request, drawn from
/// the thread's generator (a simulation seeds it).
pub fn sdk_backoff(n: u32) -> Duration {
    let ceiling = SDK_INITIAL_BACKOFF
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(SDK_MAX_BACKOFF);
    ceiling.mul_f64(fastrand::f64())
}

/// Reads or writes: each partition limits them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Write,
}

/// One partition's bucket and what it served.
#[derive(Debug, Clone)]
struct Bucket {
    balance: f64,
    at_ms: u64,
    /// Units served in all, in the second `second` so far, and in its
    /// busiest whole second.
    total: f64,
    second: u64,
    in_second: f64,
    peak: f64,
}

/// A refusal: the partition that had no units left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttle {
    pub kind: Kind,
    pub partition: Partition,
}

impl Throttle {
    /// The error the store answers once the SDK's retries are spent.
    pub fn error(&self, operation: &'static str) -> StoreError {
        let resource = if self.partition.index.is_some() {
            "Index"
        } else {
            "Table"
        };
        let kind = match self.kind {
            Kind::Read => "Read",
            Kind::Write => "Write",
        };
        StoreError::Throttled {
            operation,
            source: format!(
                "ProvisionedThroughputExceededException: {resource}{kind}KeyRangeThroughputExceeded \
                 ({})",
                self.partition
            )
            .into(),
        }
    }
}

/// The busiest partition of a kind: the units it served in all and in
/// its busiest second.
#[derive(Debug, Clone, PartialEq)]
pub struct Busiest {
    pub partition: Partition,
    pub units: f64,
    pub peak_second: f64,
}

/// The limits and what each partition served.
#[derive(Debug)]
pub struct PartitionLimits {
    /// The table's global secondary indexes (what a write touches).
    pub indexes: Vec<Index>,
    clock: SharedClock,
    write_per_second: f64,
    read_per_second: f64,
    buckets: HashMap<(Kind, Partition), Bucket>,
    /// Refusals by kind, and whether an index's partition refused.
    throttled: HashMap<(Kind, bool), u64>,
}

impl PartitionLimits {
    /// DynamoDB's limits over a table with `indexes`, refilled on `clock`.
    pub fn new(indexes: Vec<Index>, clock: SharedClock) -> Self {
        Self {
            indexes,
            clock,
            write_per_second: WRITE_UNITS_PER_SECOND,
            read_per_second: READ_UNITS_PER_SECOND,
            buckets: HashMap::new(),
            throttled: HashMap::new(),
        }
    }

    fn limit(&self, kind: Kind) -> f64 {
        match kind {
            Kind::Read => self.read_per_second,
            Kind::Write => self.write_per_second,
        }
    }

    /// `partition`'s bucket, refilled to now.
    fn bucket(&mut self, kind: Kind, partition: &Partition) -> &mut Bucket {
        let (now, limit) = (self.clock.now_ms(), self.limit(kind));
        let b = self
            .buckets
            .entry((kind, partition.clone()))
            .or_insert(Bucket {
                balance: limit,
                at_ms: now,
                total: 0.0,
                second: now / 1000,
                in_second: 0.0,
                peak: 0.0,
            });
        let gained = now.saturating_sub(b.at_ms) as f64 / 1000.0 * limit;
        b.balance = (b.balance + gained).min(limit);
        b.at_ms = b.at_ms.max(now);
        if now / 1000 != b.second {
            b.peak = b.peak.max(b.in_second);
            b.in_second = 0.0;
            b.second = now / 1000;
        }
        b
    }

    /// Admits a request of `kind` that touches `partitions` when each has
    /// units left; else counts the refusal and names the first that has
    /// none. Nothing is taken: [`PartitionLimits::take`] does that.
    pub fn admit<'a>(
        &mut self,
        kind: Kind,
        partitions: impl IntoIterator<Item = &'a Partition>,
    ) -> Result<(), Throttle> {
        for p in partitions {
            if self.bucket(kind, p).balance <= 0.0 {
                *self.throttled.entry((kind, p.index.is_some())).or_default() += 1;
                return Err(Throttle {
                    kind,
                    partition: p.clone(),
                });
            }
        }
        Ok(())
    }

    /// Takes `units` of `kind` from `partition` (an admitted request's).
    pub fn take(&mut self, kind: Kind, partition: &Partition, units: f64) {
        let b = self.bucket(kind, partition);
        b.balance -= units;
        b.total += units;
        b.in_second += units;
    }

    /// The partition that served the most units of `kind`, among the
    /// indexes' (`index`) or the table's.
    pub fn busiest(&self, kind: Kind, index: bool) -> Option<Busiest> {
        self.buckets
            .iter()
            .filter(|((k, p), b)| *k == kind && p.index.is_some() == index && b.total > 0.0)
            .max_by(|(ka, a), (kb, b)| a.total.total_cmp(&b.total).then(kb.1.cmp(&ka.1)))
            .map(|((_, p), b)| Busiest {
                partition: p.clone(),
                units: b.total,
                peak_second: b.peak.max(b.in_second),
            })
    }

    /// Requests of `kind` refused, by an index's partition (`index`) or
    /// the table's.
    pub fn throttled(&self, kind: Kind, index: bool) -> u64 {
        self.throttled.get(&(kind, index)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, TokioClock};
    use std::sync::Arc;

    fn limits() -> (PartitionLimits, Arc<TokioClock>) {
        let clock = Arc::new(TokioClock::starting_at(1_000_000));
        (PartitionLimits::new(Vec::new(), clock.clone()), clock)
    }

    /// A partition serves a second's units at once, then its rate: 1,000
    /// write units a second; other partitions and reads are apart.
    #[tokio::test(start_paused = true)]
    async fn a_partition_serves_its_limit_a_second() {
        let (mut l, clock) = limits();
        let hot = Partition::index("claimable-index", "0");
        let mut served = 0;
        while l.admit(Kind::Write, [&hot]).is_ok() {
            l.take(Kind::Write, &hot, 1.0);
            served += 1;
        }
        assert_eq!(served, 1_000);
        let refused = l.admit(Kind::Write, [&hot]).unwrap_err();
        assert_eq!(refused.partition, hot);
        let cold = Partition::index("claimable-index", "1");
        assert!(l.admit(Kind::Write, [&cold]).is_ok());
        assert!(l.admit(Kind::Read, [&hot]).is_ok());
        // A request touching the table and the hot index is refused.
        assert!(
            l.admit(Kind::Write, [&Partition::table("t"), &hot])
                .is_err()
        );
        assert_eq!(
            (
                l.throttled(Kind::Write, true),
                l.throttled(Kind::Write, false)
            ),
            (3, 0)
        );
        // 100 ms later: 100 more units.
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(clock.now_ms(), 1_000_100);
        let mut more = 0;
        while l.admit(Kind::Write, [&hot]).is_ok() {
            l.take(Kind::Write, &hot, 1.0);
            more += 1;
        }
        assert_eq!(more, 100);
        let busiest = l.busiest(Kind::Write, true).unwrap();
        assert_eq!((busiest.partition, busiest.units), (hot, 1_100.0));
        assert!(l.busiest(Kind::Write, false).is_none());
    }

    /// The SDK's backoff grows from a draw of up to 1 s, to at most 20 s.
    #[test]
    fn the_sdks_backoff_is_drawn_under_a_doubling_ceiling() {
        for _ in 0..100 {
            assert!(sdk_backoff(1) < Duration::from_secs(1));
            assert!(sdk_backoff(2) < Duration::from_secs(2));
            assert!(sdk_backoff(9) <= Duration::from_secs(20));
        }
    }
}
