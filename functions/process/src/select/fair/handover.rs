//! The ledger's memory across a tail call: each tenant's starts in the last
//! [`WINDOW`], carried in the tail call's wake-up (`served`), so the next
//! invocation of the loop does not start with every tenant even and hand
//! the flooding tenant the top again.
//!
//! Bounded: at most [`MAX_BYTES`] of JSON, the most served tenants first
//! (they are what the next invocation must remember); an SNS message may
//! be 256 KB. Times are milliseconds before the wake-up's `at`, so the
//! next invocation reads them on its own clock.

use super::ledger::{Ledger, WINDOW};
use lifo_lambda::notify::Served;

/// Most bytes the handover adds to a wake-up (≈ 5,000 starts).
pub const MAX_BYTES: usize = 32 * 1024;

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
