//! What the fair share hands to the next invocation of the tail-call loop
//! ([`Handed`], under [`NAME`] in the opaque handover): each tenant's
//! starts in the last [`WINDOW`](super::WINDOW) (`served`), so the next invocation does
//! not hand the flooding tenant the top again, and the candidates in view
//! of the tenants not flooding (`inView`), which its first read, newest
//! first, would not show. Bounded ([`MAX_BYTES`], [`MAX_IN_VIEW_BYTES`]; an
//! SNS message may be 256 KB); times count back from `at`, the sender's
//! clock. One this code cannot read is ignored.

use super::ledger::Ledger;
use super::tenants::{tenant_heads, tenant_of};
use crate::select::heads::Heads;
use crate::select::{Handover, Ids};
use lifo_core::Candidate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The fair share's name in a handover.
pub const NAME: &str = "fairShare";

/// Most bytes of starts handed over (≈ 5,000 starts).
pub const MAX_BYTES: usize = 32 * 1024;

/// Most bytes of candidates in view handed over (≈ 100 to 150 index
/// entries).
pub const MAX_IN_VIEW_BYTES: usize = 16 * 1024;

/// Each tenant's starts, in ms before the handover's `at`, newest first.
pub type Served = BTreeMap<String, Vec<u32>>;

/// The fair share's part of a handover.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handed {
    /// When it was handed over (epoch ms, the sender's clock).
    pub at: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub served: Served,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_view: Vec<Candidate>,
}

impl Handed {
    /// The fair share's part of `handover`, if it holds one this code reads.
    pub fn from_handover(handover: &Handover) -> Option<Self> {
        let value = handover.get(NAME)?;
        match serde_json::from_value(value.clone()) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!(event = "process.handover_ignored", error = %e);
                None
            }
        }
    }

    /// Adds it to `out`, unless it holds nothing.
    pub fn into_handover(self, out: &mut Handover) {
        if self.served.is_empty() && self.in_view.is_empty() {
            return;
        }
        if let Ok(v) = serde_json::to_value(self) {
            out.insert(NAME.to_owned(), v);
        }
    }
}

/// The candidates in `heads` (none in `exclude` or expired at `now_ms`) of
/// the tenants not flooding: up to `page` each in the claim order
/// ([`super::PAGE`]), the fewest waiting first, within
/// [`MAX_IN_VIEW_BYTES`] of JSON.
pub fn in_view(
    heads: &Heads,
    exclude: &Ids,
    ledger: &Ledger,
    page: usize,
    now_ms: u64,
) -> Vec<Candidate> {
    let seen = tenant_heads(heads, exclude);
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
            .filter(|c| tenant_of(c) == tenant && !exclude.contains(&c.task_id))
            .filter(|c| c.expires_at > now_ms / 1000)
            .take(page);
        for c in theirs {
            // Its JSON and a comma.
            let cost = serde_json::to_string(c).map_or(usize::MAX, |j| j.len() + 1);
            if bytes + cost > MAX_IN_VIEW_BYTES {
                return out;
            }
            bytes += cost;
            out.push((*c).clone());
        }
    }
    out
}

impl Ledger {
    /// Each tenant's starts of the last [`WINDOW`](super::WINDOW) at `now_ms` (ms before
    /// it, newest first), the most served first, within [`MAX_BYTES`].
    pub fn served(&mut self, now_ms: u64) -> Served {
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

    /// Takes over the starts handed over at `at_ms` (the sender's clock),
    /// before anything this invocation booked.
    pub fn take_over(&mut self, served: &Served, at_ms: u64) {
        let window = self.window().as_millis() as u64;
        for (tenant, ago) in served {
            let times = self.starts.entry(tenant.clone()).or_default();
            let mut before: Vec<u64> = ago
                .iter()
                .filter(|a| u64::from(**a) < window)
                .map(|a| at_ms.saturating_sub(u64::from(*a)))
                .collect();
            before.sort_unstable();
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
    use crate::select::heads::HeadsPolicy;
    use lifo_core::Order;
    use lifo_core::priority::Priority;

    fn heads_of(entries: Vec<Candidate>) -> Heads {
        let mut h = Heads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 5));
        h.replace(vec![(entries, false)], NOW);
        h
    }

    #[test]
    fn the_next_invocation_remembers_who_was_served_and_when() {
        let mut first = Ledger::new(None);
        ran(&mut first, "flood", 40, NOW - 3_000);
        ran(&mut first, "quiet", 2, NOW - 1_000);
        ran(&mut first, "old", 5, NOW - 11_000);
        let handed = Handed {
            at: NOW,
            served: first.served(NOW),
            in_view: Vec::new(),
        };
        assert_eq!(handed.served.len(), 2, "too old to count: not handed over");
        assert_eq!(handed.served["flood"], vec![3_000; 40]);
        let mut out = Handover::new();
        handed.clone().into_handover(&mut out);
        // Through JSON, as a wake-up carries it.
        let json = serde_json::to_string(&out).unwrap_or_default();
        let back: Handover = serde_json::from_str(&json).unwrap_or_default();
        let got = Handed::from_handover(&back).unwrap_or_default();
        assert_eq!(got, handed);
        // Read 150 ms later by the next invocation: flood is still at the
        // top, so quiet's task goes first.
        let mut next = Ledger::new(None);
        next.take_over(&got.served, got.at);
        let s = next.shares(["flood", "quiet"], NOW + 150);
        let heads = [
            ("flood", Priority::Normal.key(NOW + 140)),
            ("quiet", Priority::Normal.key(NOW + 100)),
        ];
        assert_eq!(s.pick(heads), Some("quiet"));
        let s = Ledger::new(None).shares(["flood", "quiet"], NOW + 150);
        assert_eq!(s.pick(heads), Some("flood"));
    }

    #[test]
    fn a_handover_of_another_shape_or_of_nothing_is_none() {
        let mut other = Handover::new();
        other.insert(NAME.to_owned(), serde_json::json!({"served": 5}));
        assert_eq!(Handed::from_handover(&other), None);
        assert_eq!(Handed::from_handover(&Handover::new()), None);
        let mut empty = Handover::new();
        Handed::default().into_handover(&mut empty);
        assert!(empty.is_empty());
    }

    #[test]
    fn the_quiet_tenants_candidates_are_handed_over_the_flood_s_are_not() {
        let t = |id: &str, tenant: &str, at: u64| Candidate {
            tenant: Some(tenant.into()),
            expires_at: NOW / 1000 + 20,
            ..Candidate::pending(id, 0, Priority::Normal.key(at))
        };
        let mut entries: Vec<Candidate> = (0..30)
            .map(|i| t(&format!("f{i}"), "flood", NOW - i * 10))
            .collect();
        entries.push(t("a1", "a", NOW - 900));
        entries.push(t("a2", "a", NOW - 400));
        entries.push(t("a3", "a", NOW - 600));
        entries.push(t("b1", "b", NOW - 700));
        entries.push(t("b-running", "b", NOW - 100));
        entries.push(Candidate {
            expires_at: NOW / 1000,
            ..t("b-expired", "b", NOW - 800)
        });
        entries.sort_by_key(|c| std::cmp::Reverse(c.claimable_at));
        let exclude = Ids::from(["b-running".to_owned()]);
        let got = in_view(
            &heads_of(entries),
            &exclude,
            &Ledger::new(None),
            crate::select::fair::PAGE,
            NOW,
        );
        let got: Vec<&str> = got.iter().map(|c| c.task_id.as_str()).collect();
        // b (two waiting, one expired) before a (three), each newest first.
        assert_eq!(got, ["b1", "a2", "a3", "a1"]);
        // No tenant flooding: every tenant's.
        let few: Vec<Candidate> = (0..3)
            .map(|i| t(&format!("f{i}"), "flood", NOW - i * 10))
            .chain([t("a1", "a", NOW - 900)])
            .collect();
        assert_eq!(
            in_view(
                &heads_of(few),
                &exclude,
                &Ledger::new(None),
                crate::select::fair::PAGE,
                NOW
            )
            .len(),
            4
        );
    }

    #[test]
    fn what_is_handed_over_stays_within_its_bytes() {
        let entries: Vec<Candidate> = (0..400)
            .map(|i| Candidate {
                tenant: Some(format!("tenant-{i:03}")),
                expires_at: NOW / 1000 + 20,
                ..Candidate::pending(&format!("{i:036}"), 0, Priority::Normal.key(NOW - i))
            })
            .collect();
        let got = in_view(
            &heads_of(entries),
            &Ids::new(),
            &Ledger::new(None),
            crate::select::fair::PAGE,
            NOW,
        );
        let json = serde_json::to_string(&got).unwrap_or_default();
        assert!(json.len() <= MAX_IN_VIEW_BYTES, "{}", json.len());
        assert!(got.len() > 100 && got.len() < 400, "{}", got.len());
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
        let served = l.served(NOW);
        let json = serde_json::to_string(&served).unwrap_or_default();
        assert!(json.len() <= MAX_BYTES, "{}", json.len());
        assert_eq!(served["flood"].len(), 3_000);
        assert!(served.len() > 1 && served.len() < 2_001);
    }
}
