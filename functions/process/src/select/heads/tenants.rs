//! The heads' tenants, for the fair share: which tenants wait and where,
//! whether a read has shown one, and the candidates kept in view from
//! read to read (and handed on by a tail call) under a flood's newer
//! tasks.

use super::{Head, ShardHeads, TenantHead, before};
use lifo_core::Candidate;
use lifo_core::priority::Priority;
use std::collections::{HashMap, HashSet};

impl ShardHeads {
    /// Whether any candidate in the heads has a tenant.
    pub fn any_tenant(&self) -> bool {
        self.heads
            .iter()
            .flat_map(|h| &h.items)
            .any(|c| c.tenant.is_some())
    }

    /// Whether any read so far has shown a task with a tenant, whatever
    /// was taken since: the heads of a queue at light load are empty
    /// between reads, and the fair share's reads must begin with the
    /// read after the first that showed one, not with one that finds the
    /// heads holding one at that moment.
    pub fn seen_tenant(&self) -> bool {
        self.seen_tenant
    }

    pub(super) fn saw(&mut self, read: &[(Vec<Candidate>, bool)]) {
        self.seen_tenant |= read
            .iter()
            .flat_map(|(items, _)| items)
            .any(|c| c.tenant.is_some());
    }

    /// Keeps, of the heads `before` a read, what the read cut short out of
    /// view: the candidates past the end of a cut-short head, of tenants
    /// with fewer than [`super::HeadsPolicy::keep_per_tenant`] in the heads, not
    /// expired at `now_ms`. A tenant's tasks buried under another tenant's
    /// newer ones stay in view without a deeper read; one that was claimed
    /// or cancelled meanwhile fails its conditional claim.
    pub(super) fn keep(&mut self, before: Vec<Head>, now_ms: u64) {
        let limit = self.policy.keep_per_tenant;
        let mut per_tenant: HashMap<String, usize> = HashMap::new();
        for c in self.heads.iter().flat_map(|h| &h.items) {
            *per_tenant.entry(c.tenant_name().to_owned()).or_default() += 1;
        }
        let order = self.order;
        for (head, old) in self.heads.iter_mut().zip(before) {
            let Some(end) = head.items.back().map(|c| c.claimable_at) else {
                continue;
            };
            if head.complete {
                continue;
            }
            let read: HashSet<String> = head.items.iter().map(|c| c.task_id.clone()).collect();
            for c in old.items {
                // Tasks written in one request share their key: one the
                // read's page ended before sorts with its last entry.
                let past_end = if order.newest_first() {
                    c.claimable_at <= end
                } else {
                    c.claimable_at >= end
                };
                if !past_end || read.contains(&c.task_id) || c.expires_at <= now_ms / 1000 {
                    continue;
                }
                let n = per_tenant.entry(c.tenant_name().to_owned()).or_default();
                if *n < limit {
                    *n += 1;
                    head.items.push_back(c);
                }
            }
        }
    }

    /// Puts the candidates an invocation before kept in view (handed on by
    /// its tail call) into heads never read yet: the first read keeps, of
    /// them, those it cuts short out of view, as it keeps its own heads'
    /// ([`super::HeadsPolicy::keep_per_tenant`]), and drops those it could have
    /// shown. Once read, nothing is seeded.
    pub fn seed(&mut self, kept: Vec<Candidate>) {
        if self.read_at.is_none() {
            self.remember(kept.iter(), crate::select::clock::now_ms());
            self.put_back(kept);
        }
    }

    /// Each tenant with candidates waiting in the heads (none in
    /// `exclude`): the index key of its first one in the claim order, how
    /// many wait, and when its oldest became claimable.
    pub fn tenant_heads(&self, exclude: &HashSet<String>) -> HashMap<String, TenantHead> {
        let mut out: HashMap<String, (&Candidate, usize, u64)> = HashMap::new();
        for c in self
            .heads
            .iter()
            .flat_map(|h| &h.items)
            .filter(|c| !exclude.contains(&c.task_id))
        {
            let at = lifo_core::priority::at_ms(c.claimable_at);
            match out.get_mut(c.tenant_name()) {
                Some((first, waiting, oldest)) => {
                    if before(self.order, c, first) {
                        *first = c;
                    }
                    *waiting += 1;
                    *oldest = (*oldest).min(at);
                }
                None => {
                    out.insert(c.tenant_name().to_owned(), (c, 1, at));
                }
            }
        }
        out.into_iter()
            .map(|(t, (c, waiting, oldest_ms))| {
                let head = TenantHead {
                    first: c.claimable_at,
                    waiting,
                    oldest_ms,
                };
                (t, head)
            })
            .collect()
    }

    /// The index key of `tenant`'s first candidate in the claim order (none
    /// in `exclude`), if one waits in the heads.
    pub fn tenant_first(&self, tenant: &str, exclude: &HashSet<String>) -> Option<i64> {
        self.heads
            .iter()
            .filter_map(|h| {
                h.items
                    .iter()
                    .find(|c| c.tenant_name() == tenant && !exclude.contains(&c.task_id))
            })
            .reduce(|a, b| if before(self.order, b, a) { b } else { a })
            .map(|c| c.claimable_at)
    }

    /// `tenant`'s last candidate in the claim order (none in `exclude`) of
    /// its first one's priority: its oldest there, in LIFO order (of tasks
    /// written in one request, which share their key, the least id).
    /// What a tenant that keeps up gives ([`crate::select::fair`]).
    pub fn tenant_last(&self, tenant: &str, exclude: &HashSet<String>) -> Option<&Candidate> {
        let priority = Priority::of_key(self.tenant_first(tenant, exclude)?);
        self.heads
            .iter()
            .flat_map(|h| &h.items)
            .filter(|c| {
                c.tenant_name() == tenant
                    && !exclude.contains(&c.task_id)
                    && Priority::of_key(c.claimable_at) == priority
            })
            .reduce(|a, b| if before(self.order, a, b) { b } else { a })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::heads::{HeadsPolicy, c};
    use lifo_core::{Candidate, Order};
    use std::collections::HashSet;
    use std::time::Instant;

    #[test]
    fn a_tenants_last_is_its_oldest_of_its_first_ones_priority() {
        let t = |id: &str, at: u64, p: Priority| Candidate {
            tenant: Some("a".into()),
            ..Candidate::pending(id, 0, p.key(at))
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0], HeadsPolicy::new(1, 5));
        let items = vec![
            t("high", 500, Priority::High),
            t("high-old", 100, Priority::High),
            t("normal", 900, Priority::Normal),
        ];
        h.replace(vec![(items, true)], Instant::now());
        let none = HashSet::new();
        let last = |exclude| h.tenant_last("a", exclude).map(|c| c.claimable_at);
        assert_eq!(last(&none), Some(Priority::High.key(100)));
        let highs = HashSet::from(["high".to_owned(), "high-old".to_owned()]);
        assert_eq!(last(&highs), Some(Priority::Normal.key(900)));
    }

    #[test]
    fn with_the_fair_share_a_tenant_buried_by_a_cut_short_read_stays_in_view() {
        let t = |id: &str, tenant: &str, at: i64| Candidate {
            tenant: Some(tenant.into()),
            ..c(id, at)
        };
        let expired = Candidate {
            expires_at: 1,
            ..t("q6", "quiet", 6)
        };
        let first = vec![
            t("f9", "flood", 9),
            expired,
            t("q5", "quiet", 5),
            t("q4", "quiet", 4),
            t("q3", "quiet", 3),
            t("f2", "flood", 2),
        ];
        // The flood's newer tasks fill the next read, cut short.
        let second = vec![
            t("f12", "flood", 12),
            t("f11", "flood", 11),
            t("f10", "flood", 10),
        ];
        // A quiet task written with f10 (the same key), past the page.
        let first = [vec![t("q10", "quiet", 10)], first].concat();
        let none = HashSet::new();
        let now = Instant::now();
        let taken = |keep: usize| {
            let policy = HeadsPolicy {
                keep_per_tenant: keep,
                ..HeadsPolicy::new(1, 5)
            };
            let mut h = ShardHeads::new(Order::Lifo, vec![0], policy);
            h.replace(vec![(first.clone(), false)], now);
            h.replace(vec![(second.clone(), false)], now);
            let got: Vec<String> = h.take(10, &none).into_iter().map(|c| c.task_id).collect();
            got
        };
        // The quiet tenant's first two stay (the limit), at or past the
        // read's end; not the expired one, nor the flood's (it has three
        // in the read).
        assert_eq!(taken(2), ["f12", "f11", "f10", "q10", "q5"]);
        // Without the fair share, the read is all there is.
        assert_eq!(taken(0), ["f12", "f11", "f10"]);
        // A read in full holds every claimable task: nothing is kept.
        let policy = HeadsPolicy {
            keep_per_tenant: 2,
            ..HeadsPolicy::new(1, 5)
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0], policy);
        h.replace(vec![(first.clone(), false)], now);
        h.replace(vec![(second.clone(), true)], now);
        assert_eq!(h.take(10, &none).len(), 3);
    }

    #[test]
    fn a_tenant_once_read_is_remembered_when_the_heads_are_empty_again() {
        let mut h = ShardHeads::new(Order::Lifo, vec![0, 1], HeadsPolicy::new(2, 8));
        let none = HashSet::new();
        h.replace(
            vec![(vec![c("a", 1)], true), (vec![], true)],
            Instant::now(),
        );
        assert!(!h.seen_tenant(), "no tenant yet");
        let tenanted = Candidate {
            tenant: Some("t".into()),
            lifo_shard: 1,
            ..c("b", 2)
        };
        h.replace_some(&[1], vec![(vec![tenanted], true)]);
        assert!(h.any_tenant() && h.seen_tenant());
        // All taken at light load: the heads hold none, the reads saw one.
        assert_eq!(h.take(5, &none).len(), 2);
        assert!(!h.any_tenant());
        assert!(h.seen_tenant());
    }

    #[test]
    fn candidates_handed_on_stay_in_view_past_the_first_read_s_end_only() {
        let t = |id: &str, tenant: &str, shard: u32, at: i64| Candidate {
            tenant: Some(tenant.into()),
            lifo_shard: shard,
            ..c(id, at)
        };
        let policy = HeadsPolicy {
            keep_per_tenant: 2,
            ..HeadsPolicy::new(2, 5)
        };
        let mut h = ShardHeads::new(Order::Lifo, vec![0, 1], policy);
        // Handed on: two quiet tasks under shard 0's flood, one within
        // the first read's range (claimed meanwhile: it is not in it), one
        // of a shard this invocation does not hold.
        h.seed(vec![
            t("q3", "quiet", 0, 3),
            t("q8", "quiet", 0, 8),
            t("q1", "quiet", 0, 1),
            t("x2", "quiet", 7, 2),
        ]);
        let in_order = |h: &ShardHeads| -> Vec<String> {
            h.in_order().iter().map(|c| c.task_id.clone()).collect()
        };
        assert_eq!(in_order(&h), ["q8", "q3", "q1"]);
        let none = HashSet::new();
        let now = Instant::now();
        let mut read = h.clone();
        read.replace(
            vec![
                (vec![t("f9", "flood", 0, 9), t("f7", "flood", 0, 7)], false),
                (vec![t("b6", "quiet", 1, 6)], true),
            ],
            now,
        );
        let got: Vec<String> = read
            .take(10, &none)
            .into_iter()
            .map(|c| c.task_id)
            .collect();
        // Under the limit of 2 (b6 is one): q3 only, in its place.
        assert_eq!(got, ["f9", "f7", "b6", "q3"]);
        // A first read that shows its shard whole drops them all.
        let mut whole = h.clone();
        whole.replace(
            vec![(vec![t("f9", "flood", 0, 9)], true), (vec![], true)],
            now,
        );
        assert_eq!(in_order(&whole), ["f9"]);
        // Once read, nothing is seeded.
        whole.seed(vec![t("q2", "quiet", 0, 2)]);
        assert_eq!(in_order(&whole), ["f9"]);
    }
}
