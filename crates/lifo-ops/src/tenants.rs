//! Who waits, per tenant (`lifo stats --tenants`): the fair share as an
//! operator sees it in the claimable index. It reads each shard's newest
//! claimable entries, up to [`READ_PER_SHARD`] (about 4 read units a
//! shard), and judges flooding by the rule it is given (the `lifo`
//! command gives the processor's fair share's), over the tasks waiting. What the
//! processor started, and for whom, is in its EMF metrics
//! (`TenantStarts`, `FloodingTenantStarts`, `QuietTenantsOldestAgeMs`).

use crate::{OpsError, Queue};
use lifo_core::{Candidate, Order, priority};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};

/// Who floods, of each tenant's waiting tasks.
pub type Flooding<'a> = &'a dyn Fn(&[(&str, usize)]) -> HashSet<String>;

/// Claimable entries read per shard, newest first.
pub const READ_PER_SHARD: usize = 200;

/// One tenant's waiting tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantRow {
    /// The empty name: tasks without a tenant.
    pub tenant: String,
    pub waiting: usize,
    /// Since its oldest waiting task became claimable (ms).
    pub oldest_age_ms: u64,
    pub flooding: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tenants {
    /// Most waiting first.
    pub rows: Vec<TenantRow>,
    /// A shard held more claimable tasks than were read: the figures are
    /// of the newest.
    pub cut_short: bool,
    /// The oldest waiting task of a tenant that is not flooding (ms).
    pub quiet_oldest_age_ms: Option<u64>,
    /// The flooding tenants' share of the waiting tasks, percent.
    pub flooding_share_pct: f64,
}

/// Reads the newest claimable entries of every shard and sums them up.
pub async fn collect(q: &Queue, now: u64, flooding: Flooding<'_>) -> Result<Tenants, OpsError> {
    let shards: Vec<u32> = (0..q.settings.shards.max(1)).collect();
    let horizon = q.settings.horizon(now);
    let heads = q
        .store
        .claimable_heads(Order::Lifo, &shards, READ_PER_SHARD, now, horizon)
        .await?;
    Ok(summarise(&heads, now, flooding))
}

/// Per tenant, of the shards' `heads` (each with whether it was complete).
pub fn summarise(heads: &[(Vec<Candidate>, bool)], now: u64, flooding: Flooding<'_>) -> Tenants {
    let mut per: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for c in heads.iter().flat_map(|(items, _)| items) {
        let at = priority::at_ms(c.claimable_at);
        let e = per
            .entry(c.tenant.as_deref().unwrap_or(""))
            .or_insert((0, at));
        e.0 += 1;
        e.1 = e.1.min(at);
    }
    let load: Vec<(&str, usize)> = per.iter().map(|(t, (n, _))| (*t, *n)).collect();
    let flooding = flooding(&load);
    let mut rows: Vec<TenantRow> = per
        .iter()
        .map(|(t, (n, oldest))| TenantRow {
            tenant: (*t).to_owned(),
            waiting: *n,
            oldest_age_ms: now.saturating_sub(*oldest),
            flooding: flooding.contains(*t),
        })
        .collect();
    rows.sort_by(|a, b| b.waiting.cmp(&a.waiting).then(a.tenant.cmp(&b.tenant)));
    let total: usize = rows.iter().map(|r| r.waiting).sum();
    let flooded: usize = rows.iter().filter(|r| r.flooding).map(|r| r.waiting).sum();
    Tenants {
        quiet_oldest_age_ms: rows
            .iter()
            .filter(|r| !r.flooding)
            .map(|r| r.oldest_age_ms)
            .max(),
        flooding_share_pct: if total == 0 {
            0.0
        } else {
            100.0 * flooded as f64 / total as f64
        },
        cut_short: heads.iter().any(|(_, complete)| !complete),
        rows,
    }
}

impl Tenants {
    pub fn json(&self) -> Value {
        json!({
            "tenants": self.rows.iter().map(|r| json!({
                "tenant": r.tenant,
                "waiting": r.waiting,
                "oldestAgeMs": r.oldest_age_ms,
                "flooding": r.flooding,
            })).collect::<Vec<_>>(),
            "cutShort": self.cut_short,
            "quietTenantsOldestAgeMs": self.quiet_oldest_age_ms,
            "floodingShareOfWaitingPct": self.flooding_share_pct,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifo_core::Priority;

    fn waiting(id: &str, tenant: &str, at_ms: u64) -> Candidate {
        Candidate {
            tenant: Some(tenant.into()),
            ..Candidate::pending(id, 0, Priority::Normal.key(at_ms))
        }
    }

    #[test]
    fn the_flooding_tenant_and_the_oldest_quiet_task_are_named() {
        let now = 1_000_000;
        let mut shard0: Vec<Candidate> = (0..8)
            .map(|i| waiting(&format!("f{i}"), "flood", now - 100 * i))
            .collect();
        shard0.push(waiting("a1", "a", now - 4_000));
        let shard1 = vec![
            waiting("b1", "b", now - 2_500),
            waiting("a2", "a", now - 50),
        ];
        // The rule the processor's is judged by elsewhere: here, the one
        // with more than half of the waiting tasks.
        let rule = |load: &[(&str, usize)]| -> HashSet<String> {
            let total: usize = load.iter().map(|(_, n)| n).sum();
            load.iter()
                .filter(|(_, n)| 2 * n > total)
                .map(|(t, _)| (*t).to_owned())
                .collect()
        };
        let t = summarise(&[(shard0, true), (shard1, false)], now, &rule);
        let rows: Vec<(&str, usize, u64, bool)> = t
            .rows
            .iter()
            .map(|r| (r.tenant.as_str(), r.waiting, r.oldest_age_ms, r.flooding))
            .collect();
        assert_eq!(
            rows,
            [
                ("flood", 8, 700, true),
                ("a", 2, 4_000, false),
                ("b", 1, 2_500, false)
            ]
        );
        assert_eq!(t.quiet_oldest_age_ms, Some(4_000));
        assert!((t.flooding_share_pct - 100.0 * 8.0 / 11.0).abs() < 1e-9);
        assert!(t.cut_short);
        // Nothing waits: nothing floods.
        let empty = summarise(&[(vec![], true)], now, &rule);
        assert_eq!((empty.rows.len(), empty.quiet_oldest_age_ms), (0, None));
        assert_eq!(empty.flooding_share_pct, 0.0);
    }
}
