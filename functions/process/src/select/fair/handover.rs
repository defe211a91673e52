//! The ledger's memory across a tail call: each tenant's starts in the last
//! [`WINDOW`], carried in the tail call's wake-up (`served`), so the next
//! invocation of the loop does not start with every tenant even and hand
//! the flooding tenant the top again.
//!
//! Bounded: at most [`MAX_BYTES`] of JSON, the most served tenants first
//! (they are what the next invocation must remember); an SNS message may
//! be 256 KB. Times are milliseconds before the wake-up's `at`, so the
//! next invocation reads them on its own clock.
//!
//! Beside the ledger, the candidates the heads kept in view of the tenants
//! that were not flooding ([`kept`], `kept`): the next invocation's first
//! read shows the newest only, and a quiet tenant's task the reads before
//! had found under a flood's newer ones would be out of view until the
//! flood's tasks above it were claimed, seconds later. At most
//! [`MAX_KEPT_BYTES`].

use super::PAGE;
use super::ledger::{Ledger, WINDOW};
use crate::select::heads::ShardHeads;
use lifo_core::Candidate;
use lifo_lambda::notify::Served;
use std::collections::HashSet;

/// Most bytes the handover adds to a wake-up (≈ 5,000 starts).
pub const MAX_BYTES: usize = 32 * 1024;

/// Most bytes of kept candidates a tail call hands on (≈ 100 to 150
/// index entries: a tenant name, a task id and four numbers each).
pub const MAX_KEPT_BYTES: usize = 16 * 1024;

/// The candidates in `heads` (none in `exclude`, none expired at `now_ms`)
/// of the tenants that are not flooding, for the next invocation to keep
/// in view: up to [`PAGE`] per tenant, in the claim order, the tenants
/// with the fewest waiting first, within [`MAX_KEPT_BYTES`] of JSON. A
/// flooding tenant's are left out: its newest are what the first read
/// shows.
pub fn kept(
    heads: &ShardHeads,
    exclude: &HashSet<String>,
    ledger: &Ledger,
    now_ms: u64,
) -> Vec<Candidate> {
    let seen = heads.tenant_heads(exclude);
    let waiting = seen.iter().map(|(t, h)| (t.clone(), h.waiting)).collect();
    let flooding = ledger.flooding(&waiting);
    let mut tenants: Vec<(usize, &str)> = seen
        .iter()
        .filter(|(t, _)| !flooding.contains(*t))
        .map(|(t, h)| (h.waiting, t.as_str()))
        .collect();
    tenants.sort_unstable();
    let all = heads.in_order();
    let mut out = Vec::new();
    let mut bytes = 0;
    for (_, tenant) in tenants {
        let theirs = all
            .iter()
            .filter(|c| c.tenant_name() == tenant && !exclude.contains(&c.task_id))
            .filter(|c| c.expires_at > now_ms / 1000)
            .take(PAGE);
        for c in theirs {
            // Its JSON and a comma.
            let cost = serde_json::to_string(c).map_or(usize::MAX, |j| j.len() + 1);
            if bytes + cost > MAX_KEPT_BYTES {
                return out;
            }
            bytes += cost;
            out.push((*c).clone());
        }
    }
    out
}

impl Ledger {
    /// The starts of the last [`WINDOW`] at `now_ms` (epoch ms), as
    /// milliseconds before it, newest first, per tenant; within
    /// [`MAX_BYTES`].
    pub fn handover(&mut self, now_ms: u64) -> Served {
        self.forget(now_ms);
        let mut tenants: Vec<(&String, _)> = self.starts.iter().collect();
        tenants.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let mut out = Served::new();
        let mut bytes = 0;
        for (tenant, times) in tenants {
            // "name":[n,…], each number at most 5 digits and a comma.
            let cost = tenant.len() + 6 + 6 * times.len();
            if bytes + cost > MAX_BYTES {
                break;
            }
            bytes += cost;
            let ago = times
                .iter()
                .rev()
                .map(|t| u32::try_from(now_ms.saturating_sub(*t)).unwrap_or(u32::MAX))
                .collect();
            out.insert(tenant.clone(), ago);
        }
        out
    }

    /// Takes over the starts a tail call handed on at `at_ms` (epoch ms,
    /// the wake-up's `at`); those older than [`WINDOW`] are dropped at the
    /// next round.
    pub fn take_over(&mut self, served: &Served, at_ms: u64) {
        let window = WINDOW.as_millis() as u64;
        for (tenant, ago) in served {
            let times = self.starts.entry(tenant.clone()).or_default();
            let mut before: Vec<u64> = ago
                .iter()
                .filter(|a| u64::from(**a) < window)
                .map(|a| at_ms.saturating_sub(u64::from(*a)))
                .collect();
            before.sort_unstable();
            // Before anything this invocation booked.
            for t in before.into_iter().rev() {
                times.push_front(t);
            }
        }
        self.starts.retain(|_, t| !t.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::{NOW, ran};
    use super::*;
    use lifo_core::priority::Priority;

    #[test]
    fn the_next_invocation_remembers_who_was_served_and_when() {
        let mut first = Ledger::new(None);
        ran(&mut first, "flood", 40, NOW - 3_000);
        ran(&mut first, "quiet", 2, NOW - 1_000);
        // Too old to count: not handed on.
        ran(&mut first, "old", 5, NOW - 11_000);
        let served = first.handover(NOW);
        assert_eq!(served.len(), 2);
        assert_eq!(served["flood"], vec![3_000; 40]);
        assert_eq!(served["quiet"], vec![1_000; 2]);
        // The wake-up travels as JSON.
        let json = serde_json::to_string(&served).unwrap_or_default();
        let back: Served = serde_json::from_str(&json).unwrap_or_default();
        // Read 150 ms later by the next invocation (its clock: `at` is the
        // sender's): flood is still at the top, quiet's task goes first.
        let mut next = Ledger::new(None);
        next.take_over(&back, NOW);
        let s = next.shares(["flood", "quiet"], NOW + 150);
        let heads = [
            ("flood", Priority::Normal.key(NOW + 140)),
            ("quiet", Priority::Normal.key(NOW + 100)),
        ];
        assert_eq!(s.pick(heads), Some("quiet"));
        // Without the memory, the newest (flood's) would.
        let s = Ledger::new(None).shares(["flood", "quiet"], NOW + 150);
        assert_eq!(s.pick(heads), Some("flood"));
    }

    #[test]
    fn the_quiet_tenants_candidates_are_handed_on_the_flood_s_are_not() {
        use crate::select::heads::HeadsPolicy;
        use lifo_core::Order;
        let now = lifo_core::now_ms();
        let t = |id: &str, tenant: &str, at: u64| Candidate {
            tenant: Some(tenant.into()),
            expires_at: now / 1000 + 20,
            ..Candidate::pending(id, 0, Priority::Normal.key(at))
        };
        let mut entries: Vec<Candidate> = (0..30)
            .map(|i| t(&format!("f{i}"), "flood", now - i * 10))
            .collect();
        entries.push(t("a1", "a", now - 900));
        entries.push(t("a2", "a", now - 400));
        entries.push(t("a3", "a", now - 600));
        entries.push(t("b1", "b", now - 700));
        entries.push(t("b-running", "b", now - 100));
        entries.push(Candidate {
            expires_at: now / 1000,
            ..t("b-expired", "b", now - 800)
        });
        entries.sort_by_key(|c| std::cmp::Reverse(c.claimable_at));
        let mut heads = ShardHeads::new(
            Order::Lifo,
            vec![0],
            super::super::policy(HeadsPolicy::new(1, 5)),
        );
        heads.replace(vec![(entries, false)], std::time::Instant::now());
        let exclude: HashSet<String> = ["b-running".to_owned()].into();
        let got: Vec<String> = kept(&heads, &exclude, &Ledger::new(None), now)
            .into_iter()
            .map(|c| c.task_id)
            .collect();
        // b (two waiting, one expired) before a (three), each newest
        // first; not the flood's 30, the running one or the expired one.
        assert_eq!(got, ["b1", "a2", "a3", "a1"]);
        // With no tenant flooding, every tenant's are handed on, up to a
        // page each.
        let mut even = ShardHeads::new(
            Order::Lifo,
            vec![0],
            super::super::policy(HeadsPolicy::new(1, 5)),
        );
        let few: Vec<Candidate> = (0..3)
            .map(|i| t(&format!("f{i}"), "flood", now - i * 10))
            .chain([t("a1", "a", now - 900)])
            .collect();
        even.replace(vec![(few, false)], std::time::Instant::now());
        assert_eq!(kept(&even, &exclude, &Ledger::new(None), now).len(), 4);
    }

    #[test]
    fn the_kept_candidates_stay_within_their_bytes() {
        use crate::select::heads::HeadsPolicy;
        use lifo_core::Order;
        let now = lifo_core::now_ms();
        let entries: Vec<Candidate> = (0..400)
            .map(|i| Candidate {
                tenant: Some(format!("tenant-{i:03}")),
                expires_at: now / 1000 + 20,
                // A task id as long as a UUID.
                ..Candidate::pending(&format!("{i:036}"), 0, Priority::Normal.key(now - i))
            })
            .collect();
        let mut heads = ShardHeads::new(
            Order::Lifo,
            vec![0],
            super::super::policy(HeadsPolicy::new(1, 5)),
        );
        heads.replace(vec![(entries, false)], std::time::Instant::now());
        let got = kept(&heads, &HashSet::new(), &Ledger::new(None), now);
        let json = serde_json::to_string(&got).unwrap_or_default();
        assert!(json.len() <= MAX_KEPT_BYTES, "{}", json.len());
        assert!(got.len() > 100 && got.len() < 400, "{}", got.len());
    }

    #[test]
    fn the_handover_stays_within_its_bytes_keeping_the_most_served() {
        let mut l = Ledger::new(None);
        ran(&mut l, "flood", 3_000, NOW - 500);
        for t in 0..2_000 {
            ran(
                &mut l,
                &format!("tenant-with-a-long-name-{t:05}"),
                1,
                NOW - 200,
            );
        }
        let served = l.handover(NOW);
        let json = serde_json::to_string(&served).unwrap_or_default();
        assert!(json.len() <= MAX_BYTES, "{}", json.len());
        assert_eq!(served["flood"].len(), 3_000);
        assert!(served.len() > 1 && served.len() < 2_001);
    }
}
