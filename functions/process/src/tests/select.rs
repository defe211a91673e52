//! What the claim policy's tests share: scripted shards, a refill as the
//! claim loop makes it, with time given, and tasks.

use crate::select::*;
use lifo_core::priority::Priority;
use lifo_core::{Candidate, Order};

pub const NOW: u64 = 1_800_000_000_000;

/// Scripted shards: each read answers each shard's list (complete), in
/// the read's order, cut to its page.
pub struct Shards(pub Vec<Vec<Candidate>>);

impl Shards {
    pub fn answer(&self, read: &Read) -> Vec<(Vec<Candidate>, bool)> {
        read.shards
            .iter()
            .map(|s| {
                let mut items = self.0.get(*s as usize).cloned().unwrap_or_default();
                items.sort_by_key(|c| std::cmp::Reverse((c.claimable_at, c.task_id.clone())));
                if !read.order.newest_first() {
                    items.reverse();
                }
                let complete = items.len() <= read.page || read.since_ms.is_some();
                if read.since_ms.is_none() {
                    items.truncate(read.page);
                }
                (items, complete)
            })
            .collect()
    }
}

/// One refill of `want` at `now`, none in `exclude`: the reads made, and
/// the ids picked.
pub fn fill(
    s: &mut dyn Select,
    shards: &Shards,
    want: usize,
    exclude: &Ids,
    now: u64,
) -> (Vec<Read>, Vec<String>) {
    let mut ask = Ask::new(want, exclude);
    let mut reads = Vec::new();
    while let Some(read) = s.next_read(&ask, now) {
        let heads = shards.answer(&read);
        let event = Event::Read {
            read: &read,
            sent_ms: now,
            heads: &heads,
        };
        s.tell(event, now);
        reads.push(read);
        ask.reads += 1;
    }
    let got = s.pick(&ask, &mut |_| true, now);
    (reads, got.into_iter().map(|c| c.task_id).collect())
}

/// A normal task of `tenant` stamped `at`, `ttl_s` to live.
pub fn task(id: &str, tenant: Option<&str>, at: u64, ttl_s: u64) -> Candidate {
    Candidate {
        tenant: tenant.map(str::to_owned),
        expires_at: at / 1000 + ttl_s,
        ..Candidate::pending(id, 0, Priority::Normal.key(at))
    }
}

/// A stack's settings: `order` on one shard, two slots.
pub fn setup(order: Order, fair_share: bool) -> Setup<'static> {
    Setup {
        order,
        shards: vec![0],
        capacity: 2,
        per_second: None,
        fair_share,
        tenant_max_in_flight: None,
        handover: None,
        tuning: Default::default(),
    }
}

/// The ids of `v`.
pub fn ids(v: &[Candidate]) -> Vec<&str> {
    v.iter().map(|c| c.task_id.as_str()).collect()
}

/// Two shards' heads, newest first, of tenants a (9, 8, 7) and b (6, 3).
pub fn two_tenants() -> heads::Heads {
    let t = |id: &str, at: i64, tenant: &str| Candidate {
        tenant: Some(tenant.into()),
        ..Candidate::pending(id, 0, at)
    };
    let mut h = heads::Heads::new(Order::Lifo, vec![0, 1], heads::HeadsPolicy::new(2, 8));
    let a = vec![t("a9", 9, "a"), t("a7", 7, "a"), t("b3", 3, "b")];
    h.replace(
        vec![(a, true), (vec![t("a8", 8, "a"), t("b6", 6, "b")], true)],
        NOW,
    );
    h
}
