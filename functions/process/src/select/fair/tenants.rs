//! The heads by tenant, for the fair share: who waits and where, and the
//! candidates carried from one read to the next under a flood's newer
//! tasks. A candidate without a tenant is the empty tenant's.

use crate::select::Ids;
use crate::select::heads::{Head, Heads, before};
use lifo_core::Candidate;
use lifo_core::priority::{Priority, at_ms};
use std::collections::{HashMap, HashSet};

/// A candidate's tenant: none is the empty name.
pub fn tenant_of(c: &Candidate) -> &str {
    c.tenant.as_deref().unwrap_or("")
}

/// One tenant's candidates in the heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantHead {
    /// Its candidates waiting.
    pub waiting: usize,
    /// When its oldest candidate became claimable (epoch ms).
    pub oldest_ms: u64,
}

/// Whether any candidate in `heads` has a tenant.
pub fn any_tenant(heads: &Heads) -> bool {
    heads.candidates().any(|c| c.tenant.is_some())
}

/// Each tenant with candidates in `heads` (none in `exclude`).
pub fn tenant_heads(heads: &Heads, exclude: &Ids) -> HashMap<String, TenantHead> {
    let mut out: HashMap<String, TenantHead> = HashMap::new();
    for c in heads.candidates().filter(|c| !exclude.contains(&c.task_id)) {
        let at = at_ms(c.claimable_at);
        let head = out.entry(tenant_of(c).to_owned()).or_insert(TenantHead {
            waiting: 0,
            oldest_ms: at,
        });
        head.waiting += 1;
        head.oldest_ms = head.oldest_ms.min(at);
    }
    out
}

/// The index key of `tenant`'s first candidate in the claim order (none in
/// `exclude`).
pub fn tenant_first(heads: &Heads, tenant: &str, exclude: &Ids) -> Option<i64> {
    let order = heads.order();
    heads
        .each()
        .iter()
        .filter_map(|h| {
            h.items
                .iter()
                .find(|c| tenant_of(c) == tenant && !exclude.contains(&c.task_id))
        })
        .reduce(|a, b| if before(order, b, a) { b } else { a })
        .map(|c| c.claimable_at)
}

/// `tenant`'s last candidate in the claim order (none in `exclude`) of its
/// first one's priority: its oldest there, newest first.
pub fn tenant_last<'a>(heads: &'a Heads, tenant: &str, exclude: &Ids) -> Option<&'a Candidate> {
    let priority = Priority::of_key(tenant_first(heads, tenant, exclude)?);
    let order = heads.order();
    heads
        .candidates()
        .filter(|c| {
            tenant_of(c) == tenant
                && !exclude.contains(&c.task_id)
                && Priority::of_key(c.claimable_at) == priority
        })
        .reduce(|a, b| if before(order, a, b) { b } else { a })
}

/// Carries into `heads`, just replaced by a read at `now_ms`, what it cut
/// out of view of the heads `before` it: candidates past a cut-short
/// head's end, not expired, of tenants with fewer than `limit` in view.
/// One claimed meanwhile fails its conditional claim.
pub fn carry(heads: &mut Heads, before: Vec<Head>, limit: usize, now_ms: u64) {
    let mut per_tenant: HashMap<String, usize> = HashMap::new();
    for c in heads.candidates() {
        *per_tenant.entry(tenant_of(c).to_owned()).or_default() += 1;
    }
    let newest_first = heads.order().newest_first();
    let mut carried: Vec<(usize, Vec<Candidate>)> = Vec::new();
    for (i, (head, old)) in heads.each().iter().zip(before).enumerate() {
        let Some(end) = head.items.back().map(|c| c.claimable_at) else {
            continue;
        };
        if head.complete {
            continue;
        }
        let read: HashSet<&str> = head.items.iter().map(|c| c.task_id.as_str()).collect();
        let mut these = Vec::new();
        for c in old.items {
            // Tasks written in one request share their key: one the read's
            // page ended before sorts with its last entry.
            let past_end = match newest_first {
                true => c.claimable_at <= end,
                false => c.claimable_at >= end,
            };
            if !past_end || read.contains(c.task_id.as_str()) || c.expires_at <= now_ms / 1000 {
                continue;
            }
            let n = per_tenant.entry(tenant_of(&c).to_owned()).or_default();
            if *n < limit {
                *n += 1;
                these.push(c);
            }
        }
        carried.push((i, these));
    }
    for (i, these) in carried {
        heads.append(i, these);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::heads::{HeadsPolicy, c};
    use lifo_core::Order;

    const NOW: u64 = 1_800_000_000_000;

    fn t(id: &str, at: i64, tenant: &str) -> Candidate {
        Candidate {
            tenant: Some(tenant.into()),
            ..c(id, at)
        }
    }

    #[test]
    fn each_tenant_s_first_count_oldest_and_last() {
        let h = crate::tests::select::two_tenants();
        let none = Ids::new();
        let head = |waiting, oldest_ms| TenantHead { waiting, oldest_ms };
        assert_eq!(
            tenant_heads(&h, &none),
            HashMap::from([("a".to_owned(), head(3, 7)), ("b".to_owned(), head(2, 3))])
        );
        let past_a9 = Ids::from(["a9".to_owned()]);
        assert_eq!(tenant_heads(&h, &past_a9).get("a"), Some(&head(2, 7)));
        assert_eq!(tenant_first(&h, "a", &past_a9), Some(8));
        assert_eq!(tenant_first(&h, "c", &none), None);
        assert_eq!(
            tenant_last(&h, "a", &none).map(|c| c.task_id.as_str()),
            Some("a7")
        );
        assert!(any_tenant(&h));
    }

    #[test]
    fn a_tenant_s_last_is_its_oldest_of_its_first_one_s_priority() {
        let at = |id: &str, ms: u64, p: Priority| Candidate {
            tenant: Some("a".into()),
            ..Candidate::pending(id, 0, p.key(ms))
        };
        let mut h = Heads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 5));
        let items = vec![
            at("high", 500, Priority::High),
            at("high-old", 100, Priority::High),
            at("normal", 900, Priority::Normal),
        ];
        h.replace(vec![(items, true)], NOW);
        let last = |exclude: &Ids| tenant_last(&h, "a", exclude).map(|c| c.claimable_at);
        assert_eq!(last(&Ids::new()), Some(Priority::High.key(100)));
        let highs = Ids::from(["high".to_owned(), "high-old".to_owned()]);
        assert_eq!(last(&highs), Some(Priority::Normal.key(900)));
    }

    #[test]
    fn a_tenant_buried_by_a_cut_short_read_is_carried_up_to_the_limit() {
        let expired = Candidate {
            expires_at: 1,
            ..t("q6", 6, "quiet")
        };
        let first = vec![
            t("q10", 10, "quiet"),
            t("f9", 9, "flood"),
            expired,
            t("q5", 5, "quiet"),
            t("q4", 4, "quiet"),
            t("q3", 3, "quiet"),
            t("f2", 2, "flood"),
        ];
        // The flood's newer tasks fill the next read, cut short.
        let second = vec![
            t("f12", 12, "flood"),
            t("f11", 11, "flood"),
            t("f10", 10, "flood"),
        ];
        let read = |limit: usize, complete: bool| {
            let mut h = Heads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 5));
            h.replace(vec![(first.clone(), false)], NOW);
            let before = h.each().to_vec();
            h.replace(vec![(second.clone(), complete)], NOW);
            carry(&mut h, before, limit, NOW);
            let got: Vec<String> = h.candidates().map(|c| c.task_id.clone()).collect();
            got
        };
        // The quiet tenant's first two, at or past the read's end; not the
        // expired one, nor the flood's (three in the read already).
        assert_eq!(read(2, false), ["f12", "f11", "f10", "q10", "q5"]);
        assert_eq!(read(0, false), ["f12", "f11", "f10"]);
        // A read in full holds every claimable task: nothing is carried.
        assert_eq!(read(2, true).len(), 3);
    }
}
