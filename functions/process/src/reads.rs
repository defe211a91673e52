//! A refill's reads: those the claim policy asks for
//! ([`Select::next_read`]), made on the claimable index (or, in the
//! scenario corpus, on a scripted one) and told to it, then its pick.

use crate::select::{Ask, Event, Ids, Read, Select};
use lifo_core::{Candidate, Store, StoreError};

/// What the claim reads read: the claimable index's heads
/// ([`Store::claimable_heads_since`]).
pub trait ClaimReads {
    fn heads_of(
        &self,
        read: &Read,
        now_ms: u64,
        horizon_ms: u64,
    ) -> impl std::future::Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> + Send;
}

impl ClaimReads for Store {
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
