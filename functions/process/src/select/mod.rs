//! The claim policy: which claimable tasks an invocation takes, and when a
//! task put back may be taken again. The protocol (what a claim writes,
//! and when it may) is `lifo-core`'s; this is the choosing.
//!
//! - [`heads`]: each shard's head of the claimable index kept in memory
//!   between reads, merged into one order across the shards;
//! - [`deadline`]: the adaptive order's lane for tasks near their deadline;
//! - [`fair`]: the fair share, when several tenants have work;
//! - [`rest`]: how long a task put back rests before its next claim;
//! - [`refill`]: all of them together, for the claim loop's free slots.

pub mod clock;
pub mod deadline;
pub mod fair;
pub mod heads;
pub mod rest;

use clock::now_ms;
use deadline::Deadlines;
use fair::Ledger;
use heads::{Read, ShardHeads};
use lifo_core::{Candidate, Order, Store, StoreError};
use std::collections::HashSet;

/// What the claim policy reads: the claimable index's heads
/// ([`Store::claimable_heads_since`]); the scenario corpus reads a
/// scripted index instead.
pub trait ClaimReads {
    fn claimable_heads_since(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
        since_ms: Option<u64>,
    ) -> impl std::future::Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>>;
}

impl ClaimReads for Store {
    fn claimable_heads_since(
        &self,
        order: Order,
        shards: &[u32],
        page: usize,
        now_ms: u64,
        horizon_ms: u64,
        since_ms: Option<u64>,
    ) -> impl std::future::Future<Output = Result<Vec<(Vec<Candidate>, bool)>, StoreError>> {
        Store::claimable_heads_since(self, order, shards, page, now_ms, horizon_ms, since_ms)
    }
}

/// Reads the heads again if they cannot answer `want` candidates, then
/// takes them: first the tasks near their deadline the `lane` gives (the
/// adaptive order), then by the fair share (with a `fair` ledger) or
/// newest first.
#[allow(clippy::too_many_arguments)]
pub async fn refill(
    store: &impl ClaimReads,
    heads: &mut ShardHeads,
    order: lifo_core::Order,
    horizon_ms: u64,
    want: usize,
    exclude: &HashSet<String>,
    fair: Option<&mut Ledger>,
    mut lane: Option<&mut Deadlines>,
) -> Result<Vec<Candidate>, StoreError> {
    // Read as LIFO would (the lane sees what arrives through these reads).
    let mut read = heads.to_read(want, exclude, clock::now());
    if matches!(read, Read::Nothing)
        && let Some(ledger) = fair.as_deref()
        && heads.any_tenant()
        && fair::needs_fresh_heads(heads, want, exclude, ledger, clock::now())
    {
        read = Read::All;
    }
    match read {
        Read::Nothing => {}
        Read::All => {
            let now = now_ms();
            let (shards, page, since) = (heads.shards(), heads.policy().page, heads.since_ms());
            let read = store
                .claimable_heads_since(order, shards, page, now, horizon_ms, since)
                .await?;
            if let Some(lane) = lane.as_deref_mut() {
                lane.observe(read.iter().flat_map(|(items, _)| items), now);
            }
            heads.replace(read, clock::now());
        }
        // Only the cut-short shards whose heads ran out.
        Read::Some(shards) => {
            let now = now_ms();
            let (page, since) = (heads.policy().page, heads.since_ms());
            let read = store
                .claimable_heads_since(order, &shards, page, now, horizon_ms, since)
                .await?;
            if let Some(lane) = lane.as_deref_mut() {
                lane.observe(read.iter().flat_map(|(items, _)| items), now);
            }
            heads.replace_some(&shards, read);
        }
    }
    // What the newest-first reads cannot show: the oldest claimable tasks
    // (the nearest their deadline) of each shard whose head is cut short,
    // at the invocation's first read (buried before it) and once tasks
    // stop arriving (what a burst buried between two reads). A shard read
    // whole showed it all.
    let now = now_ms();
    if let Some(lane) = lane.as_deref_mut()
        && lane.wants_oldest(heads.reads() == 1, now)
    {
        let short = heads.cut_short();
        if !short.is_empty() {
            let oldest = store
                .claimable_heads_since(
                    lifo_core::Order::Fifo,
                    &short,
                    deadline::FIRST_READ_PAGE,
                    now,
                    horizon_ms,
                    None,
                )
                .await?;
            lane.keep(oldest.iter().flat_map(|(items, _)| items));
            lane.read_oldest(now);
        }
    }
    // The tasks that must go first to keep their deadlines (adaptive).
    let mut out = match lane {
        Some(lane) => {
            // Never past a higher priority waiting in the heads; with the
            // share, never a flooding tenant's.
            let by_priority = deadline::no_lower_priority(heads.first_key(exclude));
            // Found only when the lane picks: most refills it gives none.
            let flooding = std::cell::OnceCell::new();
            let flooding = || {
                flooding.get_or_init(|| match fair.as_deref() {
                    Some(ledger) if heads.any_tenant() => {
                        let waiting = heads
                            .tenant_heads(exclude)
                            .into_iter()
                            .map(|(t, h)| (t, h.waiting))
                            .collect();
                        ledger.flooding(&waiting)
                    }
                    _ => HashSet::new(),
                })
            };
            lane.take(want, exclude, now_ms(), |c| {
                by_priority(c) && !flooding().contains(c.tenant_name())
            })
        }
        None => Vec::new(),
    };
    let mut taken = exclude.clone();
    let given: HashSet<String> = out.iter().map(|c| c.task_id.clone()).collect();
    heads.forget(&given);
    if out.len() == want {
        return Ok(out);
    }
    taken.extend(given);
    let rest = want - out.len();
    // The share orders the tenants from the first read that shows one.
    out.extend(match fair {
        Some(ledger) if heads.any_tenant() => fair::take(heads, rest, &taken, ledger),
        _ => heads.take(rest, &taken),
    });
    Ok(out)
}
