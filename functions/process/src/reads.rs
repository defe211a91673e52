//! A refill's reads: those the claim policy asks for
//! ([`Select::next_read`]), made on the claimable index of any store behind
//! the queue's seam (the DynamoDB store, the in-memory model; or, in the
//! scenario corpus, a scripted index) and told to it, then its pick.

use crate::select::{Ask, Event, Ids, Read, Select};
use lifo_core::store::{Queue, QueueOps};
use lifo_core::{Candidate, StoreError};

/// What the claim reads read: the claimable index's heads
/// ([`QueueOps::claimable_heads_since`]).
pub trait ClaimReads {
    fn heads_of(
        &self,
        read: &Read,
        now_ms: u64,
        horizon_ms: u64,
    ) -> impl std::future::Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send;
}

impl<Q: Queue> ClaimReads for Q {
    async fn heads_of(
        &self,
        read: &Read,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Vec<(Vec<Candidate>, bool)>, StoreError> {
        self.claimable_heads_since(
            read.order,
            &read.shards,
            read.page,
            now_ms,
            horizon_ms,
            read.since_ms,
        )
        .await
    }
}

/// One refill of `want` free slots: the reads `select` asks for, each
/// told to it, then its pick (none in `exclude`, none claimable before
/// `horizon_ms`). `clock` gives the time (epoch ms).
pub async fn refill<S: Select + ?Sized>(
    select: &mut S,
    reads: &impl ClaimReads,
    (want, exclude): (usize, &Ids),
    horizon_ms: u64,
    clock: &(dyn Fn() -> u64 + Sync),
) -> Result<Vec<Candidate>, StoreError> {
    let mut ask = Ask::new(want, exclude);
    while let Some(read) = select.next_read(&ask, clock()) {
        let sent_ms = clock();
        let heads = reads.heads_of(&read, sent_ms, horizon_ms).await?;
        let event = Event::Read {
            read: &read,
            sent_ms,
            heads: &heads,
        };
        select.tell(event, clock());
        ask.reads += 1;
    }
    Ok(select.pick(&ask, &mut |_| true, clock()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::{Setup, stack};
    use lifo_core::memory::{Lag, Memory};
    use lifo_core::{Order, Payload, Task};

    /// The claim loop's refill runs on the in-memory model as on DynamoDB:
    /// the newest claimable tasks, none that a lease holds.
    #[tokio::test]
    async fn a_refill_reads_the_models_index_newest_first() {
        const T0: u64 = 1_800_000_000_000;
        let model = Memory::new(Lag::Off);
        let tasks: Vec<Task> = (0..4)
            .map(|i| Task::new_pending(format!("t{i}"), Payload::new(), T0 + i, 60, 1))
            .collect();
        model.put_new(&tasks).await.unwrap();
        let setup = Setup {
            order: Order::Lifo,
            shards: vec![0],
            capacity: 2,
            per_second: None,
            fair_share: false,
            tenant_max_in_flight: None,
            handover: None,
            tuning: Default::default(),
        };
        let mut select = stack(&setup, T0 + 10);
        let exclude = Ids::from(["t3".to_owned()]);
        let clock = || T0 + 10;
        let picked = refill(&mut *select, &model, (2, &exclude), 0, &clock)
            .await
            .unwrap();
        let ids: Vec<&str> = picked.iter().map(|c| c.task_id.as_str()).collect();
        assert_eq!(ids, ["t2", "t1"]);
    }
}
